"""What each job cost (issue 34): the worker's metrics priced by ops/_cost.py, in `sqsjobs status` and the overview.

- **The benchmark agrees with the console**: the benchmark's workload (bench/contenders.py: its job, its
  messages, its handler) runs through the worker on moto, each batch taking the duration bench/cost.py
  models (an injected clock the job moves); its EMF lines go into CloudWatch as the local cloud puts them;
  what ``sqsjobs status`` and the console's overview price from them equals bench/cost.py's row for the
  same inputs, measured the way bench/ measures them.
- **A fixed set of metrics** priced by hand, tenants and the metrics' own hourly charge included.
- **The overview** shows the line per job and reads CloudWatch again only every 10 minutes.
- **``sqsjobs status``** prints the table and the lines; ``--json`` carries them; a bad ``--price`` is a usage error.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from starlette.testclient import TestClient

from bench import cost as bench_cost
from bench.contenders import Job, bodies, event, message_bytes, sqsjobs_handler
from bench.figures import writes
from bench.sections import sqs_per_job
from bench.support import CallLog
from sqsjobs import _metrics as m
from sqsjobs.console.app import create_app
from sqsjobs.console.config import ConsoleConfig
from sqsjobs.console.sources import Sources
from sqsjobs.ops._cost import HOURS_PER_MONTH, CostOptions, Prices
from sqsjobs.ops._status import collect_status

REGION = "us-east-1"
#: 2026-01-01T00:00Z: every clock here starts from it
T0 = 1_767_225_600.0
SERVICE = "billing"


@dataclass
class Aws:
    sqs: Any
    dynamodb: Any
    cloudwatch: Any
    queue_url: str
    dlq_url: str


@pytest.fixture
def aws(local_metric_data: None) -> Iterator[Aws]:
    """In-process moto with a jobs queue, its DLQ and the idempotency table; GetMetricData as the local cloud's."""
    from aws_support import create_queues, create_table
    from moto import mock_aws

    with mock_aws():
        import boto3

        sqs = boto3.client("sqs", region_name=REGION)
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        create_table(dynamodb, "records")
        queue_url, dlq_url = create_queues(sqs, "jobs")
        yield Aws(sqs=sqs, dynamodb=dynamodb, cloudwatch=boto3.client("cloudwatch", region_name=REGION),
                  queue_url=queue_url, dlq_url=dlq_url)


def publish(cloudwatch: Any, lines: list[str]) -> None:
    """The EMF lines as CloudWatch Logs turns them into metrics (the local cloud's way: sqsjobs.local.telemetry)."""
    from sqsjobs.local.metric_store import parse_emf

    data = [{"MetricName": p.name, "Dimensions": [{"Name": k, "Value": v} for k, v in sorted(p.dimensions)],
             "Timestamp": p.timestamp, "Value": p.value, "Unit": p.unit}
            for line in lines for p in parse_emf(line)]
    for start in range(0, len(data), 500):
        cloudwatch.put_metric_data(Namespace=m.DEFAULT_NAMESPACE, MetricData=data[start:start + 500])


def console(aws: Aws, clock: Callable[[], float], **options: Any) -> TestClient:
    config = ConsoleConfig(queue=aws.queue_url, service=SERVICE, refresh_seconds=5.0, **options)
    sources = Sources(sqs=aws.sqs, cloudwatch=aws.cloudwatch, dynamodb=aws.dynamodb, queue_url=aws.queue_url,
                      dlq_url=aws.dlq_url, table="records", clock=clock)
    return TestClient(create_app(config, sources), base_url="http://127.0.0.1:8765")


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


# ---------------------------------------------------------------- the benchmark's workload
BATCHES = 10


