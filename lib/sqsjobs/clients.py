"""The AWS clients the runtime creates for itself (when none is injected).

Created on first use, once per process, never at import. The DynamoDB client
skips botocore's parameter validation, as pynamodb's own client does: every
request the guard sends is built by the pynamodb model and checked by the
tests, and validation is the largest single CPU cost of a call (about a
third of botocore's per-request work, measured in bench/).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_sqs import SQSClient

#: enough connections for a batch's concurrent claims (at most 10 records)
POOL_CONNECTIONS = 10


def dynamodb_client(**kwargs: Any) -> DynamoDBClient:
    """A DynamoDB client for the guard: no parameter validation, a pool for 10 concurrent calls.

    Example:
        >>> dynamodb_client(region_name="eu-west-1").meta.config.parameter_validation  # doctest: +SKIP
        False
    """
    import boto3
    from botocore.config import Config

    config = Config(parameter_validation=False, max_pool_connections=POOL_CONNECTIONS,
                    retries={"mode": "standard"})
    return boto3.client("dynamodb", config=config, **kwargs)


def sqs_client(**kwargs: Any) -> SQSClient:
    """An SQS client (botocore's defaults, standard retries).

    Example:
        >>> sqs_client(region_name="eu-west-1").meta.region_name  # doctest: +SKIP
        'eu-west-1'
    """
    import boto3
    from botocore.config import Config

    return boto3.client("sqs", config=Config(retries={"mode": "standard"}), **kwargs)


def scheduler_client(**kwargs: Any) -> EventBridgeSchedulerClient:
    """An EventBridge Scheduler client (standard retries), for delayed jobs' one-time schedules.

    Example:
        >>> scheduler_client(region_name="eu-west-1").meta.service_model.service_name  # doctest: +SKIP
        'scheduler'
    """
    import boto3
    from botocore.config import Config

    return boto3.client("scheduler", config=Config(retries={"mode": "standard"}), **kwargs)
