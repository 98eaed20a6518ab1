"""What a redrive is asked to do: its options, the ``--job``/``--error`` filter, and what SQS's move task refuses.

The CLI (``sqsjobs redrive``), the console and the Lambda event
(:mod:`sqsjobs.ops._redrive_event`) all build a :class:`RedriveOptions`;
:mod:`sqsjobs.ops._redrive` carries it out. Nothing here calls AWS.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from sqsjobs._backoff import MAX_VISIBILITY_SECONDS
from sqsjobs._settings import DEFAULT_RECORD_TTL, ENV_DLQ_URL, ENV_QUEUE_URL, ENV_RECORD_TTL
from sqsjobs.enqueue._batching import SQS_MAX_ENTRIES
from sqsjobs.ops._errors import RedriveError

if TYPE_CHECKING:
    from sqsjobs.ops._dlq_letters import DlqMessage

__all__ = ["RedriveOptions", "event_flag", "letter_matches", "options_from_event", "record_ttl_from",
           "refuse_filters_for_native"]

# SQS batch APIs take at most 10 entries.
_BATCH: Final = SQS_MAX_ENTRIES


@dataclass(frozen=True, kw_only=True)
class RedriveOptions:
    """What to redrive, where to, and how fast.

    Targets: ``to`` (the operator's) wins; otherwise a letter goes to one of
    the DLQ's source queues (``ListDeadLetterSourceQueues``), the one its
    worker-written ``sqsjobs.source_queue`` names, else the only one, else
    ``default_to`` (the Lambda's ``SQSJOBS_QUEUE_URL``) when it is one of them
    (:mod:`sqsjobs.ops._redrive_targets`). ``record_ttl`` is how long idempotency
    records live (``SQSJOBS_RECORD_TTL_SECONDS``): older letters are counted
    and noted, because a replay may run a job that completed meanwhile.

    Example:
        >>> RedriveOptions(dlq="jobs-dlq", job="invoice-email", max_messages=100).rate is None
        True
    """

    dlq: str
    to: str | None = None
    default_to: str | None = None
    job: str | None = None
    error_type: str | None = None
    max_messages: int | None = None
    rate: float | None = None
    dry_run: bool = False
    force: bool = False
    max_redrives: int = 3
    malformed: Literal["move", "skip"] = "move"
    visibility_timeout: int = 60
    wait_time_seconds: int = 1
    stop_margin_seconds: float = 10.0
    record_ttl: float = DEFAULT_RECORD_TTL

    def __post_init__(self) -> None:
        if not self.dlq:
            raise RedriveError("a DLQ is required: pass --dlq URL_OR_NAME (or SQSJOBS_DLQ_URL)")
        if self.max_messages is not None and self.max_messages < 1:
            raise RedriveError(f"max_messages must be >= 1, got {self.max_messages}")
        if self.rate is not None and self.rate <= 0:
            raise RedriveError(f"rate must be > 0 messages per second, got {self.rate}")
        if self.max_redrives < 0:
            raise RedriveError(f"max_redrives must be >= 0, got {self.max_redrives}")
        if self.malformed not in ("move", "skip"):
            raise RedriveError(f"malformed must be 'move' or 'skip', got {self.malformed!r}")
        if not 0 <= self.wait_time_seconds <= 20:
            raise RedriveError(f"wait_time_seconds must be 0..20, got {self.wait_time_seconds}")
        if not 1 <= self.visibility_timeout <= MAX_VISIBILITY_SECONDS:
            raise RedriveError(f"visibility_timeout must be 1..{MAX_VISIBILITY_SECONDS}, got {self.visibility_timeout}")
        if not self.record_ttl > 0 or math.isinf(self.record_ttl):
            raise RedriveError(f"record_ttl must be a positive number of seconds, got {self.record_ttl}")

    @property
    def has_filters(self) -> bool:
        """True when a filter or a per-message decision needs the client-side engine."""
        return bool(self.job or self.error_type or self.max_messages or self.dry_run)

    def receive_size(self) -> int:
        """Messages to take per receive (at most 10).

        Under a slow rate, no more than can be sent within half the visibility
        timeout: a receipt handle that expires while its message waits for its
        turn would let the message reappear in the DLQ mid-send.

        Example:
            >>> RedriveOptions(dlq="d").receive_size(), RedriveOptions(dlq="d", rate=0.1).receive_size()
            (10, 3)
        """
        if self.rate is None:
            return _BATCH
        return max(1, min(_BATCH, math.floor(self.rate * self.visibility_timeout / 2)))

    def chunk_size(self) -> int:
        """Messages per send: bursts are at most one second's worth of the rate limit.

        Example:
            >>> RedriveOptions(dlq="d", rate=4).chunk_size()
            4
        """
        if self.rate is None:
            return _BATCH
        return max(1, min(_BATCH, math.floor(self.rate)))

    def pace_wait(self, *, started: float, sent: int, now: float) -> float:
        """Seconds to wait before the next send so that ``sent`` messages since ``started`` keep to the rate.

        Example:
            >>> RedriveOptions(dlq="d", rate=2).pace_wait(started=100.0, sent=10, now=103.0)
            2.0
        """
        if self.rate is None:
            return 0.0
        return max(0.0, started + sent / self.rate - now)


def letter_matches(letter: DlqMessage, *, job: str | None, error_type: str | None) -> bool:
    """True when ``letter`` passes the ``--job`` and ``--error`` filters (error: its error type or its reason).

    Example:
        >>> msg = {"MessageId": "m", "Body": '{"job": "a"}', "MessageAttributes": {
        ...     "sqsjobs.reason": {"DataType": "String", "StringValue": "exhausted"}}}
        >>> from sqsjobs.ops._dlq_letters import DlqMessage
        >>> letter = DlqMessage.from_message(msg, now=0.0)
        >>> letter_matches(letter, job="a", error_type="exhausted"), letter_matches(letter, job="b", error_type=None)
        (True, False)
    """
    if job is not None and letter.job != job:
        return False
    return error_type is None or error_type in (letter.error_type, letter.reason)


def refuse_filters_for_native(options: RedriveOptions) -> None:
    """Raise :class:`RedriveError` when ``options`` ask for what SQS's move task cannot do.

    Example:
        >>> refuse_filters_for_native(RedriveOptions(dlq="d", rate=10))
    """
    if options.has_filters:
        raise RedriveError(
            "--native moves every message and cannot filter, limit or dry-run; "
            "drop --job/--error/--max/--dry-run or run without --native"
        )


def options_from_event(
    event: Mapping[str, Any], *, environ: Mapping[str, str] | None = None
) -> RedriveOptions:
    """Options from a Lambda event; names follow the CLI flags (``error``, ``max``, ``dry_run``...).

    Example:
        >>> options_from_event({"job": "a", "max": 5}, environ={"SQSJOBS_DLQ_URL": "u"}).max_messages
        5
    """
    env = os.environ if environ is None else environ
    known = {"dlq", "to", "job", "error", "max", "rate", "dry_run", "force", "max_redrives", "malformed",
             "native", "status", "cancel", "wait_time_seconds", "visibility_timeout", "stop_margin_seconds",
             "record_ttl"}
    unknown = sorted(set(event) - known)
    if unknown:
        raise RedriveError(f"unknown redrive option(s) {unknown}; use {sorted(known)}")
    try:
        return RedriveOptions(
            dlq=str(event.get("dlq") or env.get(ENV_DLQ_URL, "")),
            to=event.get("to"),
            default_to=env.get(ENV_QUEUE_URL) or None,
            record_ttl=float(event["record_ttl"]) if event.get("record_ttl") is not None else record_ttl_from(env),
            job=event.get("job"),
            error_type=event.get("error"),
            max_messages=int(event["max"]) if event.get("max") is not None else None,
            rate=float(event["rate"]) if event.get("rate") is not None else None,
            dry_run=event_flag(event, "dry_run"),
            force=event_flag(event, "force"),
            max_redrives=int(event.get("max_redrives", 3)),
            malformed=event.get("malformed", "move"),
            wait_time_seconds=int(event.get("wait_time_seconds", 1)),
            visibility_timeout=int(event.get("visibility_timeout", 60)),
            stop_margin_seconds=float(event.get("stop_margin_seconds", 10.0)),
        )
    except (TypeError, ValueError) as exc:
        raise RedriveError(f"bad redrive option: {exc}") from exc


def record_ttl_from(environ: Mapping[str, str]) -> float:
    """How long idempotency records live: ``SQSJOBS_RECORD_TTL_SECONDS``, else the default (21 days).

    Example:
        >>> record_ttl_from({"SQSJOBS_RECORD_TTL_SECONDS": "1209600"}), record_ttl_from({})
        (1209600.0, 1814400.0)
    """
    raw = environ.get(ENV_RECORD_TTL)
    if not raw:
        return DEFAULT_RECORD_TTL
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise RedriveError(f"{ENV_RECORD_TTL} must be a positive number of seconds, got {raw!r}")
    return value


def event_flag(event: Mapping[str, Any], name: str) -> bool:
    # bool("false") is True: a JSON string must not turn on --force by accident.
    value = event.get(name, False)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise RedriveError(f"{name} must be true or false, got {value!r}")
