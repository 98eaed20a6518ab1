"""E9109: a function's message size limit must fit every queue it sends to.

The app refuses a message over its own limit (``SQSJOBS_MAX_MESSAGE_BYTES``,
262,144 when unset) before anything is sent, so that limit must not be larger
than the ``MaximumMessageSize`` of the queues the function sends to: the jobs
queues its environment names, its DLQ, and the queues feeding it (a job re-sent
at its last receive goes back there). Otherwise a message the app lets through
is refused by SQS at run time: an enqueue error, or a dead letter that cannot
be written. A queue without ``MaximumMessageSize`` is taken at 262,144 bytes:
CloudFormation's documented default (SQS's own is now 1 MiB; say it in the
template rather than rely on either).
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

LIMIT_VARIABLE = "SQSJOBS_MAX_MESSAGE_BYTES"
#: the app's limit without the variable, and a queue's size without the property
DEFAULT_BYTES = 262_144
#: the variables naming a queue the function sends to
QUEUE_VARIABLES = ("SQSJOBS_QUEUE_URL", "SQSJOBS_DLQ_URL")


def queues_sent_to(wiring: _base.Wiring, function_id: str) -> list[_base.Queue]:
    """The queues of the template ``function_id`` sends to: named in its environment, feeding it, and their DLQs."""
    function = wiring.functions[function_id]
    named = [s.queue_id for s in wiring.sources if s.function_id == function_id and s.queue_id]
    for name, value in function.environment.items():
        target = value.get("Ref") if isinstance(value, dict) and set(value) == {"Ref"} else None
        if name.startswith(QUEUE_VARIABLES) and target in wiring.queues:
            named.append(target)
    found = {queue_id: wiring.queues[queue_id] for queue_id in named}
    found.update({q.logical_id: q for q in wiring.dead_letter_queues_of(function_id)})
    return list(found.values())


class MessageLimitOverQueueSize(_base.WiringRule):
    """E9109: SQSJOBS_MAX_MESSAGE_BYTES larger than the MaximumMessageSize of a queue the function sends to.

    Example:
        >>> t = {"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"MaximumMessageSize": 262144}},
        ...      "F": {"Type": "AWS::Serverless::Function", "Properties": {"Environment": {"Variables": {
        ...            "SQSJOBS_QUEUE_URL": {"Ref": "Q"}, "SQSJOBS_MAX_MESSAGE_BYTES": 1048576}}}}}}
        >>> [m[:60] for _, m in MessageLimitOverQueueSize().check(_base.Wiring(t))]
        ['F sends messages of up to 1048576 bytes (SQSJOBS_MAX_MESSAGE']
    """

    id = "E9109"
    shortdesc = "A function's SQSJOBS_MAX_MESSAGE_BYTES is larger than a queue it sends to takes"
    description = (
        "The app checks messages against SQSJOBS_MAX_MESSAGE_BYTES before sending; a queue with a smaller "
        "MaximumMessageSize refuses what gets through, at run time."
    )

    def check(self, wiring: _base.Wiring) -> Iterator[tuple[_base.Path, str]]:
        for function_id, function in wiring.functions.items():
            if not any(name.startswith("SQSJOBS_") for name in function.environment):
                continue  # not an sqsjobs function
            raw = function.environment.get(LIMIT_VARIABLE)
            limit = DEFAULT_BYTES if raw is None else wiring.resolve.number(raw)
            if limit is None:
                continue
            for queue in queues_sent_to(wiring, function_id):
                declared = queue.properties.get("MaximumMessageSize")
                size = DEFAULT_BYTES if declared is None else wiring.resolve.number(declared)
                if size is None or limit <= size:
                    continue
                given = f"{LIMIT_VARIABLE}" if raw is not None else f"{LIMIT_VARIABLE} unset: {DEFAULT_BYTES}"
                yield (
                    function.variable_path(LIMIT_VARIABLE),
                    f"{function_id} sends messages of up to {limit} bytes ({given}) but {queue.logical_id} takes "
                    f"at most {size} (MaximumMessageSize{'' if declared is not None else ' unset'}), so SQS refuses "
                    f"what the app lets through. Fix: give {queue.logical_id}.MaximumMessageSize and "
                    f"{function_id}'s {LIMIT_VARIABLE} the same value (the template's MaximumMessageSize "
                    "parameter feeds both).",
                )
