"""One log line per delivered message: what the worker did with it, by job, key and message id.

``JobApp.process_batch`` writes them at DEBUG (``"job outcome"``), so a
production function at INFO pays for one disabled-level check per record;
``sqsjobs local up`` turns them on and prints each as one readable line. The
message id is SQS's: the same one redrive and status show (a DLQ letter's
``sqsjobs.original_message_id``).

Example:
    >>> from sqsjobs import JobApp
    >>> class Log:
    ...     lines = []
    ...     def debug(self, message, extra):
    ...         if message == OUTCOME_MESSAGE:
    ...             self.lines.append((extra["outcome"], extra["key"], extra["message_id"]))
    ...     def __getattr__(self, name):  # the worker's other log calls
    ...         return lambda *args, **kwargs: None
    >>> app = JobApp(logger=Log())
    >>> @app.job("greet", key="greet:{user_id}")
    ... def greet(user_id: int) -> None: ...
    >>> with app.testing() as t:
    ...     _ = t.run(greet.message(user_id=7), greet.message(user_id=7))
    >>> Log.lines
    [('succeeded', 'greet:7', 'fake-000001'), ('duplicate', 'greet:7', 'fake-000002')]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqsjobs.worker._delivery import loggable

if TYPE_CHECKING:
    from sqsjobs.worker._delivery import BatchResult

#: the log message every outcome line carries (``sqsjobs.local.output`` looks for it)
OUTCOME_MESSAGE = "job outcome"


def log_outcomes(logger: Any, result: BatchResult) -> None:
    """Log ``result``'s deliveries, one DEBUG line each: job, key, message id, attempt, outcome (and why).

    ``attempt`` is the attempt this delivery ran as (None when it ran none: a duplicate, a
    cancelled key...). After a dead letter a key's attempts start again (a redrive gets fresh
    ones), while its record counts every run: then ``attempts`` says how many that is, the
    figure ``app.status(key).attempts`` and ``sqsjobs status`` show.
    """
    for d in result.deliveries:
        if d.outcome is None:
            continue
        fields: dict[str, Any] = {"job": loggable(d.job_name), "key": loggable(d.key), "message_id": d.message_id,
                                  "attempt": d.attempt or None, "outcome": d.outcome.value}
        runs = (d.previous.attempts if d.previous is not None else 0) + 1
        if d.attempt and runs != d.attempt:
            fields["attempts"] = runs
        if d.reason is not None:
            fields["reason"] = d.reason.value
        if d.outcome.value == "retry":
            fields["delay"] = round(d.delay, 1)
        if d.error is not None:
            fields["error"] = loggable(f"{type(d.error).__name__}: {d.error}")[:256]
        logger.debug(OUTCOME_MESSAGE, extra=fields)
