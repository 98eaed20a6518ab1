"""When jobs and functions ran, read back from the local cloud: to check a limiter there.

A job that logs a line with its start (and end) times, as the reference app's
flow-control jobs do (``"provider called"``, ``started``, ``finished``),
leaves a timeline in the functions' logs (``LocalCloudSession.logs``, or an
``Output`` log sink). Counting over those times is what a rate or
concurrency limit promises, whatever the load on the machine.

Example:
    >>> lines = [("Worker", '{"message": "provider called", "provider": "sms", "id": 1, "started": 0.0, '
    ...          '"finished": 0.1}'), ("Worker", "not json")]
    >>> calls(lines, "sms")
    {1: (0.0, 0.1)}
    >>> most_in_window([0.0, 0.2, 0.9, 1.25, 1.3], 1.0), most_at_once([(0.0, 1.0), (0.5, 1.5), (1.0, 2.0)])
    (3, 2)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from sqsjobs import _metrics as m

#: the log message the reference app's stand-in providers write (handlers/app.py)
PROVIDER_CALLED = "provider called"


def calls(logs: Iterable[tuple[str, str]], provider: str) -> dict[int, tuple[float, float]]:
    """``id -> (started, finished)`` of every ``provider called`` line for ``provider`` in ``logs``."""
    found: dict[int, tuple[float, float]] = {}
    for _, line in logs:
        if PROVIDER_CALLED not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("message") == PROVIDER_CALLED and entry.get("provider") == provider:
            found[int(entry["id"])] = (float(entry["started"]), float(entry["finished"]))
    return found


def most_in_window(starts: Sequence[float], window: float) -> int:
    """The most starts inside any closed window of ``window`` seconds (each window opening at a start)."""
    ordered = sorted(starts)
    most, first = 0, 0
    for last, start in enumerate(ordered):
        while ordered[first] < start - window:
            first += 1
        most = max(most, last - first + 1)
    return most


def most_at_once(intervals: Iterable[tuple[float, float]]) -> int:
    """The most ``(start, end)`` intervals running at one instant (an end and a start at one instant do not meet)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = peak = 0
    for _, step in events:  # at one instant, -1 sorts before +1
        running += step
        peak = max(peak, running)
    return peak


def busy_seconds(cloud: Any, function: str, since: float, until: float) -> float:
    """How long invocations of ``function`` (a logical id) ran between ``since`` and ``until`` (its Duration)."""
    name = cloud.deployment.functions[function].name
    total_ms = sum(value for (namespace, metric, dims), series in cloud.metrics.series().items()
                   if (namespace, metric) == ("AWS/Lambda", "Duration") and dict(dims).get("FunctionName") == name
                   for at, value in series if since <= at <= until)
    return float(total_ms) / 1000.0


def metric_total(cloud: Any, name: str, **dimensions: str) -> int:
    """The sum of framework metric ``name`` over the set ``{service, Job, ...dimensions}`` with these values."""
    wanted = {m.DIMENSION_SERVICE, m.DIMENSION_JOB, *dimensions}
    total = 0.0
    for (_, metric, dims), series in cloud.metrics.series().items():
        labels = dict(dims)
        if metric == name and set(labels) == wanted and all(labels.get(k) == v for k, v in dimensions.items()):
            total += sum(value for _, value in series)
    return int(total)
