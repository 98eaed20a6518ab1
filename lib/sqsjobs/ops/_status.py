"""`sqsjobs status`: what the paged engineer looks at first.

Queue depth and in-flight counts, the oldest message's age, the DLQ grouped by
job and reason, alarm states, the most recent failures and the delayed jobs
waiting in the schedule group (count and next due), as one frozen
:class:`StatusReport` (rendered as rich tables or JSON by ``sqsjobs.cli.status``).

What it must never do:

- receive from the *jobs* queue: every receive counts toward the queue's
  ``maxReceiveCount`` and the worker's attempt number, so peeking could push a
  healthy message into the DLQ. Only the DLQ is peeked (nothing redrives out
  of it by receive count), and every peeked message is made visible again;
- call AWS at import (clients are injected).

The oldest age comes from CloudWatch's ``ApproximateAgeOfOldestMessage``.
Where CloudWatch has no datapoint (a new queue, the local cloud), the DLQ's
age is estimated from the peeked sample and the jobs queue's is reported as
unknown, each with its source named.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from sqsjobs._errors import StatusError
from sqsjobs._settings import ENV_DLQ_URL, ENV_NAMESPACE, ENV_QUEUE_URL, ENV_SCHEDULE_GROUP, ENV_TABLE, Settings
from sqsjobs.ops._dlq_evidence import read_letters
from sqsjobs.ops._dlq_letters import DlqMessage, ignored_line
from sqsjobs.ops._queues import dead_letter_queue_of, dead_letter_sources, queue_identity, queue_name, resolve_queue_url
from sqsjobs.workflows._chunked import RunStatus

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_cloudwatch.type_defs import CompositeAlarmTypeDef, MetricAlarmTypeDef
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

    from sqsjobs.ops._metrics_reader import SkippedJob
    from sqsjobs.schedules._one_time import PendingSummary
    from sqsjobs.store._lease import LeaseStore

DEFAULT_SAMPLE: Final = 100
DEFAULT_RECENT: Final = 10
#: the window of the cancelled and expired counts per job
DEFAULT_SKIPPED_HOURS: Final = 24
# Long enough to finish the peek before the first peeked message reappears,
# short enough that a crash mid-peek hides nothing for long.
PEEK_VISIBILITY_SECONDS: Final = 30
ERROR_MESSAGE_CHARS: Final = 200
# Lines about malformed attributes a report carries before it only counts them.
ATTRIBUTE_NOTES: Final = 20

AgeSource = Literal["cloudwatch", "peek", "empty", "unknown"]
_T = TypeVar("_T")



@dataclass(frozen=True, kw_only=True)
class QueueStatus:
    """Depth of one queue and the age of its oldest message.

    Example:
        >>> QueueStatus(name="jobs", url="u", visible=3, in_flight=1, delayed=0,
        ...             oldest_age_seconds=None, oldest_age_source="unknown").depth
        4
    """

    name: str
    url: str
    visible: int
    in_flight: int
    delayed: int
    oldest_age_seconds: float | None
    oldest_age_source: AgeSource

    @property
    def depth(self) -> int:
        """Visible + in flight + delayed."""
        return self.visible + self.in_flight + self.delayed


@dataclass(frozen=True, kw_only=True)
class DeadLetterGroup:
    """Dead letters of one job with one reason and error type (from the peeked sample).

    Example:
        >>> DeadLetterGroup(job="a", reason="exhausted", error_type="TimeoutError", count=2,
        ...                 oldest_age_seconds=60.0).count
        2
    """

    job: str
    reason: str
    error_type: str
    count: int
    oldest_age_seconds: float | None
    #: False when the reason is the letters' own claim (no idempotency table was read)
    verified: bool = True


@dataclass(frozen=True, kw_only=True)
class RecentFailure:
    """One recent dead letter: which job, why, when.

    Example:
        >>> RecentFailure(message_id="m", job="a", reason="permanent", error_type="KeyError",
        ...               error_message="'x'", attempts=1, redrive_count=0, age_seconds=5.0).job
        'a'
    """

    #: the id the worker logged (the original message id its evidence names; the DLQ's own id for a letter
    #: SQS's redrive moved, which keeps the id): the same id in logs, status, redrive and the console
    message_id: str
    job: str
    reason: str
    error_type: str
    error_message: str
    attempts: int | None
    #: None when the letter's count is unreadable (poison-suspect)
    redrive_count: int | None
    age_seconds: float | None
    #: False when reason, error and counts are the letter's own claims (no idempotency table was read)
    verified: bool = True


@dataclass(frozen=True, kw_only=True)
class AlarmState:
    """One CloudWatch alarm and its state (``OK``, ``ALARM``, ``INSUFFICIENT_DATA``).

    Example:
        >>> AlarmState(name="jobs-dlq-not-empty", state="ALARM", reason="1 > 0", metric="x",
        ...            updated_at=None).firing
        True
    """

    name: str
    state: str
    reason: str
    metric: str
    updated_at: float | None

    @property
    def firing(self) -> bool:
        """True in state ``ALARM``."""
        return self.state == "ALARM"


@dataclass(frozen=True, kw_only=True)
class StatusReport:
    """Everything ``sqsjobs status`` shows.

    ``dlq_sampled`` is how many DLQ messages the groups and recent failures
    were computed from; when it is below the DLQ's depth they are a sample.
    Copies of one dead letter (the same original message id, as their
    evidence says) count once: ``dlq_duplicates`` says how many extra copies
    the sample held. ``dlq_verified`` is False when no idempotency table was
    read: reasons and counts are then the letters' own claims.
    ``dlq_malformed_attributes`` counts sampled letters with an unreadable
    ``sqsjobs.*`` attribute (one note each).

    Example:
        >>> StatusReport(queue=None, dlq=None, dlq_groups=(), dlq_sampled=0, alarms=(),
        ...              recent_failures=(), notes=()).to_dict()["dlq_sampled"]
        0
    """

    queue: QueueStatus | None
    dlq: QueueStatus | None
    dlq_groups: tuple[DeadLetterGroup, ...]
    dlq_sampled: int
    alarms: tuple[AlarmState, ...]
    recent_failures: tuple[RecentFailure, ...]
    notes: tuple[str, ...]
    #: chunked runs asked for with ``--run JOB:RUN_ID`` (docs/patterns.md)
    runs: tuple[RunStatus, ...] = ()
    dlq_duplicates: int = 0
    dlq_malformed_attributes: int = 0
    dlq_verified: bool = True
    #: delayed jobs waiting in the schedule group (``--schedule-group`` / ``SQSJOBS_SCHEDULE_GROUP``)
    delayed: PendingSummary | None = None
    #: every jobs queue: ``queue`` first, then the app's named queues and the DLQ's other source queues
    queues: tuple[QueueStatus, ...] = ()
    #: per job, deliveries acknowledged without running in the last ``skipped_hours``: cancelled, expired
    skipped: tuple[SkippedJob, ...] = ()
    skipped_hours: int = DEFAULT_SKIPPED_HOURS

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``sqsjobs status --json``)."""
        data = asdict(self)
        for key in ("queue", "dlq"):
            value = getattr(self, key)
            if value is not None:
                data[key]["depth"] = value.depth
        for entry, value in zip(data["queues"], self.queues, strict=True):
            entry["depth"] = value.depth
        data["alarms_firing"] = [a.name for a in self.alarms if a.firing]
        data["delayed"] = None if self.delayed is None else self.delayed.to_dict()
        return data


