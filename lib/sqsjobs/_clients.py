"""The AWS clients of a process, from one botocore session: the runtime's, the handlers', the tools', the jobs'.

This is the one client factory. Every Lambda handler (handlers/*.py), the
runtime (``JobApp``'s SQS, DynamoDB and Scheduler clients), the operator tools
(``operator_client``: the CLI, the console, the redrive function) and the local
cloud (sqsjobs/local/aws.py, which only adds its endpoint and fake
credentials) make their clients here, and jobs should too (``client("ses")``).
It uses botocore's public API only (tests/unit/test_public_botocore.py), so
any botocore from 1.36 on serves it.

Why it matters on a cold start (figures in BENCHMARKS.md, "first invocation"):

- **one session**: a botocore session reads each service model, the endpoint
  data (``endpoints.json``, 1.2 MB of JSON) and the credentials once. Every
  client made here shares it. A job calling ``boto3.client`` gets boto3's
  default session instead, which reads all of that again;
- **no boto3**: clients are built with botocore directly; importing boto3
  also imports s3transfer and multiprocessing, which no batch uses;
- **no directory scan**: botocore checks that a service exists by listing
  every service directory it ships (about 400 of them, twice per first client).
  ``ServiceLoader`` (a ``botocore.loaders.Loader``, registered as the session's
  ``data_loader`` component, both public) checks the one directory asked for
  and lists the rest only if someone reads the whole list. Measured (CPU of
  the session and the DynamoDB, SQS and SES clients, fresh processes): about
  25 ms saved with botocore's full data, nothing with the bundle's trimmed data
  (infra/bundle/trim_botocore_data.py), which has few directories to list;
- **no garbage collection while a model loads**: parsing a service model
  allocates tens of thousands of containers, which trip Python's cyclic
  collector dozens of times (about 50 ms of CPU of the same three clients).
  The first client of each service is built with the collector off, then
  what it loaded is moved out of the collector's reach (``gc.freeze``: the
  models live as long as the process anyway) and the collector is put back
  as it was.

The session follows the environment: it is made on first use, under a lock
(clients are thread-safe, building them from one session is not), and made
again when a variable that configures botocore (``AWS_*``: the endpoint, the
region, the profile, the credentials; ``sqsjobs._environment``) changed since,
because a session keeps the credentials and the configuration files it read
first. In Lambda they never change; a test fixture that sets them gets
clients built for its values. A session made after moto is imported also
carries moto's in-process mock (moto adds it to the handlers every new
session registers), as any boto3 user's does.

The DynamoDB client skips botocore's parameter validation, as pynamodb's own
client does: every request the guard sends is built by the pynamodb model and
checked by the tests, and validation is the largest single CPU cost of a call
(about a third of botocore's per-request work, measured in bench/).
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, overload
from urllib.parse import urlparse

from botocore.config import Config
from botocore.exceptions import DataNotFoundError, UnknownServiceError
from botocore.loaders import Loader

from sqsjobs._environment import AWS, environment_key
from sqsjobs._errors import ConfigurationError
from sqsjobs._settings import ENV_AWS_DEFAULT_REGION, ENV_AWS_ENDPOINT_URL, ENV_AWS_PROFILE, ENV_AWS_REGION

if TYPE_CHECKING:
    from botocore.session import Session
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_sqs import SQSClient

#: enough connections for a batch's concurrent claims (at most 10 records)
POOL_CONNECTIONS = 10
#: botocore's standard retry mode (3 attempts, throttling and transient errors, with backoff)
RETRY_MODE: Final = "standard"
#: what a client on a loopback endpoint (the local cloud) signs with: it accepts any signature
LOCAL_CREDENTIALS: Final = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
#: the region of a local-cloud client when none is configured
LOCAL_REGION: Final = "us-east-1"

#: what to do when no region is configured (one line, no botocore traceback)
NO_REGION = (f"no AWS region is set: export {ENV_AWS_REGION} (or {ENV_AWS_DEFAULT_REGION}), give the profile a "
             "region, or pass --region")

_lock = threading.Lock()
#: the session, and the key of the environment it was made in (``sqsjobs._environment``)
_session: tuple[int, Session] | None = None
#: services whose model this process has loaded (their first client was built with the collector off)
_loaded: set[str] = set()


def session() -> Session:
    """The process's botocore session: made on first use, and again when the ``AWS_*`` environment changed.

    Example:
        >>> session() is session()
        True
    """
    global _session
    key = environment_key(prefixes=AWS)
    with _lock:
        if _session is None or _session[0] != key:
            from botocore.session import Session

            made = Session()
            made.register_component("data_loader", ServiceLoader.for_session(made))
            _session = (key, made)
        return _session[1]


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
    from botocore.exceptions import BotoCoreError
    from botocore.session import Session

    try:
        named = profile or env.get(ENV_AWS_PROFILE) or None
        region = (Session(profile=named) if named else session()).get_config_variable("region")
    except BotoCoreError as error:  # e.g. the profile named in AWS_PROFILE does not exist
        raise ConfigurationError(f"{error}; {NO_REGION}") from None
    if not region:
        raise ConfigurationError(NO_REGION)
    return str(region)


def client(service_name: str, **kwargs: Any) -> Any:
    """A client of ``service_name`` from the shared session; ``kwargs`` as for ``boto3.client``.

    Each call builds a client: jobs get theirs from ``sqsjobs.client`` (sqsjobs/_job_clients.py), which
    shares what this builds. A client costs a model read, not a second session. The region is
    ``resolve_region``'s; botocore's standard retries apply unless ``config`` says otherwise. A service
    or a data file this botocore lacks is a ``ConfigurationError`` saying what to keep
    (sqsjobs/_botocore_data.py), never botocore's error from deep in a cold start.

    Example:
        >>> client("ses", region_name="eu-west-1").meta.region_name
        'eu-west-1'
    """
    with _collector_paused_for_first(service_name):
        config = Config(retries={"mode": RETRY_MODE})
        if kwargs.get("config") is not None:
            config = config.merge(kwargs.pop("config"))
        kwargs.pop("config", None)
        kwargs["region_name"] = resolve_region(kwargs.get("region_name"))
        owner = session()
        try:
            return owner.create_client(service_name, config=config, **kwargs)
        except UnknownServiceError:  # no model of it here: a trimmed bundle's botocore, or a misspelled name
            from sqsjobs._botocore_data import unknown_service

            raise unknown_service(service_name, owner) from None
        except DataNotFoundError as error:  # a data file every client reads is missing: a bundle trimmed too far
            from sqsjobs._botocore_data import missing_data

            raise missing_data(service_name, error) from None


@contextlib.contextmanager
def _collector_paused_for_first(service_name: str) -> Iterator[None]:
    """Build the first client of ``service_name`` with the cyclic collector off; freeze what it loaded.

    Only a service's first client loads its model (later ones read the
    loader's cache), and the process's first client also makes the session
    and imports the rest of botocore, so the collector is paused at most once
    per service and process. ``gc.freeze`` moves every object tracked so far to the permanent
    generation: the loaded models are never scanned again, and the first
    collection after the pause has nothing of theirs to look at. A collector
    that was off stays off.
    """
    if service_name in _loaded:
        yield
        return
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        _loaded.add(service_name)
        gc.freeze()
        if was_enabled:
            gc.enable()


def dynamodb_client(**kwargs: Any) -> DynamoDBClient:
    """A DynamoDB client for the guard: no parameter validation, and a pool for 10 concurrent calls.

    Example (a value of the wrong type reaches the wire unchecked; a default client refuses it):
        >>> from botocore.stub import Stubber
        >>> guard_client = dynamodb_client(region_name="eu-west-1")
        >>> with Stubber(guard_client) as stub:
        ...     stub.add_response("get_item", {})
        ...     guard_client.get_item(TableName="t", Key={"pk": {"S": "k"}}, ConsistentRead="yes")
        {}
        >>> dynamodb_client(region_name="eu-west-1").meta.config.max_pool_connections
        10
    """
    config = Config(parameter_validation=False, max_pool_connections=POOL_CONNECTIONS)
    made: DynamoDBClient = client("dynamodb", config=config, **kwargs)
    return made


def sqs_client(**kwargs: Any) -> SQSClient:
    """An SQS client (botocore's defaults, standard retries).

    Example:
        >>> sqs_client(region_name="eu-west-1").meta.region_name
        'eu-west-1'
    """
    made: SQSClient = client("sqs", **kwargs)
    return made


def scheduler_client(**kwargs: Any) -> EventBridgeSchedulerClient:
    """An EventBridge Scheduler client from the shared session, for delayed jobs' one-time schedules.

    Example:
        >>> scheduler_client(region_name="eu-west-1").meta.service_model.service_name
        'scheduler'
    """
    made: EventBridgeSchedulerClient = client("scheduler", **kwargs)
    return made


OperatorService = Literal["sqs", "dynamodb", "cloudwatch", "scheduler"]


@overload
def operator_client(service: Literal["sqs"], *, endpoint_url: str | None = ..., region: str | None = ...
                    ) -> SQSClient: ...
@overload
def operator_client(service: Literal["dynamodb"], *, endpoint_url: str | None = ..., region: str | None = ...
                    ) -> DynamoDBClient: ...
@overload
def operator_client(service: Literal["cloudwatch"], *, endpoint_url: str | None = ..., region: str | None = ...
                    ) -> CloudWatchClient: ...
@overload
def operator_client(service: Literal["scheduler"], *, endpoint_url: str | None = ..., region: str | None = ...
                    ) -> EventBridgeSchedulerClient: ...
def operator_client(service: OperatorService, *, endpoint_url: str | None = None, region: str | None = None) -> Any:
    """A client for the operator tools (CLI, console, redrive function): AWS, or the local cloud on a loopback endpoint.

    ``endpoint_url`` wins over ``AWS_ENDPOINT_URL``. On a loopback endpoint
    (the local cloud, which accepts any signature) the client signs with
    ``LOCAL_CREDENTIALS`` and falls back to ``LOCAL_REGION``: a laptop with no
    AWS profile runs the runbook's commands as written, and real credentials
    are never sent to a local server.

    Example:
        >>> local = operator_client("sqs", endpoint_url="http://127.0.0.1:5000", region="eu-west-1")
        >>> local.meta.endpoint_url, local.meta.region_name
        ('http://127.0.0.1:5000', 'eu-west-1')
        >>> operator_client("cloudwatch", region="eu-west-1").meta.region_name
        'eu-west-1'
    """
    endpoint = endpoint_url or os.environ.get(ENV_AWS_ENDPOINT_URL) or None
    kwargs: dict[str, Any] = {}
    if endpoint is None:
        kwargs["region_name"] = resolve_region(region)
    else:
        kwargs["endpoint_url"] = endpoint
        if is_loopback(endpoint):
            kwargs.update(LOCAL_CREDENTIALS)
            try:
                kwargs["region_name"] = resolve_region(region)
            except ConfigurationError:
                kwargs["region_name"] = LOCAL_REGION
        else:
            kwargs["region_name"] = resolve_region(region)
    return client(service, **kwargs)


def is_loopback(endpoint: str) -> bool:
    """Whether ``endpoint`` is on this machine (the local cloud's moto server).

    Example:
        >>> is_loopback("http://127.0.0.1:5000"), is_loopback("https://sqs.eu-west-1.amazonaws.com")
        (True, False)
    """
    return urlparse(endpoint).hostname in ("127.0.0.1", "localhost", "::1")


class ServiceLoader(Loader):
    """botocore's data loader, minus the scan of every service directory on a service's first model.

    botocore's ``load_service_model`` asks for the list of all services only to
    test ``service_name in services``; this loader answers that test from the
    service's own directory (``list_api_versions``, which the load reads next
    anyway) and lists everything only if the whole list is read.
    """

    @classmethod
    def for_session(cls, owner: Session) -> ServiceLoader:
        """The loader botocore's session would build (same search path: ``AWS_DATA_PATH`` honoured)."""
        paths = owner.get_config_variable("data_path")
        return cls(extra_search_paths=[p for p in (paths or "").split(os.pathsep) if p])

    def list_available_services(self, type_name: str) -> list[str]:
        return _KnownServices(self, type_name)  # type: ignore[return-value]  # a read-only list, listed lazily

    def list_all_services(self, type_name: str) -> list[str]:
        """Every service with a ``type_name`` model: botocore's own (full) listing."""
        listed: list[str] = super().list_available_services(type_name)
        return listed


class _KnownServices(Sequence[str]):
    """The sorted service names of one model type; ``in`` looks at one directory only."""

    def __init__(self, loader: ServiceLoader, type_name: str) -> None:
        self._loader = loader
        self._type_name = type_name
        self._all: list[str] | None = None

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self._loader.list_api_versions(name, self._type_name)
        except DataNotFoundError:
            return False
        return True

    def _listed(self) -> list[str]:
        if self._all is None:
            self._all = self._loader.list_all_services(self._type_name)
        return self._all

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._listed()[index]

    def __len__(self) -> int:
        return len(self._listed())

    def __iter__(self) -> Iterator[str]:
        return iter(self._listed())