def run_the_benchmarks_workload(aws: Aws, memory_mb: int, batch_ms: float) -> tuple[list[str], bench_cost.Inputs]:
    """bench/'s sqsjobs worker on bench/'s messages, each batch taking ``batch_ms`` by the worker's clock.

    Returns its EMF lines and bench/cost.py's inputs measured as bench/ measures them (bench/sections.py
    ``cost_inputs``): write units from the DynamoDB calls, SQS requests from the message size and the
    worker's own SQS calls, EMF bytes from the lines.
    """
    from sqsjobs.store._statement_trust import StatementTrust
    from sqsjobs.testing import FakeContext, moto_partiql

    now = [T0 + 60]

    class Timed(Job):
        """The benchmark's job, each run moving the worker's clock by its share of the batch."""

        def __call__(self, invoice_id: int) -> None:
            super().__call__(invoice_id)
            now[0] += step

    # The model bills ceil(batch_ms): the clock runs half a millisecond short of that, so that the float sums of
    # its steps (a clock near 1.8e9 s rounds each to a quarter of a µs) land on the same billed millisecond.
    step = (math.ceil(batch_ms) - 0.5) / 10 / 1000
    lines: list[str] = []
    handler, app = sqsjobs_handler(sqs=aws.sqs, dynamodb=aws.dynamodb, queue_url=aws.queue_url,
                                   dlq_url=aws.dlq_url, table="records", job=Timed(), emit=lines.append)
    log = CallLog()
    log.attach(aws.dynamodb)
    log.attach(aws.sqs)
    with moto_partiql(), app.use(clock=lambda: now[0], settings={"service": SERVICE}):
        # A warm container, as bench/figures.py measures: the store's probe is a cold start's, left out.
        handler(event(bodies(10_000, 10)), FakeContext(memory_limit_in_mb=memory_mb))
        assert StatementTrust.of(aws.dynamodb, "records").allows()  # bench's path: two calls a batch
        lines.clear()
        log.calls.clear()
        for b in range(BATCHES):
            result = handler(event(bodies(b * 10, 10)), FakeContext(memory_limit_in_mb=memory_mb))
            assert result == {"batchItemFailures": []}
    jobs = BATCHES * 10
    dynamodb = [c for c in log.calls if c.service == "dynamodb"]
    own_sqs = sum(1 for c in log.calls if c.service == "sqs") / jobs
    inputs = bench_cost.Inputs(
        wait_ms=2 * bench_cost.LATENCY_MS, cpu_ms=0.0,  # the duration is the clock's; see duration_ms below
        wcu_per_job=writes(dynamodb) / jobs,  # every item here is under 1 KB: a write is a unit
        sqs_per_job=sqs_per_job("sqsjobs", message_bytes(), own_sqs),
        emf_bytes_per_job=sum(len(line.encode()) + 1 for line in lines) / jobs,
    )
    return lines, inputs


def benchmarks_md() -> tuple[float, dict[int, float]]:
    """BENCHMARKS.md's sqsjobs figures: its client CPU per batch (ms), and its cost rows (memory → total $)."""
    from doc_snippets import ROOT

    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    cpu = re.search(r"^\| sqsjobs \| ([\d.]+) \(.* µs a message\) \|", text, re.M)
    totals = {int(memory.replace(",", "")): float(total) for memory, total in
              re.findall(r"^\| sqsjobs \| ([\d,]+) MB \|.*\| ([\d.]+) \|$", text, re.M)}
    assert cpu is not None and set(totals) == set(bench_cost.MEMORIES), "BENCHMARKS.md lost its cost table"
    return float(cpu.group(1)), totals


