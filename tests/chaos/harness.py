"""Chaos run: jobs through the real worker against a moto server, with faults injected, then a ledger.

What it drives: ``JobApp.process_batch`` exactly as Lambda would call it,
fed by this module's own poller (receive → process → delete what was
acknowledged), against SQS and DynamoDB served by ``ThreadedMotoServer`` on
127.0.0.1. One virtual clock drives the worker (leases, ``FakeContext``) *and*
moto's SQS (visibility timeouts, receive timestamps), so retry delays and
visibility timeouts play out for real without waiting for them.

Faults, each at a stated rate, decided by one seeded ``random.Random``:

- job executions: transient exception (``ConnectionError``), permanent
  failure (``PermanentError``), or the invocation is *killed* after the claim,
  before or after the job's side effect (``Killed``, a ``BaseException`` that
  escapes ``process_batch`` like a SIGKILL/timeout would: nothing after it runs,
  nothing is deleted, the whole batch comes back after the visibility timeout);
- the producer sends some jobs twice;
- a share of the jobs are members of job groups (``app.group``) with an
  ``on_complete`` and an ``on_success`` callback; members suffer the same
  faults, and some of their messages are sent twice too;
- DynamoDB answers some requests with ``ProvisionedThroughputExceededException``
  at the botocore layer (a ``before-send`` hook returns the 400), so
  botocore's own retry handler has to absorb them;
- a share of DynamoDB *calls* fail after botocore's own retries: a
  ``before-call`` hook dooms the call and every one of its attempts is
  answered with the 400, so botocore retries it to its limit and the error
  reaches sqsjobs (claims, completions, group counts, dead-letter evidence:
  any call). botocore's retry sleeps are counted, not slept (wall time is no
  part of what is checked).

The ledger is built from three independent sources (the side-effect log, the
queues, the table) and fails the run on any lost job, on a letter without a
reason the worker wrote (unless SQS's backstop moved it after the invocation
of its final receive was killed), on more duplicate side effects than kills
after a side effect plus completion writes that failed after their retries
(``BatchResult.unrecorded``), and, per group, on a count that does not add up
or a callback that did not run exactly once (``on_success`` only for a group
whose members all succeeded). ``make chaos`` runs the full size and writes the
ledger to CHAOS.md (``python -m chaos.harness --jobs 10000 --fail 0.02 --write
CHAOS.md`` with ``tests`` on the path); ``tests/chaos/test_chaos.py`` runs a
few hundred jobs in ``make test``.

This module never talks to anything but 127.0.0.1.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

#: the worker's function timeout (s); the lease is this + lease_margin, the visibility must exceed both
FUNCTION_TIMEOUT = 20.0
LEASE_MARGIN = 5.0
VISIBILITY_TIMEOUT = 30
#: virtual seconds a batch takes (jobs do "work"); keeps receive timestamps realistic
BATCH_SECONDS = 0.2
#: virtual seconds the poller waits when nothing is visible
IDLE_STEP = 1.0
#: jobs are enqueued in waves of this many whenever the queue holds fewer than half a wave
WAVE = 1000
WAVE_CHECK_EVERY = 10
#: times the producer tries to enqueue a group whose records a failing DynamoDB call refused
PRODUCER_TRIES = 5
#: a run that needs more virtual time than this is stuck, not slow
VIRTUAL_TIME_LIMIT = 7 * 24 * 3600.0
REASON_ATTRIBUTE = "sqsjobs.reason"
ORIGINAL_ID_ATTRIBUTE = "sqsjobs.original_message_id"
#: the worker's reasons (sqsjobs.worker._dead_letters.Reason); imported late, so ``--help`` stays instant
REASONS = frozenset({"permanent", "exhausted", "malformed", "lost", "key_conflict", "crashed", "result_too_large",
                     "result_not_json"})


class Killed(BaseException):
    """Raised when the simulated invocation dies: not an ``Exception``, so nothing in the worker catches it."""


@dataclass(frozen=True, kw_only=True)
class ChaosConfig:
    """Sizes and fault rates of one run."""

    jobs: int = 300
    seed: int = 8
    transient: float = 0.20
    permanent: float = 0.02
    #: invocations killed per job execution, split evenly before/after the side effect
    kill: float = 0.01
    duplicate: float = 0.10
    throttle: float = 0.05
    #: the share of DynamoDB calls whose every attempt fails: the error reaches sqsjobs after botocore's retries
    fail: float = 0.0
    max_attempts: int = 4
    #: concurrent pollers (invocations), each with its own JobApp; duplicates then race for the claim
    pollers: int = 2
    backoff_base: float = 2.0
    backoff_cap: float = 60.0
    #: the share of jobs that are members of groups, and the members per group
    grouped: float = 0.2
    group_size: int = 50


class VirtualClock:
    """Epoch seconds that move only when told to; shared by the worker and moto's SQS."""

    def __init__(self, start: float = 1_767_225_600.0) -> None:
        self.now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time forward (never back)."""
        with self._lock:
            self.now += seconds


@contextlib.contextmanager
def moto_sqs_clock(clock: VirtualClock) -> Iterator[None]:
    """Make moto's SQS read ``clock`` for visibility, delays and receive timestamps.

    ``ThreadedMotoServer`` runs in this process, so patching the two names the
    SQS model reads time through moves its visibility timeouts with our clock.
    """
    import moto.sqs.models as sqs_models

    saved = (sqs_models.unix_time, sqs_models.unix_time_millis)
    sqs_models.unix_time = lambda dt=None: clock()  # type: ignore[assignment]
    sqs_models.unix_time_millis = lambda dt=None: clock() * 1000.0  # type: ignore[assignment]
    try:
        yield
    finally:
        sqs_models.unix_time, sqs_models.unix_time_millis = saved


def _serial_moto_server() -> Any:
    """A ``ThreadedMotoServer`` that handles one request at a time.

    moto's backends are not thread-safe: two concurrent ReceiveMessage calls
    both moving a message to the DLQ crash with ``list.remove``, and a
    conditional write is a check-then-set that a thread switch can split.
    Real SQS and DynamoDB are atomic per request, so requests are serialized
    here (the chaos pollers never long-poll); the pollers and the guard's
    thread pool still overlap everything else.
    """
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import make_server

    from sqsjobs.local.serial_moto import moto_app

    class SerialMotoServer(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app = moto_app()
            lock = threading.Lock()

            def serial(environ: Any, start_response: Any) -> Any:
                with lock:
                    return list(app(environ, start_response))

            self._server = make_server(self._ip_address, self._port, serial, True, request_handler=MotoRequestHandler)
            self._server_ready_event.set()
            self._server.serve_forever()

    return SerialMotoServer(ip_address="127.0.0.1", port=0, verbose=False)


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """A moto server on 127.0.0.1 at a free port; yields its endpoint URL."""
    import logging

    # One access-log line per request would bury the ledger.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = _serial_moto_server()
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


class _RawBody(io.BytesIO):
    """What ``AWSResponse`` reads a body from."""

    def stream(self, **kwargs: Any) -> Iterator[bytes]:
        yield self.getvalue()


class Throttler:
    """A ``before-send`` hook answering a share of DynamoDB requests with a throttling 400.

    Returning a response from ``before-send`` skips the network; botocore then
    parses the 400 and its retry handler retries the request, as it would
    against DynamoDB under pressure.
    """

    def __init__(self, rate: float, seed: int) -> None:
        self.rate = rate
        self.random = random.Random(seed)
        self.injected = 0
        self.requests = 0
        self._lock = threading.Lock()  # the guard's claims run on a thread pool

    def __call__(self, request: Any, **kwargs: Any) -> Any:
        with self._lock:
            self.requests += 1
            if self.random.random() >= self.rate:
                return None
            self.injected += 1
        return throttled(request)


class CallFailer:
    """Dooms a share of DynamoDB *calls*: every attempt of a doomed call is refused, retries included.

    botocore emits ``before-call`` once per API call, with the request it will send; a doomed call's
    request gets a header, which every attempt's prepared request carries (botocore 1.36 and later alike:
    the request context reaches ``before-send`` only in newer ones); the ``before-send`` hook refuses each
    attempt of a call marked there, so botocore's retry handler spends all its retries and raises: the
    error reaches sqsjobs as it would after a long DynamoDB outage.
    """

    MARK = "x-sqsjobs-chaos-doomed"

    def __init__(self, rate: float, seed: int) -> None:
        self.rate = rate
        self.random = random.Random(seed)
        self.calls = 0
        self.doomed: Counter[str] = Counter()
        self.attempts_refused = 0
        self._lock = threading.Lock()

    def before_call(self, model: Any, params: dict[str, Any], **kwargs: Any) -> None:
        with self._lock:
            self.calls += 1
            if self.rate and self.random.random() < self.rate:
                params.setdefault("headers", {})[self.MARK] = "1"
                self.doomed[model.name] += 1

    def before_send(self, request: Any, **kwargs: Any) -> Any:
        if not request.headers.get(self.MARK):
            return None
        with self._lock:
            self.attempts_refused += 1
        return throttled(request)


class RetrySleeps:
    """botocore's retry sleeps, counted instead of slept (its endpoint module sleeps through its ``time``).

    A doomed call spends all of DynamoDB's legacy retries (9 after the first attempt, from 50 ms doubling:
    25.6 s); slept for real at 2% of calls that is hours of wall time measuring nothing. The total is reported.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self.count = 0
        self._lock = threading.Lock()

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.seconds += seconds
            self.count += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@contextlib.contextmanager