def collect_status(
    *,
    sqs_client: SQSClient,
    cloudwatch_client: CloudWatchClient | None = None,
    queue: str | None = None,
    dlq: str | None = None,
    sample: int = DEFAULT_SAMPLE,
    recent: int = DEFAULT_RECENT,
    alarm_prefix: str | None = None,
    namespace: str | None = None,
    clock: Callable[[], float] = time.time,
    runs: Sequence[tuple[str, str]] = (),
    dynamodb_client: DynamoDBClient | None = None,
    table: str | None = None,
    scheduler_client: EventBridgeSchedulerClient | None = None,
    schedule_group: str | None = None,
    schedule_sample: int = DEFAULT_SAMPLE,
    skipped_hours: int = DEFAULT_SKIPPED_HOURS,
    records: LeaseStore | None = None,
) -> StatusReport:
    """Read queue depths, peek the DLQ, read alarms; return one report.

    ``queue``/``dlq`` are URLs, ARNs or names, defaulting to
    ``SQSJOBS_QUEUE_URL``/``SQSJOBS_DLQ_URL``; the DLQ is otherwise found from
    the queue's redrive policy. Every jobs queue is shown: ``queue``, the
    app's named queues (``SQSJOBS_QUEUE_URL_<NAME>``) and every other source
    queue of the DLQ (a critical queue sharing it). ``runs`` are
    ``(job, run_id)`` pairs of chunked runs whose run records (in ``table``,
    default ``SQSJOBS_TABLE``) are shown. The DLQ's letters are checked against
    that table's evidence (``records``, else ``table`` with ``dynamodb_client``;
    without one they show their own claims, marked unverified).
    ``schedule_group`` (default ``SQSJOBS_SCHEDULE_GROUP``) adds the delayed
    jobs waiting there: their count (``ListSchedules``) and, from up to
    ``schedule_sample`` of them (a ``GetSchedule`` each), the next one due.
    With CloudWatch, the jobs whose deliveries were acknowledged without
    running in the last ``skipped_hours`` (``JobCancelled``, ``JobExpired``)
    are counted per job.

    Example:
        >>> import json
        >>> from moto import mock_aws
        >>> from sqsjobs._clients import sqs_client
        >>> with mock_aws():
        ...     sqs = sqs_client(region_name="eu-west-1")
        ...     dlq_url = sqs.create_queue(QueueName="jobs-dlq")["QueueUrl"]
        ...     policy = json.dumps({"deadLetterTargetArn": "arn:aws:sqs:eu-west-1:123456789012:jobs-dlq",
        ...                          "maxReceiveCount": 5})
        ...     _ = sqs.create_queue(QueueName="jobs", Attributes={"RedrivePolicy": policy})
        ...     for i in (1, 2):
        ...         _ = sqs.send_message(QueueUrl=dlq_url, MessageBody=json.dumps({"job": "invoice-email"}))
        ...     report = collect_status(sqs_client=sqs, queue="jobs")  # the DLQ is found from the redrive policy
        ...     report.dlq.depth, [g.job for g in report.dlq_groups]
        (2, ['invoice-email'])
    """
    # The environment's queue (the CLI's default): the app's named queues (SQSJOBS_QUEUE_URL_<NAME>) show too.
    from_environment = not queue or queue == os.environ.get(ENV_QUEUE_URL)
    queue = queue or os.environ.get(ENV_QUEUE_URL) or None
    dlq = dlq or os.environ.get(ENV_DLQ_URL) or None
    if not queue and not dlq:
        raise StatusError(f"which queue? pass --queue (and --dlq) or set {ENV_QUEUE_URL} / {ENV_DLQ_URL}")
    notes: list[str] = []
    queue_url = resolve_queue_url(sqs_client, queue) if queue else None
    if dlq:
        dlq_url: str | None = resolve_queue_url(sqs_client, dlq)
    else:
        dlq_url = dead_letter_queue_of(sqs_client, queue_url) if queue_url else None
    if dlq_url is None:
        notes.append("the queue has no redrive policy: no DLQ to inspect")

    watch = _Watch(cloudwatch_client, notes)
    table = table or os.environ.get(ENV_TABLE)
    if records is None and dynamodb_client is not None and table:
        from sqsjobs.store._dynamodb import DynamoDBStore

        records = DynamoDBStore(dynamodb_client, table)
    reading = read_letters(peek_dead_letters(sqs_client, dlq_url, sample=sample) if dlq_url else [],
                           records=records, now=clock())
    copies = list(reading.letters)
    if copies and reading.note:
        notes.append(reading.note)
    letters = _one_per_original(copies)
    if len(letters) < len(copies):
        notes.append(f"{len(copies) - len(letters)} DLQ message(s) are extra copies of a dead letter (the same "
                     "original message, as their evidence says: an acknowledgement lost after the DLQ send), "
                     "shown once; sqsjobs redrive moves one and deletes the others")
    notes.extend(_attribute_notes(letters))
    jobs_queues: list[QueueStatus] = []
    for url in _jobs_queues(sqs_client, queue_url, dlq_url, named=_named_queues() if from_environment else []):
        status = _queue_status(sqs_client, watch, url, letters=None, now=clock())
        jobs_queues.append(status)
        if status.oldest_age_source == "unknown":
            notes.append(
                f"oldest age of {status.name} unknown: no CloudWatch datapoint "
                "(a jobs queue is never peeked: a receive would count toward maxReceiveCount)"
            )
    queue_status = jobs_queues[0] if queue_url and jobs_queues else None
    dlq_status = None
    if dlq_url:
        dlq_status = _queue_status(sqs_client, watch, dlq_url, letters=letters, now=clock())
        if dlq_status.oldest_age_source == "peek":
            notes.append(f"oldest age of {dlq_status.name}: estimated from a peek of {len(letters)}")
        if len(copies) < dlq_status.visible:
            notes.append(f"DLQ groups are a sample: {len(copies)} of ~{dlq_status.depth} messages")

    names = {q.name for q in jobs_queues} | {queue_name(u) for u in (queue_url, dlq_url) if u}
    ns = namespace or os.environ.get(ENV_NAMESPACE) or "sqsjobs"
    alarms = watch.alarms(prefix=alarm_prefix, queue_names=names, namespace=ns)
    run_statuses = _runs(runs, dynamodb_client, table, notes)
    delayed = _delayed(scheduler_client, schedule_group or os.environ.get(ENV_SCHEDULE_GROUP), schedule_sample,
                       clock, notes)
    return StatusReport(
        queue=queue_status,
        dlq=dlq_status,
        dlq_groups=_group(letters),
        dlq_sampled=len(letters),
        alarms=alarms,
        recent_failures=_recent(letters, recent),
        notes=tuple(notes),
        runs=run_statuses,
        dlq_duplicates=len(copies) - len(letters),
        dlq_malformed_attributes=sum(1 for letter in letters if letter.bad_attributes),
        dlq_verified=reading.checked,
        delayed=delayed,
        queues=tuple(jobs_queues),
        skipped=watch.skipped(namespace=ns, hours=skipped_hours, now=clock()),
        skipped_hours=skipped_hours,
    )