@pytest.mark.parametrize("memory_mb", bench_cost.MEMORIES)
def test_status_and_the_console_price_the_benchmarks_workload_as_benchmarks_md_does(aws: Aws, memory_mb: int) -> None:
    # The batch duration BENCHMARKS.md models at this memory from its sqsjobs inputs (its CPU, 2 round trips).
    cpu_ms, printed = benchmarks_md()
    modelled = bench_cost.Inputs(wait_ms=2 * bench_cost.LATENCY_MS, cpu_ms=cpu_ms, wcu_per_job=0, sqs_per_job=0,
                                 emf_bytes_per_job=0)
    batch_ms = bench_cost.duration_ms(modelled, memory_mb)
    lines, measured = run_the_benchmarks_workload(aws, memory_mb, batch_ms)
    publish(aws.cloudwatch, lines)
    inputs = bench_cost.Inputs(wait_ms=batch_ms, cpu_ms=0.0, wcu_per_job=measured.wcu_per_job,
                               sqs_per_job=measured.sqs_per_job, emf_bytes_per_job=measured.emf_bytes_per_job)
    row = bench_cost.price(inputs, memory_mb)  # what BENCHMARKS.md's cost table prints for these inputs
    # bench/ sends through enqueue_many (10 a SendMessageBatch): the view is told so.
    options = CostOptions(sends_per_request=10)

    report = collect_status(sqs_client=aws.sqs, cloudwatch_client=aws.cloudwatch, queue=aws.queue_url,
                            clock=lambda: T0 + 3600, costs=options, service=SERVICE)
    html = console(aws, lambda: T0 + 3600, costs=options).get("/").text

    assert report.costs is not None
    [job] = report.costs.jobs
    per_million = {name: value * 1e6 / job.jobs for name, value in (
        ("lambda", job.cost.lambda_usd), ("dynamodb", job.cost.dynamodb_usd), ("sqs", job.cost.sqs_usd),
        ("cloudwatch", job.cost.logs_usd))}
    assert (job.job, job.jobs) == ("invoice-email", BATCHES * 10)
    assert per_million == pytest.approx({"lambda": row.lambda_usd, "dynamodb": row.dynamodb_usd,
                                         "sqs": row.sqs_usd, "cloudwatch": row.cloudwatch_usd}, rel=1e-9)
    assert job.per_million == pytest.approx(row.total_usd, rel=1e-9)
    # ... and BENCHMARKS.md's table, as make bench last wrote it (its inputs are printed rounded: within 0.5 cent;
    # a stale table, written before the worker's lines or the model changed, is further off: make bench).
    assert job.per_million == pytest.approx(printed[memory_mb], abs=0.005), (job.per_million, printed)
    assert job.usage.lambda_gb_seconds * 1e6 / job.jobs == pytest.approx(row.lambda_gb_s, rel=1e-9)
    # The inputs are what bench/ reports for this workload: two writes a job, 0.3 SQS requests a job.
    assert (measured.wcu_per_job, round(measured.sqs_per_job, 2)) == (2.0, 0.3)
    # The page prints the figure BENCHMARKS.md's summary row prints (two decimals).
    cost_line = re.search(r'data-test="cost-line" data-job="invoice-email">([^<]+)<', html)
    assert cost_line is not None
    assert cost_line.group(1).endswith(f"${row.total_usd:,.2f} per million")
    assert re.search(r'data-test="per-million">\$([\d.,]+)<', html).group(1) == f"{row.total_usd:,.2f}"  # type: ignore[union-attr]


# ---------------------------------------------------------------- a fixed set of metrics
def put(aws: Aws, name: str, value: float, *, hour: int, **dims: str) -> None:
    dimensions = [{"Name": k, "Value": v} for k, v in sorted({"service": SERVICE, **dims}.items())]
    aws.cloudwatch.put_metric_data(Namespace=m.DEFAULT_NAMESPACE, MetricData=[{
        "MetricName": name, "Dimensions": dimensions, "Timestamp": T0 + hour * 3600 + 60, "Value": value}])


@pytest.fixture
def fixed(aws: Aws) -> Aws:
    """:func:`put_fixed`'s metrics on moto."""
    put_fixed(aws)
    return aws


