"""Lambda's DynamoDB stream event source mapping, emulated against moto.

Per shard, in order: a batch of up to ``BatchSize`` records goes to the
function; on success the iterator advances. On failure the same records are
retried (up to ``MaximumRetryAttempts``, -1 = until they expire, as on AWS);
with ``ReportBatchItemFailures`` the shard resumes at the first reported
sequence number, so records before it are not delivered again. With
``BisectBatchOnFunctionError`` a failing batch is split in halves; records
whose retries run out are skipped and described to the on-failure SQS
destination. ``FilterCriteria`` drops records before the invocation.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqsjobs.local.filters import matches_any
from sqsjobs.local.invoker import FunctionPool, InvocationResult
from sqsjobs.local.model import StreamMapping

_IDLE_POLL_S = 0.5
_RETRY_PAUSE_S = 0.5


def to_lambda_record(record: dict[str, Any], mapping: StreamMapping) -> dict[str, Any]:
    """A GetRecords entry in the shape Lambda hands to the function (epoch seconds, source ARN).

    Example:
        >>> mapping = StreamMapping(logical_id="M", function="F", stream_arn="arn:stream")
        >>> created = datetime(2026, 1, 1, tzinfo=UTC)
        >>> record = {"eventName": "INSERT", "dynamodb": {"ApproximateCreationDateTime": created}}
        >>> to_lambda_record(record, mapping)["eventSourceARN"], to_lambda_record(record, mapping)["dynamodb"]
        ('arn:stream', {'ApproximateCreationDateTime': 1767225600.0})"""
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
        sqs: Any = None,
        iterator_age: Callable[[float], None] | None = None,
        resume: dict[str, str] | None = None,
    ) -> None:
        self.mapping = mapping
        #: per shard, the sequence number of the last record handled (delivered, filtered out or given up):
        #: where a resumed cloud goes on (``resume``), instead of the mapping's StartingPosition
        self.positions: dict[str, str] = dict(resume or {})
        self.pool = pool
        self.streams = streams
        self.sqs = sqs
        self.iterator_age = iterator_age
        self.skipped = 0
        self.given_up = 0
        #: completed reads of every shard; ``drain()`` waits for fresh rounds
        self.rounds = 0
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

    def halt(self) -> None:
        """Read no more records from now on."""
        self._stop.set()

    def stop(self) -> None:
        """Stop after the invocation in flight."""
        self.halt()
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
                self.rounds += 1
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
            where: dict[str, str] = {"ShardIteratorType": self.mapping.starting_position}
            if shard["ShardId"] in self.positions:
                where = {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER",
                         "SequenceNumber": self.positions[shard["ShardId"]]}
            iterators[shard["ShardId"]] = self.streams.get_shard_iterator(
                StreamArn=self.mapping.stream_arn, ShardId=shard["ShardId"], **where)["ShardIterator"]
        return iterators

    def _poll_shard(self, shard: str, iterator: str) -> tuple[str | None, bool]:
        response = self.streams.get_records(ShardIterator=iterator, Limit=self.mapping.batch_size)
        records = [to_lambda_record(r, self.mapping) for r in response.get("Records", [])]
        if not records:
            return response.get("NextShardIterator"), False
        # Lambda drops the records its filters reject without invoking.
        wanted = [r for r in records if matches_any(list(self.mapping.filters), r)]
        self.skipped += len(records) - len(wanted)
        if wanted:
            self.pending = True  # until a round finds nothing, retries included
            if not self._deliver(shard, wanted, 0):
                return None, True  # stopping mid-batch: the records were not handled, the position stays
        self.positions[shard] = str(records[-1]["dynamodb"]["SequenceNumber"])
        return response.get("NextShardIterator"), True

    def _deliver(self, shard: str, records: list[dict[str, Any]], attempts: int) -> bool:
        """Invoke until the records succeed, are split (bisect), or their retries run out; False: stopped first."""
        while not self._stop.is_set():
            numbers = [r["dynamodb"]["SequenceNumber"] for r in records]
            self.in_flight = 1
            try:
                if self.iterator_age is not None:
                    created = records[-1]["dynamodb"].get("ApproximateCreationDateTime")
                    if isinstance(created, (int, float)):
                        self.iterator_age(max(0.0, (time.time() - created) * 1000))
                result = self.pool.invoke({"Records": records})
            finally:
                self.in_flight = 0
            if result.init_error:
                if self.pool.report_once(result):
                    self.report("error", f"{self.mapping.logical_id}: {result.one_line()}; cannot import handler "
                                         f"{self.pool.spec.handler}: its stream records wait")
                # Unprocessed: the same records go again once the import works.
                self._stop.wait(2.0)
                continue
            resume = first_failure(result, numbers, self.mapping.report_batch_item_failures)
            if resume is None:
                self.delivered += len(records)
                return True
            attempts += 1
            why = result.error_type or "batch item failure"
            if result.failed and self.mapping.bisect_on_error and len(records) > 1:
                half = len(records) // 2
                self.report("warn", f"{self.mapping.logical_id}: batch of {len(records)} failed ({why}); bisecting")
                return self._deliver(shard, records[:half], attempts) and self._deliver(shard, records[half:],
                                                                                         attempts)
            self.delivered += numbers.index(resume)
            records = records[numbers.index(resume):]
            if 0 <= self.mapping.max_retry_attempts < attempts:
                self._give_up(shard, records, why)
                return True
            self.report("warn", f"{self.mapping.logical_id}: stream batch failed at {resume} ({why}); retry {attempts}")
            self._stop.wait(_RETRY_PAUSE_S)
        return False

    def _give_up(self, shard: str, records: list[dict[str, Any]], why: str) -> None:
        """Retries exhausted: skip the records, telling the on-failure destination, as Lambda does."""
        self.given_up += len(records)
        self.report("warn", f"{self.mapping.logical_id}: retries exhausted ({why}); {len(records)} record(s) skipped")
        if not self.mapping.on_failure_queue_url or self.sqs is None:
            return
        first, last = records[0]["dynamodb"], records[-1]["dynamodb"]
        invocation_record = {
            "requestContext": {"condition": "RetryAttemptsExhausted", "functionArn": self.pool.spec.arn,
                               "approximateInvokeCount": self.mapping.max_retry_attempts + 1},
            "responseContext": {"functionError": why},
            "version": "1.0",
            "timestamp": datetime.now(UTC).isoformat(),
            "DDBStreamBatchInfo": {
                "shardId": shard,
                "startSequenceNumber": first["SequenceNumber"],
                "endSequenceNumber": last["SequenceNumber"],
                "approximateArrivalOfFirstRecord": first.get("ApproximateCreationDateTime"),
                "approximateArrivalOfLastRecord": last.get("ApproximateCreationDateTime"),
                "batchSize": len(records),
                "streamArn": self.mapping.stream_arn,
            },
        }
        self.sqs.send_message(QueueUrl=self.mapping.on_failure_queue_url, MessageBody=json.dumps(invocation_record))
