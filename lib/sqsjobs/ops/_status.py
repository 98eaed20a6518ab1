"""`sqsjobs status`: what the paged engineer looks at first.

Queue depth and in-flight counts, the oldest message's age, the DLQ grouped by
job and reason, alarm states, the most recent failures and the delayed jobs
waiting in the schedule group (count and next due), as one frozen
:class:`StatusReport` (rendered as rich tables or JSON by ``sqsjobs.cli.status``).
The report's values are :mod:`sqsjobs.ops._status_report`, CloudWatch's side
:mod:`sqsjobs.ops._status_cloudwatch`, the DLQ's peek :mod:`sqsjobs.ops._peek`.

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
from typing import TYPE_CHECKING, Final

from sqsjobs._errors import ScheduleError
from sqsjobs._settings import (
    ENV_DLQ_URL,
    ENV_NAMESPACE,
    ENV_QUEUE_URL,
    ENV_SCHEDULE_GROUP,
    ENV_SERVICE,
    ENV_TABLE,
    Settings,
)
from sqsjobs.enqueue._addresses import queue_identity, queue_name, resolve_queue_url
from sqsjobs.ops._cost import CostOptions
from sqsjobs.ops._dlq_evidence import read_letters
from sqsjobs.ops._dlq_letters import DlqMessage, ignored_line
from sqsjobs.ops._errors import StatusError
from sqsjobs.ops._peek import peek
from sqsjobs.ops._queues import dead_letter_queue_of, dead_letter_sources
from sqsjobs.ops._status_cloudwatch import Watch
from sqsjobs.ops._status_report import (
    DEFAULT_RECENT,
    DEFAULT_SAMPLE,
    DEFAULT_SKIPPED_HOURS,
    AgeSource,
    QueueStatus,
    StatusReport,
    group_dead_letters,
    recent_failures,
)
from sqsjobs.workflows._chunked import RunStatus, RunStore

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_sqs import SQSClient

    from sqsjobs.schedules._one_time import PendingSummary
    from sqsjobs.store._lease import LeaseStore

# Lines about malformed attributes a report carries before it only counts them.
ATTRIBUTE_NOTES: Final = 20


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
    costs: CostOptions | None = None,
    service: str | None = None,
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
    are counted per job, and ``costs`` (default: the last 7 days at us-east-1's prices) prices what each
    job of ``service`` (default: ``POWERTOOLS_SERVICE_NAME``, else the only one with metrics) cost
    (``ops/_cost.py``).

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
        from sqsjobs._env_names import did_you_mean

        raise StatusError(f"which queue? pass --queue (and --dlq) or set {ENV_QUEUE_URL} / {ENV_DLQ_URL}"
                          f"{did_you_mean(ENV_QUEUE_URL, ENV_DLQ_URL)}")
    notes: list[str] = []
    queue_url = resolve_queue_url(sqs_client, queue) if queue else None
    if dlq:
        dlq_url: str | None = resolve_queue_url(sqs_client, dlq)
    else:
        dlq_url = dead_letter_queue_of(sqs_client, queue_url) if queue_url else None
    if dlq_url is None:
        notes.append("the queue has no redrive policy: no DLQ to inspect")

    watch = Watch(cloudwatch_client, notes)
    table = table or os.environ.get(ENV_TABLE)
    if records is None and dynamodb_client is not None and table:
        from sqsjobs.store._dynamodb import DynamoDBStore

        records = DynamoDBStore(dynamodb_client, table)
    reading = read_letters(peek(sqs_client, dlq_url, max_messages=sample) if dlq_url else [],
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
        dlq_groups=group_dead_letters(letters),
        dlq_sampled=len(letters),
        alarms=alarms,
        recent_failures=recent_failures(letters, recent),
        notes=tuple(notes),
        runs=run_statuses,
        dlq_duplicates=len(copies) - len(letters),
        dlq_malformed_attributes=sum(1 for letter in letters if letter.bad_attributes),
        dlq_verified=reading.checked,
        delayed=delayed,
        queues=tuple(jobs_queues),
        skipped=watch.skipped(namespace=ns, hours=skipped_hours, now=clock()),
        skipped_hours=skipped_hours,
        costs=watch.costs(namespace=ns, service=service or os.environ.get(ENV_SERVICE) or None,
                          options=costs or CostOptions(), now=clock()),
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
        from sqsjobs._env_names import did_you_mean

        raise StatusError(f"--run needs the idempotency table: pass --table or set {ENV_TABLE}"
                          f"{did_you_mean(ENV_TABLE)}")
    from sqsjobs.store._dynamodb import DynamoDBStore

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


def _queue_status(
    sqs_client: SQSClient,
    watch: Watch,
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
    return _queue_status(sqs_client, Watch(cloudwatch_client, []), url, letters=list(letters), now=clock())