def put_fixed(aws: Aws) -> None:
    """Two jobs and two tenants, each value put in two halves in hours 1 and 2 (so each series bills 2 hours).

    invoice-email: 1.19 M succeeded + 10 k dead-lettered = 1.2 M jobs; 30 k retries and 20 k duplicates make
    1.25 M deliveries; report-pdf: 250 k. The service's 150 k batches and 3 GB of EMF lines are shared 5 : 1.
    """
    invoice = {m.SUCCEEDED: 1_190_000, m.DEAD_LETTERED: 10_000, m.RETRIED: 30_000, m.DUPLICATE: 20_000,
               m.SCHEDULED: 1_000, m.DURATION: 4_000_000, m.LAMBDA_GB_SECONDS: 45_000, m.WRITE_UNITS: 2_500_000,
               m.READ_UNITS: 40_000, m.SQS_REQUESTS: 300_000}
    report = {m.SUCCEEDED: 250_000, m.LAMBDA_GB_SECONDS: 90_000, m.WRITE_UNITS: 500_000, m.SQS_REQUESTS: 50_000}
    tenants = {"acme": {m.SUCCEEDED: 600_000, m.DURATION: 3_000_000},
               "globex": {m.SUCCEEDED: 590_000, m.DEAD_LETTERED: 10_000, m.RETRIED: 30_000, m.DUPLICATE: 20_000,
                          m.DURATION: 1_000_000}}
    for hour in (1, 2):
        for name, value in invoice.items():
            put(aws, name, value / 2, hour=hour, Job="invoice-email")
        for name, value in report.items():
            put(aws, name, value / 2, hour=hour, Job="report-pdf")
        for tenant, values in tenants.items():
            for name, value in values.items():
                put(aws, name, value / 2, hour=hour, Job="invoice-email", Tenant=tenant)
        put(aws, m.BATCHES, 75_000, hour=hour)
        put(aws, m.LOG_BYTES, 1.5e9, hour=hour)


def test_a_fixed_set_of_metrics_is_priced_as_worked_out_by_hand(fixed: Aws) -> None:
    report = collect_status(sqs_client=fixed.sqs, cloudwatch_client=fixed.cloudwatch, queue=fixed.queue_url,
                            clock=lambda: T0 + 5 * 3600, costs=CostOptions(sends_per_request=10), service=SERVICE)

    assert report.costs is not None
    rows = {(row.job, row.tenant): row for row in (*report.costs.jobs, *report.costs.tenants)}
    invoice = rows[("invoice-email", None)]
    hour = 0.30 / HOURS_PER_MONTH  # one metric for one hour
    # Lambda: 45,000 GB-s, and 5/6 of the 150,000 invocations (its share of the deliveries).
    assert invoice.cost.lambda_usd == pytest.approx(45_000 * 0.0000133334 + 125_000 * 0.20e-6)
    assert invoice.cost.dynamodb_usd == pytest.approx(2_500_000 * 0.625e-6 + 40_000 * 0.125e-6)
    # The worker's 300,000, the producer's 1,220,000 sends ten a request (jobs and duplicates), a send per schedule.
    assert invoice.cost.sqs_usd == pytest.approx((300_000 + 122_000 + 1_000) * 0.40e-6)
    assert invoice.cost.scheduler_usd == pytest.approx(1_000 * 1.00e-6)
    assert invoice.cost.logs_usd == pytest.approx(2.5 * 0.50)  # 5/6 of 3 GB
    # Its ten {service, Job} series and the two tenants' series (2 and 5 of them), two hours each.
    assert invoice.cost.metrics_usd == pytest.approx((10 + 2 + 5) * 2 * hour)
    assert invoice.jobs == 1_200_000
    assert invoice.per_million == pytest.approx(invoice.cost.variable_usd / 1.2)
    assert invoice.summary(7) == (f"invoice-email: 1.2 M jobs, ${invoice.cost.total_usd:,.2f} last 7 days, "
                                  f"${invoice.per_million:,.2f} per million")
    pdf = rows[("report-pdf", None)]
    assert pdf.cost.lambda_usd == pytest.approx(90_000 * 0.0000133334 + 25_000 * 0.20e-6)
    assert pdf.cost.logs_usd == pytest.approx(0.5 * 0.50)
    # A tenant: Lambda by its share of the job's run time (3/4), the rest by its share of the deliveries (0.48).
    acme = rows[("invoice-email", "acme")]
    assert acme.usage.lambda_gb_seconds == pytest.approx(45_000 * 0.75)
    assert acme.usage.write_units == pytest.approx(2_500_000 * 0.48)
    assert acme.cost.metrics_usd == pytest.approx(2 * 2 * hour)
    assert [row.job for row in report.costs.jobs] == ["invoice-email", "report-pdf"]  # the costliest first
    assert report.costs.service_metrics_usd == pytest.approx(2 * 2 * hour)  # WorkerBatches, WorkerLogBytes
    assert report.costs.total_usd == pytest.approx(invoice.cost.total_usd + pdf.cost.total_usd + 4 * hour)


