"""The optional features' stages, each built from the runtime when the first delivery it concerns arrives.

The consumer's stages (``Runtime._stages``, ``_runtime.py``) hold debounce and
dedupe, limiters, groups and chains, and awaited jobs as ``OnDemand``
(``worker/_stages.py``): each answers whether a delivery concerns it without
importing its feature, and only the first delivery that does builds the stage,
here. This module is imported by that delivery, and each builder imports its
own feature and no other, so a worker whose app uses none of them loads neither
this module nor any feature's (tests/unit/test_feature_imports.py). What only
a feature's stage uses is built here with it: the sender of a group's callbacks
and a chain's next steps.

The builders read the runtime through ``Builder``, a protocol: the runtime
imports this module, so this module names the runtime by what it uses of it
(tests/unit/test_layering.py counts an import under ``TYPE_CHECKING`` too).

Example:
    >>> from sqsjobs import InMemoryStore, JobApp
    >>> app = JobApp(queue_url="https://sqs.example/q", store=InMemoryStore())
    >>> type(build_stage("LimitsStage", app.runtime)).__name__
    'LimitsStage'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from sqsjobs._job import Registered, Services

if TYPE_CHECKING:
    from sqsjobs.enqueue._message import JobMessage
    from sqsjobs.worker._stages import Stage
    from sqsjobs.workflows._callback_sender import CallbackSender


class Builder(Services, Protocol):
    """What the features' stages are built from: the runtime's services, the app's limiters, and the answerer
    of awaited jobs (``_runtime.Runtime``)."""

    @property
    def registry(self) -> Registered: ...

    @property
    def callback_sender(self) -> CallbackSender: ...


def debounce_stage(runtime: Builder) -> Stage:
    """Debounce and dedupe: a coalesced burst runs once (``enqueue/_debounce_stage.py``)."""
    from sqsjobs.enqueue._debounce_stage import DebounceStage

    return DebounceStage(store=runtime.store, clock=runtime.clock)


def limits_stage(runtime: Builder) -> Stage:
    """Rate and concurrency limiters: a job starts once it holds its permits (``flow/_stage.py``)."""
    from sqsjobs.flow._stage import LimitsStage

    return LimitsStage(store=runtime.store, limiters=runtime.registry.limiters, clock=runtime.clock,
                       sleep=runtime.sleep, logger=runtime.logger)


def workflow_stage(runtime: Builder) -> Stage:
    """Groups and chains: a member counted, a finished group's callback and a chain's next step sent
    (``workflows/_stage.py``)."""
    from sqsjobs.workflows._callback_stage import GroupCallbacks
    from sqsjobs.workflows._stage import WorkflowStage

    return WorkflowStage(store=runtime.store, send=_followups(runtime), record_ttl=runtime.settings.record_ttl,
                         clock=runtime.clock, logger=runtime.logger,
                         answer_group=GroupCallbacks(store=runtime.store, sender=_sender(runtime),
                                                     logger=runtime.logger).finished)


def callback_stage(runtime: Builder) -> Stage:
    """Awaited jobs: the workflow waiting on one is answered when it ends (``workflows/_callback_stage.py``)."""
    from sqsjobs.workflows._callback_stage import CallbackStage

    return CallbackStage(store=runtime.store, sender=_sender(runtime), clock=runtime.clock, logger=runtime.logger)


def _followups(runtime: Builder) -> Callable[[Sequence[JobMessage]], list[bool]]:
    """Sends a group's callbacks or a chain's next steps; says whether each was sent (a failure is logged)."""
    def send(messages: Sequence[JobMessage]) -> list[bool]:
        batch = list(messages)
        if not batch:
            return []
        report = runtime.send_many(batch)
        failed = {f.index for f in report.failed}
        for entry in report.failed:
            runtime.logger.error("could not send a callback or a chain's next step",
                                 extra={"key": entry.key, "error": f"{entry.code}: {entry.message}"})
        return [i not in failed for i in range(len(batch))]

    return send


def _sender(runtime: Builder) -> Callable[[], CallbackSender]:
    """The runtime's callback sender, asked for at the first answer (its clients are made then, not here)."""
    return lambda: runtime.callback_sender


#: each feature's builder, by the name of its stage (the ``OnDemand`` name ``Runtime._stages`` gives it)
BUILDERS: dict[str, Callable[[Builder], Stage]] = {
    "DebounceStage": debounce_stage,
    "LimitsStage": limits_stage,
    "WorkflowStage": workflow_stage,
    "CallbackStage": callback_stage,
}


def build_stage(name: str, runtime: Builder) -> Stage:
    """The stage named ``name`` (a key of ``BUILDERS``), built from ``runtime``."""
    return BUILDERS[name](runtime)
