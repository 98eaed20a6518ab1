"""E9102/E9103/W9103/E9105: every consumed queue dead-letters, with one attempt count.

- E9102: a queue that feeds a function has no ``RedrivePolicy`` (no DLQ): a
  message that always fails is retried until retention expires, then lost.
- E9103: the queue's ``maxReceiveCount`` differs from the ``SQSJOBS_MAX_ATTEMPTS``
  the function is given: the worker would dead-letter earlier than SQS does, or
  believe it has attempts left that SQS will never deliver.
- W9103: ``maxReceiveCount`` below 5: a throttled or briefly failing dependency
  sends healthy jobs to the DLQ.
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
                    f"{{deadLetterTargetArn: !GetAtt <Dlq>.Arn, maxReceiveCount: !Ref MaxAttempts}}.",
                )


class MaxAttemptsMismatch(_base.WiringRule):
    """E9103: ``maxReceiveCount`` differs from the function's ``SQSJOBS_MAX_ATTEMPTS``.

    Example:
        >>> MaxAttemptsMismatch().id
        'E9103'
    """

    id = "E9103"
    shortdesc = "maxReceiveCount differs from the function's SQSJOBS_MAX_ATTEMPTS"
    description = (
        "The worker dead-letters with a reason at SQSJOBS_MAX_ATTEMPTS; SQS moves the message at "
        "maxReceiveCount. Both must be the same number (one template parameter)."
    )

    def check(self, wiring: _base.Wiring) -> Iterator[tuple[_base.Path, str]]:
        for source, queue in _consumed(wiring):
            if source.function_id is None or queue.max_receive_count is None:
                continue
            env = wiring.functions[source.function_id].environment
            if MAX_ATTEMPTS_VARIABLE not in env:
                continue
            given = env[MAX_ATTEMPTS_VARIABLE]
            if _base.same_value(queue.max_receive_count, given, wiring.resolve) is False:
                yield (
                    (*queue.property_path("RedrivePolicy"), "maxReceiveCount"),
                    f"{queue.logical_id}'s maxReceiveCount ({wiring.resolve.number(queue.max_receive_count)}) "
                    f"differs from {MAX_ATTEMPTS_VARIABLE} ({wiring.resolve.number(given)}) given to "
                    f"{source.function_id}: the worker and SQS would disagree on the last attempt. Fix: feed "
                    f"both from one parameter (maxReceiveCount: !Ref MaxAttempts and "
                    f"{MAX_ATTEMPTS_VARIABLE}: !Ref MaxAttempts).",
                )


class FewReceives(_base.WiringRule):
    """W9103: ``maxReceiveCount`` below 5.

    Example:
        >>> FewReceives().severity
        'warning'
    """

    id = "W9103"
    shortdesc = "maxReceiveCount below 5"
    description = "Fewer than 5 receives dead-letters jobs on short outages and throttling."

    def check(self, wiring: _base.Wiring) -> Iterator[tuple[_base.Path, str]]:
        for _source, queue in _consumed(wiring):
            count = wiring.resolve.number(queue.max_receive_count)
            if count is not None and count < MIN_RECOMMENDED_RECEIVES:
                yield (
                    (*queue.property_path("RedrivePolicy"), "maxReceiveCount"),
                    f"{queue.logical_id}'s maxReceiveCount is {count}: a throttled batch or a short outage "
                    f"of a dependency would send healthy jobs to the DLQ. Fix: use at least "
                    f"{MIN_RECOMMENDED_RECEIVES}.",
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