def test_prices_are_parameters(fixed: Aws) -> None:
    x86 = Prices().with_overrides({"lambda_gb_second": 0.0000166667})

    report = collect_status(sqs_client=fixed.sqs, cloudwatch_client=fixed.cloudwatch, queue=fixed.queue_url,
                            clock=lambda: T0 + 5 * 3600, costs=CostOptions(prices=x86), service=SERVICE)

    assert report.costs is not None
    pdf = next(row for row in report.costs.jobs if row.job == "report-pdf")
    assert pdf.cost.lambda_usd == pytest.approx(90_000 * 0.0000166667 + 25_000 * 0.20e-6)


def test_outside_the_window_nothing_is_priced(fixed: Aws) -> None:
    report = collect_status(sqs_client=fixed.sqs, cloudwatch_client=fixed.cloudwatch, queue=fixed.queue_url,
                            clock=lambda: T0 + 9 * 86400, costs=CostOptions(days=1), service=SERVICE)

    assert report.costs is not None
    assert {row.jobs for row in report.costs.jobs} == {0.0}
    assert report.costs.total_usd == 0


@pytest.mark.parametrize(("days", "warned"), [(14, False), (15, True)])
def test_a_window_longer_than_what_cloudwatch_lists_says_what_it_may_miss(fixed: Aws, days: int,
                                                                           warned: bool) -> None:
    report = collect_status(sqs_client=fixed.sqs, cloudwatch_client=fixed.cloudwatch, queue=fixed.queue_url,
                            clock=lambda: T0 + 5 * 3600, costs=CostOptions(days=days), service=SERVICE)

    assert report.costs is not None
    missing = [note for note in report.costs.notes if "last 14 days" in note]
    assert bool(missing) is warned, report.costs.notes
    assert report.costs.jobs[0].jobs == 1_200_000  # moto lists every series: the figures are whole here


# ---------------------------------------------------------------- the overview
def test_the_overview_shows_a_line_and_the_dollars_of_each_job(fixed: Aws) -> None:
    html = console(fixed, lambda: T0 + 5 * 3600, costs=CostOptions(sends_per_request=10)).get("/").text

    lines = re.findall(r'data-test="cost-line" data-job="([^"]+)">([^<]+)<', html)
    assert [job for job, _ in lines] == ["invoice-email", "report-pdf"]
    assert re.fullmatch(r"invoice-email: 1\.2 M jobs, \$[\d.]+ last 7 days, \$[\d.]+ per million", lines[0][1])
    row = html[html.index('<tr data-job="invoice-email">'):]
    cells = dict(re.findall(r'data-test="([\w-]+)">([^<]+)<', row[:row.index("</tr>")]))
    assert cells["jobs"] == "1.2 M"
    assert cells["dynamodb"] == "$1.57"  # 2.5 M write units and 40 k read units
    assert cells["logs"] == "$1.25"
    assert 'data-tenant="acme"' in html and 'data-tenant="globex"' in html


