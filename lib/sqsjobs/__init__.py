"""sqsjobs: background jobs on SQS + Lambda behind a DynamoDB idempotency guard.

Example:
    >>> from sqsjobs import JobApp, PermanentError, RetryableError
    >>> app = JobApp(queue_url="https://sqs.eu-west-1.amazonaws.com/123456789012/jobs")
    >>> @app.job("invoice-email", key="invoice-email:{invoice_id}")
    ... def send_invoice_email(invoice_id: int) -> None: ...
"""

from importlib import import_module
from typing import TYPE_CHECKING, Final

from sqsjobs._app import JobApp
from sqsjobs._backoff import BackoffPolicy
from sqsjobs._errors import HOMES as _HOMES
from sqsjobs._errors import (
    BatchItemsFailed,
    ChainError,
    ConfigurationError,
    EnqueueError,
    GroupError,
    InvalidArgumentsError,
    InvalidDelayError,
    InvalidEventError,
    JobError,
    MalformedMessageError,
    MessageTooLargeError,
    PeriodBusyError,
    PermanentError,
    QueueNotFoundError,
    ReservedAttributeError,
    RetryableError,
    ScheduleError,
    SqsJobsError,
    StoreError,
    TimeLimitExceeded,
    TransactionError,
    UnknownJobError,
)
from sqsjobs._job import Job
from sqsjobs._job_clients import client
from sqsjobs._settings import Settings
from sqsjobs.worker._snapstart import prepare_snapstart

if TYPE_CHECKING:
    from sqsjobs._tracing import current_trace_id
    from sqsjobs.enqueue._message import JobMessage
    from sqsjobs.enqueue._producer import EnqueueReport
    from sqsjobs.schedules._receipt import ScheduledJob
    from sqsjobs.store._lease import LeaseStore
    from sqsjobs.store._memory import InMemoryStore
    from sqsjobs.worker._budget import time_left
    from sqsjobs.worker._cancellation import cancel_requested
    from sqsjobs.worker._delivery import BatchResult, Outcome
    from sqsjobs.worker._job_records import JobStatus
    from sqsjobs.workflows._callbacks import DurableCallback, TaskToken
    from sqsjobs.workflows._chains import Chain, ChainStatus, chain
    from sqsjobs.workflows._chunked import ChunkedJob, RunStatus
    from sqsjobs.workflows._group import Group
    from sqsjobs.workflows._groups import GroupStatus
    from sqsjobs.workflows._outbox import Transaction
    from sqsjobs.workflows._relay import OutboxRelay

#: the public names a handler seldom needs, by the module that defines them: imported on first use
#: (``__getattr__``), so ``import sqsjobs`` loads no feature an app does not use (tests/unit/test_feature_imports.py)
LAZY: Final = {
    "current_trace_id": "sqsjobs._tracing",
    "JobMessage": "sqsjobs.enqueue._message",
    "EnqueueReport": "sqsjobs.enqueue._producer",
    "ScheduledJob": "sqsjobs.schedules._receipt",
    "LeaseStore": "sqsjobs.store._lease",
    "InMemoryStore": "sqsjobs.store._memory",
    "time_left": "sqsjobs.worker._budget",
    "cancel_requested": "sqsjobs.worker._cancellation",
    "BatchResult": "sqsjobs.worker._delivery",
    "Outcome": "sqsjobs.worker._delivery",
    "JobStatus": "sqsjobs.worker._job_records",
    "DurableCallback": "sqsjobs.workflows._callbacks",
    "TaskToken": "sqsjobs.workflows._callbacks",
    "Chain": "sqsjobs.workflows._chains",
    "ChainStatus": "sqsjobs.workflows._chains",
    "chain": "sqsjobs.workflows._chains",
    "ChunkedJob": "sqsjobs.workflows._chunked",
    "RunStatus": "sqsjobs.workflows._chunked",
    "Group": "sqsjobs.workflows._group",
    "GroupStatus": "sqsjobs.workflows._groups",
    "Transaction": "sqsjobs.workflows._outbox",
    "OutboxRelay": "sqsjobs.workflows._relay",
}

