"""Chunked long-running jobs: one page per message, continued from a cursor.

``@app.job("reindex-products", key="reindex-products:{run_id}:{cursor}", chunked=True)``
declares a job whose function processes one page and returns the next cursor
(``None`` when done). The framework then enqueues the same job with the same
arguments and the new cursor. The key template names both ``run_id`` and
``cursor``, so every page has its own idempotency key: a duplicate delivery
of a page is absorbed by the guard and never forks the chain.

A *run record* (``run#<job>:<run_id>`` in the idempotency table) is the chain's
checkpoint, and a lease (``sqsjobs.store._lease``) held by the run's current page:
pages done, the cursor of the next page (``cursor``) and of the last page done
(``prev_cursor``), started/updated/finished times. It expires ``record_ttl``
after its last write, finished or not. Per page:

1. read the run record; a page that is already done only re-sends its
   continuation (the crash window below), a page behind the run is stale;
2. run the page function (it may read ``sqsjobs.worker._budget.time_left()`` and stop
   early, returning the cursor it reached);
3. hand the run's lease from this page to the next (fenced on this page being
   the holder, so two deliveries of one page can never both advance the run);
4. send the continuation; a failed send raises ``RetryableError``.

Crash windows: a crash during 2 re-runs the page (at-least-once, as every job:
keep page side effects idempotent, e.g. upserts). A crash between 3 and 4 does
*not* re-run the page: its redelivery finds the page done in the run record
and only sends the continuation, whose own key makes a second copy harmless.

Nothing here runs at import or calls AWS before a page runs.
"""

from __future__ import annotations

import hashlib
import json
import string
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from sqsjobs._calls import refuse_awaitable
from sqsjobs._errors import ConfigurationError, EnqueueError, PermanentError, RetryableError, StoreError
from sqsjobs._job import Job
from sqsjobs._job_options import JobOptions
from sqsjobs.store._lease import (
    LeaseItem,
    LeaseState,
    LeaseStore,
    Written,
    expiry,
)
from sqsjobs.store._lease_ops import (
    Acquire,
    Complete,
    FieldValue,
    HandOver,
)

if TYPE_CHECKING:
    from sqsjobs._job import JobRuntime

P = ParamSpec("P")
R = TypeVar("R")

RUN_PREFIX = "run#"


class RunState(StrEnum):
    """Where a chunked run is (``RunStatus.status``)."""

    RUNNING = "RUNNING"
    FINISHED = "FINISHED"


RUNNING = RunState.RUNNING
FINISHED = RunState.FINISHED
CURSOR = "cursor"
RUN_ID = "run_id"


def run_key(job: str, run_id: str) -> str:
    """The run record's key in the idempotency table.

    Example:
        >>> run_key("reindex-products", "2026-08-05")
        'run#reindex-products:2026-08-05'
    """
    return f"{RUN_PREFIX}{job}:{run_id}"


@dataclass(frozen=True, kw_only=True)
class RunStatus:
    """Where a chunked run is: what ``app.run_status(...)`` returns.

    Example:
        >>> RunStatus(job="reindex-products", run_id="r1", status="RUNNING", pages_done=3, cursor=1500).finished
        False
    """

    job: str
    run_id: str
    status: str
    pages_done: int = 0
    cursor: Any = None  #: where the next page starts (None once finished)
    started_at: float | None = None
    updated_at: float | None = None
    finished_at: float | None = None

    @property
    def finished(self) -> bool:
        """True once a page returned ``None``."""
        return self.status == FINISHED


