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

import logging
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
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

    from sqsjobs.local import moto_partiql, moto_transactions

    moto_transactions.install()
    moto_partiql.install()
    return serial_dynamodb(DomainDispatcherApplication(create_backend_app))


def serve(host: str, port: int, snapshot: Path | None = None) -> None:
    """Run the server in this process until SIGTERM (the local cloud's moto child).

    With ``snapshot`` (``local up``'s, per project) the state saved there at the last stop is
    loaded before the first request, and written there again at SIGTERM: new requests are no
    longer taken, those under way finish (a second at most), then the backends are pickled
    (``sqsjobs.local.snapshot``) and the process exits 0; a save that fails exits 3 after
    saying why on its output. The parent (``server.MotoServer.stop``) waits for that.
    """
    import signal

    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import make_server

    from sqsjobs.local import snapshot as snapshots

    if snapshot is not None:
        loaded = snapshots.load(snapshot)
        if loaded is not None:
            snapshot.unlink()  # in use now: a run that dies without saving must not resume an older state
            print(f"resumed the state saved at {loaded.saved_at:.0f} ({', '.join(loaded.services)})", flush=True)
    requests = Requests(moto_app())
    server = make_server(host, port, requests, threaded=True, request_handler=MotoRequestHandler)
    stopping = threading.Event()

    def on_term(*_: object) -> None:
        if not stopping.is_set():
            stopping.set()
            threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    server.serve_forever(poll_interval=0.1)
    if snapshot is None:
        return
    requests.wait_idle(timeout=1.0)
    try:
        saved = snapshots.save(snapshot)
    except Exception as error:  # say why; the parent reports that nothing was kept
        print(f"sqsjobs: could not save the local cloud's state: {type(error).__name__}: {error}", flush=True)
        sys.exit(3)
    left_out = "; ".join(f"{name}: {why}" for name, why in saved.not_kept.items())
    print(f"saved the state to {snapshot}" + (f" (not kept: {left_out})" if left_out else ""), flush=True)


class Requests:
    """A WSGI app that counts the requests under way, so a stop can wait for them to finish."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self._active = 0
        self._idle = threading.Condition()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        with self._idle:
            self._active += 1
        try:
            return list(self.app(environ, start_response))
        finally:
            with self._idle:
                self._active -= 1
                self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no request is under way (at most ``timeout`` seconds); True when none is."""
        with self._idle:
            return self._idle.wait_for(lambda: self._active == 0, timeout=timeout)


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
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = threaded_server()
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