__all__ = [
    "BackoffPolicy",
    "BatchItemsFailed",
    "BatchResult",
    "Chain",
    "ChainError",
    "ChainStatus",
    "CheckUnavailable",
    "ChunkedJob",
    "ConfigurationError",
    "ConsoleError",
    "DurableCallback",
    "EnqueueError",
    "EnqueueReport",
    "Group",
    "GroupError",
    "GroupStatus",
    "InMemoryStore",
    "InvalidArgumentsError",
    "InvalidDelayError",
    "InvalidEventError",
    "Job",
    "JobApp",
    "JobError",
    "JobMessage",
    "JobStatus",
    "LeaseStore",
    "LocalCloudError",
    "MalformedMessageError",
    "MessageTooLargeError",
    "MoveTaskError",
    "OutboxRelay",
    "Outcome",
    "PeriodBusyError",
    "PermanentError",
    "QueueNotFoundError",
    "RedriveError",
    "ReservedAttributeError",
    "RetryableError",
    "RunStatus",
    "ScheduleError",
    "ScheduledJob",
    "Settings",
    "SqsJobsError",
    "StatusError",
    "StoreError",
    "TaskToken",
    "TimeLimitExceeded",
    "Transaction",
    "TransactionError",
    "UnknownJobError",
    "cancel_requested",
    "chain",
    "client",
    "current_trace_id",
    "prepare_snapstart",
    "time_left",
]
__version__ = "0.1.0"

# A traceback names an error where users import it from (``sqsjobs.GroupError``, not the private module that
# defines it), as httpx's ``__init__`` does. Only the errors: other classes keep their module, where their
# docstring examples are collected. The errors defined elsewhere (``_errors.HOMES``) are named so where they
# are defined.
for _name in __all__:
    _value = globals().get(_name)
    if isinstance(_value, type) and issubclass(_value, Exception):
        _value.__module__ = "sqsjobs"
del _name, _value


def _installed(home: str) -> bool:
    """Whether module ``home`` of this package is installed beside it (as source or bytecode), not importing it.

    The Lambda bundle (lib/sqsjobs/scaffold/bundle.py's ``NOT_RUNTIME``, and every function but the redrive
    one without ``sqsjobs/ops``) leaves the homes of the tools' errors out: those names then stay out of
    ``__all__`` and ``dir()``, so ``from sqsjobs import *`` imports what is there (tests/unit/test_public_api.py).
    One or two ``stat`` calls a home, four homes: about 50 microseconds an import, measured. A package that
    is not a directory of files (a zip) keeps every name.
    """
    import os

    package = os.path.dirname(__file__)
    if not os.path.isdir(package):
        return True
    module = os.path.join(package, *home.split(".")[1:])
    return os.path.isfile(f"{module}.py") or os.path.isfile(f"{module}.pyc")


_absent = {home for home in set(_HOMES.values()) if not _installed(home)}
__all__[:] = [name for name in __all__ if _HOMES.get(name) not in _absent]
del _absent


def __dir__() -> list[str]:
    """The module's names and the installed tools' errors (``__getattr__`` imports those on first use)."""
    return sorted({*globals(), *__all__})


def __getattr__(name: str) -> object:
    """A public name of ``LAZY`` imported from its module on first use; an error of the operator's side or a tool
    (``sqsjobs._errors.HOMES``) likewise.

    So ``import sqsjobs`` loads neither a tool nor a feature the app does not use, yet ``sqsjobs.Group`` is the
    class groups are made of and ``sqsjobs.ConsoleError`` the class the console raises.

    Example:
        >>> import sqsjobs
        >>> sqsjobs.StatusError.__name__, issubclass(sqsjobs.StatusError, sqsjobs.SqsJobsError)
        ('StatusError', True)
        >>> sqsjobs.Group.__module__
        'sqsjobs.workflows._group'
    """
    lazy = LAZY.get(name)
    if lazy is not None:
        value: object = getattr(import_module(lazy), name)
        globals()[name] = value  # once: the next lookup is the module's own
        return value
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'sqsjobs' has no attribute {name!r}")
    try:
        module = import_module(home)
    except ImportError as missing:  # the Lambda bundle leaves the tools out
        raise AttributeError(f"sqsjobs.{name} is defined in {home}, which this installation leaves out") from missing
    error: object = getattr(module, name)
    return error