def _named_queues() -> list[str]:
    """The app's named queues from the environment (``SQSJOBS_QUEUE_URL_<NAME>``)."""
    return [url for url in Settings.from_env().queues.values() if url]


def _jobs_queues(sqs_client: SQSClient, queue_url: str | None, dlq_url: str | None, *,
                 named: Sequence[str]) -> list[str]:
    """``queue_url`` first, then the named queues and the DLQ's other source queues, each once."""
    found: list[str] = []
    seen: set[tuple[str, str] | str] = set()
    sources = list(dead_letter_sources(sqs_client, dlq_url)) if dlq_url else []
    for url in ([queue_url] if queue_url else []) + [resolve_queue_url(sqs_client, n) for n in named] + sources:
        identity = queue_identity(url) or url
        if identity not in seen:
            seen.add(identity)
            found.append(url)
    return found



def _delayed(client: EventBridgeSchedulerClient | None, group: str | None, sample: int,
             clock: Callable[[], float], notes: list[str]) -> PendingSummary | None:
    """The schedule group's pending delayed jobs; a failure to read them is a note (the queues still show)."""
    if not group or client is None:
        return None
    from sqsjobs._errors import ScheduleError
    from sqsjobs.schedules._one_time import OneTimeSchedules

    try:
        summary = OneTimeSchedules(group=group, client=client, clock=clock).pending(sample=sample)
    except ScheduleError as error:
        notes.append(f"delayed jobs in {group} unknown: {error}")
        return None
    if not summary.complete:
        notes.append(f"next delayed job due: from {len(summary.sampled)} of {summary.count} schedules "
                     "(--schedule-sample reads more, one GetSchedule each)")
    return summary