class ChunkedJob(Job[P, R]):
    """A job that runs page by page; ``app.job(..., chunked=True)`` builds it.

    Calling it directly runs one page in-process and returns the next cursor;
    the worker runs it through ``run_page``, which keeps the run record and
    enqueues the continuation.

    Example:
        >>> from sqsjobs import JobApp
        >>> app = JobApp(queue_url="https://sqs.example/q", table_name="idempotency")
        >>> @app.job("reindex-products", key="reindex-products:{run_id}:{cursor}", chunked=True)
        ... def reindex(run_id: str, cursor: int = 0) -> int | None:
        ...     return None if cursor >= 1000 else cursor + 500
        >>> reindex(run_id="r1", cursor=0)
        500
        >>> with app.testing() as t:  # start enqueues the first page; each page enqueues the next
        ...     run_id, _ = reindex.start(run_id="r1"), t.drain()
        ...     run_id, [m.key for m in t.enqueued()]
        ('r1', ['reindex-products:r1:0', 'reindex-products:r1:500', 'reindex-products:r1:1000'])
    """

    def __init__(self, runtime: JobRuntime, name: str, fn: Callable[P, R], options: JobOptions) -> None:
        super().__init__(runtime, name, fn, options)
        missing = [p for p in (RUN_ID, CURSOR) if p not in self.signature.names]
        if missing:
            raise ConfigurationError(
                f"chunked job {name!r}: the function needs the parameter(s) {missing}: 'run_id' names the run "
                "(its run record) and 'cursor' is where the page starts"
            )
        fields = _fields(options.key or "")
        if not {RUN_ID, CURSOR} <= fields:
            raise ConfigurationError(
                f"chunked job {name!r}: key={options.key!r} must contain {{run_id}} and {{cursor}} "
                f"(e.g. key=\"{name}:{{run_id}}:{{cursor}}\"): each page needs its own idempotency key, or the "
                "continuation would be taken for a duplicate of the page that sent it"
            )
        self.page: Callable[..., Any] = fn
        # The worker calls ``job.fn``: for a chunked job that is the page runner (awaited for an async page).
        self.fn = cast(Callable[P, R], self.run_page_async if self.is_async else self.run_page)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return cast(R, self.page(*args, **kwargs))

    def __repr__(self) -> str:
        return f"<Job {self.name!r} -> {self.page.__module__}.{self.page.__qualname__} (chunked)>"

    # ------------------------------------------------------------ producing
    def start(self, *, run_id: str | None = None, **args: Any) -> str:
        """Start a run (first page at the function's default cursor unless given); returns the run id.

        Writes the run record first, so ``app.run_status`` shows the run before its first page.
        """
        run_id = run_id or uuid.uuid4().hex
        message = self.message(run_id=run_id, **args)
        cursor = args.get(CURSOR, self._defaults.get(CURSOR))
        self.runs.begin(self.name, run_id, cursor=_encode(cursor), now=self.runtime.clock())
        self.runtime.send(message)
        return run_id

    # ------------------------------------------------------------ consuming
    def run_page(self, **args: Any) -> Any:
        """Run one page as the worker does: check the run, run the page, advance, continue."""
        started = self._page_start(args)
        if started is None:
            return None
        following = refuse_awaitable(self.page(**args), f"chunked job {self.name!r}")
        return self._page_end(args, following, *started)

    async def run_page_async(self, **args: Any) -> Any:
        """``run_page`` for an ``async def`` page: the page is awaited, the run record kept the same way."""
        started = self._page_start(args)
        if started is None:
            return None
        return self._page_end(args, await self.page(**args), *started)

    def _page_start(self, args: Mapping[str, Any]) -> tuple[LeaseItem | None, str] | None:
        """The run's record and the page's cursor, or None when the page must not run (done, stale, taken)."""
        run_id = str(args[RUN_ID])
        here = _encode(args.get(CURSOR, self._defaults.get(CURSOR)))
        runs = self.runs
        record = runs.get(self.name, run_id)
        if record is not None:
            finished = record.state is LeaseState.DONE
            done = record.get("prev_cursor") == here and record.get("cursor") != here
            if finished or done:
                if done and not finished:
                    # Crashed after checkpointing the page, before its continuation left: send it now.
                    self._continue(args, _decode(record.get("cursor")))
                self._log("page already done; not run again", run_id, here)
                return None
            if record.get("cursor") != here:
                self._log("stale page (the run is elsewhere); not run", run_id, here)
                return None
        elif not runs.begin(self.name, run_id, cursor=here, now=self.runtime.clock()):
            # Enqueued without start(): the first page made the record, unless another delivery just did.
            self._log("another delivery started the run first; not run", run_id, here)
            return None
        return record, here

    def _page_end(self, args: Mapping[str, Any], following: Any, record: LeaseItem | None, here: str) -> Any:
        """The page returned ``following``: advance the run and send the next page (None: the run is done)."""
        run_id = str(args[RUN_ID])
        after = None if following is None else _encode(following)
        if after == here:
            raise PermanentError(f"chunked job {self.name!r}: the page at cursor {here} returned the same cursor; "
                                 "the run would never end")
        pages_done = int(record.get("pages_done") or 0) if record is not None else 0
        if not self.runs.advance(self.name, run_id, page=here, following=after, now=self.runtime.clock(),
                                 pages_done=pages_done):
            self._log("another delivery advanced the run first; no continuation from this one", run_id, here)
            return following
        if following is not None:
            self._continue(args, following)
        return following

    def _continue(self, args: Mapping[str, Any], cursor: Any) -> None:
        message = self.message(**{**args, CURSOR: cursor})
        try:
            self.runtime.send(message)
        except EnqueueError as error:
            # Retrying the page is safe: the run record says it is done, so the retry only sends this.
            raise RetryableError(f"continuation {message.key!r} not sent: {error}") from error

    def _log(self, text: str, run_id: str, cursor: str) -> None:
        self.runtime.logger.info(text, extra={"job": self.name, "run_id": run_id, "cursor": cursor})

    @property
    def runs(self) -> RunStore:
        """The run records (in the app's idempotency table)."""
        return RunStore(self.runtime.store, ttl=self.runtime.settings.record_ttl)