def test_the_overview_reads_the_costs_again_only_every_ten_minutes(fixed: Aws) -> None:
    now = [T0 + 5 * 3600]
    client = console(fixed, lambda: now[0])
    first = client.get("/").text
    put(fixed, m.SUCCEEDED, 850_000, hour=3, Job="report-pdf")

    now[0] += 300
    cached = client.get("/").text
    now[0] += 300
    fresh = client.get("/").text

    def jobs(html: str) -> str:
        return re.findall(r'data-test="cost-line" data-job="report-pdf">report-pdf: ([^,]+) jobs', html)[0]

    assert (jobs(first), jobs(cached), jobs(fresh)) == ("250 k", "250 k", "1.1 M")


def test_the_overview_without_job_metrics_says_so(aws: Aws) -> None:
    html = console(aws, lambda: T0).get("/").text

    assert "no job metrics to price yet" in html
    assert 'data-test="cost-line"' not in html


# ---------------------------------------------------------------- sqsjobs status
def test_status_prints_each_jobs_cost_and_its_json_carries_them(fixed: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from sqsjobs.cli import build_app
    from sqsjobs.ops import _status

    # The command's clock: the status reads "now" through collect_status's default.
    monkeypatch.setattr(_status.collect_status, "__kwdefaults__",
                        {**(_status.collect_status.__kwdefaults__ or {}), "clock": lambda: T0 + 5 * 3600})
    args = ["status", "--queue", fixed.queue_url, "--region", REGION, "--sends-per-request", "10"]
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", SERVICE)

    text = CliRunner().invoke(build_app(), args, env={"COLUMNS": "200"})
    data = CliRunner().invoke(build_app(), [*args, "--json"])

    assert text.exit_code == 0, text.output
    assert "what each job cost (last 7 days" in text.output
    assert re.search(r"invoice-email: 1\.2 M jobs, \$[\d.]+ last 7 days, \$[\d.]+ per million", text.output)
    assert re.search(r"│ invoice-email +│ +1\.2 M │", text.output)
    assert data.exit_code == 0, data.output
    costs = json.loads(data.stdout)["costs"]
    assert [row["job"] for row in costs["jobs"]] == ["invoice-email", "report-pdf"]
    assert costs["jobs"][0]["jobs"] == 1_200_000 and costs["sends_per_request"] == 10
    assert {row["tenant"] for row in costs["tenants"]} == {"acme", "globex"}


def cost_view_of(output: str) -> str:
    """The cost view of ``sqsjobs status``'s output: from its table's title to its last line a job."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if "what each job cost" in line)
    end = max(i for i, line in enumerate(lines) if " per million" in line and ": " in line)
    return "\n".join(line.rstrip() for line in lines[start:end + 1])


def test_the_docs_show_what_status_prints_for_the_fixed_metrics(fixed: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/observability.md's sample is this test's output (regenerate it from here when the view changes)."""
    from doc_snippets import ROOT
    from typer.testing import CliRunner

    from sqsjobs.cli import build_app
    from sqsjobs.ops import _status

    monkeypatch.setattr(_status.collect_status, "__kwdefaults__",
                        {**(_status.collect_status.__kwdefaults__ or {}), "clock": lambda: T0 + 5 * 3600})
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", SERVICE)
    done = CliRunner().invoke(build_app(), ["status", "--queue", fixed.queue_url, "--region", REGION,
                                            "--sends-per-request", "10"], env={"COLUMNS": "120"})
    page = (ROOT / "docs" / "observability.md").read_text(encoding="utf-8")
    sample = re.search(r"<!-- the cost view's sample -->\n```text\n(.*?)\n```", page, re.S)

    assert done.exit_code == 0, done.output
    assert sample is not None, "docs/observability.md lost its sample of the cost view"
    assert sample.group(1).rstrip() == cost_view_of(done.output), cost_view_of(done.output)


def test_status_refuses_a_price_it_does_not_know(aws: Aws) -> None:
    from typer.testing import CliRunner

    from sqsjobs.cli import build_app

    done = CliRunner().invoke(build_app(), ["status", "--queue", aws.queue_url, "--region", REGION,
                                            "--price", "lambda_per_hour=1"])

    assert done.exit_code == 2
    assert "unknown price 'lambda_per_hour'" in done.output
