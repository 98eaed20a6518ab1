"""The demo's final report: per-job outcomes, dead letters by reason, e-mails, alarms fired."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from demo.view import COLUMNS, job_counts
from demo.workload import Workload


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What happened, gathered from the metrics, the DLQ, SES and the alarms.

    Example:
        >>> Outcome(counts={}, dead_letters=[], emails=[], alarms=[], wall_s=1.0).problems(Workload.default())[0]
        'e-mailed 0 distinct invoices, expected 71'
    """

    counts: dict[str, dict[str, int]]
    dead_letters: list[dict[str, str]]
    emails: list[dict[str, Any]]
    alarms: list[tuple[str, str, str]]
    wall_s: float

    def problems(self, workload: Workload) -> list[str]:
        """Ways the run differs from what the workload must produce (empty: success)."""
        found = []
        subjects = Counter(str(e.get("subject")) for e in self.emails)
        if len(subjects) != workload.expected_done:
            found.append(f"e-mailed {len(subjects)} distinct invoices, expected {workload.expected_done}")
        twice = sorted(s for s, n in subjects.items() if n > 1)
        if twice:
            found.append(f"e-mailed more than once: {', '.join(twice)}")
        if len(self.dead_letters) != workload.expected_dead:
            found.append(f"{len(self.dead_letters)} dead letters, expected {workload.expected_dead}")
        return found


def dead_letters(cloud: Any) -> list[dict[str, str]]:
    """The DLQ's messages as ``{job, reason, error_type, error_message, body}`` (peeked, left in place)."""
    found: dict[str, dict[str, str]] = {}
    for message in cloud.peek_all("DeadLetterQueue"):
        attributes = {k: v.get("StringValue", "") for k, v in message.get("MessageAttributes", {}).items()}
        found[message["MessageId"]] = {
            "job": attributes.get("sqsjobs.job", "?"),
            "reason": attributes.get("sqsjobs.reason", "?"),
            "error_type": attributes.get("sqsjobs.error_type", "?"),
            "error_message": attributes.get("sqsjobs.error_message", ""),
            "body": message["Body"][:60],
        }
    return list(found.values())


def gather(cloud: Any, *, namespace: str, service: str, wall_s: float) -> Outcome:
    """Collect the outcome from the running local cloud."""
    fired = [(t.alarm, t.severity, t.reason) for t in cloud.alarms.history if t.new == "ALARM"]
    return Outcome(
        counts=job_counts(cloud, namespace, service),
        dead_letters=dead_letters(cloud),
        emails=cloud.emails(),
        alarms=fired,
        wall_s=wall_s,
    )


def show(console: Console, outcome: Outcome, workload: Workload) -> None:
    """Print the report tables."""
    jobs = Table(title="Jobs")
    jobs.add_column("job")
    for label, _ in COLUMNS:
        jobs.add_column(label, justify="right")
    for job, counts in sorted(outcome.counts.items()):
        jobs.add_row(job, *(str(counts.get(metric, 0)) for _, metric in COLUMNS))
    console.print(jobs)

    reasons = Table(title="Dead-lettered, by reason (sqsjobs.* attributes on the DLQ)")
    for column in ("job", "reason", "error", "count", "example"):
        reasons.add_column(column, justify="right" if column == "count" else "left")
    grouped = Counter((d["job"], d["reason"], d["error_type"]) for d in outcome.dead_letters)
    for (job, reason, error_type), count in sorted(grouped.items()):
        example = next(d for d in outcome.dead_letters
                       if (d["job"], d["reason"], d["error_type"]) == (job, reason, error_type))
        reasons.add_row(job, reason, error_type, str(count), example["error_message"][:70])
    console.print(reasons)

    alarms = Table(title="Alarms that fired")
    for column in ("alarm", "severity", "why"):
        alarms.add_column(column)
    for name, severity, reason in outcome.alarms:
        alarms.add_row(name, severity, reason)
    console.print(alarms)

    subjects = Counter(str(e.get("subject")) for e in outcome.emails)
    console.print(
        f"SES: {len(outcome.emails)} e-mails for {len(subjects)} distinct invoices "
        f"(expected {workload.expected_done}, each once). Wall time {outcome.wall_s:.1f} s."
    )


def as_json(outcome: Outcome) -> str:
    """The outcome as JSON (for CI logs)."""
    return json.dumps({"counts": outcome.counts, "dead_letters": outcome.dead_letters,
                       "alarms": outcome.alarms, "emails": len(outcome.emails), "wall_s": outcome.wall_s})
