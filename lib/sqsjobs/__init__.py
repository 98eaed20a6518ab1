"""sqsjobs: background jobs on SQS + Lambda behind a DynamoDB idempotency guard.

Example:
    >>> from sqsjobs import JobApp, PermanentError, RetryableError
    >>> app = JobApp(queue_url="https://sqs.eu-west-1.amazonaws.com/123456789012/jobs")
    >>> @app.job("invoice-email", key="invoice-email:{invoice_id}")
    ... def send_invoice_email(invoice_id: int) -> None: ...
"""

from sqsjobs.app import JobApp
from sqsjobs.backoff import BackoffPolicy
from sqsjobs.budget import time_left
from sqsjobs.cancellation import cancel_requested
from sqsjobs.chains import Chain, ChainStatus, chain
from sqsjobs.chunked import ChunkedJob, RunStatus
from sqsjobs.delivery import BatchResult, Outcome
from sqsjobs.errors import (
    ChainError,
    ConfigurationError,
    EnqueueError,
    GroupError,
    InvalidArgumentsError,
    InvalidDelayError,
    InvalidEventError,
    JobError,
    LocalCloudError,
    MalformedMessageError,
    PeriodBusyError,
    PermanentError,
    QueueNotFoundError,
    RedriveError,
    ReservedAttributeError,
    RetryableError,
    ScheduleError,
    SqsJobsError,
    StatusError,
    StoreError,
    TimeLimitExceeded,
    TransactionError,
    UnknownJobError,
)
from sqsjobs.groups import Group, GroupStatus
from sqsjobs.guard import JobStatus
from sqsjobs.job import Job
from sqsjobs.lease import InMemoryStore, LeaseStore
from sqsjobs.message import JobMessage
from sqsjobs.outbox import OutboxRelay, Transaction
from sqsjobs.producer import EnqueueReport
from sqsjobs.scheduled_job import ScheduledJob
from sqsjobs.settings import Settings

__all__ = [
    "BackoffPolicy",
    "BatchResult",
    "Chain",
    "ChainError",
    "ChainStatus",
    "ChunkedJob",
    "ConfigurationError",
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
    "TimeLimitExceeded",
    "Transaction",
    "TransactionError",
    "UnknownJobError",
    "cancel_requested",
    "chain",
    "time_left",
]
__version__ = "0.1.0"