def counted_retry_sleeps() -> Iterator[RetrySleeps]:
    """Swap botocore's endpoint module's ``time`` for :class:`RetrySleeps` while the run lasts."""
    import botocore.endpoint

    sleeps = RetrySleeps()
    saved = botocore.endpoint.time
    botocore.endpoint.time = sleeps  # type: ignore[assignment]
    try:
        yield sleeps
    finally:
        botocore.endpoint.time = saved


def throttled(request: Any) -> Any:
    """The 400 DynamoDB answers a throttled request with; botocore's retry handler retries it."""
    from botocore.awsrequest import AWSResponse

    body = json.dumps({"__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
                       "message": "injected by the chaos run"}).encode()
    headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": uuid.uuid4().hex}
    return AWSResponse(request.url, 400, headers, _RawBody(body))


@dataclass
class Ledger:
    """Everything the run counted; ``problems`` lists each broken promise (empty = pass)."""

    config: ChaosConfig
    jobs: int = 0
    messages_sent: int = 0
    duplicates_sent: int = 0
    producer_calls: int = 0
    #: group enqueues the producer tried again because a DynamoDB call failed (nothing was sent)
    producer_retries: int = 0
    batches: int = 0
    executions: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    completed_keys: int = 0
    dead_lettered_keys: int = 0
    completed_and_dead_lettered_keys: int = 0
    lost_keys: list[str] = field(default_factory=list)
    dlq_by_reason: Counter[str] = field(default_factory=Counter)
    dlq_moved_by_queue: int = 0
    #: of those, messages whose last receive before SQS's redrive (the backstop) was in a killed invocation
    dlq_moved_after_a_kill: int = 0
    messages_acked: int = 0
    messages_unaccounted: list[str] = field(default_factory=list)
    left_in_queue: int = 0
    side_effects: int = 0
    keys_with_duplicate_effects: int = 0
    duplicate_effects: int = 0
    duplicate_bound: int = 0
    #: side effects done in an invocation that was then killed, before their records were written (the crash
    #: window: completions are gathered, worker/_record_writes.py), counted as tests/model/world.py counts them
    exposed_effects: int = 0
    exposed_keys: int = 0
    unexplained_duplicate_keys: list[str] = field(default_factory=list)
    completed_without_effect: list[str] = field(default_factory=list)
    retry_delays_checked: int = 0
    retry_delays_out_of_bounds: list[str] = field(default_factory=list)
    retry_delay_mean_ratio: float = 0.0
    redelivered_early: list[str] = field(default_factory=list)
    busy_retries: int = 0
    throttles_injected: int = 0
    dynamodb_requests: int = 0
    store_unavailable_retries: int = 0
    store_errors: int = 0
    #: completions of jobs that ran whose write failed even after the worker's own retries (BatchResult.unrecorded)
    unrecorded: int = 0
    unrecorded_keys: set[str] = field(default_factory=set)
    #: DynamoDB calls doomed to fail after botocore's retries, by operation; the calls made; botocore's sleeps
    doomed_calls: Counter[str] = field(default_factory=Counter)
    dynamodb_calls: int = 0
    retry_sleeps: int = 0
    retry_sleep_seconds: float = 0.0
    #: worker-written letters whose evidence item (dlq#<id>) is not in the table (its write was a doomed call)
    letters_without_evidence: int = 0
    fence_lost: int = 0
    stale_in_progress: int = 0
    virtual_seconds: float = 0.0
    wall_seconds: float = 0.0
    groups: int = 0
    group_members: int = 0
    groups_succeeded: int = 0
    #: groups whose last members' letters SQS's backstop moved (a kill at that receive): they wait for a redrive
    groups_waiting_for_redrive: int = 0
    #: (group id, callback) → runs of the callback's side effect
    callback_runs: Counter[tuple[str, str]] = field(default_factory=Counter)
    callbacks_exposed: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def lost(self) -> int:
        """Jobs neither completed nor dead-lettered, plus messages that vanished."""
        return len(self.lost_keys) + len(self.messages_unaccounted) + self.left_in_queue

    def render(self) -> str:
        """The ledger as aligned text lines."""
        c = self.config
        rows: list[tuple[str, Any]] = [
            ("rates", f"transient {c.transient:.0%}, permanent {c.permanent:.0%}, killed {c.kill:.0%} "
                      f"(half before, half after the side effect), duplicate sends {c.duplicate:.0%}, "
                      f"DynamoDB throttling {c.throttle:.0%} of requests, DynamoDB calls failing after "
                      f"botocore's retries {c.fail:.0%}; seed {c.seed}, max attempts "
                      f"{c.max_attempts}, backoff base {c.backoff_base} s cap {c.backoff_cap} s, "
                      f"{c.pollers} concurrent pollers"),
            ("jobs sent (distinct keys)", self.jobs),
            ("messages sent", f"{self.messages_sent} ({self.duplicates_sent} duplicate sends) in "
                              f"{self.producer_calls} SendMessageBatch calls; {self.producer_retries} group "
                              "enqueues tried again after a failed DynamoDB call"),
            ("jobs completed", self.completed_keys),
            ("jobs dead-lettered", self.dead_lettered_keys),
            ("  of which also completed", f"{self.completed_and_dead_lettered_keys} (one copy dead-lettered, "
                                          "its duplicate completed)"),
            ("sent = completed + dead-lettered",
             f"{self.jobs} = {self.completed_keys} + {self.dead_lettered_keys} - "
             f"{self.completed_and_dead_lettered_keys}"),
            ("LOST", self.lost),
            ("  lost jobs", len(self.lost_keys)),
            ("  messages unaccounted for", len(self.messages_unaccounted)),
            ("  messages left in the queue", self.left_in_queue),
            ("messages acknowledged", f"{self.messages_acked} ({self.outcomes['succeeded']} succeeded, "
                                      f"{self.outcomes['duplicate']} duplicates, "
                                      f"{self.outcomes['dead_lettered']} dead-lettered by the worker)"),
            ("DLQ messages by reason", dict(sorted(self.dlq_by_reason.items()))),
            ("DLQ messages without a reason", f"{self.dlq_moved_by_queue}, of which {self.dlq_moved_after_a_kill} "
                                              "had their backstop receive in a killed invocation (moved by SQS's "
                                              "own redrive: the "
                                              "backstop; the worker writes a reason on every letter)"),
            ("batches / job executions", f"{self.batches} / {self.executions}"),
            ("faults injected", dict(sorted(self.faults.items()))),
            ("side effects", self.side_effects),
            ("duplicate side effects",
             f"{self.duplicate_effects} on {self.keys_with_duplicate_effects} keys; allowed {self.duplicate_bound} "
             f"(side effects exposed by a kill {self.exposed_effects} + completion writes that "
             f"failed after their retries {self.unrecorded}); unexplained {len(self.unexplained_duplicate_keys)}"),
            ("completed without a side effect", len(self.completed_without_effect)),
            ("retry delays", f"{self.retry_delays_checked} checked against uniform(0, min(cap, base*2**(n-1))), "
                             f"{len(self.retry_delays_out_of_bounds)} out of bounds, mean delay/bound "
                             f"{self.retry_delay_mean_ratio:.3f} (0.5 expected), redelivered early "
                             f"{len(self.redelivered_early)}"),
            ("lease-held (BUSY) retries", self.busy_retries),
            ("DynamoDB throttles", f"{self.throttles_injected} injected into {self.dynamodb_requests} requests; "
                                   f"surfaced to the worker {self.store_unavailable_retries}"),
            ("DynamoDB calls failed after retries",
             f"{sum(self.doomed_calls.values())} of {self.dynamodb_calls} calls "
             f"{dict(sorted(self.doomed_calls.items()))}; botocore retried each to its limit "
             f"({self.retry_sleeps} retry sleeps, {self.retry_sleep_seconds:,.0f} s counted, not slept)"),
            ("store errors / fences lost", f"{self.store_errors} / {self.fence_lost} (store errors: writes that "
                                           f"failed after the worker's retries; {self.unrecorded} of them "
                                           "completions of jobs that ran)"),
            ("letters without evidence", f"{self.letters_without_evidence} (worker-written letters whose dlq# "
                                         "evidence write failed: operators see them as unproven)"),
            ("stale HELD records", f"{self.stale_in_progress} (left by kills whose message was then dead-lettered "
                                   "as lost; their lease has expired)"),
            ("groups", f"{self.groups} groups of {self.config.group_size}: {self.group_members} members, "
                       f"{self.groups_succeeded} succeeded, "
                       f"{self.groups - self.groups_succeeded - self.groups_waiting_for_redrive} completed with "
                       f"failures, {self.groups_waiting_for_redrive} waiting for the redrive of members SQS's backstop "
                       "moved; counts add up in each"),
            ("callbacks", f"on_complete ran {sum(n for (_, c), n in self.callback_runs.items() if c == 'on_complete')}"
                          f" times for {self.groups} groups, on_success "
                          f"{sum(n for (_, c), n in self.callback_runs.items() if c == 'on_success')} for "
                          f"{self.groups_succeeded} succeeded groups; each exactly once (runs a kill may repeat: "
                          f"{self.callbacks_exposed})"),
            ("time", f"{self.virtual_seconds:,.0f} virtual s, {self.wall_seconds:.1f} wall s"),
        ]
        width = max(len(k) for k, _ in rows)
        lines = ["chaos ledger", "=" * 12] + [f"{k.ljust(width)}  {v}" for k, v in rows]
        lines.append("RESULT: " + ("PASS" if not self.problems else "FAIL"))
        lines.extend(f"  problem: {p}" for p in self.problems)
        return "\n".join(lines)


