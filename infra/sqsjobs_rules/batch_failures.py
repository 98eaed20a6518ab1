"""E9104: an SQS event source must report partial batch failures.

Without ``FunctionResponseTypes: [ReportBatchItemFailures]`` the worker can
only fail a whole batch: one failing job makes Lambda redeliver every message,
so jobs that succeeded run again (the idempotency guard absorbs it, at a
cost), and every message's receive count climbs toward the DLQ together.
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

REPORT = "ReportBatchItemFailures"


class MissingBatchItemFailures(_base.WiringRule):
    """E9104: an SQS event source without ``ReportBatchItemFailures``.

    Example:
        >>> MissingBatchItemFailures().id
        'E9104'
    """

    id = "E9104"
    shortdesc = "SQS event source without ReportBatchItemFailures"
    description = "SQS event sources must set FunctionResponseTypes: [ReportBatchItemFailures]."

    def check(self, wiring: _base.Wiring) -> Iterator[tuple[_base.Path, str]]:
        for source in wiring.sources:
            types = source.response_types
            if isinstance(types, list) and REPORT in types:
                continue
            if isinstance(types, dict):
                continue  # an intrinsic function: cannot be decided statically
            queue = source.queue_id or "its queue"
            yield (
                source.property_path("FunctionResponseTypes"),
                f"{source.label} (queue {queue}) does not set FunctionResponseTypes: [{REPORT}]: one failed "
                f"job makes Lambda retry the whole batch, re-running jobs that already succeeded. Fix: add "
                f"FunctionResponseTypes: [{REPORT}] to {source.label} and return "
                f'{{"batchItemFailures": [...]}} from the handler (sqsjobs does).',
            )