def _one_per_original(letters: list[DlqMessage]) -> list[DlqMessage]:
    """One letter per original message (the oldest copy), as the letters' evidence names it.

    Example:
        >>> from sqsjobs.ops._dlq_letters import TableFacts
        >>> from sqsjobs.worker._dead_letters import Evidence, Reason
        >>> evidence = Evidence(original_message_id="o1", job="a", key=None, reason=Reason.PERMANENT,
        ...                     error_type="PermanentError", error_message="", attempts=1, source_queue="",
        ...                     first_receive_time=0)
        >>> copies = [DlqMessage.from_message({"MessageId": m, "Body": "{}"}, now=0,
        ...                                   facts=TableFacts(evidence=evidence)) for m in ("d1", "d2")]
        >>> [d.message_id for d in _one_per_original(copies)]
        ['d1']
    """
    kept: dict[str, DlqMessage] = {}
    for letter in letters:
        original = letter.copy_of
        if original not in kept or (letter.sent_at or 0.0) < (kept[original].sent_at or 0.0):
            kept[original] = letter
    return list(kept.values())


def _attribute_notes(letters: list[DlqMessage]) -> list[str]:
    """One note per unreadable or ignored ``sqsjobs.*`` attribute, at most ``ATTRIBUTE_NOTES`` (then a count)."""
    lines = [
        f"message {letter.original_message_id} ({letter.job}): malformed attribute {problem.line()}"
        + (" (redrive treats it as poison-suspect)" if problem.name.endswith("redrive_count") else "")
        for letter in letters
        for problem in letter.bad_attributes
    ]
    lines += [f"message {letter.original_message_id} ({letter.job}): {ignored_line(letter)}"
              for letter in letters if letter.ignored_attributes]
    if len(lines) > ATTRIBUTE_NOTES:
        lines = [*lines[:ATTRIBUTE_NOTES], f"... and {len(lines) - ATTRIBUTE_NOTES} more attribute note(s)"]
    return lines


