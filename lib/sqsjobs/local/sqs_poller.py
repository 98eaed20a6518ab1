"""Lambda's SQS event source mapping, emulated against the moto server.

What it reproduces (and tests pin down):
- batches of up to ``BatchSize``, gathered for up to the batching window;
- at most ``ScalingConfig.MaximumConcurrency`` invocations in flight;
- a failed invocation (raised, timed out, crashed) deletes nothing: the batch
  comes back after the queue's visibility timeout;
- with ``ReportBatchItemFailures`` only the listed messages stay; a malformed
  response (unknown, empty or missing ``itemIdentifier``, wrong shape) fails
  the whole batch, as on AWS;
- the move to the DLQ is left to the queue's own redrive policy (moto applies
  ``maxReceiveCount`` on receive, as SQS does).
A handler that cannot even be imported pauses the mapping: the messages are
made visible again and wait, unprocessed, until the import works.
"""

from __future__ import annotations

import base64
import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqsjobs.local.filters import matches_any, sqs_view
from sqsjobs.local.invoker import FunctionPool, InvocationResult
from sqsjobs.local.model import SqsMapping

_WAIT_S = 1  # long-poll length: short enough that Ctrl-C is prompt
_IMPORT_RETRY_S = 2.0


@dataclass
class MappingStats:
    """Counters of one mapping, read by ``drain()``, the demo and tests.

    Example:
        >>> MappingStats().in_flight
        0
    """

    batches: int = 0
    received: int = 0
    deleted: int = 0
    item_failures: int = 0
    failed_batches: int = 0
    timeouts: int = 0
    malformed_responses: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0
    last_activity: float = field(default_factory=time.monotonic)


def to_lambda_record(message: dict[str, Any], mapping: SqsMapping, region: str) -> dict[str, Any]:
    """One ReceiveMessage entry in the shape Lambda hands to the function."""
    attributes = {}
    for name, value in message.get("MessageAttributes", {}).items():
        binary = value.get("BinaryValue")
        attributes[name] = {
            "stringValue": value.get("StringValue"),
            "binaryValue": base64.b64encode(binary).decode() if binary is not None else None,
            "stringListValues": value.get("StringListValues", []),
            "binaryListValues": [base64.b64encode(b).decode() for b in value.get("BinaryListValues", [])],
            "dataType": value["DataType"],
        }
        attributes[name] = {k: v for k, v in attributes[name].items() if v is not None}
    record = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes", {})),
        "messageAttributes": attributes,
        "md5OfBody": message.get("MD5OfBody"),
        "eventSource": "aws:sqs",
        "eventSourceARN": mapping.queue_arn,
        "awsRegion": region,
    }
    if "MD5OfMessageAttributes" in message:
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    return record


def failed_ids(result: InvocationResult, batch_ids: list[str], report_failures: bool) -> tuple[set[str], bool]:
    """Which message ids of the batch stay on the queue, and whether the response was malformed.

    Example:
        >>> ok = InvocationResult(request_id="r", ok=True, payload={"batchItemFailures": [{"itemIdentifier": "b"}]})
        >>> failed_ids(ok, ["a", "b"], True)
        ({'b'}, False)
        >>> bad = InvocationResult(request_id="r", ok=True, payload={"batchItemFailures": [{"itemIdentifier": ""}]})
        >>> failed_ids(bad, ["a", "b"], True) == ({"a", "b"}, True)
        True
    """
    everything = set(batch_ids)
    if result.failed:
        return everything, False
    if not report_failures:
        return set(), False
    payload = result.payload
    if payload is None or payload == {} or payload == "":
        return set(), False
    if not isinstance(payload, dict):
        return everything, True
    failures = payload.get("batchItemFailures")
    if failures is None or failures == []:
        return set(), False
    if not isinstance(failures, list):
        return everything, True
    kept: set[str] = set()
    for item in failures:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not isinstance(identifier, str) or identifier not in everything:
            return everything, True
        kept.add(identifier)
    return kept, False


