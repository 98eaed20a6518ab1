"""Each function's environment against what its app needs: a missing or misspelled variable is an error.

Without ``SQSJOBS_TABLE`` (or with ``SQSJOBS_TABEL``) a worker deploys, starts,
and fails every batch with ``table_name is not set``. The app a function runs is
imported as Lambda would import it, with the function's template environment
(:mod:`sqsjobs.validation.inspect_app`), and what it then lacks is compared with
what the function's role needs:

- a **worker** (an SQS queue feeds it): its jobs queue, its DLQ and the
  idempotency table; the URL of every named queue a job declares
  (``queue="critical"``: ``SQSJOBS_QUEUE_URL_CRITICAL``); the outbox table when
  the app uses the outbox; the schedule group and the role Scheduler sends with
  when it delays jobs (or retries beyond 12 hours);
- a **scheduler** (a schedule fires its jobs): the idempotency table (the
  period's lease), and the jobs queue when a scheduled job is enqueued.

Code cannot say whether it will call ``app.transaction()`` or enqueue with
``delay=2 * 86_400``, so the template says it: the app uses the outbox when a
function of the template is given ``SQSJOBS_OUTBOX_TABLE`` or a table's stream
feeds a function that sends jobs (a relay: ``SQSJOBS_QUEUE_URL``), and delays jobs
when the template declares a schedule group or gives a function
``SQSJOBS_SCHEDULE_GROUP`` or ``SQSJOBS_SCHEDULER_ROLE_ARN``. A missing name close to one the function does
set gets "did you mean"; a set name close to an sqsjobs variable it does not
read is a warning.

Example:
    >>> app = {"settings": {"queue_url": True, "dlq_url": True, "table_name": False}, "queues": {}}
    >>> [p.message for p in check_environment("WorkerFunction", ["SQSJOBS_QUEUE_URL", "SQSJOBS_DLQ_URL",
    ...     "SQSJOBS_TABEL"], app, roles={Role.WORKER}, features=frozenset())]  # doctest: +NORMALIZE_WHITESPACE
    ['SQSJOBS_TABLE is not set, and its app needs it (the idempotency table: without it every batch fails);
      did you mean SQSJOBS_TABEL?']
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqsjobs import _env_names, _settings
from sqsjobs._env_names import CLOSE
from sqsjobs.validation.problems import Problem, Severity


class Role(StrEnum):
    """What a function does with its app (a function may do both)."""

    WORKER = "worker"  #: an SQS queue feeds it: it runs the jobs
    SCHEDULER = "scheduler"  #: a schedule fires its scheduled jobs


class Feature(StrEnum):
    """What the template says the app uses beyond the jobs queue (see the module docstring)."""

    OUTBOX = "outbox"
    DELAYS = "delays"


@dataclass(frozen=True)
class Need:
    """A setting the app needs, the variable that gives it, and what breaks without it."""

    setting: str
    variable: str
    why: str


TABLE = Need("table_name", _settings.ENV_TABLE, "the idempotency table: without it every batch fails")
QUEUE = Need("queue_url", _settings.ENV_QUEUE_URL, "its jobs queue: jobs it enqueues, and re-sends at the last "
                                                   "receive, go there")
DLQ = Need("dlq_url", _settings.ENV_DLQ_URL, "the DLQ the worker writes reasons to: without it a failed job is "
                                             "never dead-lettered")
OUTBOX = Need("outbox_table", _settings.ENV_OUTBOX_TABLE, "the outbox table app.transaction() writes to")
GROUP = Need("schedule_group", _settings.ENV_SCHEDULE_GROUP, "the schedule group delayed jobs (beyond 900 s) and "
                                                             "retries beyond 12 hours wait in")
ROLE = Need("scheduler_role_arn", _settings.ENV_SCHEDULER_ROLE_ARN, "the role EventBridge Scheduler sends delayed "
                                                                    "jobs with")
#: the variables whose presence anywhere in the template says the app uses a feature
FEATURE_VARIABLES = {Feature.OUTBOX: (OUTBOX.variable,), Feature.DELAYS: (GROUP.variable, ROLE.variable)}


def known_variables() -> frozenset[str]:
    """Every ``SQSJOBS_*`` variable sqsjobs reads (the one list, ``sqsjobs._env_names``), named queues aside."""
    return frozenset(name for name in _env_names.VARIABLES if name.startswith("SQSJOBS_"))


def needs(app: Mapping[str, Any], roles: Collection[Role], features: Collection[Feature]) -> list[Need]:
    """What a function in ``roles`` running ``app`` needs from its environment, in the order a reader fixes it."""
    wanted: list[Need] = []
    if Role.WORKER in roles:
        wanted += [TABLE, QUEUE, DLQ]
        if Feature.OUTBOX in features:
            wanted.append(OUTBOX)
        if Feature.DELAYS in features:
            wanted += [GROUP, ROLE]
    if Role.SCHEDULER in roles:
        wanted += [TABLE] + ([QUEUE] if app.get("enqueues_on_schedule") else [])
    if roles:
        for queue in app.get("queues", {}):
            variable = f"{_settings.ENV_QUEUE_URL_PREFIX}{queue.upper()}"
            wanted.append(Need(f"queue:{queue}", variable, f"the URL of queue {queue!r}, which its jobs name "
                                                         f"(queue={queue!r})"))
    return list(dict.fromkeys(wanted))


def check_environment(function: str, variables: Iterable[str], app: Mapping[str, Any], *,
                      roles: Collection[Role], features: Collection[Feature],
                      sources: Mapping[str, str] | None = None) -> list[Problem]:
    """Problems between the variables ``function`` is given and what ``app`` (described by inspect_app) needs.

    ``sources`` maps a variable to how another function of the template sets it (``!Ref IdempotencyTable``),
    for the fix.
    """
    names = list(variables)
    settings: Mapping[str, bool] = app.get("settings", {})
    queues: Mapping[str, bool] = app.get("queues", {})
    problems: list[Problem] = []
    blamed: set[str] = set()
    for need in needs(app, roles, features):
        has = queues.get(need.setting[6:], False) if need.setting.startswith("queue:") else settings.get(need.setting)
        if has:
            continue
        near = _closest(need.variable, [n for n in names if n not in known_variables()])
        hint = f"; did you mean {near}?" if near else ""
        blamed.update([near] if near else [])
        fix = (f"rename {near} to {need.variable}" if near else
               f"add {need.variable}: {(sources or {}).get(need.variable, '<its value>')} to {function}'s "
               "Environment.Variables")
        problems.append(Problem(where=function, message=f"{need.variable} is not set, and its app needs it "
                                                        f"({need.why}){hint}", fix=fix))
    for name in names:
        if not name.startswith("SQSJOBS_") or name in blamed or name in known_variables():
            continue
        if name.startswith(_settings.ENV_QUEUE_URL_PREFIX):
            continue  # a named queue's URL: any name is one
        near = _closest(name, sorted(known_variables()))
        if near:
            problems.append(Problem(where=function, severity=Severity.WARNING,
                                    message=f"{name} is not a variable sqsjobs reads; did you mean {near}?",
                                    fix=f"rename it to {near} (or drop it)"))
    return problems


def features_of(environments: Iterable[Iterable[str]], *, declares_schedule_group: bool,
                relays_a_table: bool = False) -> frozenset[Feature]:
    """What the template's functions' variables (near misses included) and resources say the app uses.

    Example:
        >>> sorted(features_of([["SQSJOBS_OUTBOX_TABEL"]], declares_schedule_group=True))
        [<Feature.DELAYS: 'delays'>, <Feature.OUTBOX: 'outbox'>]
    """
    found = {Feature.DELAYS} if declares_schedule_group else set()
    if relays_a_table:
        found.add(Feature.OUTBOX)
    names = {name for environment in environments for name in environment}
    for feature, variables in FEATURE_VARIABLES.items():
        if any(name in variables or _closest(name, list(variables)) for name in names):
            found.add(feature)
    return frozenset(found)


def _closest(name: str, candidates: list[str]) -> str | None:
    found = difflib.get_close_matches(name, candidates, n=1, cutoff=CLOSE)
    return found[0] if found else None
