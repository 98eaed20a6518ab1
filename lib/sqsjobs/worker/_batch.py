"""One batch in flight: its deliveries, this invocation's lease, and how a delivery is concluded.

The consumer builds one ``Batch`` per invocation and hands it to every stage
(``worker/_stages.py``). ``conclude`` is the only way a delivery's fate is set:
it completes the facts a step of the flow knows (``Facts``: how the delivery
ended, or why it did not run) with what every decision needs (the attempt, the
receive counts, the job's backoff), asks the one decision
(``worker/_decision.py``), and moves the delivery. It is called from one place
per step: decoding, the stages' ``before_claim``, the claim, a claimed
delivery that does not start, a run's end, and a later copy of a key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from sqsjobs._backoff import BackoffPolicy, RandomSource
from sqsjobs.enqueue._message import ATTR_RESENDS
from sqsjobs.worker._decision import Decision, Ending, Facts, decide

if TYPE_CHECKING:
    from sqsjobs.store._lease import Operation
    from sqsjobs.worker._delivery import Delivery
    from sqsjobs.worker._record_writes import RecordWrites
    from sqsjobs.worker._spans import BatchTrace


@dataclass(kw_only=True)
class Batch:
    """The deliveries of one invocation and what the flow and its stages share about them."""

    deliveries: list[Delivery]
    #: this invocation's token: every lease it takes is held by it
    owner: str
    now: float
    context: Any
    #: until when this invocation's leases last; None when it is too late to start anything
    lease_until: float | None
    #: the queue's max_attempts: the receive after it is the backstop (SQS's redrive moves the message after)
    max_attempts: int
    default_backoff: BackoffPolicy
    random: RandomSource | None
    can_schedule: bool
    writes: RecordWrites
    #: how many of its jobs may run at once (the ``concurrency`` setting: ``worker/_run_step.py``)
    concurrency: int = 1
    #: writes that go in the claims' round trip (an expired record...), with the delivery they are for
    claim_wave: list[tuple[Delivery, Operation]] = field(default_factory=list)
    #: what each delivery's fate was decided from, by index
    facts: dict[int, Facts] = field(default_factory=dict)
    #: deliveries whose acknowledgement a stage's failed hook withholds (by index: why), ``worker/_stages.py``
    followups_failed: dict[int, str] = field(default_factory=dict)
    #: called once a delivery is decided (the stages' ``after_decision``)
    on_decided: Callable[[Delivery], None] | None = None
    #: its OpenTelemetry spans, where the application traces (``worker/_spans.py``)
    trace: BatchTrace | None = None
    #: what each stage keeps for this batch only (``scratch``)
    _scratch: dict[int, Any] = field(default_factory=dict)

    def scratch(self, stage: object, make: Callable[[], Any]) -> Any:
        """What ``stage`` keeps for this batch (made by ``make`` on first use), gone with the batch."""
        if id(stage) not in self._scratch:
            self._scratch[id(stage)] = make()
        return self._scratch[id(stage)]

    def conclude(self, d: Delivery, known: Facts) -> Decision:
        """Decide ``d``'s fate from what is ``known`` of how it ended, and move it there.

        ``known`` is what the step or stage that ended ``d`` knows (its ending, an
        error, a wait); the batch adds what every decision needs (the attempt, the
        receive counts, the job's backoff).
        """
        job = d.job
        facts = replace(
            known,
            attempt=d.attempt,
            max_attempts=self.job_attempts(d),
            took_over=d.took_over,
            receive_count=d.receive_count,
            backstop=self.max_attempts + 1,
            resends=resends(d),
            backoff=job.options.backoff if job is not None and known.ending is Ending.FAILED else self.default_backoff,
            can_schedule=self.can_schedule,
        )
        decision = decide(facts, self.random)
        self.facts[d.index] = facts
        d.decided(decision)
        if self.on_decided is not None:
            self.on_decided(d)
        return decision

    def job_attempts(self, d: Delivery) -> int:
        """The attempts ``d``'s job may run: its own ``max_attempts``, never more than the queue's."""
        own = d.job.options.max_attempts if d.job is not None else None
        return min(own or self.max_attempts, self.max_attempts)


def resends(d: Delivery) -> int:
    """How often the worker re-sent this message already (its ``sqsjobs.resends``; garbage counts as 0)."""
    attr = d.message_attributes.get(ATTR_RESENDS)
    text = attr.get("stringValue") if isinstance(attr, dict) else None
    return int(text) if isinstance(text, str) and text.isdigit() and len(text) < 6 else 0
