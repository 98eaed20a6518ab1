"""Lambda's DynamoDB stream event source mapping, emulated against moto.

Per shard, in order: a batch of up to ``BatchSize`` records goes to the
function; on success the iterator advances. On failure the same records are
retried (up to ``MaximumRetryAttempts``, -1 = until they expire, as on AWS);
with ``ReportBatchItemFailures`` the shard resumes at the first reported
sequence number, so records before it are not delivered again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqsjobs.local.invoker import FunctionPool, InvocationResult
from sqsjobs.local.model import StreamMapping

_IDLE_POLL_S = 0.5
_RETRY_PAUSE_S = 0.5


def to_lambda_record(record: dict[str, Any], mapping: StreamMapping) -> dict[str, Any]:
    """A GetRecords entry in the shape Lambda hands to the function (epoch seconds, source ARN)."""
    out = dict(record)
    change = dict(out.get("dynamodb", {}))
    created = change.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        change["ApproximateCreationDateTime"] = created.timestamp()
    out["dynamodb"] = change
    out["eventSourceARN"] = mapping.stream_arn
    return out


def first_failure(result: InvocationResult, sequence_numbers: list[str], report: bool) -> str | None:
    """The sequence number to resume from, or ``None`` when the whole batch succeeded.

    Example:
        >>> ok = InvocationResult(request_id="r", ok=True, payload={"batchItemFailures": [{"itemIdentifier": "2"}]})
        >>> first_failure(ok, ["1", "2", "3"], True)
        '2'
    """
    if result.failed:
        return sequence_numbers[0]
    if not report or not isinstance(result.payload, dict):
        return None
    failures = result.payload.get("batchItemFailures") or []
    if not isinstance(failures, list):
        return sequence_numbers[0]
    positions = []
    for item in failures:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        if identifier not in sequence_numbers:
            return sequence_numbers[0]  # malformed: the whole batch failed
        positions.append(sequence_numbers.index(identifier))
    return sequence_numbers[min(positions)] if positions else None


class StreamPoller:
    """Runs one stream mapping (every shard) until ``stop()``."""

    def __init__(
        self,
        mapping: StreamMapping,
        pool: FunctionPool,
        streams: Any,
        *,
        report: Callable[[str, str], None],
        healthy: Callable[[], bool] = lambda: True,
    ) -> None:
        self.mapping = mapping
        self.pool = pool
        self.streams = streams
        self.report = report
        self.healthy = healthy
        self.delivered = 0
        self.in_flight = 0
        self.pending = True  # unknown until the first empty read
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"stream-{mapping.logical_id}", daemon=True)

    @property
    def idle(self) -> bool:
        """True when the last read found nothing and no invocation runs."""
        return not self.pending and self.in_flight == 0

    def start(self) -> None:
        """Begin polling in a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop after the invocation in flight."""
        self._stop.set()
        self._thread.join(timeout=self.pool.spec.timeout + 5)

    def _run(self) -> None:
        iterators: dict[str, str] = {}
        while not self._stop.is_set():
            if not self.healthy():
                self._stop.wait(0.5)
                continue
            try:
                if not iterators:
                    iterators = self._open_shards()
                got_any = False
                for shard, iterator in list(iterators.items()):
                    next_iterator, delivered = self._poll_shard(shard, iterator)
                    got_any = got_any or delivered
                    if next_iterator is None:
                        del iterators[shard]
                    else:
                        iterators[shard] = next_iterator
                self.pending = got_any
                if not got_any:
                    self._stop.wait(_IDLE_POLL_S)
            except Exception as exc:  # server trouble: report, keep the mapping alive
                self.report("error", f"{self.mapping.logical_id}: {exc}")
                iterators = {}
                self._stop.wait(1.0)

    def _open_shards(self) -> dict[str, str]:
        description = self.streams.describe_stream(StreamArn=self.mapping.stream_arn)["StreamDescription"]
        iterators = {}
        for shard in description.get("Shards", []):
            iterators[shard["ShardId"]] = self.streams.get_shard_iterator(
                StreamArn=self.mapping.stream_arn, ShardId=shard["ShardId"],
                ShardIteratorType=self.mapping.starting_position,
            )["ShardIterator"]
        return iterators

    def _poll_shard(self, shard: str, iterator: str) -> tuple[str | None, bool]:
        response = self.streams.get_records(ShardIterator=iterator, Limit=self.mapping.batch_size)
        records = response.get("Records", [])
        if not records:
            return response.get("NextShardIterator"), False
        attempts = 0
        while not self._stop.is_set():
            numbers = [r["dynamodb"]["SequenceNumber"] for r in records]
            self.in_flight = 1
            try:
                result = self.pool.invoke({"Records": [to_lambda_record(r, self.mapping) for r in records]})
            finally:
                self.in_flight = 0
            resume = first_failure(result, numbers, self.mapping.report_batch_item_failures)
            if result.init_error:
                self.report("error", f"{self.mapping.logical_id}: cannot import handler\n{result.traceback}")
                # Unprocessed: read the same records again once the import works.
                time.sleep(2.0)
                continue
            if resume is None:
                self.delivered += len(records)
                return response.get("NextShardIterator"), True
            attempts += 1
            self.delivered += numbers.index(resume)
            self.report(
                "warn",
                f"{self.mapping.logical_id}: stream batch failed at {resume} "
                f"({result.error_type or 'batch item failure'}); retry {attempts}",
            )
            if 0 <= self.mapping.max_retry_attempts < attempts:
                self.report("warn", f"{self.mapping.logical_id}: retries exhausted; records skipped")
                return response.get("NextShardIterator"), True
            records = records[numbers.index(resume):]
            self._stop.wait(_RETRY_PAUSE_S)
        return None, False