def _runs(runs: Sequence[tuple[str, str]], client: DynamoDBClient | None, table: str | None,
          notes: list[str]) -> tuple[RunStatus, ...]:
    """The run records asked for; a missing one is a note, not an error."""
    if not runs:
        return ()
    if client is None or not table:
        raise StatusError("--run needs the idempotency table: pass --table or set SQSJOBS_TABLE")
    from sqsjobs.store._dynamodb import DynamoDBStore
    from sqsjobs.workflows._chunked import RunStore

    # The TTL only matters to writes, which status never makes.
    store = RunStore(DynamoDBStore(client, table), ttl=0.0)
    found = []
    for job, run_id in runs:
        status = store.status(job, run_id)
        if status is None:
            notes.append(f"no run record for {job}:{run_id} in {table}")
        else:
            found.append(status)
    return tuple(found)


class _Watch:
    """CloudWatch, best effort: an operator without CloudWatch rights still sees the queues."""

    def __init__(self, client: CloudWatchClient | None, notes: list[str]) -> None:
        self.client = client
        self.notes = notes

    def oldest_age(self, name: str, *, now: float) -> float | None:
        if self.client is None:
            return None
        return self._guard("the oldest-age metric", lambda c: _cloudwatch_oldest_age(c, name, now=now), None)

    def alarms(self, *, prefix: str | None, queue_names: set[str], namespace: str) -> tuple[AlarmState, ...]:
        if self.client is None:
            return ()
        return self._guard(
            "alarms",
            lambda c: tuple(_alarms(c, prefix=prefix, queue_names=queue_names, namespace=namespace)),
            (),
        )

    def skipped(self, *, namespace: str, hours: int, now: float) -> tuple[SkippedJob, ...]:
        if self.client is None:
            return ()
        from sqsjobs.ops._metrics_reader import Window, skipped_jobs

        window = Window.last(hours=hours, now=now)
        return self._guard("the cancelled and expired counts", lambda c: skipped_jobs(c, namespace, window), ())

    def _guard(self, what: str, read: Callable[[CloudWatchClient], _T], default: _T) -> _T:
        from botocore.exceptions import BotoCoreError, ClientError

        if self.client is None:
            return default
        try:
            return read(self.client)
        except (BotoCoreError, ClientError) as exc:
            self.notes.append(f"could not read {what} from CloudWatch: {exc}")
            self.client = None  # one note, not one per queue
            return default


