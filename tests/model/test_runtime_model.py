"""The cross-feature model-based test: random stories of the whole runtime, invariants after every step.

Hypothesis draws a story (enqueues and duplicate sends, requests and groups a workflow awaits (callbacks answered
by a fake that fails when told to, and closed by their workflow at times), groups whose members
are also sent alone or were done before, chains, cancels, two deploys of a
job whose clocks differ by up to the lease margin, two jobs on one key template, batch handlers (one call for up
to 3 items, each item with its own plan; one rate-limited, one under a concurrency limit and a time limit, one under
a time limit), limiter deferrals, kills before and after a side effect, runs that take long, a second invocation
running inside a job, debounced bursts and deduplicated enqueues, messages at the queue's size limit, store errors
on any write, SQS errors on the DLQ send and on visibility changes, SQS
delivering a deleted message again, redrives of the
DLQ, schedule fires and the same periods sent from a queue, time passing), runs it against the real worker
(``tests/model/world.py``), checks the invariants after every step and, once
the story is over, settles the world and checks what must hold at rest. A
failure is shrunk to a short story and printed as the steps that make it.

``make test`` runs it at size 1 (under a minute on 2 cores); ``make chaos``
at 20 (``SQSJOBS_MODEL_SCALE=20``). Each size is derandomized (a fixed seed per
size), so a run never depends on luck: a new failure is a new story found by a
larger size or a code change, never a flake.
"""

from __future__ import annotations

import contextlib
import os
import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from model.world import (
    AWAITED_JOBS,
    BATCH_JOBS,
    CALLBACK_JOBS,
    DEBOUNCE,
    FAULTS,
    MAX_ATTEMPTS,
    MEMBER_JOBS,
    PLAIN_JOBS,
    PLANS,
    GroupBook,
    World,
    fault_matcher,
    note,
)

from sqsjobs import ChainError, EnqueueError, GroupError, InvalidArgumentsError, StoreError
from sqsjobs.enqueue._envelope import CallbackTo
from sqsjobs.ops._redrive import redrive
from sqsjobs.ops._redrive_options import RedriveOptions
from sqsjobs.store._lease import LeaseState

SCALE = int(os.environ.get("SQSJOBS_MODEL_SCALE", "1"))
#: the stories' work is fixed (derandomized, 40 steps each); the bound only catches a hang. On a shared machine
#: (load 14 on 2 cores) size 1 took 335 s with the workflow callbacks' rules, past pytest's default 300 s
pytestmark = pytest.mark.timeout(900 * SCALE)

keys = st.integers(min_value=0, max_value=3)
apps = st.integers(min_value=0, max_value=1)
#: the second deploy's clock against the first's: within the lease margin (5 s), either way
skews = st.sampled_from([0.0, 4.0, -4.0])
plans = st.lists(st.sampled_from(PLANS), max_size=6)


