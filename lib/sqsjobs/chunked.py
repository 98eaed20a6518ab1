"""Chunked long-running jobs: one page per message, continued from a cursor.

``@app.job("reindex-products", key="reindex-products:{run_id}:{cursor}", chunked=True)``
declares a job whose function processes one page and returns the next cursor
(``None`` when done). The framework then enqueues the same job with the same
arguments and the new cursor. The key template names both ``run_id`` and
``cursor``, so every page has its own idempotency key: a duplicate delivery
of a page is absorbed by the guard and never forks the chain.

A *run record* (``run#<job>:<run_id>`` in the idempotency table) is the chain's
checkpoint: pages done, the cursor of the next page (``cursor``) and of the
last page done (``prev_cursor``), started/updated/finished times. Per page:

1. read the run record; a page that is already done only re-sends its
   continuation (the crash window below), a page behind the run is stale;
2. run the page function (it may read ``sqsjobs.budget.time_left()`` and stop
   early, returning the cursor it reached);
3. advance the run record, conditional on ``cursor`` still being this page's
   (so two deliveries of one page can never both advance the run);
4. send the continuation; a failed send raises ``RetryableError``.

Crash windows: a crash during 2 re-runs the page (at-least-once, as every job:
keep page side effects idempotent, e.g. upserts). A crash between 3 and 4 does
*not* re-run the page: its redelivery finds the page done in the run record
and only sends the continuation, whose own key makes a second copy harmless.

Nothing here runs at import or calls AWS before a page runs.
"""

from __future__ import annotations

import json
import string
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from sqsjobs.dynamodb_calls import ConditionFailed, call
from sqsjobs.errors import ConfigurationError, EnqueueError, PermanentError, RetryableError
from sqsjobs.job import Job, JobOptions

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from sqsjobs.app import JobApp

P = ParamSpec("P")
R = TypeVar("R")

