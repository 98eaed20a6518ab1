"""Runtime settings: the environment the template sets, overridable in code.

Explicit constructor arguments win over the environment; the environment wins
over defaults. Reading settings never calls AWS. An app's settings are read
when first used, never at import (``SettingsSource``): the environment a test
fixture sets is the one its app sees.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from sqsjobs._backoff import MAX_VISIBILITY_SECONDS
from sqsjobs._errors import ConfigurationError
from sqsjobs._metrics import DEFAULT_NAMESPACE

ENV_QUEUE_URL = "SQSJOBS_QUEUE_URL"
#: ``SQSJOBS_QUEUE_URL_<NAME>``: the URL of named queue ``<name>`` (``sqsjobs.enqueue._routing``)
ENV_QUEUE_URL_PREFIX = ENV_QUEUE_URL + "_"
#: the queue a job goes to unless it names another (``SQSJOBS_QUEUE_URL``; ``sqsjobs.enqueue._routing``)
DEFAULT_QUEUE = "default"
ENV_DLQ_URL = "SQSJOBS_DLQ_URL"
ENV_TABLE = "SQSJOBS_TABLE"
ENV_OUTBOX_TABLE = "SQSJOBS_OUTBOX_TABLE"
ENV_MAX_ATTEMPTS = "SQSJOBS_MAX_ATTEMPTS"
ENV_FUNCTION_TIMEOUT = "SQSJOBS_FUNCTION_TIMEOUT"
ENV_RECORD_TTL = "SQSJOBS_RECORD_TTL_SECONDS"
ENV_MAX_MESSAGE_BYTES = "SQSJOBS_MAX_MESSAGE_BYTES"
ENV_SCHEDULE_GROUP = "SQSJOBS_SCHEDULE_GROUP"
ENV_SCHEDULER_ROLE_ARN = "SQSJOBS_SCHEDULER_ROLE_ARN"
ENV_CONCURRENCY = "SQSJOBS_CONCURRENCY"
ENV_FLUSH_AFTER = "SQSJOBS_FLUSH_AFTER"
#: ``false`` turns the worker's cost metrics off (``JobLambdaGbSeconds``...: docs/observability.md)
ENV_COST_METRICS = "SQSJOBS_COST_METRICS"
ENV_SERVICE = "POWERTOOLS_SERVICE_NAME"
ENV_NAMESPACE = "POWERTOOLS_METRICS_NAMESPACE"
#: the operator console's access token (``sqsjobs console --token``); never a default
ENV_CONSOLE_TOKEN = "SQSJOBS_CONSOLE_TOKEN"
#: Powertools' log level (``sqsjobs local up`` sets DEBUG in its workers to see every job's outcome)
ENV_LOG_LEVEL = "POWERTOOLS_LOG_LEVEL"
#: AWS's own variables, read the same way by the runtime and every CLI command (Lambda sets both regions;
#: botocore itself reads only AWS_DEFAULT_REGION)
ENV_AWS_REGION = "AWS_REGION"
ENV_AWS_DEFAULT_REGION = "AWS_DEFAULT_REGION"
ENV_AWS_ENDPOINT_URL = "AWS_ENDPOINT_URL"
ENV_AWS_PROFILE = "AWS_PROFILE"
#: the JobApp the CLI commands load (``module:attribute``)
ENV_APP = "SQSJOBS_APP"

#: what EventBridge Scheduler takes as a group name, and as the role a schedule sends with
_SCHEDULE_GROUP = re.compile(r"[0-9a-zA-Z\-_.]{1,64}")
_ROLE_ARN = re.compile(r"arn:aws(-[a-z]+)*:iam:[a-z0-9-]*:\d{12}:role/[\w+=,.@/-]+")

#: a queue's ``MaximumMessageSize``: SQS's range, and what the template's parameter (and an app without
#: ``SQSJOBS_MAX_MESSAGE_BYTES``) assumes
SQS_MIN_MESSAGE_BYTES = 1024
SQS_MAX_MESSAGE_BYTES = 1024 * 1024
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024

#: 21 days: the DLQ's longest retention (14 days) plus a week to redrive it
DEFAULT_RECORD_TTL = 21 * 24 * 3600.0
#: jobs of a batch running at once: a batch of 10 at once fits a 128 MB function (BENCHMARKS.md, "Async jobs")
DEFAULT_CONCURRENCY = 10
#: seconds a finished job's record may wait to be written with others (worker/_record_writes.py)
DEFAULT_FLUSH_AFTER = 1.0


#: a queue name: lower-case, so that ``SQSJOBS_QUEUE_URL_<NAME>`` maps back to exactly one name
QUEUE_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


def check_queue_name(name: Any) -> str:
    """``name`` if it can name a queue, else a ``ConfigurationError``.

    Here, not in ``sqsjobs.enqueue._routing``, because ``Settings`` checks its queues' names and routing reads
    ``Settings``: one direction of import (tests/unit/test_import_cycles.py).

    Example:
        >>> check_queue_name("critical")
        'critical'
        >>> check_queue_name("Critical-Jobs")
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: queue name 'Critical-Jobs': use 1..40 lower-case letters, digits or '_', ...
    """
    if not isinstance(name, str) or not QUEUE_NAME.fullmatch(name):
        raise ConfigurationError(f"queue name {name!r}: use 1..40 lower-case letters, digits or '_', starting with "
                                 f"a letter (its environment variable is {ENV_QUEUE_URL_PREFIX}<NAME>)")
    return name


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Where the jobs go and how the worker behaves.

    Example:
        >>> s = Settings.from_env({"SQSJOBS_MAX_ATTEMPTS": "7"}, table_name="jobs")
        >>> (s.max_attempts, s.table_name)
        (7, 'jobs')
    """

    queue_url: str | None = None
    #: named queues besides the default one (``queue_url``): name -> URL (None: known by name, no URL here)
    queues: Mapping[str, str | None] = field(default_factory=dict)
    dlq_url: str | None = None
    table_name: str | None = None
    #: the transactional outbox table (``app.transaction()``), streamed to the relay
    outbox_table: str | None = None
    #: attempts the worker runs (runs that started) before it dead-letters; the queue's
    #: ``maxReceiveCount`` is one more, SQS's redrive being only the backstop
    max_attempts: int = 5
    #: the Lambda function's timeout (seconds), when known: bounds ``time_limit``
    function_timeout: float | None = None
    service: str = "sqsjobs"
    namespace: str = DEFAULT_NAMESPACE
    #: full-jitter defaults: ``uniform(0, min(cap, base * 2 ** (attempt - 1)))``
    backoff_base: float = 30.0
    backoff_cap: float = 600.0
    #: records are kept this long (DynamoDB TTL) after their last write, to absorb late duplicates and
    #: DLQ replays: it must outlast the DLQ's retention (14 days) plus a redrive window (7 days)
    record_ttl: float = DEFAULT_RECORD_TTL
    #: records are not started with less than this left in the invocation
    deadline_margin: float = 5.0
    #: added to the remaining invocation time to form a claim's lease
    lease_margin: float = 5.0
    #: the queues' ``MaximumMessageSize`` (the template's parameter): a larger message is refused before it is sent,
    #: and a dead letter is shrunk to fit. SQS takes 1,024..1,048,576; each 64 KiB is billed as one request
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    #: the EventBridge Scheduler schedule group of delayed jobs (delays beyond 15 minutes, docs/delays.md)
    schedule_group: str | None = None
    #: the role EventBridge Scheduler assumes to send a delayed job to the jobs queue (and its DLQ)
    scheduler_role_arn: str | None = None
    #: jobs of one batch that may run at once: async jobs, and sync jobs with ``threads=True`` (docs/jobs.md)
    concurrency: int = DEFAULT_CONCURRENCY
    #: seconds a finished job's record may wait to be written with others: the crash window (0: each at once)
    flush_after: float = DEFAULT_FLUSH_AFTER
    #: the worker writes what each batch bills, per job (``sqsjobs status`` and the console price it); off, it
    #: saves their custom metrics (three or four a job type, billed by the hour) and a few bytes a job
    cost_metrics: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.max_attempts <= 1000:
            raise ConfigurationError(
                f"max_attempts must be 1..1000, got {self.max_attempts}"
            )
        if self.backoff_base < 0 or self.backoff_cap < 0 or self.backoff_cap > MAX_VISIBILITY_SECONDS:
            raise ConfigurationError(
                "backoff_base and backoff_cap must be >= 0 and the cap at most 43200 s "
                "(the longest visibility timeout SQS allows)"
            )
        if (type(self.max_message_bytes) is not int
                or not SQS_MIN_MESSAGE_BYTES <= self.max_message_bytes <= SQS_MAX_MESSAGE_BYTES):
            raise ConfigurationError(
                f"max_message_bytes ({ENV_MAX_MESSAGE_BYTES}) must be the queues' MaximumMessageSize, a whole number "
                f"of bytes within {SQS_MIN_MESSAGE_BYTES}..{SQS_MAX_MESSAGE_BYTES} (SQS's range), "
                f"got {self.max_message_bytes!r}"
            )
        if self.function_timeout is not None and self.function_timeout <= 0:
            raise ConfigurationError(f"function_timeout must be positive, got {self.function_timeout}")
        for name in ("record_ttl", "deadline_margin", "lease_margin"):
            if getattr(self, name) < 0:
                raise ConfigurationError(f"{name} must be >= 0")
        if type(self.concurrency) is not int or not 1 <= self.concurrency <= 1000:
            raise ConfigurationError(f"concurrency ({ENV_CONCURRENCY}) must be a whole number of jobs within "
                                     f"1..1000, got {self.concurrency!r}")
        if not 0 <= self.flush_after <= 60:
            raise ConfigurationError(f"flush_after ({ENV_FLUSH_AFTER}) must be 0..60 seconds, got {self.flush_after!r}")
        if self.schedule_group is not None and not _SCHEDULE_GROUP.fullmatch(self.schedule_group):
            raise ConfigurationError(
                f"schedule_group ({ENV_SCHEDULE_GROUP}) must be an EventBridge Scheduler group name: 1..64 letters, "
                f"digits, '-', '_' or '.', got {self.schedule_group!r}"
            )
        if self.scheduler_role_arn is not None and not _ROLE_ARN.fullmatch(self.scheduler_role_arn):
            raise ConfigurationError(
                f"scheduler_role_arn ({ENV_SCHEDULER_ROLE_ARN}) must be an IAM role ARN "
                f"(arn:aws:iam::<account>:role/<name>), got {self.scheduler_role_arn!r}"
            )
        for name, url in self.queues.items():
            check_queue_name(name)
            if name == DEFAULT_QUEUE:
                raise ConfigurationError(f"the default queue is queue_url ({ENV_QUEUE_URL}), not a named queue")
            if url is not None and (not isinstance(url, str) or not url):
                raise ConfigurationError(f"queue {name!r}: its URL must be non-empty text (or None: from "
                                         f"{ENV_QUEUE_URL_PREFIX}{name.upper()}), got {url!r}")

    def queue_urls(self) -> dict[str, str | None]:
        """Every queue the app knows, by name: ``default`` (``queue_url``, maybe unset) and the named ones.

        Example:
            >>> s = Settings.from_env({"SQSJOBS_QUEUE_URL": "https://q/1/jobs",
            ...                        "SQSJOBS_QUEUE_URL_CRITICAL": "https://q/1/critical"})
            >>> s.queue_urls()
            {'default': 'https://q/1/jobs', 'critical': 'https://q/1/critical'}
        """
        return {"default": self.queue_url, **dict(self.queues)}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build settings from ``environ`` (default ``os.environ``); ``overrides`` win.

        ``None`` overrides are ignored so callers can pass optional arguments through.
        """
        env = os.environ if environ is None else environ
        known = {f.name for f in fields(cls)}
        unknown = set(overrides) - known
        if unknown:
            raise ConfigurationError(f"unknown setting(s) {sorted(unknown)}; known: {sorted(known)}")
        values: dict[str, Any] = {}
        if env.get(ENV_QUEUE_URL):
            values["queue_url"] = env[ENV_QUEUE_URL]
        named = {name[len(ENV_QUEUE_URL_PREFIX):].lower(): url for name, url in env.items()
                 if name.startswith(ENV_QUEUE_URL_PREFIX) and url}
        if named:
            values["queues"] = dict(sorted(named.items()))
        if env.get(ENV_DLQ_URL):
            values["dlq_url"] = env[ENV_DLQ_URL]
        if env.get(ENV_TABLE):
            values["table_name"] = env[ENV_TABLE]
        if env.get(ENV_OUTBOX_TABLE):
            values["outbox_table"] = env[ENV_OUTBOX_TABLE]
        if env.get(ENV_MAX_ATTEMPTS):
            values["max_attempts"] = _number(env, ENV_MAX_ATTEMPTS, int)
        if env.get(ENV_FUNCTION_TIMEOUT):
            values["function_timeout"] = _number(env, ENV_FUNCTION_TIMEOUT, float)
        if env.get(ENV_MAX_MESSAGE_BYTES):
            values["max_message_bytes"] = _number(env, ENV_MAX_MESSAGE_BYTES, int)
        if env.get(ENV_RECORD_TTL):
            values["record_ttl"] = _number(env, ENV_RECORD_TTL, float)
        if env.get(ENV_SCHEDULE_GROUP):
            values["schedule_group"] = env[ENV_SCHEDULE_GROUP]
        if env.get(ENV_SCHEDULER_ROLE_ARN):
            values["scheduler_role_arn"] = env[ENV_SCHEDULER_ROLE_ARN]
        if env.get(ENV_CONCURRENCY):
            values["concurrency"] = _number(env, ENV_CONCURRENCY, int)
        if env.get(ENV_FLUSH_AFTER):
            values["flush_after"] = _number(env, ENV_FLUSH_AFTER, float)
        if env.get(ENV_COST_METRICS):
            values["cost_metrics"] = _flag(env, ENV_COST_METRICS)
        if env.get(ENV_SERVICE):
            values["service"] = env[ENV_SERVICE]
        if env.get(ENV_NAMESPACE):
            values["namespace"] = env[ENV_NAMESPACE]
        given = {k: v for k, v in overrides.items() if v is not None}
        if "queues" in given:
            # Named queues given in code add to the environment's; a URL given wins, a name given alone
            # (None) takes its URL from the environment when there is one.
            from_env = values.get("queues", {})
            given["queues"] = {**from_env, **{name: url for name, url in given["queues"].items()
                                              if url is not None or name not in from_env}}
        values.update(given)
        return cls(**values)

    def with_overrides(self, **overrides: Any) -> Settings:
        """A copy with some fields replaced."""
        return replace(self, **overrides)

    def require(self, name: str) -> str:
        """The value of a string setting that an operation cannot do without."""
        value = getattr(self, name)
        if not value:
            from sqsjobs._env_names import did_you_mean

            env = ENV_NAMES.get(name, "")
            raise ConfigurationError(f"{name} is not set: pass {name}= to JobApp or set {env}{did_you_mean(env)}")
        return str(value)


#: the settings a job's options are checked against (``sqsjobs._job_options.check_against_settings``)
BOUNDS = frozenset({"max_attempts", "function_timeout", "queues"})


@dataclass(frozen=True)
class SettingsSource:
    """Where an app's settings come from; ``resolve`` reads them (``sqsjobs._runtime`` caches the answer).

    ``fixed``: settings given whole (``JobApp(settings=...)``). Otherwise ``environ``
    (a mapping given in code, or ``os.environ`` as it is at each resolution) under
    ``overrides`` (``JobApp``'s keyword arguments, which win). ``patches`` are what
    ``app.use(settings=...)`` lays on top for a block. ``declared`` is what the code
    alone says, checked when the app is built: a wrong name or value given in code
    fails at once, and reading it reads no environment.

    Example:
        >>> source = SettingsSource(overrides={"table_name": "jobs"})
        >>> source.resolve({"SQSJOBS_TABLE": "other", "SQSJOBS_MAX_ATTEMPTS": "7"}).table_name
        'jobs'
        >>> source.resolve({"SQSJOBS_MAX_ATTEMPTS": "7"}).max_attempts, source.declared.max_attempts
        (7, 5)
        >>> sorted(source.final), sorted(SettingsSource(overrides={"max_attempts": 3}).final)
        ([], ['max_attempts'])
    """

    fixed: Settings | None = None
    environ: Mapping[str, str] | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    patches: tuple[Mapping[str, Any], ...] = ()
    declared: Settings = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        declared = self.fixed or Settings.from_env(self.environ if self.environ is not None else {}, **self.overrides)
        object.__setattr__(self, "declared", declared)

    @property
    def follows_environment(self) -> bool:
        """Whether the settings are read from ``os.environ`` (neither given whole nor from a given mapping)."""
        return self.fixed is None and self.environ is None

    @property
    def final(self) -> frozenset[str]:
        """The ``BOUNDS`` the code decided, whatever the environment says (all of them when it is not read)."""
        if not self.follows_environment:
            return BOUNDS
        return frozenset(name for name in BOUNDS if self.overrides.get(name) is not None) - {"queues"}

    def base(self, environ: Mapping[str, str] | None = None) -> Settings:
        """The app's settings without the patches: what its jobs' options are checked against."""
        if not self.follows_environment:
            return self.declared
        return Settings.from_env(environ, **self.overrides)

    def resolve(self, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings now: ``base`` under the patches (``environ`` stands for ``os.environ``, for tests)."""
        settings = self.base(environ)
        for patch in self.patches:
            settings = settings.with_overrides(**patch)
        return settings

    def patched(self, patch: Mapping[str, Any]) -> SettingsSource:
        """This source with ``patch`` laid on top."""
        return SettingsSource(fixed=self.fixed, environ=self.environ, overrides=self.overrides,
                              patches=(*self.patches, dict(patch)))


#: the variable each string setting is read from (for error messages)
ENV_NAMES = {"queue_url": ENV_QUEUE_URL, "dlq_url": ENV_DLQ_URL, "table_name": ENV_TABLE,
             "outbox_table": ENV_OUTBOX_TABLE, "schedule_group": ENV_SCHEDULE_GROUP,
             "scheduler_role_arn": ENV_SCHEDULER_ROLE_ARN}


def _flag(env: Mapping[str, str], name: str) -> bool:
    """A yes/no variable: ``true``/``false`` (also 1/0, yes/no, on/off, any case).

    Example:
        >>> _flag({"X": "False"}, "X"), _flag({"X": "1"}, "X")
        (False, True)
    """
    value = env[name].strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(f"{name} must be true or false, got {env[name]!r}")


def _number(env: Mapping[str, str], name: str, kind: type[int] | type[float]) -> Any:
    try:
        return kind(env[name])
    except ValueError:
        raise ConfigurationError(f"{name} must be a number, got {env[name]!r}") from None
