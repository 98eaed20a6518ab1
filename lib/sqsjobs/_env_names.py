"""The environment variables sqsjobs reads, in one list, and "did you mean" for a name set instead of one.

``SQSJOBS_QUEUE`` or ``SQSJOBS_TABLE_NAME`` exported instead of
``SQSJOBS_QUEUE_URL`` or ``SQSJOBS_TABLE`` reads as nothing set: the error that
follows names the variable to set, and :func:`did_you_mean` adds the one that
was set instead. :data:`VARIABLES` is the list every "is not set" message reads,
and ``sqsjobs check`` (:mod:`sqsjobs.validation.environment`) for a template's
functions. Code names a variable by its constant in ``sqsjobs._settings``
(``ENV_*``), which calls this module: so it imports nothing of sqsjobs, and
tests/unit/test_env_names.py fails when a constant there is not listed here.

It reads the environment only when an error is being written: never on a
batch's path.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from typing import Final

#: every variable sqsjobs reads from its environment, AWS's own aside
VARIABLES: Final = (
    "SQSJOBS_QUEUE_URL", "SQSJOBS_DLQ_URL", "SQSJOBS_TABLE", "SQSJOBS_OUTBOX_TABLE", "SQSJOBS_MAX_ATTEMPTS",
    "SQSJOBS_FUNCTION_TIMEOUT", "SQSJOBS_RECORD_TTL_SECONDS", "SQSJOBS_MAX_MESSAGE_BYTES", "SQSJOBS_SCHEDULE_GROUP",
    "SQSJOBS_SCHEDULER_ROLE_ARN", "SQSJOBS_CONSOLE_TOKEN", "SQSJOBS_APP", "SQSJOBS_CONCURRENCY", "SQSJOBS_FLUSH_AFTER",
    "SQSJOBS_COST_METRICS",
    "POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE", "POWERTOOLS_LOG_LEVEL",
)
#: a named queue's URL: ``SQSJOBS_QUEUE_URL_<NAME>``, whatever the name
NAMED_QUEUE_PREFIX: Final = "SQSJOBS_QUEUE_URL_"
#: how close a name must be to count as a misspelling (difflib's ratio: SQSJOBS_TABLE_NAME/SQSJOBS_TABLE is 0.84)
CLOSE: Final = 0.8


def did_you_mean(*variables: str, environ: Mapping[str, str] | None = None) -> str:
    """For each of ``variables`` that is not set: the set name close to it that sqsjobs does not read, as a hint.

    The text goes after an error that says to set ``variables``; it is empty
    when nothing close is set.

    Example:
        >>> did_you_mean("SQSJOBS_TABLE", environ={"SQSJOBS_TABLE_NAME": "jobs", "HOME": "/root"})
        '; SQSJOBS_TABLE_NAME is set, which sqsjobs does not read: did you mean SQSJOBS_TABLE?'
        >>> did_you_mean("SQSJOBS_QUEUE_URL", "SQSJOBS_DLQ_URL", environ={"SQSJOBS_QUEUE": "https://q"})
        '; SQSJOBS_QUEUE is set, which sqsjobs does not read: did you mean SQSJOBS_QUEUE_URL?'
        >>> did_you_mean("SQSJOBS_TABLE", environ={"SQSJOBS_TABLE": "jobs", "SQSJOBS_TABLE_NAME": "old"})
        ''
    """
    env = os.environ if environ is None else environ
    unread = [name for name in env if name not in VARIABLES and not name.startswith(NAMED_QUEUE_PREFIX)]
    hints = []
    for variable in variables:
        if env.get(variable):
            continue
        near = difflib.get_close_matches(variable, unread, n=1, cutoff=CLOSE)
        if near:
            hints.append(f"; {near[0]} is set, which sqsjobs does not read: did you mean {variable}?")
    return "".join(hints)