RUN_PREFIX = "run#"
RUNNING = "RUNNING"
FINISHED = "FINISHED"
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
        >>> reindex.start(run_id="r1")  # doctest: +SKIP
        'r1'
    """

    def __init__(self, app: JobApp, name: str, fn: Callable[P, R], options: JobOptions) -> None:
        super().__init__(app, name, fn, options)
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
        # The worker calls ``job.fn``: for a chunked job that is the page runner.
        self.fn = cast(Callable[P, R], self.run_page)

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
        self.runs.begin(self.name, run_id, cursor=_encode(cursor), now=self.app.clock())
        self.app.send(message)
        return run_id

    # ------------------------------------------------------------ consuming
    def run_page(self, **args: Any) -> Any:
        """Run one page as the worker does: check the run, run the page, advance, continue."""
        run_id = str(args[RUN_ID])
        cursor = args.get(CURSOR, self._defaults.get(CURSOR))
        here = _encode(cursor)
        record = self.runs.get(self.name, run_id)
        if record is not None:
            done = record.prev_cursor == here and record.cursor != here
            if record.status == FINISHED or done:
                if done and record.status != FINISHED:
                    # Crashed after checkpointing the page, before its continuation left: send it now.
                    self._continue(args, _decode(record.cursor))
                self._log("page already done; not run again", run_id, here)
                return None
            if record.cursor != here:
                self._log("stale page (the run is elsewhere); not run", run_id, here)
                return None
        started = self.app.clock()
        following = self.page(**args)
        after = None if following is None else _encode(following)
        if after == here:
            raise PermanentError(f"chunked job {self.name!r}: the page at cursor {here} returned the same cursor; "
                                 "the run would never end")
        if not self.runs.advance(self.name, run_id, page=here, following=after, started=started,
                                 now=self.app.clock(), ttl=self.app.settings.record_ttl):
            self._log("another delivery advanced the run first; no continuation from this one", run_id, here)
            return following
        if following is not None:
            self._continue(args, following)
        return following

    def _continue(self, args: Mapping[str, Any], cursor: Any) -> None:
        message = self.message(**{**args, CURSOR: cursor})
        try:
            self.app.send(message)
        except EnqueueError as error:
            # Retrying the page is safe: the run record says it is done, so the retry only sends this.
            raise RetryableError(f"continuation {message.key!r} not sent: {error}") from error

    def _log(self, text: str, run_id: str, cursor: str) -> None:
        self.app.logger.info(text, extra={"job": self.name, "run_id": run_id, "cursor": cursor})

    @property
    def runs(self) -> RunStore:
        """The run records (in the app's idempotency table)."""
        return RunStore(self.app.dynamodb, self.app.settings.require("table_name"))


class RunStore:
    """Run records of chunked jobs, in the idempotency table under ``run#...``.

    Example:
        >>> RunStore(boto3.client("dynamodb"), "idempotency").status("reindex-products", "r1")  # doctest: +SKIP
        RunStatus(job='reindex-products', run_id='r1', status='FINISHED', pages_done=21, ...)
    """

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self.client = client
        self.table_name = table_name
        self.model = run_record_model(table_name)

    def get(self, job: str, run_id: str) -> Any:
        """The raw run record (a pynamodb model instance), or None."""
        response = self._call("get_item", TableName=self.table_name, Key={"pk": {"S": run_key(job, run_id)}},
                              ConsistentRead=True)
        item = response.get("Item")
        return None if item is None else self.model.from_raw_data(item)

    def status(self, job: str, run_id: str) -> RunStatus | None:
        """The run's status, or None when there is no such run (or its record expired)."""
        r = self.get(job, run_id)
        if r is None:
            return None
        return RunStatus(job=job, run_id=run_id, status=r.status, pages_done=int(r.pages_done or 0),
                         cursor=None if r.status == FINISHED else _decode(r.cursor), started_at=r.started_at,
                         updated_at=r.updated_at, finished_at=r.finished_at)

    def begin(self, job: str, run_id: str, *, cursor: str, now: float) -> bool:
        """Create the run record at ``cursor``; False when the run already exists."""
        m = self.model
        record = m(run_key(job, run_id), job=job, run_id=run_id, status=RUNNING, cursor=cursor, pages_done=0,
                   started_at=now, updated_at=now)
        kwargs = record.get_save_kwargs_from_instance(condition=m.pk.does_not_exist())
        return self._conditional("put_item", kwargs)

    def advance(self, job: str, run_id: str, *, page: str, following: str | None, started: float, now: float,
                ttl: float) -> bool:
        """Record the page at cursor ``page`` as done; False when the run is no longer at that page."""
        m = self.model
        actions = [
            m.pages_done.add(1), m.prev_cursor.set(page), m.updated_at.set(now),
            m.started_at.set(m.started_at | started), m.job.set(job), m.run_id.set(run_id),
            m.expires_at.set(now + ttl),
        ]
        if following is None:
            actions += [m.status.set(FINISHED), m.cursor.set(_encode(None)), m.finished_at.set(now)]
        else:
            actions += [m.status.set(RUNNING), m.cursor.set(following)]
        here = (m.cursor == page) & (m.status == RUNNING)
        kwargs = m(run_key(job, run_id)).get_update_kwargs_from_instance(
            actions=actions, condition=m.pk.does_not_exist() | here)
        return self._conditional("update_item", kwargs)

    def _conditional(self, operation: str, kwargs: dict[str, Any]) -> bool:
        try:
            self._call(operation, **kwargs)
        except ConditionFailed:
            return False
        return True

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        return call(self.client, operation, what="run record", **kwargs)



@lru_cache(maxsize=16)
def run_record_model(table_name: str) -> Any:
    """The pynamodb ``Model`` of a run record (same table and key as the idempotency records).

    Example:
        >>> Run = run_record_model("idempotency")
        >>> Run("run#reindex-products:r1", status="RUNNING").pk
        'run#reindex-products:r1'
    """
    from pynamodb.attributes import NumberAttribute, UnicodeAttribute
    from pynamodb.models import Model

    class RunRecord(Model):
        class Meta:
            region = "us-east-1"  # request kwargs only; I/O goes through the injected client

        pk = UnicodeAttribute(hash_key=True)
        job = UnicodeAttribute(null=True)
        run_id = UnicodeAttribute(null=True)
        status = UnicodeAttribute()
        # Cursors are stored as JSON text, so 0, "0" and null stay different values.
        cursor = UnicodeAttribute(null=True)
        prev_cursor = UnicodeAttribute(null=True)
        pages_done = NumberAttribute(null=True)
        started_at = NumberAttribute(null=True)
        updated_at = NumberAttribute(null=True)
        finished_at = NumberAttribute(null=True)
        expires_at = NumberAttribute(null=True)

    RunRecord.Meta.table_name = table_name  # type: ignore[attr-defined]
    return RunRecord


def _encode(cursor: Any) -> str:
    return json.dumps(cursor, sort_keys=True, separators=(",", ":"))


def _decode(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _fields(template: str) -> set[str]:
    try:
        return {f.split(".")[0].split("[")[0] for _, f, _, _ in string.Formatter().parse(template) if f}
    except ValueError:
        return set()
