"""E9102/E9103/W9103/E9105: every consumed queue dead-letters, with one attempt count.

- E9102: a queue that feeds a function has no ``RedrivePolicy`` (no DLQ): a
  message that always fails is retried until retention expires, then lost.
- E9103: the queue's ``maxReceiveCount`` is not the ``SQSJOBS_MAX_ATTEMPTS`` the
  function is given plus one. The worker runs its attempts and dead-letters a
  job with a reason; a receive beyond the last attempt (which never reported: a
  timeout, a crash, out of memory) is dead-lettered by the worker with reason
  ``lost``. SQS's own redrive at ``maxReceiveCount`` is only the backstop, and a
  letter it moves carries no reason.
- W9103: fewer than 5 attempts (``SQSJOBS_MAX_ATTEMPTS``, else ``maxReceiveCount``):
  a throttled or briefly failing dependency sends healthy jobs to the DLQ.
- E9105: a DLQ that does not outlive its source (standard queues keep the
  original enqueue time, so a message arrives already aged), or a queue-type
  mismatch (SQS requires a FIFO queue's DLQ to be FIFO, and a standard queue's
  to be standard).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path as FilePath

try:
    from sqsjobs_rules import _base
except ImportError:  # pragma: no cover - loaded by path from a checkout, package not installed
    sys.path.append(str(FilePath(__file__).resolve().parent.parent))
    from sqsjobs_rules import _base

MAX_ATTEMPTS_VARIABLE = "SQSJOBS_MAX_ATTEMPTS"
MIN_RECOMMENDED_RECEIVES = 5


def _consumed(wiring: _base.Wiring) -> Iterator[tuple[_base.SqsSource, _base.Queue]]:
    for source in wiring.sources:
        if source.queue_id is not None:
            yield source, wiring.queues[source.queue_id]


class MissingDeadLetterQueue(_base.WiringRule):
    """E9102: a queue that feeds a function without a redrive policy.

    Example:
        >>> MissingDeadLetterQueue().id
        'E9102'
    """

    id = "E9102"
    shortdesc = "SQS queue feeding a function has no dead-letter queue"
    description = "A queue consumed by Lambda needs a RedrivePolicy with a deadLetterTargetArn."

    def check(self, wiring: _base.Wiring) -> Iterator[tuple[_base.Path, str]]:
        for source, queue in _consumed(wiring):
            if not queue.has_redrive:
                yield (
                    queue.path,
                    f"{queue.logical_id} feeds {source.function_id or source.label} but has no RedrivePolicy "
                    f"(no dead-letter queue): a job that keeps failing is retried until MessageRetentionPeriod "
                    f"ends and is then silently lost. Fix: add an AWS::SQS::Queue for its dead letters "
                    f"(MessageRetentionPeriod 1209600) and set {queue.logical_id}.RedrivePolicy to "
                    f"{{deadLetterTargetArn: !GetAtt <Dlq>.Arn, maxReceiveCount: <the function's "
                    f"{MAX_ATTEMPTS_VARIABLE} + 1>}} (see E9103).",
                )


class MaxAttemptsMismatch(_base.WiringRule):
    """E9103: ``maxReceiveCount`` is not the function's ``SQSJOBS_MAX_ATTEMPTS`` + 1.

    Example:
        >>> MaxAttemptsMismatch().id
        'E9103'
    """

    id = "E9103"
    shortdesc = "maxReceiveCount is not the function's SQSJOBS_MAX_ATTEMPTS + 1"
    description = (
        "The worker runs SQSJOBS_MAX_ATTEMPTS attempts and dead-letters with a reason, including `lost` for a "
        "receive after its last attempt; SQS's redrive at maxReceiveCount is the backstop, so maxReceiveCount "
        "must be SQSJOBS_MAX_ATTEMPTS + 1."
    )

    def check(self, wiring: _base.Wiring) -> Iterator[tuple[_base.Path, str]]:
        for source, queue in _consumed(wiring):
            if source.function_id is None or queue.max_receive_count is None:
                continue
            env = wiring.functions[source.function_id].environment
            if MAX_ATTEMPTS_VARIABLE not in env:
                continue
            given = env[MAX_ATTEMPTS_VARIABLE]
            receives = wiring.resolve.number(queue.max_receive_count)
            attempts = wiring.resolve.number(given)
            # One expression for both can only be equal, never one apart.
            if queue.max_receive_count != given and (receives is None or attempts is None):
                continue
            if receives is not None and attempts is not None and receives == attempts + 1:
                continue
            yield (
                (*queue.property_path("RedrivePolicy"), "maxReceiveCount"),
                f"{queue.logical_id}'s maxReceiveCount ({_shown(receives)}) must be {MAX_ATTEMPTS_VARIABLE} "
                f"({_shown(attempts)}, given to {source.function_id}) + 1: the worker runs its attempts and "
                f"dead-letters the receive after the last one with reason `lost` (that attempt never reported: "
                f"a timeout, a crash, out of memory); SQS's own redrive is only the backstop, and the letters it "
                f"moves carry no reason. Fix: {MAX_ATTEMPTS_VARIABLE}: !Ref MaxAttempts and maxReceiveCount: "
                f"!FindInMap [ReceivesPerMaxAttempts, !Ref MaxAttempts, MaxReceiveCount], a mapping with one row "
                f"per allowed MaxAttempts (CloudFormation cannot add; template.yaml has one).",
            )


class FewReceives(_base.WiringRule):
    """W9103: fewer than 5 attempts.

    The attempts are the consuming function's ``SQSJOBS_MAX_ATTEMPTS`` when it
    is given one, else the queue's ``maxReceiveCount``.

    Example:
        >>> FewReceives().severity
        'warning'
    """

    id = "W9103"
    shortdesc = "Fewer than 5 attempts before the DLQ"
    description = "Fewer than 5 attempts dead-letters jobs on short outages and throttling."

    def check(self, wiring: _base.Wiring) -> Iterator[tuple[_base.Path, str]]:
        for source, queue in _consumed(wiring):
            env = wiring.functions[source.function_id].environment if source.function_id else {}
            path = (*queue.property_path("RedrivePolicy"), "maxReceiveCount")
            if MAX_ATTEMPTS_VARIABLE in env:
                attempts = wiring.resolve.number(env[MAX_ATTEMPTS_VARIABLE])
                what = f"{source.function_id} runs {attempts} attempts ({MAX_ATTEMPTS_VARIABLE})"
            else:
                attempts = wiring.resolve.number(queue.max_receive_count)
                what = f"{queue.logical_id}'s maxReceiveCount is {attempts}"
            if attempts is not None and attempts < MIN_RECOMMENDED_RECEIVES:
                yield (
                    path,
                    f"{what}: a throttled batch or a short outage of a dependency would send healthy jobs to "
                    f"the DLQ. Fix: use at least {MIN_RECOMMENDED_RECEIVES}.",
                )


class DeadLetterRetention(_base.WiringRule):
    """E9105: the DLQ must outlive its source and match its type.

    Example:
        >>> DeadLetterRetention().id
        'E9105'
    """

    id = "E9105"
    shortdesc = "Dead-letter queue retention or type does not fit its source queue"
    description = (
        "On standard queues a dead-lettered message keeps its original enqueue time, so the DLQ must "
        "retain messages longer than the source; FIFO sources need FIFO DLQs (and standard, standard)."
    )

    def check(self, wiring: _base.Wiring) -> Iterator[tuple[_base.Path, str]]:
        for source, dlq in wiring.dead_letter_queues():
            if source.fifo and not dlq.fifo:
                yield (
                    dlq.path,
                    f"{source.logical_id} is a FIFO queue but its dead-letter queue {dlq.logical_id} is not: "
                    f"SQS rejects the redrive policy. Fix: set {dlq.logical_id}.FifoQueue: true.",
                )
                continue
            if dlq.fifo and not source.fifo:
                yield (
                    dlq.path,
                    f"{dlq.logical_id} is a FIFO queue but dead-letters for the standard queue "
                    f"{source.logical_id}: SQS rejects the redrive policy. Fix: make {dlq.logical_id} standard.",
                )
                continue
            if source.fifo or source.retention is None or dlq.retention is None:
                continue
            if dlq.retention <= source.retention:
                yield (
                    dlq.property_path("MessageRetentionPeriod"),
                    f"{dlq.logical_id} keeps messages {dlq.retention} s, not longer than its source "
                    f"{source.logical_id} ({source.retention} s): a dead-lettered message keeps its original "
                    f"enqueue time and can expire from the DLQ before anyone reads it. Fix: set "
                    f"{dlq.logical_id}.MessageRetentionPeriod to 1209600 (14 days) and keep "
                    f"{source.logical_id}'s shorter.",
                )


def _shown(value: int | None) -> str:
    return "unknown" if value is None else str(value)
