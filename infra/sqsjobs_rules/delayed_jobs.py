"""E9108 / W9108: a function that schedules delayed jobs may create, move, read and delete them, and pass the role.

A function given ``SQSJOBS_SCHEDULE_GROUP`` creates one-time EventBridge
Scheduler schedules for jobs due beyond 15 minutes and for retries beyond 12
hours (docs/delays.md). Without the permissions the first long delay fails at
run time — in the worker, a retry then comes back after 12 hours instead of
its delay. So the function must be allowed:

- ``scheduler:CreateSchedule``, ``UpdateSchedule`` (``replace=True``),
  ``GetSchedule`` and ``DeleteSchedule`` on the group's schedules
  (``arn:...:schedule/<group>/*``; the group's own ARN,
  ``schedule-group/<group>``, does not cover them);
- ``iam:PassRole`` on the role ``SQSJOBS_SCHEDULER_ROLE_ARN`` names (which it
  must have);

and that role, when the template defines it, must trust
``scheduler.amazonaws.com`` and allow ``sqs:SendMessage`` on the queue
``SQSJOBS_QUEUE_URL`` names. A grant wider than needed (every group, every
role) is a warning (W9108). Policies the rule cannot read (managed policies,
a role outside the template, values only known at deploy) skip the check.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path as FilePath

try:
    from sqsjobs_rules import _base, _delayed_jobs
except ImportError:  # pragma: no cover - loaded by path from a checkout, package not installed
    sys.path.append(str(FilePath(__file__).resolve().parent.parent))
    from sqsjobs_rules import _base, _delayed_jobs


class DelayedJobPermissions(_base.WiringRule):
    """E9108: a function with ``SQSJOBS_SCHEDULE_GROUP`` cannot manage its delayed jobs' schedules.

    Example:
        >>> DelayedJobPermissions().id
        'E9108'
    """

    id = "E9108"
    shortdesc = "Function schedules delayed jobs without the Scheduler permissions or PassRole"
    description = (
        "A function with SQSJOBS_SCHEDULE_GROUP needs scheduler:CreateSchedule/UpdateSchedule/GetSchedule/"
        "DeleteSchedule on the group's schedules, iam:PassRole on SQSJOBS_SCHEDULER_ROLE_ARN, and that role must "
        "trust scheduler.amazonaws.com and may send to the jobs queue."
    )

    def check(self, wiring: _base.Wiring) -> Iterator[tuple[_base.Path, str]]:
        for finding in _delayed_jobs.findings(wiring):
            if finding.error:
                yield finding.path, finding.message


class BroadDelayedJobPermissions(_base.WiringRule):
    """W9108: the Scheduler permissions or PassRole reach beyond the function's group and role.

    Example:
        >>> BroadDelayedJobPermissions().id
        'W9108'
    """

    id = "W9108"
    shortdesc = "Delayed-job permissions wider than the schedule group and its role"
    description = "Scope scheduler:* to arn:...:schedule/<group>/* and iam:PassRole to the delivery role."

    def check(self, wiring: _base.Wiring) -> Iterator[tuple[_base.Path, str]]:
        for finding in _delayed_jobs.findings(wiring):
            if not finding.error:
                yield finding.path, finding.message