class SqsPoller:
    """Runs one SQS mapping until ``stop()``."""

    def __init__(
        self,
        mapping: SqsMapping,
        pool: FunctionPool,
        sqs: Any,
        *,
        region: str,
        report: Callable[[str, str], None],
        healthy: Callable[[], bool] = lambda: True,
        max_receive_count: int = 0,
    ) -> None:
        self.mapping = mapping
        self.max_receive_count = max_receive_count
        # message id -> SentTimestamp (s) of messages taken but not yet deleted,
        # the basis of ApproximateAgeOfOldestMessage (moto does not report it).
        self._outstanding: dict[str, float] = {}
        self.pool = pool
        self.sqs = sqs
        self.region = region
        self.report = report
        self.healthy = healthy
        self.stats = MappingStats()
        self._slots = threading.BoundedSemaphore(max(1, mapping.max_concurrency))
        self._stop = threading.Event()
        #: set while a test holds the mapping (``LocalCloud.paused``): no batch is taken, one in hand goes back
        self._paused = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._receiver = threading.Thread(target=self._run, name=f"sqs-{mapping.logical_id}", daemon=True)

    def start(self) -> None:
        """Begin polling in a background thread."""
        self._receiver.start()

    def halt(self) -> None:
        """Take no new batches from now on (the current long poll may still end)."""
        self._stop.set()

    def pause(self) -> None:
        """Start no invocation until ``resume()`` (a batch a long poll brings meanwhile goes straight back)."""
        self._paused.set()

    def resume(self) -> None:
        """Take batches again after ``pause()``."""
        self._paused.clear()

    def stop(self) -> None:
        """Stop receiving and wait for the invocations in flight."""
        self.halt()
        self._receiver.join(timeout=_WAIT_S + 5)
        for thread in list(self._threads):
            thread.join(timeout=self.pool.spec.timeout + 5)

    @property
    def idle(self) -> bool:
        """True when no invocation of this mapping is running."""
        with self._lock:
            return self.stats.in_flight == 0

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.healthy() or self._paused.is_set():
                self._stop.wait(0.1 if self._paused.is_set() else 0.5)
                continue
            if self.pool.init_error is not None and not self._import_recovered():
                self._stop.wait(_IMPORT_RETRY_S)
                continue
            if not self._slots.acquire(timeout=0.5):
                continue
            try:
                messages = self._gather()
            except Exception as exc:  # the server may be gone; the health check reports it
                self._slots.release()
                self.report("error", f"{self.mapping.logical_id}: receive failed: {exc}")
                self._stop.wait(1.0)
                continue
            if not messages:
                self._slots.release()
                continue
            if self._stop.is_set() or self._paused.is_set():
                # Stopping or paused: hand the batch straight back instead of starting an invocation.
                self._slots.release()
                self._make_visible(messages)
                continue
            with self._lock:
                for m in messages:
                    self._outstanding[m["MessageId"]] = int(m.get("Attributes", {}).get("SentTimestamp", 0)) / 1000
                self.stats.in_flight += 1
                self.stats.peak_in_flight = max(self.stats.peak_in_flight, self.stats.in_flight)
                self.stats.received += len(messages)
                self.stats.last_activity = time.monotonic()
            thread = threading.Thread(
                target=self._invoke, args=(messages,), name=f"invoke-{self.mapping.logical_id}", daemon=True
            )
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            thread.start()

    def _receive(self, limit: int, wait: int) -> list[dict[str, Any]]:
        response = self.sqs.receive_message(
            QueueUrl=self.mapping.queue_url,
            MaxNumberOfMessages=min(10, limit),
            WaitTimeSeconds=wait,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages: list[dict[str, Any]] = response.get("Messages", [])
        return messages

    def _gather(self) -> list[dict[str, Any]]:
        """One batch: a long poll, then more polls while the batching window lasts."""
        batch = self._receive(self.mapping.batch_size, _WAIT_S)
        if not batch or self.mapping.batching_window_s <= 0:
            return batch
        window_end = time.monotonic() + self.mapping.batching_window_s
        while len(batch) < self.mapping.batch_size and not self._stop.is_set():
            remaining = window_end - time.monotonic()
            if remaining <= 0:
                break
            batch += self._receive(self.mapping.batch_size - len(batch), min(_WAIT_S, max(0, int(remaining))))
        return batch

    def _invoke(self, messages: list[dict[str, Any]]) -> None:
        try:
            records = [to_lambda_record(m, self.mapping, self.region) for m in messages]
            wanted = [r for r in records if matches_any(list(self.mapping.filters), sqs_view(r))]
            if len(wanted) < len(records):
                # Lambda deletes the messages its filters reject, without an invocation.
                keep_ids = {r["messageId"] for r in wanted}
                dropped = [m for m in messages if m["MessageId"] not in keep_ids]
                self._delete(dropped)
                self._forget(dropped, set())
                messages = [m for m in messages if m["MessageId"] in keep_ids]
            if not wanted:
                return
            result = self.pool.invoke({"Records": wanted})
            self._settle(messages, result)
        except Exception as exc:  # keep the mapping alive; the batch returns on its own
            self.report("error", f"{self.mapping.logical_id}: {exc}")
        finally:
            with self._lock:
                self.stats.in_flight -= 1
                self.stats.batches += 1
                self.stats.last_activity = time.monotonic()
            self._slots.release()

    def _settle(self, messages: list[dict[str, Any]], result: InvocationResult) -> None:
        name = self.mapping.logical_id
        ids = [m["MessageId"] for m in messages]
        if result.init_error:
            self._release_unprocessed(messages, result)
            return
        keep, malformed = failed_ids(result, ids, self.mapping.report_batch_item_failures)
        with self._lock:
            if result.failed:
                self.stats.failed_batches += 1
                self.stats.timeouts += int(result.timed_out)
            self.stats.malformed_responses += int(malformed)
            self.stats.item_failures += len(keep) if not result.failed and not malformed else 0
        if result.failed and result.error_type != "Shutdown":
            self.report(
                "warn",
                f"{name}: invocation {result.request_id[:8]} failed ({result.error_type}: {result.error_message}); "
                f"{len(ids)} message(s) return after the visibility timeout",
            )
        elif malformed:
            self.report(
                "warn",
                f"{name}: malformed batch response {str(result.payload)[:200]}; the whole batch of {len(ids)} "
                "counts as failed (as on AWS)",
            )
        self._forget(messages, keep)
        self._delete([m for m in messages if m["MessageId"] not in keep])

    def _delete(self, done: list[dict[str, Any]]) -> None:
        for start in range(0, len(done), 10):
            chunk = done[start : start + 10]
            response = self.sqs.delete_message_batch(
                QueueUrl=self.mapping.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)],
            )
            with self._lock:
                self.stats.deleted += len(response.get("Successful", []))

    def _forget(self, messages: list[dict[str, Any]], keep: set[str]) -> None:
        """Stop tracking deleted messages, and kept ones whose next receive moves them to the DLQ."""
        with self._lock:
            for m in messages:
                count = int(m.get("Attributes", {}).get("ApproximateReceiveCount", 1))
                last_chance = 0 < self.max_receive_count <= count
                if m["MessageId"] not in keep or last_chance:
                    self._outstanding.pop(m["MessageId"], None)

    def oldest_sent(self) -> float | None:
        """SentTimestamp (epoch s) of the oldest message taken and not yet gone, if any."""
        with self._lock:
            return min(self._outstanding.values(), default=None)

    def _release_unprocessed(self, messages: list[dict[str, Any]], result: InvocationResult) -> None:
        """The handler cannot load: say why once (in one line), put the messages back untouched."""
        self._report_import(result)
        self._make_visible(messages)

    def _report_import(self, failure: InvocationResult) -> None:
        if self.pool.report_once(failure):
            self.report("error", f"{self.pool.spec.logical_id}: {failure.one_line()}; cannot import handler "
                                 f"{self.pool.spec.handler}: polling paused, messages stay on the queue")

    def _make_visible(self, messages: list[dict[str, Any]]) -> None:
        for message in messages:
            with contextlib.suppress(Exception):
                self.sqs.change_message_visibility(
                    QueueUrl=self.mapping.queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                )

    def _import_recovered(self) -> bool:
        failure = self.pool.warm()
        if failure is None:
            self.report("info", f"{self.pool.spec.logical_id}: handler imports again; polling resumed")
            self.pool.imported()
            return True
        self._report_import(failure)
        return False
