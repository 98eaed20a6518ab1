"""The AWS clients the runtime creates for itself (when none is injected).

Created on first use, once per process, never at import. The DynamoDB client
skips botocore's parameter validation, as pynamodb's own client does: every
request the guard sends is built by the pynamodb model and checked by the
tests, and validation is the largest single CPU cost of a call (about a
third of botocore's per-request work, measured in bench/).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqsjobs.errors import ConfigurationError
from sqsjobs.settings import ENV_AWS_DEFAULT_REGION, ENV_AWS_PROFILE, ENV_AWS_REGION

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

#: enough connections for a batch's concurrent claims (at most 10 records)
POOL_CONNECTIONS = 10


#: what to do when no region is configured (one line, no botocore traceback)
NO_REGION = (f"no AWS region is set: export {ENV_AWS_REGION} (or {ENV_AWS_DEFAULT_REGION}), give the profile a "
             "region, or pass --region")


def resolve_region(explicit: str | None = None, environ: Mapping[str, str] | None = None,
                   profile: str | None = None) -> str:
    """The region every client of sqsjobs uses: the argument, ``AWS_REGION``, ``AWS_DEFAULT_REGION``, the profile's.

    botocore alone reads only ``AWS_DEFAULT_REGION``; Lambda sets both. A missing region is a
    ``ConfigurationError`` naming the variables, never botocore's ``NoRegionError`` traceback.

    Example:
        >>> resolve_region(environ={"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "us-east-1"})
        'eu-west-1'
        >>> resolve_region("ap-south-1", environ={})
        'ap-south-1'
    """
    env = os.environ if environ is None else environ
    region = explicit or env.get(ENV_AWS_REGION) or env.get(ENV_AWS_DEFAULT_REGION)
    if region:
        return region
    import boto3
    from botocore.exceptions import BotoCoreError

    try:
        region = boto3.session.Session(profile_name=profile or env.get(ENV_AWS_PROFILE) or None).region_name
    except BotoCoreError as error:  # e.g. the profile named in AWS_PROFILE does not exist
        raise ConfigurationError(f"{error}; {NO_REGION}") from None
    if not region:
        raise ConfigurationError(NO_REGION)
    return region


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
    kwargs["region_name"] = resolve_region(kwargs.get("region_name"))
    return boto3.client("dynamodb", config=config, **kwargs)


def sqs_client(**kwargs: Any) -> SQSClient:
    """An SQS client (botocore's defaults, standard retries).

    Example:
        >>> sqs_client(region_name="eu-west-1").meta.region_name  # doctest: +SKIP
        'eu-west-1'
    """
    import boto3
    from botocore.config import Config

    kwargs["region_name"] = resolve_region(kwargs.get("region_name"))
    return boto3.client("sqs", config=Config(retries={"mode": "standard"}), **kwargs)
