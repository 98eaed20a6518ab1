"""AWS resources for tests, shaped like the template's (imported by conftests and tests)."""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass
from typing import Any

MAX_ATTEMPTS = 3


@dataclass
class Aws:
    sqs: Any
    dynamodb: Any
    queue_url: str
    dlq_url: str
    table: str


def create_table(dynamodb: Any, name: str) -> None:
    # moto's PartiQL is wrong for sqsjobs' statements: the emulation the local cloud uses answers them.
    from sqsjobs.local.moto_partiql import install

    install()
    # The same key schema and TTL attribute as the template's idempotency table.
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"}
    )


def trust_statements(dynamodb: Any, table: str) -> None:
    """Send the store's probe now (store/_statement_trust.py), so a test counting a batch's calls on this
    client counts the batch's own; what the probe costs is tested in tests/integration/test_statement_trust.py.
    It leaves its witness item (``sqsjobs#partiql``) in ``table``: only idempotency tables get one."""
    from sqsjobs.store._statement_trust import StatementTrust

    assert StatementTrust.of(dynamodb, table).allows(), "the statement emulation did not pass the store's probe"


def create_queues(sqs: Any, name: str, *, fifo: bool = False, max_attempts: int = MAX_ATTEMPTS) -> tuple[str, str]:
    suffix = ".fifo" if fifo else ""
    extra = {"FifoQueue": "true"} if fifo else {}
    dlq_url = sqs.create_queue(QueueName=f"{name}-dlq{suffix}", Attributes={**extra})["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    # As the template: SQS's redrive is the backstop, one receive after the worker's last attempt.
    queue_url = sqs.create_queue(
        QueueName=f"{name}{suffix}",
        Attributes={
            **extra,
            "VisibilityTimeout": "120",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_attempts + 1)}),
        },
    )["QueueUrl"]
    return queue_url, dlq_url


#: how long a call waits for the rest of its wave before the gate gives up (a failing worker only)
HANG_BOUND = 30.0


class CallRecorder:
    """DynamoDB calls of a client, ordered through botocore's event hooks (never timed).

    A "sequential round trip" is a link in the longest chain of calls where each
    call starts only after the previous one answered. Calls are ordered by a
    counter bumped in ``before-send`` and ``after-call``. With ``wave=n`` every
    call waits in ``before-send`` until ``n`` calls have arrived (a gate, not a
    sleep), so the calls a worker makes in parallel overlap however late a loaded
    machine schedules their threads; ``wave=1`` (the default) only records.
    """

    def __init__(self, client: Any, wave: int = 1, gated: frozenset[str] | None = None) -> None:
        #: the operations the gate holds (None: all); others (a batch's one statement call) pass at once
        self.gated = gated
        self.counter = itertools.count()
        self.lock = threading.Condition()
        self.calls: list[dict[str, Any]] = []
        self.wave = wave
        self.arrived = 0
        self.broken_waves: set[int] = set()
        self._open: dict[int, dict[str, Any]] = {}
        events = client.meta.events
        events.register("before-send.dynamodb.*", self._before_send)
        events.register("after-call.dynamodb.*", self._after_call)

    def _before_send(self, request: Any, **kwargs: Any) -> None:
        target = str(request.headers.get("X-Amz-Target", b"") or "")
        with self.lock:
            call = {"start": next(self.counter), "op": None}
            self._open[threading.get_ident()] = call
            if self.gated is not None and not any(target.endswith(f".{op}") or target.endswith(f".{op}'")
                                                  for op in self.gated):
                return
            wave = self.arrived // self.wave
            self.arrived += 1
            self.lock.notify_all()
            filled = self.lock.wait_for(lambda: self.arrived >= (wave + 1) * self.wave or wave in self.broken_waves,
                                        timeout=HANG_BOUND)
            if not filled:
                self.broken_waves.add(wave)  # the rest of this wave is not coming: let the others through
                self.lock.notify_all()

    def _after_call(self, model: Any, **kwargs: Any) -> None:
        with self.lock:
            call = self._open.pop(threading.get_ident())
            call["end"] = next(self.counter)
            call["op"] = model.name
            self.calls.append(call)

    def sequential_round_trips(self) -> int:
        # Longest chain a1 -> a2 -> ... with a(i+1).start > a(i).end (interval-order longest path).
        calls = sorted(self.calls, key=lambda c: c["end"])
        depth: list[int] = []
        for i, call in enumerate(calls):
            before = [depth[j] for j in range(i) if calls[j]["end"] < call["start"]]
            depth.append(1 + max(before, default=0))
        return max(depth, default=0)


class Serialized:
    """A boto3 client whose calls run one at a time, as real DynamoDB requests are atomic.

    moto's in-process mock is not: a transaction snapshots the table and a
    cancelled one restores its snapshot, undoing what a concurrent request
    wrote meanwhile. The worker's writes run on a thread pool, so tests that
    race transactions on one item (a group's counter) wrap the client in this
    (the local cloud's server serializes DynamoDB the same way:
    ``sqsjobs.local.serial_moto``).
    """

    def __init__(self, client: Any) -> None:
        import threading

        self._client = client
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attribute(*args, **kwargs)

        return call


def prove_letter(store: Any, dlq_message_id: str, *, original: str, job: str = "invoice-email",
                 key: str | None = None, reason: str = "exhausted", error_type: str = "TimeoutError",
                 error_message: str = "boom", attempts: int = 3, source_queue: str = "",
                 first_receive_ms: int = 0, redrives: int = 0) -> None:
    """Write what the worker writes once it dead-lettered ``original`` as the DLQ copy ``dlq_message_id``.

    Its evidence item (``worker/_dead_letters.py``'s own builder), and with ``redrives`` the count a
    redrive left for ``original``.
    """
    from sqsjobs.worker._dead_letters import DeadLetter, Reason, evidence_of, redrive_record

    letter = DeadLetter(message_id=original, body="{}", reason=Reason(reason), error_type=error_type,
                        error_message=error_message, job=job, attempts=attempts,
                        first_receive_time=first_receive_ms, source_queue=source_queue, source_attributes={},
                        key=key)
    ops = [evidence_of(letter, dlq_message_id, now=0.0, expires_at=FAR_FUTURE)]
    if redrives:
        ops.append(redrive_record(original, count=redrives, redriven_from="earlier", job=job, now=0.0,
                                  expires_at=FAR_FUTURE))
    written = store.write_many(ops)
    assert all(w.ok for w in written), written


#: a TTL nothing reaches during a test
FAR_FUTURE = 4_000_000_000.0