def _queue_status(
    sqs_client: SQSClient,
    watch: _Watch,
    url: str,
    *,
    letters: list[DlqMessage] | None,
    now: float,
) -> QueueStatus:
    attrs = sqs_client.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    ).get("Attributes", {})
    visible = int(attrs.get("ApproximateNumberOfMessages", 0))
    in_flight = int(attrs.get("ApproximateNumberOfMessagesNotVisible", 0))
    delayed = int(attrs.get("ApproximateNumberOfMessagesDelayed", 0))
    name = queue_name(url)
    age: float | None = None
    source: AgeSource = "unknown"
    age = watch.oldest_age(name, now=now)
    if age is not None:
        source = "cloudwatch"
    peeked = [letter.age_seconds for letter in letters or () if letter.age_seconds is not None]
    if age is None and visible + in_flight + delayed == 0:
        age, source = 0.0, "empty"
    elif peeked and (age is None or max(peeked) > age):
        # CloudWatch's datapoint lags by a minute or more; a message we can
        # see is a lower bound that a stale datapoint must not hide.
        age, source = max(peeked), "peek"
    return QueueStatus(
        name=name,
        url=url,
        visible=visible,
        in_flight=in_flight,
        delayed=delayed,
        oldest_age_seconds=age,
        oldest_age_source=source,
    )


def _cloudwatch_oldest_age(cloudwatch_client: CloudWatchClient, name: str, *, now: float) -> float | None:
    end = datetime.fromtimestamp(now, tz=UTC)
    response = cloudwatch_client.get_metric_statistics(
        Namespace="AWS/SQS",
        MetricName="ApproximateAgeOfOldestMessage",
        Dimensions=[{"Name": "QueueName", "Value": name}],
        StartTime=end - timedelta(minutes=15),
        EndTime=end,
        Period=60,
        Statistics=["Maximum"],
    )
    points = sorted(response.get("Datapoints", []), key=lambda p: p["Timestamp"])
    if not points or "Maximum" not in points[-1]:
        return None
    return float(points[-1]["Maximum"])