class RuntimeModel(RuleBasedStateMachine):
    """One world per story; rules are what users, producers, operators and AWS do to it."""

    @initialize(seed=st.integers(min_value=0, max_value=2**16), skew=skews)
    def start(self, seed: int, skew: float) -> None:
        # Owners, group and chain ids come from uuid4: seeded here, so a story replays exactly when shrunk.
        ids = random.Random(seed)
        self._uuid4 = uuid.uuid4
        uuid.uuid4 = lambda: uuid.UUID(int=ids.getrandbits(128), version=4)  # type: ignore[assignment]
        self.world = World(seed, skew)

    # ------------------------------------------------------------ producers
    @rule(job=st.sampled_from(PLAIN_JOBS), n=keys, twice=st.booleans(), app=apps)
    def enqueue(self, job: str, n: int, twice: bool, app: int) -> None:
        message = self.world.message(app, job, n)
        for _ in range(2 if twice else 1):
            self.world.apps[app].enqueue(message)

    @rule(job=st.sampled_from(AWAITED_JOBS), n=keys, twice=st.booleans(), again=st.booleans(), app=apps,
          heartbeat=st.booleans())
    def enqueue_awaited(self, job: str, n: int, twice: bool, again: bool, app: int, heartbeat: bool) -> None:
        """A workflow awaits a request (sent twice: a duplicate send); ``again``: a second workflow awaits another
        request of the same key (answered from the record once the key is done)."""
        w = self.world
        for _ in range(2 if again else 1):
            callback = w.new_callback(heartbeat)
            message = w.apps[app].jobs[job].message(n=n, callback=callback)
            w.awaited[callback.id] = ("job", message.key)
            for _ in range(2 if twice else 1):
                w.apps[app].enqueue(message)

    @rule(times=st.sampled_from([1, 2, 50]))
    def callback_fault(self, times: int) -> None:
        """The callback services fail the next sends (throttled, unavailable)."""
        self.world.callbacks.fail_next(times)

    @precondition(lambda self: bool(self.world.awaited))
    @rule(pick=st.integers(min_value=0))
    def workflow_closes(self, pick: int) -> None:
        """A workflow stops waiting (its callback timed out): a later answer is refused, which ends it."""
        w = self.world
        callback_id = sorted(w.awaited)[pick % len(w.awaited)]
        service = "states" if callback_id.startswith("token-") else "lambda"
        w.callbacks.close(CallbackTo(service, callback_id))
        w.closed_by_workflow.add(callback_id)

    @rule(job=st.sampled_from(BATCH_JOBS), app=apps)
    def enqueue_items(self, job: str, app: int) -> None:
        """Every key of a batch handler at once, so that one delivery holds several of its items."""
        self.world.apps[app].enqueue_many(self.world.apps[app].jobs[job].message(n=n) for n in range(4))

    @rule(members=st.lists(st.tuples(st.sampled_from(MEMBER_JOBS), keys), min_size=1, max_size=4),
          alone=st.lists(st.booleans(), min_size=4, max_size=4), on_success=st.booleans(), app=apps,
          callback=st.tuples(st.sampled_from(CALLBACK_JOBS), keys), awaited=st.booleans())
    def enqueue_group(self, members: list[tuple[str, int]], alone: list[bool], on_success: bool, app: int,
                      callback: tuple[str, int], awaited: bool) -> None:
        w = self.world
        jobs = w.apps[app].jobs
        messages, seen = [], set()
        for job, n in members:
            message = w.message(app, job, n)
            if message.key not in seen:  # a group holds each key once
                seen.add(message.key)
                messages.append(message)
        label = f"g{len(w.groups)}"
        callbacks = {**({"complete": f"{label}-complete"} if callback[0] == "report" else {}),
                     **({"success": f"{label}-success"} if on_success else {})}
        # on_complete: the model's own callback (its runs counted), or a job whose key other paths share
        on_complete = (jobs["report"].message(g=callbacks["complete"]) if callback[0] == "report"
                       else w.message(app, *callback))
        w.callback_bodies.add(on_complete.body)
        workflow = w.new_callback(False) if awaited else None
        group = w.apps[app].group(
            on_complete=on_complete,
            on_success=jobs["report"].message(g=callbacks["success"]) if on_success else None, callback=workflow)
        try:
            group.add_many(messages)
            group_id = group.enqueue()
        except (StoreError, GroupError, InvalidArgumentsError):
            return  # its records could not be written, or a member or callback is too large: nothing was sent
        if workflow is not None:
            w.awaited[workflow.id] = ("group", group_id)
        w.groups.append(GroupBook(id=group_id, label=label, members=[m.key for m in messages],
                                  callbacks=callbacks))
        for message, also in zip(messages, alone, strict=False):
            if also:
                self._send_alone(app, message)

    def _send_alone(self, app: int, message: Any) -> None:
        """A member's message sent on its own too (a deduplicated job's is reserved; a debounced job's refused)."""
        w = self.world
        sent = len(w.sqs.sent_to(w.queue))
        try:
            receipt = w.apps[app].enqueue(message)
        except InvalidArgumentsError:
            return  # a prepared message of a debounced job: only job.enqueue writes a burst token
        if getattr(receipt, "duplicate", False):
            assert len(w.sqs.sent_to(w.queue)) == sent, "a refused enqueue sent a message"
            w.refused(message.job, message.key)

    @rule(steps=st.lists(st.tuples(st.sampled_from(MEMBER_JOBS), keys), min_size=2, max_size=3), app=apps)
    def enqueue_chain(self, steps: list[tuple[str, int]], app: int) -> None:
        messages: dict[str, Any] = {}
        for job, n in steps:
            message = self.world.message(app, job, n)
            messages.setdefault(message.key, message)
        if len(messages) < 2:
            return
        try:
            self.world.apps[app].chain(*messages.values()).enqueue()
        except (StoreError, ChainError, InvalidArgumentsError):
            return  # its records could not be written, or its steps are too large: nothing was sent
        self.world.chains.append(list(messages))

    @rule(n=st.integers(min_value=0, max_value=1), app=apps)
    def enqueue_debounced(self, n: int, app: int) -> None:
        """An edit of a debounced key (each with its own ``v``: a burst's arguments name it)."""
        w = self.world
        w.edits += 1
        try:
            w.apps[app].jobs["deb"].enqueue(n=n, v=w.edits)
        except EnqueueError:
            return  # the token could not be written: nothing was sent
        w.ledger.last_burst[f"deb:{n}"] = w.edits
        item = w.store.get(f"deb:{n}")
        assert item is not None
        w.ledger.tokens[item.get("debounce_token")] = w.edits

    @rule(job=st.sampled_from(["dd", "ds"]), n=keys, app=apps)
    def enqueue_deduplicated(self, job: str, n: int, app: int) -> None:
        w = self.world
        sent = len(w.sqs.sent_to(w.queue))
        record = w.store.get(f"{job}:{n}")
        now = w.apps[app].runtime.clock()
        cancelled = (record is not None and record.state is LeaseState.DONE and record.get("outcome") == "cancelled"
                     and not record.past_ttl(now))
        try:
            receipt = w.apps[app].jobs[job].enqueue(n=n)
        except EnqueueError:
            return
        # A cancelled key stays cancelled: its request is refused, and the receipt says so (issue 31 item 4).
        assert receipt.cancelled == cancelled, f"{job}:{n}: cancelled={cancelled}, the receipt says {receipt.cancelled}"
        if receipt.refused:
            assert len(w.sqs.sent_to(w.queue)) == sent, "a refused enqueue sent a message"
        if receipt.duplicate:
            w.refused(job, f"{job}:{n}")

    @rule(job=st.sampled_from((*PLAIN_JOBS, "dd", "ds")), n=keys)
    def cancel(self, job: str, n: int) -> None:
        key = self.world.message(0, job, n).key
        with contextlib.suppress(StoreError):
            self.world.apps[0].cancel(key)

    # ------------------------------------------------------------ Lambda
    @rule(size=st.integers(min_value=1, max_value=10), story=plans, app=apps,
          remaining_ms=st.sampled_from([60_000, 60_000, 3_000]), nested=plans)
    def deliver(self, size: int, story: list[str], app: int, remaining_ms: int, nested: list[str]) -> None:
        w = self.world

        def second_invocation() -> None:
            with w.plans(nested):
                w.deliver(app=1 - app, size=size, remaining_ms=60_000)

        if remaining_ms < 60_000:
            w.disturbed = True  # an invocation near its deadline sends back what it cannot start
        with w.plans(story):
            w.deliver(app=app, size=size, remaining_ms=remaining_ms, nest=second_invocation)

    @rule(hour=st.integers(min_value=0, max_value=2), app=apps)
    def fire_schedule(self, hour: int, app: int) -> None:
        at = datetime.fromtimestamp(self.world.clock(), UTC).replace(minute=0, second=0) - timedelta(hours=hour)
        w = self.world
        before = sum(w.ledger.effects.values())
        try:
            w.apps[app].fire_schedule({"job": "tick", "scheduled_time": at.isoformat()})
        except StoreError:
            # The job ran, but the period's completion could not be written even after its retries.
            if sum(w.ledger.effects.values()) > before:
                period = w.apps[app].runtime.registry.schedules["tick"].period_of(at)
                w.ledger.unrecorded[f"tick:{period}"] += 1
        except Exception:
            pass

    @rule(hour=st.integers(min_value=0, max_value=2), app=apps)
    def enqueue_tick(self, hour: int, app: int) -> None:
        """The period a schedule fires, sent from a queue too (a key names one operation on every path)."""
        at = datetime.fromtimestamp(self.world.clock(), UTC).replace(minute=0, second=0) - timedelta(hours=hour)
        runtime = self.world.apps[app].runtime
        period = runtime.registry.schedules["tick"].period_of(at)
        self.world.apps[app].enqueue(runtime.job("tick").message(period=period))

    # ------------------------------------------------------------ time and faults
    @rule(seconds=st.sampled_from([1, 5, 30, 61, 300]))
    def advance(self, seconds: int) -> None:
        self.world.disturbed = True  # no poller polled meanwhile: a copy may come back after its slot
        self.world.clock.advance(seconds)

    @rule(kind=st.sampled_from(FAULTS), times=st.sampled_from([1, 2, 50]))
    def store_fault(self, kind: str, times: int) -> None:
        self.world.store_faults = self.world.disturbed = True
        self.world.store.fail(fault_matcher(kind), times=times)

    @precondition(lambda self: bool(self.world.deleted))
    @rule(pick=st.integers(min_value=0))
    def sqs_delivers_again(self, pick: int) -> None:
        """At-least-once: a message the poller deleted is received once more."""
        w = self.world
        w.disturbed = True
        message = w.deleted.pop(pick % len(w.deleted))
        if message.receive_count >= MAX_ATTEMPTS + 1:  # past the worker's backstop: SQS's redrive moves it
            w.ledger.killed_late[message.message_id] += 1
        w.sqs.deliver_again(message)

    @rule(operation=st.sampled_from(["dlq_send", "visibility"]), times=st.sampled_from([1, 2, 50]))
    def sqs_fault(self, operation: str, times: int) -> None:
        w = self.world
        w.disturbed = True
        if operation == "dlq_send":  # a batch refused as a whole is retried entry by entry: 1 may be absorbed
            w.sqs.refuse("SendMessageBatch", queue_url=w.dlq, times=times)
        else:
            w.sqs.refuse("ChangeMessageVisibilityBatch", queue_url=w.queue, times=times)

    # ------------------------------------------------------------ operators
    @precondition(lambda self: bool(self.world.sqs.messages(self.world.dlq)))
    @rule()
    def redrive_dlq(self) -> None:
        w = self.world
        w.disturbed = True
        letters = {m.message_id: m for m in w.sqs.messages(w.dlq)}
        before = set(letters)
        redrive(RedriveOptions(dlq=w.dlq, to=w.queue, wait_time_seconds=0, max_redrives=50),
                sqs_client=w.sqs, clock=w.clock, sleep=w.clock.advance, records=w.store)  # type: ignore[arg-type]
        moved = before - {m.message_id for m in w.sqs.messages(w.dlq)}
        w.redriven |= moved
        for letter in moved:
            kinds = w.kinds_of(letters[letter])
            note(f"redriven: {' + '.join(sorted(kinds - {'redriven'})) or 'a letter redriven before'}")

    @rule(kind=st.sampled_from(["deb", "bat", "battime"]), n=st.integers(min_value=0, max_value=1), app=apps)
    def dead_letter_then_redrive(self, kind: str, n: int, app: int) -> None:
        """A debounced burst, or a batch handler's items, fail for good; an operator then redrives the DLQ (the
        redriven letters meet whatever else of their keys is queued by then)."""
        w = self.world
        if kind == "deb":
            self.enqueue_debounced(n, app)
            w.clock.advance(DEBOUNCE)
        else:
            self.enqueue_items(kind, app)
        with w.plans(["permanent"] * 10):
            w.deliver(app=app, size=10, remaining_ms=60_000)
        w.check()
        if w.sqs.messages(w.dlq):
            self.redrive_dlq()

    @rule(job=st.sampled_from(PLAIN_JOBS), n=keys, app=apps)
    def back_to_its_backstop(self, job: str, n: int, app: int) -> None:
        """A message (one at the queue's size limit among them) that keeps coming back unstarted (no time left in
        its invocations) until its backstop receive, where the worker re-sends it rather than let SQS move it."""
        w = self.world
        w.disturbed = True
        try:
            w.apps[app].enqueue(w.message(app, job, n))
        except (EnqueueError, StoreError):
            return
        for _ in range(MAX_ATTEMPTS + 1):
            w.deliver(app=app, size=10, remaining_ms=3_000)
            w.check()

    # ------------------------------------------------------------ checks
    @invariant()
    def holds(self) -> None:
        if hasattr(self, "world"):
            self.world.check()

    def teardown(self) -> None:
        try:
            if hasattr(self, "world"):
                self.world.settle()
        finally:
            if hasattr(self, "_uuid4"):
                uuid.uuid4 = self._uuid4  # type: ignore[assignment]


RuntimeModel.TestCase.settings = settings(
    max_examples=200 * SCALE, stateful_step_count=40, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much], print_blob=False)
test_runtime_model = RuntimeModel.TestCase
