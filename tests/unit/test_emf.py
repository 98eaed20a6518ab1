"""sqsjobs writes its EMF lines itself: the same documents Powertools' metrics provider writes for the same counts.

What an alarm or a dashboard reads is the namespace, the metric names, their
units, the dimension sets and the values; these tests compare the documents
key for key with the ones ``AmazonCloudWatchEMFProvider`` builds (the emitter
sqsjobs used before), and check the split EMF asks for past 100 values.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider
from hypothesis import given, settings
from hypothesis import strategies as st

from sqsjobs import _metrics as m

JOBS = st.sampled_from(["invoice-email", "sms-reminder", "?"])
EXTRAS = st.dictionaries(st.sampled_from([m.DIMENSION_TENANT, m.DIMENSION_LIMITER]),
                         st.text("abc-1", min_size=1, max_size=5), max_size=2)
MEASUREMENTS = st.lists(st.one_of(
    st.tuples(st.just("count"), JOBS, st.sampled_from(m.COUNTS), st.integers(1, 5), EXTRAS),
    st.tuples(st.just("duration"), JOBS, st.just(m.DURATION),
              st.floats(0, 1e6, allow_nan=False, allow_infinity=False), EXTRAS),
), max_size=40)


def powertools_documents(batch: m.BatchMetrics, timestamp: int) -> list[dict[str, Any]]:
    """What the provider-based emitter wrote for the batch's counts (one document per job and extras)."""
    documents = []
    for job, extra in sorted(set(batch._counts) | set(batch._durations)):
        provider = AmazonCloudWatchEMFProvider(namespace=batch.namespace, service=batch.service)
        provider.add_dimension(name=m.DIMENSION_JOB, value=job)
        for name, value in extra:
            provider.add_dimension(name=name, value=value)
        if len(extra) > 1:
            for name, value in extra:
                provider.add_dimensions(**{m.DIMENSION_JOB: job, name: value, m.DIMENSION_SERVICE: batch.service})
        if extra:
            provider.add_dimensions(**{m.DIMENSION_JOB: job, m.DIMENSION_SERVICE: batch.service})
        provider.add_dimensions(**{m.DIMENSION_SERVICE: batch.service})
        for name, count in batch._counts.get((job, extra), {}).items():
            provider.add_metric(name=name, unit=MetricUnit.Count, value=count)
        for ms in batch._durations.get((job, extra), []):
            provider.add_metric(name=m.DURATION, unit=MetricUnit.Milliseconds, value=ms)
        provider.timestamp = timestamp
        documents.append(provider.serialize_metric_set())
    return documents


@settings(max_examples=150, deadline=None)
@given(MEASUREMENTS)
def test_every_document_is_the_one_powertools_wrote(measurements: list[tuple[Any, ...]]) -> None:
    lines: list[str] = []
    batch = m.BatchMetrics(namespace="sqsjobs", service="billing", emit=lines.append, clock=lambda: 1_767_225_600.5)
    for kind, job, name, value, extra in measurements:
        if kind == "count":
            batch.count(job, name, value, dimensions=extra)
        else:
            batch.duration(job, value, dimensions=extra)
    expected = powertools_documents(batch, timestamp=1_767_225_600_500)
    batch.flush()
    assert [json.loads(line) for line in lines] == expected
    # Key order too: the lines are byte for byte what the provider's documents serialize to.
    assert lines == [json.dumps(doc, separators=(",", ":")) for doc in expected]


def test_past_100_values_a_metric_continues_in_a_second_document() -> None:
    lines: list[str] = []
    batch = m.BatchMetrics(namespace="sqsjobs", service="billing", emit=lines.append, clock=lambda: 1.0)
    batch.count("resize", m.SUCCEEDED, 250)
    for i in range(250):
        batch.duration("resize", float(i))
    batch.flush()
    docs = [json.loads(line) for line in lines]
    assert [len(doc[m.DURATION]) for doc in docs] == [100, 100, 50]
    assert [doc.get(m.SUCCEEDED) for doc in docs] == [[250.0], None, None]  # counted once
    assert sorted(v for doc in docs for v in doc[m.DURATION]) == [float(i) for i in range(250)]
    for doc in docs:
        directive = doc["_aws"]["CloudWatchMetrics"][0]
        assert {d["Name"] for d in directive["Metrics"]} == {k for k in doc if k.startswith("Job") and k != "Job"}
        assert directive["Dimensions"] == [["Job", "service"], ["service"]]


def test_a_flush_forgets_the_batch() -> None:
    lines: list[str] = []
    batch = m.BatchMetrics(namespace="sqsjobs", service="billing", emit=lines.append)
    batch.count("resize", m.FAILED)
    batch.flush()
    batch.flush()
    assert len(lines) == 1
