"""A moto server whose DynamoDB requests are atomic, as DynamoDB's are.

moto evaluates a conditional write as check-then-write with no lock: two
concurrent ``UpdateItem`` calls on one key can both pass ``attribute_not_exists``
and both "win" the lease, which real DynamoDB never allows. The local cloud
and the tests that race workers against a moto server therefore run DynamoDB
requests one at a time. Other services are left concurrent: an SQS long poll
holding a lock would stall everything else.

This is a workaround for the emulator only; the runtime (``sqsjobs`` outside
``sqsjobs.local``) never imports it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def serial_dynamodb(app: WSGIApp) -> WSGIApp:
    """Wrap a moto WSGI app so that DynamoDB requests run one at a time (the response is read inside the lock).

    Example:
        >>> calls = []
        >>> app = serial_dynamodb(lambda environ, start: calls.append(environ["HTTP_X_AMZ_TARGET"]) or [b"{}"])
        >>> list(app({"HTTP_X_AMZ_TARGET": "DynamoDB_20120810.UpdateItem"}, None)), calls
        ([b'{}'], ['DynamoDB_20120810.UpdateItem'])
    """
    lock = threading.Lock()

    def handle(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if str(environ.get("HTTP_X_AMZ_TARGET", "")).startswith("DynamoDB_"):
            with lock:
                return list(app(environ, start_response))
        return app(environ, start_response)

    return handle


def moto_app() -> WSGIApp:
    """moto's server application, with DynamoDB made atomic (and its transactions cheap: ``moto_transactions``)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    from sqsjobs.local.moto_transactions import install

    install()
    return serial_dynamodb(DomainDispatcherApplication(create_backend_app))


def serve(host: str, port: int) -> None:
    """Run the server in this process until it is killed (the local cloud's moto child)."""
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import make_server

    make_server(host, port, moto_app(), threaded=True, request_handler=MotoRequestHandler).serve_forever()


def threaded_server() -> Any:
    """A ``ThreadedMotoServer`` (moto's in-process server for tests) with atomic DynamoDB, on a free port."""
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import make_server

    class SerialMotoServer(ThreadedMotoServer):
        def _server_entry(self) -> None:
            self._server = make_server(self._ip_address, self._port, moto_app(), True,
                                       request_handler=MotoRequestHandler)
            self._server_ready_event.set()
            self._server.serve_forever()

    return SerialMotoServer(ip_address="127.0.0.1", port=0, verbose=False)


@contextmanager
def serving() -> Iterator[str]:
    """``threaded_server()`` started on 127.0.0.1 for the block; yields its endpoint URL (quiet access log)."""
    import logging

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = threaded_server()
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