def peek_dead_letters(sqs_client: SQSClient, dlq_url: str, *, sample: int = DEFAULT_SAMPLE) -> list[MessageTypeDef]:
    """Receive up to ``sample`` DLQ messages (bodies included), then make every one visible again.

    The operator console shows a sample of each group with its body.

    Example:
        >>> import json
        >>> from moto import mock_aws
        >>> from sqsjobs._clients import sqs_client
        >>> with mock_aws():
        ...     sqs = sqs_client(region_name="eu-west-1")
        ...     dlq_url = sqs.create_queue(QueueName="jobs-dlq")["QueueUrl"]
        ...     for i in (1, 2):
        ...         _ = sqs.send_message(QueueUrl=dlq_url, MessageBody=json.dumps({"job": "invoice-email"}))
        ...     peeked = peek_dead_letters(sqs, dlq_url, sample=1)
        ...     [json.loads(m["Body"])["job"] for m in peeked], read_queue_status(sqs, dlq_url).visible
        (['invoice-email'], 2)
    """
    received: dict[str, MessageTypeDef] = {}
    try:
        while len(received) < sample:
            messages = sqs_client.receive_message(
                QueueUrl=dlq_url,
                MaxNumberOfMessages=min(10, sample - len(received)),
                VisibilityTimeout=PEEK_VISIBILITY_SECONDS,
                WaitTimeSeconds=0,
                MessageAttributeNames=["All"],
                AttributeNames=["All"],
            ).get("Messages", [])
            fresh = [m for m in messages if m.get("MessageId", "") not in received]
            for m in messages:
                received[m.get("MessageId", "")] = m
            if not fresh:
                break
    finally:
        _make_visible(sqs_client, dlq_url, received.values())
    return list(received.values())


def _make_visible(sqs_client: SQSClient, url: str, messages: Iterable[MessageTypeDef]) -> None:
    handles = [m.get("ReceiptHandle", "") for m in messages]
    for start in range(0, len(handles), 10):
        sqs_client.change_message_visibility_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": 0}
                for i, h in enumerate(handles[start : start + 10])
            ],
        )


def read_queue_status(sqs_client: SQSClient, url: str, *, cloudwatch_client: CloudWatchClient | None = None,
                      letters: Sequence[DlqMessage] = (), clock: Callable[[], float] = time.time) -> QueueStatus:
    """One queue's depth and oldest age, as ``collect_status`` reads it (``letters``: a peek of it, if any).

    Example:
        >>> import json
        >>> from moto import mock_aws
        >>> from sqsjobs._clients import sqs_client
        >>> with mock_aws():
        ...     sqs = sqs_client(region_name="eu-west-1")
        ...     dlq_url = sqs.create_queue(QueueName="jobs-dlq")["QueueUrl"]
        ...     for i in (1, 2):
        ...         _ = sqs.send_message(QueueUrl=dlq_url, MessageBody=json.dumps({"job": "invoice-email"}))
        ...     read_queue_status(sqs, dlq_url).visible
        2
    """
    return _queue_status(sqs_client, _Watch(cloudwatch_client, []), url, letters=list(letters), now=clock())


def group_dead_letters(letters: Iterable[DlqMessage]) -> tuple[DeadLetterGroup, ...]:
    """Dead letters grouped by job, reason and error type, largest group first.

    Example:
        >>> msg = {"MessageId": "m", "Body": '{"job": "a"}', "MessageAttributes": {
        ...     "sqsjobs.reason": {"DataType": "String", "StringValue": "exhausted"}}}
        >>> [(g.job, g.reason, g.count) for g in group_dead_letters([DlqMessage.from_message(msg, now=0.0)] * 2)]
        [('a', 'exhausted', 2)]
    """
    return _group(list(letters))


def _group(letters: list[DlqMessage]) -> tuple[DeadLetterGroup, ...]:
    groups: dict[tuple[str, str, str, bool], list[DlqMessage]] = defaultdict(list)
    for letter in letters:
        groups[letter.job, letter.reason, letter.error_type, letter.verified].append(letter)
    out = []
    for (job, reason, error_type, verified), members in groups.items():
        ages = [m.age_seconds for m in members if m.age_seconds is not None]
        out.append(
            DeadLetterGroup(
                job=job,
                reason=reason,
                error_type=error_type,
                count=len(members),
                oldest_age_seconds=max(ages) if ages else None,
                verified=verified,
            )
        )
    return tuple(sorted(out, key=lambda g: (-g.count, g.job, g.reason, g.error_type)))