class RunStore:
    """Run records of chunked jobs (``run#...``): a lease held by the page at the run's cursor.

    A run is a relay: the record is HELD by its current page (the owner is
    the page's cursor), each page that finishes *hands the lease over* to the
    next one, and the last page completes it (DONE). Handing over is fenced
    on the owner, so two deliveries of one page can never both advance the run.

    Example:
        >>> from sqsjobs import InMemoryStore
        >>> runs = RunStore(InMemoryStore(), ttl=86400)
        >>> runs.begin("reindex-products", "r1", cursor="0", now=0.0)
        True
        >>> runs.advance("reindex-products", "r1", page="0", following="500", now=1.0)
        True
        >>> runs.advance("reindex-products", "r1", page="0", following="500", now=2.0)  # a duplicate
        False
        >>> status = runs.status("reindex-products", "r1")
        >>> status.status, status.pages_done, status.cursor
        ('RUNNING', 1, 500)
    """

    def __init__(self, store: LeaseStore, *, ttl: float) -> None:
        self.store = store
        self.ttl = ttl

    def get(self, job: str, run_id: str) -> LeaseItem | None:
        """The run record, or None."""
        return self.store.get(run_key(job, run_id))

    def status(self, job: str, run_id: str) -> RunStatus | None:
        """The run's status, or None when there is no such run (or its record expired)."""
        r = self.get(job, run_id)
        if r is None:
            return None
        finished = r.state is LeaseState.DONE
        return RunStatus(job=job, run_id=run_id, status=(FINISHED if finished else RUNNING).value,
                         pages_done=int(r.get("pages_done") or 0),
                         cursor=None if finished else _decode(r.get("cursor")), started_at=r.get("started_at"),
                         updated_at=r.get("updated_at"), finished_at=r.get("finished_at"))

    def begin(self, job: str, run_id: str, *, cursor: str, now: float) -> bool:
        """Create the run record, held by the page at ``cursor``; False when the run already exists."""
        written = self.store.write(Acquire(
            key=run_key(job, run_id), owner=page_owner(cursor), now=now, lease_until=None,
            expires_at=expiry(now, self.ttl),
            data={"job": job, "run_id": run_id, "cursor": cursor, "pages_done": 0, "started_at": now,
                  "updated_at": now}))
        return _answer(written)

    def advance(self, job: str, run_id: str, *, page: str, following: str | None, now: float,
                pages_done: int = 0) -> bool:
        """Record the page at cursor ``page`` as done; False when the run is no longer at that page."""
        data: dict[str, FieldValue] = {"prev_cursor": page, "updated_at": now, "pages_done": pages_done + 1}
        key = run_key(job, run_id)
        if following is None:
            data.update(cursor=_encode(None), finished_at=now)
            return _answer(self.store.write(Complete(key=key, owner=page_owner(page), expires_at=expiry(now, self.ttl),
                                                     data=data)))
        data["cursor"] = following
        return _answer(self.store.write(HandOver(key=key, owner=page_owner(page), to_owner=page_owner(following),
                                                 expires_at=expiry(now, self.ttl), data=data)))


def page_owner(cursor: str) -> str:
    """The owner token of the page at ``cursor`` (a run's lease is held by its current page).

    Example:
        >>> page_owner("500") == page_owner("500") != page_owner('"500"')
        True
    """
    return "page:" + hashlib.sha256(cursor.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _answer(written: Written) -> bool:
    if written.error is not None:
        raise StoreError(written.error)
    return written.ok


def _encode(cursor: Any) -> str:
    return json.dumps(cursor, sort_keys=True, separators=(",", ":"))


def _decode(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _fields(template: str) -> set[str]:
    try:
        return {f.split(".")[0].split("[")[0] for _, f, _, _ in string.Formatter().parse(template) if f}
    except ValueError:
        return set()
