"""E9101/W9101: the queue's visibility timeout must outlast the function that consumes it.

If a message becomes visible again while the first invocation still runs its
job, a second worker receives it: the idempotency lease (which ends with the
invocation) is the only thing between the two, and it ends too early. Hence
visibility >= function timeout + batching window + margin (the batch waits in
the window already invisible). AWS recommends 6 x the function timeout so
retries after throttling have room too: a warning below that.

The margin is the rule's ``margin`` option (default 30 s, ``-x E9101:margin=60``
or ``configure_rules`` in ``.cfnlintrc``) or, when larger, the template's own
``VisibilityMarginSeconds`` parameter (``margin_parameter`` option).
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

RECOMMENDED_FACTOR = 6


def _pairs(wiring: _base.Wiring) -> Iterator[tuple[_base.SqsSource, _base.Queue, int, int, int]]:
    """(source, queue, visibility, timeout, window) for every fully resolved queue -> function pair."""
    for source in wiring.sources:
        if source.queue_id is None or source.function_id is None:
            continue
        queue = wiring.queues[source.queue_id]
        function = wiring.functions[source.function_id]
        visibility, timeout, window = queue.visibility_timeout, function.timeout, source.batching_window
        if visibility is None or timeout is None or window is None:
            continue
        yield source, queue, visibility, timeout, window


def _target(queue: _base.Queue) -> str:
    """What to change: the property, or the parameter it comes from (named so the fix is one edit)."""
    raw = queue.properties.get("VisibilityTimeout")
    prop = f"{queue.logical_id}.VisibilityTimeout"
    if isinstance(raw, dict) and set(raw) == {"Ref"}:
        return f"parameter {raw['Ref']} ({prop})"
    return prop


class VisibilityBelowTimeout(_base.WiringRule):
    """E9101: visibility timeout < function timeout + batching window + margin.

    Example:
        >>> VisibilityBelowTimeout().id
        'E9101'
    """

    id = "E9101"
    shortdesc = "SQS visibility timeout shorter than the consuming function's timeout + margin"
    description = (
        "A queue that feeds a Lambda function must keep a received message invisible for at least the "
        "function timeout + the batching window + a margin, or it is delivered again while still running."
    )

    def __init__(self) -> None:
        super().__init__()
        self.config_definition = {
            "margin": {"default": 30, "type": "integer"},
            "margin_parameter": {"default": "VisibilityMarginSeconds", "type": "string"},
        }
        self.configure()

    def check(self, wiring: _base.Wiring) -> Iterator[tuple[_base.Path, str]]:
        margin = int(self.config["margin"])
        declared = str(self.config["margin_parameter"])
        if declared and wiring.resolve.declares(declared):
            margin = max(margin, wiring.resolve.number({"Ref": declared}) or 0)
        for source, queue, visibility, timeout, window in _pairs(wiring):
            needed = timeout + window + margin
            if visibility < needed:
                yield (
                    queue.property_path("VisibilityTimeout"),
                    f"{queue.logical_id} feeds {source.function_id} ({source.label}) but its VisibilityTimeout "
                    f"{visibility} s is less than the function's Timeout {timeout} s + batching window "
                    f"{window} s + margin {margin} s = {needed} s, so a message can be delivered again while "
                    f"its first run is still going. Fix: set {_target(queue)} to at least "
                    f"{needed} (AWS recommends {RECOMMENDED_FACTOR} x Timeout = {RECOMMENDED_FACTOR * timeout}), "
                    f"or lower {source.function_id}'s Timeout.",
                )


class VisibilityBelowRecommendation(_base.WiringRule):
    """W9101: visibility timeout < 6 x function timeout (AWS's recommendation).

    Example:
        >>> VisibilityBelowRecommendation().severity
        'warning'
    """

    id = "W9101"
    shortdesc = "SQS visibility timeout below 6 x the consuming function's timeout"
    description = (
        "AWS recommends a visibility timeout of at least six times the function timeout, so a batch "
        "retried after throttling does not become visible again mid-run."
    )

    def check(self, wiring: _base.Wiring) -> Iterator[tuple[_base.Path, str]]:
        for source, queue, visibility, timeout, _window in _pairs(wiring):
            recommended = RECOMMENDED_FACTOR * timeout
            if visibility < recommended:
                yield (
                    queue.property_path("VisibilityTimeout"),
                    f"{queue.logical_id}.VisibilityTimeout {visibility} s is below AWS's recommended "
                    f"{RECOMMENDED_FACTOR} x {source.function_id}'s Timeout {timeout} s = {recommended} s. "
                    f"Fix: raise {_target(queue)} to {recommended}.",
                )