def _recent(letters: list[DlqMessage], limit: int) -> tuple[RecentFailure, ...]:
    newest = sorted(letters, key=lambda m: -(m.sent_at or 0.0))[:limit]
    return tuple(
        RecentFailure(
            message_id=m.original_message_id,
            job=m.job,
            reason=m.reason,
            error_type=m.error_type,
            error_message=m.error_message[:ERROR_MESSAGE_CHARS],
            attempts=m.attempts,
            redrive_count=m.redrive_count,
            age_seconds=m.age_seconds,
            verified=m.verified,
        )
        for m in newest
    )


def _alarms(
    cloudwatch_client: CloudWatchClient, *, prefix: str | None, queue_names: set[str], namespace: str
) -> Iterable[AlarmState]:
    """Alarms named with ``prefix``; without one, the alarms that concern these queues.

    Those are the alarms on the queues or on the sqsjobs metrics, plus every
    alarm that notifies the same SNS topics (the worker's Lambda errors and
    throttles alarms name a function, not a queue, but page the same people).
    """
    paginator = cloudwatch_client.get_paginator("describe_alarms")
    kwargs: dict[str, Any] = {"AlarmTypes": ["MetricAlarm", "CompositeAlarm"]}
    if prefix:
        kwargs["AlarmNamePrefix"] = prefix
    metric_alarms: list[MetricAlarmTypeDef] = []
    composites: list[CompositeAlarmTypeDef] = []
    for page in paginator.paginate(**kwargs):
        metric_alarms.extend(page.get("MetricAlarms", []))
        composites.extend(page.get("CompositeAlarms", []))
    ours = [a for a in metric_alarms if prefix or _concerns(a, queue_names, namespace)]
    topics = {arn for a in ours for arn in a.get("AlarmActions", []) if ":sns:" in arn}
    for alarm in metric_alarms:
        if alarm in ours or topics & set(alarm.get("AlarmActions", [])):
            yield _alarm_state(alarm, _metric_label(alarm))
    for composite in composites:
        if prefix or topics & set(composite.get("AlarmActions", [])):
            yield AlarmState(
                name=composite.get("AlarmName", ""),
                state=composite.get("StateValue", "INSUFFICIENT_DATA"),
                reason=composite.get("StateReason", ""),
                metric=composite.get("AlarmRule", ""),
                updated_at=_ts(composite.get("StateUpdatedTimestamp")),
            )


def _alarm_state(alarm: MetricAlarmTypeDef, metric: str) -> AlarmState:
    return AlarmState(
        name=alarm.get("AlarmName", ""),
        state=alarm.get("StateValue", "INSUFFICIENT_DATA"),
        reason=alarm.get("StateReason", ""),
        metric=metric,
        updated_at=_ts(alarm.get("StateUpdatedTimestamp")),
    )


def _concerns(alarm: MetricAlarmTypeDef, queue_names: set[str], namespace: str) -> bool:
    """True when the alarm watches one of our queues or our metric namespace."""
    metrics: list[tuple[str, dict[str, str]]] = []
    if "MetricName" in alarm:
        dims = {d["Name"]: d["Value"] for d in alarm.get("Dimensions", [])}
        metrics.append((alarm.get("Namespace", ""), dims))
    for query in alarm.get("Metrics", []):
        stat = query.get("MetricStat")
        if stat is not None:
            m = stat["Metric"]
            metrics.append((m.get("Namespace", ""), {d["Name"]: d["Value"] for d in m.get("Dimensions", [])}))
    for ns, dims in metrics:
        if ns == namespace:
            return True
        if ns == "AWS/SQS" and dims.get("QueueName") in queue_names:
            return True
    return False


def _metric_label(alarm: MetricAlarmTypeDef) -> str:
    if "MetricName" in alarm:
        return f"{alarm.get('Namespace', '')}/{alarm['MetricName']}"
    queries = alarm.get("Metrics", [])
    names = [q["MetricStat"]["Metric"].get("MetricName", "") for q in queries if "MetricStat" in q]
    return "math(" + ", ".join(names) + ")" if names else ""


def _ts(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None