class ChaosRun:
    """One run: set up the queues and table, enqueue, poll until drained, build the ledger."""

    def __init__(self, config: ChaosConfig, endpoint: str, clock: VirtualClock) -> None:
        import boto3
        from botocore.config import Config

        self.config = config
        self.clock = clock
        self.faults = random.Random(config.seed)
        self.throttler = Throttler(config.throttle, config.seed + 1)
        self.failer = CallFailer(config.fail, config.seed + 3)
        # The boto3 default (legacy) retry mode, stated: DynamoDB gets 10 attempts, retried from 50 ms.
        common: dict[str, Any] = {"endpoint_url": endpoint, "region_name": "us-east-1",
                                  "aws_access_key_id": "testing", "aws_secret_access_key": "testing",
                                  "config": Config(retries={"mode": "legacy"}, max_pool_connections=50)}
        self.sqs = boto3.client("sqs", **common)
        self.dynamodb = boto3.client("dynamodb", **common)
        self.dynamodb.meta.events.register("before-call.dynamodb", self.failer.before_call)
        self.dynamodb.meta.events.register("before-send.dynamodb", self.failer.before_send)
        self.dynamodb.meta.events.register("before-send.dynamodb", self.throttler)
        self.ledger = Ledger(config=config)
        self.invocation = 0
        #: key → invocations in which its side effect ran
        self.effects: dict[str, list[int]] = {}
        # Pollers run in threads: shared bookkeeping under one lock, the current invocation per thread.
        self._lock = threading.RLock()
        self._local = threading.local()
        self._busy = 0
        self._done = False
        self._enqueued = 0
        self._since_check = WAVE_CHECK_EVERY
        self._started = clock()
        self.exposed: set[str] = set()
        self.exposed_effects = 0
        #: message ids whose backstop receive (maxReceiveCount) was in a killed invocation
        self.killed_at_backstop: set[str] = set()
        #: per group, members whose letter SQS's backstop moved after a kill at that receive: never counted yet
        self.waiting_in_dlq: Counter[str] = Counter()
        #: message id → (virtual time of the retry decision, delay asked for)
        self.pending_retry: dict[str, tuple[float, float]] = {}
        self.acked: dict[str, str] = {}
        #: message id → key of every message the producer sent
        self.sent: dict[str, str] = {}
        self._ratios: list[float] = []
        #: group id → member count
        self.groups: dict[str, int] = {}

    # ------------------------------------------------------------------ setup
    def _resources(self) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.dlq_url = self.sqs.create_queue(QueueName=f"chaos-dlq-{suffix}")["QueueUrl"]
        dlq_arn = self.sqs.get_queue_attributes(QueueUrl=self.dlq_url, AttributeNames=["QueueArn"])
        # As the template: SQS's redrive is only the backstop, one receive after the worker's last attempt.
        policy = {"deadLetterTargetArn": dlq_arn["Attributes"]["QueueArn"],
                  "maxReceiveCount": str(self.config.max_attempts + 1)}
        self.queue_url = self.sqs.create_queue(
            QueueName=f"chaos-{suffix}",
            Attributes={"VisibilityTimeout": str(VISIBILITY_TIMEOUT), "RedrivePolicy": json.dumps(policy)},
        )["QueueUrl"]
        self.queue_arn = self.sqs.get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.table = f"chaos-{suffix}"
        self.dynamodb.create_table(
            TableName=self.table, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST",
        )

    def _app(self, index: int) -> Any:
        from aws_lambda_powertools import Logger

        from sqsjobs import JobApp, PermanentError

        app = JobApp(
            queue_url=self.queue_url, dlq_url=self.dlq_url, table_name=self.table,
            max_attempts=self.config.max_attempts, function_timeout=FUNCTION_TIMEOUT, lease_margin=LEASE_MARGIN,
            backoff_base=self.config.backoff_base, backoff_cap=self.config.backoff_cap,
            sqs_client=self.sqs, dynamodb_client=self.dynamodb, clock=self.clock,
            random=random.Random(self.config.seed + 2 + index), sleep=lambda seconds: None,
            emit_metrics=lambda line: None,
            # Thousands of expected job failures would drown the ledger; outcomes are read from BatchResult.
            logger=Logger(service="chaos", level="CRITICAL"),
        )
        cfg = self.config

        def fault(name: str) -> None:
            with self._lock:
                self.ledger.faults[name] += 1

        @app.job("chaos-callback", key="chaos-callback:{name}:{kind}")
        def chaos_callback(name: str, kind: str) -> None:
            # Fault-free: what the ledger checks is that it runs once per group.
            with self._lock:
                self.ledger.callback_runs[(name, kind)] += 1
            self._local.effects.append(f"callback:{name}:{kind}")

        @app.job("chaos", key="chaos:{n}")
        def chaos(n: int) -> None:
            with self._lock:
                self.ledger.executions += 1
                draw = self.faults.random()
            key = f"chaos:{n}"
            if draw < cfg.kill / 2:
                fault("killed before the side effect")
                raise Killed(key)
            draw -= cfg.kill / 2
            if draw < cfg.transient:
                fault("transient")
                raise ConnectionError(f"{key}: dependency down (injected)")
            draw -= cfg.transient
            if draw < cfg.permanent:
                fault("permanent")
                raise PermanentError(f"{key}: record gone (injected)")
            draw -= cfg.permanent
            # The side effect: what a duplicate run would repeat.
            with self._lock:
                self.effects.setdefault(key, []).append(self._local.invocation)
            self._local.effects.append(key)
            if draw < cfg.kill / 2:
                fault("killed after the side effect")
                raise Killed(key)

        return app

    def _enqueue(self, app: Any, first: int, count: int) -> None:
        """Send jobs ``first`` .. ``first + count - 1``, some twice; records message id → key in ``sent``.

        The first ``grouped`` share of the wave goes out as groups (each enqueued by ``group.enqueue()``);
        some of their members are sent twice more, with the rest of the wave.
        """
        job = app.runtime.job("chaos")
        messages = []
        size = self.config.group_size
        in_groups = int(count * self.config.grouped) // size * size
        for start in range(first, first + in_groups, size):
            messages.extend(self._enqueue_group(app, range(start, start + size)))
        for n in range(first + in_groups, first + count):
            messages.append(job.message(n=n))
            if self.faults.random() < self.config.duplicate:
                messages.append(job.message(n=n))
                self.ledger.duplicates_sent += 1
        # A duplicate lands anywhere in the wave, not always right behind its original.
        self.faults.shuffle(messages)
        report = app.enqueue_many(messages)
        if not report.ok:
            raise RuntimeError(f"the producer failed to send {len(report.failed)} messages: {report.failed[:3]}")
        self.ledger.jobs += count - in_groups
        self.ledger.messages_sent += report.sent
        self.ledger.producer_calls += report.calls
        self.sent.update({mid: messages[i].key for i, mid in report.message_ids.items()})

    def _enqueue_group(self, app: Any, numbers: range) -> list[Any]:
        """One group of ``numbers`` with both callbacks, enqueued; returns the copies to send again."""
        from sqsjobs import StoreError

        job, callback = app.runtime.job("chaos"), app.runtime.job("chaos-callback")
        name = f"g{numbers.start}"
        sent: list[tuple[list[Any], Any]] = []
        runtime = app.runtime  # a group sends its members through the app's runtime (_runtime.py)
        send_many = runtime.send_many
        runtime.send_many = lambda batch: sent.append((list(batch), send_many(batch))) or sent[-1][1]
        try:
            for tries_left in range(PRODUCER_TRIES - 1, -1, -1):
                group = app.group(on_complete=callback.message(name=name, kind="on_complete"),
                                  on_success=callback.message(name=name, kind="on_success"), name=name)
                group.add_many(job.message(n=n) for n in numbers)
                try:
                    group_id = group.enqueue()
                    break
                except StoreError:
                    # A doomed call: its records were not written and nothing was sent (workflows/_groups.py
                    # says so), so the producer tries again with a new group, as an application would.
                    if not tries_left:
                        raise
                    self.ledger.producer_retries += 1
        finally:
            del runtime.send_many
        for batch, report in sent:
            self.ledger.producer_calls += report.calls
            self.ledger.messages_sent += report.sent
            self.sent.update({mid: batch[i].key for i, mid in report.message_ids.items()})
        self.groups[group_id] = len(numbers)
        self.ledger.jobs += len(numbers)
        self.ledger.groups += 1
        self.ledger.group_members += len(numbers)
        copies = [m for m in group.messages if self.faults.random() < self.config.duplicate]
        self.ledger.duplicates_sent += len(copies)
        return copies

    # ------------------------------------------------------------------ polling
    def _record(self, message: dict[str, Any]) -> dict[str, Any]:
        """A received message in the shape Lambda's SQS poller hands to the function."""
        attrs = {}
        for name, attr in message.get("MessageAttributes", {}).items():
            attrs[name] = {"dataType": attr["DataType"], "stringValue": attr.get("StringValue")}
        return {
            "messageId": message["MessageId"], "receiptHandle": message["ReceiptHandle"], "body": message["Body"],
            "attributes": {k: str(v) for k, v in message.get("Attributes", {}).items()},
            "messageAttributes": attrs, "md5OfBody": message.get("MD5OfBody", ""), "eventSource": "aws:sqs",
            "eventSourceARN": self.queue_arn, "awsRegion": "us-east-1",
        }

    def _depth(self) -> int:
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                 "ApproximateNumberOfMessagesDelayed"]
        attrs = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=names)["Attributes"]  # type: ignore[arg-type]
        return sum(int(attrs.get(n, "0")) for n in names)

    def _queue_empty(self) -> bool:
        return self._depth() == 0

    def _poll(self, app: Any) -> None:
        """One poller (one concurrent "Lambda invocation" at a time) until the queue is drained."""
        from sqsjobs import Outcome
        from sqsjobs.testing import FakeContext

        while True:
            with self._lock:
                if self.clock() - self._started > VIRTUAL_TIME_LIMIT:
                    self.ledger.problems.append("the queue did not drain within a virtual week")
                    self._done = True
                if self._done:
                    return
                self._maybe_enqueue(app)
            response = self.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10, AttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            received = response.get("Messages", [])
            if not received:
                self._idle()
                continue
            with self._lock:
                self._busy += 1
                for message in received:
                    self._check_redelivery(message)
                self.invocation += 1
                invocation = self.invocation
            self._local.invocation = invocation
            self._local.effects = []
            event = {"Records": [self._record(m) for m in received]}
            context = FakeContext(remaining_ms=int(FUNCTION_TIMEOUT * 1000), clock=self.clock)
            batch_started = self.clock()
            try:
                result = app.process_batch(event, context)
            except Killed:
                # Lambda reports the invocation failed: every record of the batch stays in flight
                # and comes back after the visibility timeout, with its receive count spent. One at its
                # backstop receive is then moved by SQS's redrive: the worker never got to re-send it.
                with self._lock:
                    self.exposed.update(self._local.effects)
                    self.exposed_effects += len(self._local.effects)
                    self.killed_at_backstop.update(
                        m["MessageId"] for m in received
                        if int(m.get("Attributes", {}).get("ApproximateReceiveCount", 0)) > self.config.max_attempts)
                    self._busy -= 1
                self.clock.advance(BATCH_SECONDS)
                continue
            acked = []
            with self._lock:
                self.ledger.batches += 1
                self.ledger.store_errors += result.store_errors
                self.ledger.unrecorded += len(result.unrecorded)
                self.ledger.unrecorded_keys.update(result.unrecorded)
                self.ledger.fence_lost += result.fence_lost
                for d in result.deliveries:
                    self.ledger.outcomes[d.outcome.value if d.outcome else "none"] += 1
                    if d.acknowledged:
                        acked.append(d)
                        self.acked[d.message_id] = d.outcome.value if d.outcome else "none"
                        self.pending_retry.pop(d.message_id, None)
                    elif d.outcome is Outcome.RETRY:
                        self._check_delay(d, batch_started)
            self._delete(acked)
            with self._lock:
                self._busy -= 1
            self.clock.advance(BATCH_SECONDS)

    def _maybe_enqueue(self, app: Any) -> None:
        """Jobs arrive in waves while the queue is low, as from a steady producer (caller holds the lock).

        A queue of 10,000 messages would make moto (a list per queue) the thing being measured.
        """
        self._since_check += 1
        if self._enqueued >= self.config.jobs or self._since_check < WAVE_CHECK_EVERY:
            return
        self._since_check = 0
        if self._depth() < WAVE // 2:
            count = min(WAVE, self.config.jobs - self._enqueued)
            self._enqueue(app, self._enqueued, count)
            self._enqueued += count

    def _idle(self) -> None:
        """Nothing visible: move time on, but only while no invocation runs (its lease must not jump)."""
        with self._lock:
            if self._busy == 0:
                if self._queue_empty():
                    if self._enqueued >= self.config.jobs:
                        self._done = True
                    self._since_check = WAVE_CHECK_EVERY
                    return
                self.clock.advance(IDLE_STEP)
                return
        time.sleep(0.005)

    def _check_redelivery(self, message: dict[str, Any]) -> None:
        """A retried message must stay invisible for the whole (whole-second) delay it was given."""
        pending = self.pending_retry.pop(message["MessageId"], None)
        if pending is None:
            return
        decided_at, delay = pending
        if self.clock() - decided_at < int(delay):
            self.ledger.redelivered_early.append(
                f"{message['MessageId']}: back after {self.clock() - decided_at:.1f} s, delay {delay:.1f} s")

    def _check_delay(self, d: Any, batch_started: float) -> None:
        from sqsjobs._backoff import BackoffPolicy

        # The visibility change happened at or after the batch began (another poller may have moved
        # the clock since), so "back no sooner than start + delay" is the check that always holds.
        self.pending_retry[d.message_id] = (batch_started, d.delay)
        message = str(d.error)
        if "being processed by another invocation" in message:
            # A live lease elsewhere: the delay follows the lease, not the backoff.
            self.ledger.busy_retries += 1
            return
        if "idempotency store unavailable" in message:
            self.ledger.store_unavailable_retries += 1
        if d.duration_ms is None:
            # A later copy of a key in the batch: it did not run, and comes back with its first copy's delay.
            return
        policy = BackoffPolicy(base=self.config.backoff_base, cap=self.config.backoff_cap)
        bound = policy.bound(d.attempt)
        self.ledger.retry_delays_checked += 1
        if not 0 <= d.delay <= bound:
            self.ledger.retry_delays_out_of_bounds.append(f"{d.message_id}: attempt {d.attempt} delay {d.delay}")
        if bound:
            self._ratios.append(d.delay / bound)

    def _delete(self, acked: list[Any]) -> None:
        for i in range(0, len(acked), 10):
            chunk = acked[i:i + 10]
            entries = [{"Id": str(j), "ReceiptHandle": d.receipt_handle} for j, d in enumerate(chunk)]
            response = self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=entries)  # type: ignore[arg-type]
            if response.get("Failed"):
                self.ledger.problems.append(f"DeleteMessageBatch failed: {response['Failed']}")

    # ------------------------------------------------------------------ ledger
    def _drain_dlq(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        while True:
            # A long visibility: each message is read once, this is the end of the run.
            batch = self.sqs.receive_message(
                QueueUrl=self.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=43_200,
                AttributeNames=["All"], MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not batch:
                return messages
            messages.extend(batch)

    def _scan_table(self) -> dict[str, dict[str, Any]]:
        from sqsjobs.store._statement_trust import WITNESS

        items: dict[str, dict[str, Any]] = {}
        kwargs: dict[str, Any] = {"TableName": self.table, "ConsistentRead": True}
        while True:
            page = self.dynamodb.scan(**kwargs)
            for item in page.get("Items", []):
                if item["pk"]["S"] != WITNESS:  # the store's probe's item (store/_statement_trust.py), no job's
                    items[item["pk"]["S"]] = item
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _ledger(self, sent: dict[str, str]) -> None:
        from sqsjobs.worker._dead_letters import evidence_key

        lg = self.ledger
        keys = set(sent.values())
        items = self._scan_table()
        completed = {k for k, item in items.items()
                     if item["status"]["S"] == "DONE" and item.get("outcome", {}).get("S") == "succeeded"}
        held = [item for item in items.values() if item["status"]["S"] == "HELD"]
        lg.stale_in_progress = sum(1 for item in held if float(item["lease_until"]["N"]) < self.clock())
        live = len(held) - lg.stale_in_progress
        if live:
            lg.problems.append(f"{live} records still hold a live lease after the run")

        dead_keys: set[str] = set()
        in_dlq: set[str] = set()
        for message in self._drain_dlq():
            attrs = message.get("MessageAttributes", {})
            try:
                key = json.loads(message["Body"])["key"]
            except (ValueError, KeyError, TypeError):
                key = "?"
            dead_keys.add(key)
            reason = attrs.get(REASON_ATTRIBUTE, {}).get("StringValue")
            if reason is None:
                # The queue's redrive policy moved it (same message id): the worker re-sends what it has not
                # given up on and dead-letters the rest itself (a last attempt that never reported: "lost"),
                # so SQS's backstop should never have to.
                lg.dlq_moved_by_queue += 1
                lg.dlq_moved_after_a_kill += message["MessageId"] in self.killed_at_backstop
                in_dlq.add(message["MessageId"])
                if message["MessageId"] in self.killed_at_backstop:
                    # No worker saw its end, so its group has not counted it: the group waits for its
                    # redrive (docs/runbook.md, "A job group (or a chain) does not finish").
                    group = _member_of(message["Body"])
                    if group is not None:
                        self.waiting_in_dlq[group] += 1
                continue
            lg.dlq_by_reason[reason] += 1
            original = attrs.get(ORIGINAL_ID_ATTRIBUTE, {}).get("StringValue", "")
            in_dlq.add(original)
            lg.letters_without_evidence += evidence_key(message["MessageId"]) not in items
            missing = [a for a in ("sqsjobs.error_type", "sqsjobs.error_message", "sqsjobs.attempts",
                                   "sqsjobs.source_queue", "sqsjobs.job") if a not in attrs]
            if reason not in REASONS or missing:
                lg.problems.append(f"DLQ message {message['MessageId']} has reason {reason!r}, missing {missing}")

        lg.completed_keys = len(completed & keys)
        lg.dead_lettered_keys = len(dead_keys & keys)
        lg.completed_and_dead_lettered_keys = len(completed & dead_keys & keys)
        lg.lost_keys = sorted(keys - completed - dead_keys)
        lg.messages_acked = len(self.acked)
        lg.messages_unaccounted = sorted(mid for mid in sent if mid not in self.acked and mid not in in_dlq)
        lg.left_in_queue = 0 if self._queue_empty() else 1

        lg.side_effects = sum(len(v) for v in self.effects.values())
        duplicated = {k for k, runs in self.effects.items() if len(runs) > 1}
        lg.keys_with_duplicate_effects = len(duplicated)
        lg.duplicate_effects = sum(len(self.effects[k]) - 1 for k in duplicated)
        lg.exposed_keys = len(self.exposed)
        # The crash window: a side effect done in an invocation that was then killed, before its record was
        # written (completions are gathered, worker/_record_writes.py), may repeat once. The slack: a completion
        # write that failed even after botocore's retries leaves its key to run again (the lease bounds it), and
        # the batch lists each such key in BatchResult.unrecorded.
        lg.exposed_effects = self.exposed_effects
        lg.duplicate_bound = lg.exposed_effects + lg.unrecorded
        lg.unexplained_duplicate_keys = sorted(duplicated - self.exposed - lg.unrecorded_keys)
        self._check_groups(app_status=self._status_app())
        # A group's member runs under its key scoped to the group; its side effect is the job's own key.
        lg.completed_without_effect = sorted(k for k in completed & keys if k.split("@")[0] not in self.effects)
        lg.retry_delay_mean_ratio = sum(self._ratios) / len(self._ratios) if self._ratios else 0.0
        lg.throttles_injected = self.throttler.injected
        lg.dynamodb_requests = self.throttler.requests
        lg.doomed_calls = Counter(self.failer.doomed)
        lg.dynamodb_calls = self.failer.calls

        checks: list[tuple[bool, str]] = [
            (not lg.lost_keys, f"{len(lg.lost_keys)} jobs lost: {lg.lost_keys[:5]}"),
            (not lg.messages_unaccounted, f"{len(lg.messages_unaccounted)} messages unaccounted for"),
            (not lg.left_in_queue, "messages left in the queue"),
            (lg.completed_keys + lg.dead_lettered_keys - lg.completed_and_dead_lettered_keys == lg.jobs,
             "sent != completed + dead-lettered"),
            (lg.dlq_moved_by_queue == lg.dlq_moved_after_a_kill,
             f"{lg.dlq_moved_by_queue - lg.dlq_moved_after_a_kill} DLQ messages without a reason, and not "
             "explained by a kill at their backstop receive"),
            (not lg.unexplained_duplicate_keys,
             f"duplicate side effects not explained by a kill: {lg.unexplained_duplicate_keys[:5]}"),
            (lg.duplicate_effects <= lg.duplicate_bound,
             f"{lg.duplicate_effects} duplicate side effects, more than the crash window allows "
             f"({lg.duplicate_bound}: kills after a side effect + completion writes that failed)"),
            (not lg.completed_without_effect, f"completed without a side effect: {lg.completed_without_effect[:5]}"),
            (not lg.retry_delays_out_of_bounds, f"retry delays out of bounds: {lg.retry_delays_out_of_bounds[:5]}"),
            (not lg.redelivered_early, f"redelivered before the delay: {lg.redelivered_early[:5]}"),
            # Without doomed calls, botocore absorbs every throttle: nothing reaches the worker.
            (self.config.fail > 0 or lg.store_unavailable_retries == 0, "throttling surfaced past botocore's retries"),
            (self.config.fail > 0 or lg.store_errors == 0, "store errors with no DynamoDB call failing"),
            (lg.fence_lost == 0, "lost fences (a lease ran out mid-batch: the clock stands still while one runs)"),
            (self.config.throttle == 0 or lg.throttles_injected > 0, "no throttling was injected"),
            (self.config.fail == 0 or sum(lg.doomed_calls.values()) > 0, "no DynamoDB call was made to fail"),
        ]
        lg.problems.extend(message for ok, message in checks if not ok)

    def _status_app(self) -> Any:
        from sqsjobs import JobApp

        return JobApp(table_name=self.table, dynamodb_client=self.dynamodb, queue_url=self.queue_url,
                      emit_metrics=lambda line: None)

    def _check_groups(self, app_status: Any) -> None:
        """Each group: every member counted once, the state its counts say, each callback run exactly once."""
        lg = self.ledger
        names = {}
        for group_id, size in self.groups.items():
            status = app_status.group_status(group_id)
            if status is None:
                lg.problems.append(f"group {group_id} has no record")
                continue
            names[status.name] = status
            waiting = self.waiting_in_dlq[group_id]
            if waiting and status.pending:  # pending 0: a duplicate send of those members ran and was counted
                # Explained: only a redrive of those letters can count them, and then the group finishes.
                lg.groups_waiting_for_redrive += 1
                if (status.total, status.pending, status.state) != (size, waiting, "running") or any(
                        lg.callback_runs[(status.name, kind)] for kind in ("on_complete", "on_success")):
                    lg.problems.append(f"group {status.name}: {waiting} member(s) moved by SQS's backstop, but "
                                       f"pending {status.pending}, state {status.state}")
                continue
            if (status.total, status.pending, status.succeeded + status.failed) != (size, 0, size):
                lg.problems.append(f"group {status.name}: total {status.total}, pending {status.pending}, "
                                   f"succeeded {status.succeeded} + failed {status.failed}, expected {size} members")
            expected_state = "succeeded" if status.failed == 0 else "completed_with_failures"
            lg.groups_succeeded += status.state == "succeeded"
            if status.state != expected_state:
                lg.problems.append(f"group {status.name} is {status.state}, its counts say {expected_state}")
            for kind, due in (("on_complete", 1), ("on_success", int(status.state == "succeeded"))):
                runs = lg.callback_runs[(status.name, kind)]
                exposed = (f"callback:{status.name}:{kind}" in self.exposed
                           or f"chaos-callback:{status.name}:{kind}" in lg.unrecorded_keys)
                lg.callbacks_exposed += int(exposed and runs > due)
                if runs != due and not (exposed and runs > due):
                    lg.problems.append(f"group {status.name}: {kind} ran {runs} times, expected {due}")
        stray = [f"{name}:{kind}" for name, kind in lg.callback_runs if name not in names]
        if stray:
            lg.problems.append(f"callbacks of unknown groups ran: {stray[:5]}")

    def run(self) -> Ledger:
        """Set up, enqueue, poll until drained, and build the ledger."""
        wall = time.perf_counter()
        start = self.clock()
        self._resources()
        apps = [self._app(i) for i in range(self.config.pollers)]
        errors: list[BaseException] = []

        def poller(app: Any) -> None:
            try:
                self._poll(app)
            except BaseException as error:  # reported below: a crashed poller must fail the run
                errors.append(error)
                with self._lock:
                    self._done = True

        threads = [threading.Thread(target=poller, args=(app,), name=f"chaos-poller-{i}") for i, app in enumerate(apps)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        # The run is over: the ledger's own reads (scan, DLQ, group status) must not be made to fail.
        self.failer.rate = 0.0
        self._ledger(self.sent)
        self.ledger.virtual_seconds = self.clock() - start
        self.ledger.wall_seconds = time.perf_counter() - wall
        return self.ledger


def _member_of(body: str) -> str | None:
    """The group id a message's envelope names (``member_of.group``), if any."""
    try:
        member_of = json.loads(body).get("member_of")
    except (ValueError, AttributeError):
        return None
    group = member_of.get("group") if isinstance(member_of, dict) else None
    return group if isinstance(group, str) else None


def run_chaos(config: ChaosConfig) -> Ledger:
    """Start a moto server, run once against it, stop it; returns the ledger."""
    clock = VirtualClock()
    with moto_server() as endpoint, moto_sqs_clock(clock), counted_retry_sleeps() as sleeps:
        ledger = ChaosRun(config, endpoint, clock).run()
    ledger.retry_sleeps, ledger.retry_sleep_seconds = sleeps.count, sleeps.seconds
    return ledger


def main(argv: list[str] | None = None, print_: Callable[[str], None] = print) -> int:
    """``make chaos``: run, print the ledger, exit 1 on any loss or broken promise."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--pollers", type=int, default=2)
    parser.add_argument("--grouped", type=float, default=ChaosConfig.grouped,
                        help="the share of jobs that are members of job groups")
    parser.add_argument("--fail", type=float, default=ChaosConfig.fail,
                        help="the share of DynamoDB calls that fail after botocore's retries")
    parser.add_argument("--write", metavar="PATH", help="write the ledger to this generated file (CHAOS.md)")
    parser.add_argument("--model-junit", metavar="PATH",
                        help="the model run's JUnit XML (make chaos runs it first): its result goes in the file")
    args = parser.parse_args(argv)
    # Nothing here may reach AWS: fake credentials, and the endpoint is always the local server.
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(name, value)
    ledger = run_chaos(ChaosConfig(jobs=args.jobs, seed=args.seed, pollers=args.pollers, grouped=args.grouped,
                                   fail=args.fail))
    print_(ledger.render())
    if args.write:
        from chaos.ledger_file import write_ledger

        write_ledger(args.write, ledger, model_junit=args.model_junit)
        print_(f"wrote {args.write}")
    return 0 if not ledger.problems else 1


if __name__ == "__main__":
    sys.exit(main())

