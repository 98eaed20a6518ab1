"""The live screen: per-job progress, queues, alarms and the latest events."""

from __future__ import annotations

from collections import deque
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from sqsjobs import _metrics as m

COLUMNS = (
    ("done", m.SUCCEEDED),
    ("duplicates skipped", m.DUPLICATE),
    ("retried", m.RETRIED),
    ("dead-lettered", m.DEAD_LETTERED),
    ("failed runs", m.FAILED),
)


def job_counts(cloud: Any, namespace: str, service: str) -> dict[str, dict[str, int]]:
    """Per job, the framework's counters as the worker emitted them (EMF, ``{service, Job}``)."""
    counts: dict[str, dict[str, int]] = {}
    for (ns, name, dims), series in cloud.metrics.series().items():
        labels = dict(dims)
        # Only the {service, Job} set: a job's tenant and limiter sets count the same runs again.
        if ns != namespace or labels.get(m.DIMENSION_SERVICE) != service or set(labels) != {
                m.DIMENSION_SERVICE, m.DIMENSION_JOB}:
            continue
        job = labels[m.DIMENSION_JOB]
        counts.setdefault(job, {})[name] = counts.get(job, {}).get(name, 0) + int(sum(v for _, v in series))
    return counts


def render(cloud: Any, *, namespace: str, service: str, phase: str, sent: int, elapsed: float,
           events: deque[tuple[str, str]]) -> Group:
    """One frame of the live view."""
    jobs = Table(title=f"sqsjobs demo: {phase}  ({elapsed:4.1f} s, {sent} messages sent)", expand=False)
    jobs.add_column("job")
    for label, _ in COLUMNS:
        jobs.add_column(label, justify="right")
    for job, counts in sorted(job_counts(cloud, namespace, service).items()):
        jobs.add_row(job, *(str(counts.get(metric, 0)) for _, metric in COLUMNS))
    queues = Table(show_header=True, expand=False)
    queues.add_column("queue")
    queues.add_column("messages", justify="right")
    for logical_id in cloud.deployment.queues:
        queues.add_row(logical_id, str(cloud.queue_depth(logical_id)))
    alarms = Table(show_header=True, expand=False)
    alarms.add_column("alarm")
    alarms.add_column("state")
    for alarm in cloud.deployment.alarms:
        state = cloud.alarms.states[alarm.name]
        style = "bold red" if state == "ALARM" else "green" if state == "OK" else "dim"
        alarms.add_row(alarm.logical_id, Text(state, style=style))
    recent = Text()
    for level, text in list(events)[-6:]:
        style = {"page": "bold red", "alarm-warn": "bold yellow", "warn": "yellow", "error": "red"}.get(level, "")
        recent.append(f"{level:>10} {text.splitlines()[0][:140]}\n", style=style)
    return Group(jobs, queues, alarms, recent)
