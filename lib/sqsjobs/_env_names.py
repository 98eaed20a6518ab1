"""The environment variables sqsjobs reads, in one list, and "did you mean" for a name set instead of one.

``SQSJOBS_QUEUE`` or ``SQSJOBS_TABLE_NAME`` exported instead of
``SQSJOBS_QUEUE_URL`` or ``SQSJOBS_TABLE`` reads as nothing set: the error that
follows names the variable to set, and :func:`did_you_mean` adds the one that
was set instead. The names themselves are constants of ``sqsjobs._settings``
(``ENV_*``); :data:`VARIABLES` is the list of those a user or a template sets,
read here by every "is not set" message and by ``sqsjobs check``
(:mod:`sqsjobs.validation.environment`) for a template's functions.

It reads the environment only when an error is being written: never on a
batch's path.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from typing import Final

from sqsjobs import _settings as s

#: every variable sqsjobs reads from its environment (named queues are ``SQSJOBS_QUEUE_URL_<NAME>``, any name)
VARIABLES: Final = (
    s.ENV_QUEUE_URL, s.ENV_DLQ_URL, s.ENV_TABLE, s.ENV_OUTBOX_TABLE, s.ENV_MAX_ATTEMPTS, s.ENV_FUNCTION_TIMEOUT,
    s.ENV_RECORD_TTL, s.ENV_MAX_MESSAGE_BYTES, s.ENV_SCHEDULE_GROUP, s.ENV_SCHEDULER_ROLE_ARN, s.ENV_CONSOLE_TOKEN,
    s.ENV_APP, s.ENV_SERVICE, s.ENV_NAMESPACE, s.ENV_LOG_LEVEL,
)
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
    unread = [name for name in env if name not in VARIABLES and not name.startswith(s.ENV_QUEUE_URL_PREFIX)]
    hints = []
    for variable in variables:
        if env.get(variable):
            continue
        near = difflib.get_close_matches(variable, unread, n=1, cutoff=CLOSE)
        if near:
            hints.append(f"; {near[0]} is set, which sqsjobs does not read: did you mean {variable}?")
    return "".join(hints)

