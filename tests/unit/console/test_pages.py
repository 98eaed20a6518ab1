"""The console's pages on in-process moto: what each shows, escaped, and what the forms do."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from typing import Any

import pytest
from starlette.testclient import TestClient
from unit.console.conftest import TABLE, Stack, csrf_of

from sqsjobs.console.app import create_app
from sqsjobs.console.config import ConsoleConfig
from sqsjobs.console.sources import Sources
from sqsjobs.schedules._period_locks import PeriodLocks
from sqsjobs.store._dynamodb import DynamoDBStore
from sqsjobs.worker._job_records import Claim, cancel_marker, retrying, succeeded
from sqsjobs.workflows._chunked import RunStore

XSS_BODY = '<script>window.__xss=1</script>"><img src=x onerror="window.__xss=2">'
XSS_JOB = '"><svg onload=alert(1)>'


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_overview_shows_each_queues_counts_and_the_age_its_alarm_fires_at(stack: Stack) -> None:
    for n in range(3):
        stack.sqs.send_message(QueueUrl=stack.queue_url, MessageBody=f"waiting {n}")
    stack.sqs.receive_message(QueueUrl=stack.queue_url, MaxNumberOfMessages=1, VisibilityTimeout=300)
    stack.sqs.send_message(QueueUrl=stack.queue_url, MessageBody="later", DelaySeconds=600)
    stack.dead_letter("invoice-email", "permanent", "PermanentError")
    stack.cloudwatch.set_alarm_state(AlarmName="jobs-dlq-not-empty", StateValue="ALARM", StateReason="1 > 0")

    html = stack.client().get("/").text

    jobs_row = html[html.index('data-queue="jobs"'):html.index("</tr>", html.index('data-queue="jobs"'))]
    assert re.findall(r'data-test="(visible|in-flight|delayed)">(\d+)<', jobs_row) == [
        ("visible", "2"), ("in-flight", "1"), ("delayed", "1")]
    assert '<span class="value" data-test="dlq-count">1</span>' in html
    assert "5m00s (jobs-oldest-age)" in text_of(html)  # Threshold 5 x 60 s in the alarm's metric math
    assert 'data-alarm="jobs-dlq-not-empty"' in html
    assert '<span class="value" data-test="alarms-firing">1</span>' in html


def test_the_overview_shows_every_jobs_queue_that_feeds_the_dlq(stack: Stack) -> None:
    # A named queue (flow control's critical queue) dead-letters to the same DLQ: it is a jobs queue too.
    dlq_arn = stack.sqs.get_queue_attributes(QueueUrl=stack.dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"]
    critical_url = stack.sqs.create_queue(QueueName="jobs-critical", Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "4"})})["QueueUrl"]
    for n in range(2):
        stack.sqs.send_message(QueueUrl=critical_url, MessageBody=f"urgent {n}")

    html = stack.client().get("/").text

    rows = re.findall(r'<tr data-queue="([^"]+)">\s*<td>[^<]*</td>\s*<td>([^<]+)</td>', html)
    assert rows[:3] == [("jobs", "jobs"), ("jobs-critical", "jobs"), ("jobs-dlq", "dead letters")]
    critical_row = html[html.index('data-queue="jobs-critical"'):html.index("</tr>", html.index(
        'data-queue="jobs-critical"'))]
    assert re.findall(r'data-test="visible">(\d+)<', critical_row) == ["2"]


def test_the_dlq_page_groups_by_job_and_reason_and_filters_as_redrive_does(stack: Stack) -> None:
    stack.dead_letter("invoice-email", "permanent", "PermanentError", "invoice 7 does not exist")
    stack.dead_letter("invoice-email", "permanent", "PermanentError", "invoice 8 does not exist")
    stack.dead_letter("process-order", "exhausted", "TimeoutError", "timed out")
    client = stack.client()

    everything = client.get("/dlq").text
    groups = re.findall(r'data-job="([^"]+)" data-reason="([^"]+)"', everything)
    by_job = client.get("/dlq?job=process-order").text
    by_error = client.get("/dlq?error=PermanentError").text

    assert groups == [("invoice-email", "permanent"), ("process-order", "exhausted")]
    assert re.findall(r'data-test="group-count">(\d+)<', everything) == ["2", "1"]
    assert "invoice 8 does not exist" in everything
    assert re.findall(r'data-job="([^"]+)"', by_job) == ["process-order"]
    assert re.findall(r'data-job="([^"]+)"', by_error) == ["invoice-email"]


def test_the_dlq_page_shows_the_original_message_id_the_logs_know(stack: Stack) -> None:
    # Issue 25, finding 9: the page showed the DLQ copy's id, cut to 8 characters; logs and the CLI the original.
    dlq_id = stack.dead_letter("invoice-email", "permanent", "PermanentError", "invoice 7 does not exist")
    client = stack.client()
    csrf = csrf_of(client.get("/dlq").text)

    page = client.get("/dlq").text
    preview = client.post("/dlq/preview", data={"csrf": csrf, "job": "invoice-email", "error": ""}).text

    for html in (page, preview):
        assert f"original-of-{dlq_id}" in re.findall(r'data-test="message-id">([^<]+)<', html)
        assert dlq_id[:8] not in html.replace(f"original-of-{dlq_id}", "")


def test_a_letter_without_evidence_reads_none_and_without_a_table_it_is_marked_unverified(stack: Stack) -> None:
    forged = stack.dead_letter("invoice-email", "permanent", "PermanentError", "forged", evidence=False)

    checked = stack.client().get("/dlq").text
    config = ConsoleConfig(queue=stack.queue_url, refresh_seconds=5.0)
    sources = dataclasses.replace(stack.sources(), table=None)
    unchecked = TestClient(create_app(config, sources), base_url="http://127.0.0.1:8765").get("/dlq").text

    assert re.findall(r'data-job="([^"]+)" data-reason="([^"]+)"', checked) == [("invoice-email", "none")]
    assert forged in checked and "forged" not in checked and 'data-test="unverified"' not in checked
    assert re.findall(r'data-job="([^"]+)" data-reason="([^"]+)"', unchecked) == [("invoice-email", "permanent")]
    assert 'data-test="unverified"' in unchecked and "no idempotency table" in unchecked


def test_message_content_is_escaped_in_text_and_in_attributes(stack: Stack) -> None:
    stack.dead_letter("?", "malformed", "MalformedMessageError", XSS_BODY, body=XSS_BODY)
    stack.dead_letter(XSS_JOB, "permanent", "PermanentError", XSS_BODY)

    pages = [stack.client().get(path).text for path in ("/", "/dlq", f"/dlq?job={XSS_JOB}")]

    for html in pages:
        assert "<script>window" not in html and "<img src=x" not in html and "<svg onload" not in html
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;&#34;&gt;&lt;img src=x" in pages[1]
    assert 'data-job="&#34;&gt;&lt;svg onload=alert(1)&gt;"' in pages[1]


def test_a_redrive_previews_then_moves_exactly_what_the_preview_counted(stack: Stack) -> None:
    for _ in range(2):
        stack.dead_letter("process-order", "permanent", "PermanentError")
    stack.dead_letter("invoice-email", "permanent", "PermanentError")
    client = stack.client()
    csrf = csrf_of(client.get("/dlq?job=process-order").text)

    preview = client.post("/dlq/preview", data={"csrf": csrf, "job": "process-order", "error": ""})
    stack.dead_letter("process-order", "permanent", "PermanentError")  # arrives after the preview
    done = client.post("/dlq/redrive", data={"csrf": csrf, "job": "process-order", "error": "", "max": "2"},
                       follow_redirects=False)
    result = client.get(done.headers["location"])

    assert preview.status_code == 200
    assert 'data-test="would-move">2<' in preview.text
    assert '<input type="hidden" name="max" value="2">' in preview.text
    assert done.status_code == 303 and done.headers["location"].startswith("/dlq?job=process-order&redrive=")
    assert 'data-test="moved">2<' in result.text
    moved = stack.sqs.receive_message(QueueUrl=stack.queue_url, MaxNumberOfMessages=10,
                                      MessageAttributeNames=["All"]).get("Messages", [])
    assert [m["MessageAttributes"]["sqsjobs.redrive_count"]["StringValue"] for m in moved] == ["1", "1"]
    left = stack.sqs.get_queue_attributes(QueueUrl=stack.dlq_url, AttributeNames=["ApproximateNumberOfMessages"])
    assert left["Attributes"]["ApproximateNumberOfMessages"] == "2"  # invoice-email and the late process-order


def test_a_bad_redrive_form_is_a_one_line_error(stack: Stack) -> None:
    client = stack.client()
    stack.dead_letter("a", "permanent")
    csrf = csrf_of(client.get("/dlq").text)

    response = client.post("/dlq/preview", data={"csrf": csrf, "job": "a", "max": "lots"})

    assert response.status_code == 400
    assert "max must be a whole number of letters, got &#39;lots&#39;" in response.text


def test_the_lookup_shows_the_jobs_status(stack: Stack) -> None:
    store = DynamoDBStore(stack.dynamodb, TABLE)
    claim = Claim(key="invoice-email:42", job="invoice-email", owner="o", now=1767225600.0,
                  lease_until=1767225660.0, expires_at=1769000000.0, fingerprint="f" * 32, fp_version=1,
                  message_id="m-1", enqueued_at=1767225599.0)
    store.write(claim.operation())
    store.write(retrying("invoice-email:42", "o", now=1767225601.0, expires_at=1769000000.0,
                         error=TimeoutError("slow <b>")))
    store.write(claim.operation())
    store.write(succeeded("invoice-email:42", "o", now=1767225602.0, expires_at=1769000000.0,
                          result=json.dumps({"sent": True})))
    client = stack.client()

    found = client.get("/lookup?key=invoice-email:42").text
    missing = client.get("/lookup?key=invoice-email:43").text
    reserved = client.get("/lookup?key=lock%23nightly-report:2026-08-05").text

    assert '<span class="state state-succeeded">succeeded</span>' in found
    assert "<dt>attempts</dt><dd>2</dd>" in found
    assert '&#34;sent&#34;: true' in found
    assert "2026-01-01 00:00:00 UTC" in found
    assert 'data-test="not-found"' in missing
    assert "reserved prefix" in reserved


def test_the_lookup_shows_a_delayed_job_waiting_in_its_schedule_as_scheduled(stack: Stack) -> None:
    import boto3
    from starlette.testclient import TestClient

    from sqsjobs.console.app import create_app
    from sqsjobs.console.config import ConsoleConfig
    from sqsjobs.enqueue._delays import schedule_name
    from sqsjobs.schedules._one_time import DelayedMessage, OneTimeSchedules

    scheduler = boto3.client("scheduler", region_name="us-east-1")
    scheduler.create_schedule_group(Name="jobs-delayed")
    body = json.dumps({"v": 1, "job": "digest", "key": "digest:7", "args": {"user_id": 7}})
    OneTimeSchedules(group="jobs-delayed", clock=lambda: 1767225600.0, client=scheduler,
                     role_arn="arn:aws:iam::123456789012:role/delivery").create(DelayedMessage(
        name=schedule_name("digest:7"), job="digest", key="digest:7", body=body, due_at=1767398400.0,
        queue_arn="arn:aws:sqs:us-east-1:123456789012:jobs"))
    sources = Sources(sqs=stack.sqs, cloudwatch=stack.cloudwatch, dynamodb=stack.dynamodb, queue_url=stack.queue_url,
                      dlq_url=stack.dlq_url, table=TABLE, schedule_group="jobs-delayed", scheduler=scheduler)
    client = TestClient(create_app(ConsoleConfig(queue=stack.queue_url), sources), base_url="http://127.0.0.1:8765")

    waiting = client.get("/lookup?key=digest:7").text
    nowhere = client.get("/lookup?key=digest:8").text

    assert '<span class="state state-scheduled">scheduled</span>' in waiting
    assert '<dd data-test="due">2026-01-03 00:00:00 UTC</dd>' in waiting and "<dd>digest</dd>" in waiting
    assert 'data-test="not-found"' in nowhere


def test_the_lookup_escapes_a_last_error(stack: Stack) -> None:
    store = DynamoDBStore(stack.dynamodb, TABLE)
    claim = Claim(key="a:1", job="a", owner="o", now=1.0, lease_until=61.0, expires_at=9e9, fingerprint="f",
                  fp_version=1, message_id="m")
    store.write(claim.operation())
    store.write(retrying("a:1", "o", now=2.0, expires_at=9e9, error=TimeoutError("slow <b>")))

    assert "TimeoutError: slow &lt;b&gt;" in stack.client().get("/lookup?key=a:1").text


def test_runs_and_leases_are_found_and_a_run_is_looked_up_exactly(stack: Stack) -> None:
    store = DynamoDBStore(stack.dynamodb, TABLE)
    RunStore(store, ttl=3600).begin("reindex-products", "r-1", cursor="0", now=time.time())
    PeriodLocks(store).acquire("nightly-report:2026-08-05", owner="owner-token", now=time.time(),
                               lease_until=time.time() + 300, expires_at=time.time() + 3600, job="nightly-report",
                               fingerprint="f", fp_version=1, period="2026-08-05")
    store.write(cancel_marker("invoice-email:1", now=time.time(), expires_at=time.time() + 3600, reason=None))
    client = stack.client()

    page = client.get("/runs").text
    exact = client.get("/runs?run=reindex-products:r-1").text
    bad = client.get("/runs?run=no-run-id").text

    assert 'data-run="r-1"' in page and "RUNNING" in page
    assert 'data-lease="nightly-report:2026-08-05"' in page and "HELD" in page
    assert "Found by a scan of 3 records." in text_of(page)
    assert "reindex-products <code>r-1</code>" in exact
    assert "a run is JOB:RUN_ID, got &#39;no-run-id&#39;" in bad


def test_a_job_group_is_looked_up_by_its_id_with_its_counts(stack: Stack) -> None:
    from sqsjobs import JobApp

    app = JobApp(queue_url=stack.queue_url, table_name=TABLE, sqs_client=stack.sqs, dynamodb_client=stack.dynamodb)

    @app.job("resize", key="resize:{n}")
    def resize(n: int) -> None: ...

    group = app.group(name="nightly <resize>")
    group.add_many(resize.message(n=n) for n in range(3))
    group_id = group.enqueue()
    client = stack.client()

    found = text_of(client.get(f"/runs?group={group_id}").text)
    missing = text_of(client.get("/runs?group=no-such-group").text)

    assert "group nightly &lt;resize&gt;: running , 3 members: 3 pending, 0 succeeded, 0 failed" in found
    assert "no job group no-such-group: it was never enqueued" in missing


def test_pages_without_the_table_say_how_to_name_it(stack: Stack) -> None:
    sources = stack.sources()
    from dataclasses import replace

    from starlette.testclient import TestClient

    from sqsjobs.console.app import create_app
    from sqsjobs.console.config import ConsoleConfig

    client = TestClient(create_app(ConsoleConfig(queue="jobs"), replace(sources, table=None)),
                        base_url="http://127.0.0.1:8765")

    assert "pass --table or set SQSJOBS_TABLE" in client.get("/lookup?key=x").text
    assert "pass --table or set SQSJOBS_TABLE" in client.get("/runs").text


def test_an_aws_error_is_one_line_on_the_page(stack: Stack) -> None:
    stack.dynamodb.delete_table(TableName=TABLE)

    response = stack.client().get("/lookup?key=x")

    assert response.status_code == 200
    assert re.search(r'class="error" role="alert">ResourceNotFoundException: [^<]+</p>', response.text)


def test_the_jobs_page_reads_counts_and_percentiles_through_get_metric_data(stack: Stack,
                                                                            local_metric_data: None) -> None:
    now = time.time()
    dims = [{"Name": "Job", "Value": "invoice-email"}, {"Name": "service", "Value": "demo"}]
    data: list[dict[str, Any]] = [{"MetricName": "JobDuration", "Dimensions": dims, "Timestamp": now - 30,
                                   "Value": float(v), "Unit": "Milliseconds"} for v in range(1, 21)]
    data += [{"MetricName": name, "Dimensions": dims, "Timestamp": now - 30, "Value": value, "Unit": "Count"}
             for name, value in (("JobSucceeded", 17.0), ("JobFailed", 3.0), ("JobRetried", 2.0),
                                 ("JobDeadLettered", 1.0), ("JobCancelled", 4.0), ("JobExpired", 5.0))]
    data += [{"MetricName": "JobSucceeded", "Dimensions": [{"Name": "service", "Value": "demo"}],
              "Timestamp": now - 30, "Value": 17.0, "Unit": "Count"}]
    stack.cloudwatch.put_metric_data(Namespace="sqsjobs", MetricData=data)

    html = stack.client().get("/jobs").text
    row = html[html.index('data-job="invoice-email"'):]

    assert re.findall(r'data-test="(\w[\w-]*)">(?:<a [^>]+>)?([\d,]+(?: ms)?)<', row)[:8] == [
        ("succeeded", "17"), ("failed", "3"), ("retried", "2"), ("dead-lettered", "1"), ("cancelled", "4"),
        ("expired", "5"), ("p50", "10 ms"), ("p95", "19 ms")]
    assert "15.0 %" in row


def test_the_overview_charts_runs_per_minute(stack: Stack, local_metric_data: None) -> None:
    now = time.time()
    service = [{"Name": "service", "Value": "demo"}]
    stack.cloudwatch.put_metric_data(Namespace="sqsjobs", MetricData=[
        {"MetricName": "JobSucceeded", "Dimensions": service, "Timestamp": now, "Value": 30.0, "Unit": "Count"},
        {"MetricName": "JobFailed", "Dimensions": service, "Timestamp": now, "Value": 10.0, "Unit": "Count"}])

    # The console's clock stays at the minute the runs were put in: a busy machine crossing into the next
    # minute between the put and the page would chart them one bucket earlier than "the current minute".
    html = stack.client(clock=lambda: now).get("/").text

    assert "jobs per minute <strong>40</strong>" in html
    assert "failure rate <strong>25 %</strong>" in html
    assert html.count('<polyline class="line"') == 2


@pytest.mark.parametrize("path", ["/", "/dlq", "/jobs", "/lookup", "/runs"])
def test_every_page_is_served_with_its_layout(stack: Stack, path: str) -> None:
    response = stack.client().get(path)

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert 'aria-current="page"' in response.text


class DeniedCloudWatch:
    """A CloudWatch client whose every call is refused, as for an operator without CloudWatch rights."""

    def __getattr__(self, name: str) -> Any:
        from botocore.exceptions import ClientError

        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "not authorized"}}, name)

        return refuse


def test_without_cloudwatch_rights_the_overview_still_shows_the_queues(stack: Stack) -> None:
    from dataclasses import replace

    from starlette.testclient import TestClient

    from sqsjobs.console.app import create_app
    from sqsjobs.console.config import ConsoleConfig

    stack.dead_letter("a", "permanent")
    sources = replace(stack.sources(), cloudwatch=DeniedCloudWatch())
    client = TestClient(create_app(ConsoleConfig(queue="jobs"), sources), base_url="http://127.0.0.1:8765")

    html = client.get("/").text

    assert '<span class="value" data-test="dlq-count">1</span>' in html
    assert 'data-queue="jobs"' in html
    assert "could not read the oldest-age metric from CloudWatch" in html
    assert "could not read the job metrics from CloudWatch" in html


def test_the_lookup_shows_a_debounced_burst_waiting_and_a_deduplicated_request_holding_its_key(stack: Stack) -> None:
    from sqsjobs import JobApp

    app = JobApp(queue_url=stack.queue_url, store=DynamoDBStore(stack.dynamodb, TABLE), sqs_client=stack.sqs,
                 clock=lambda: 1767225600.0, environ={})

    @app.job("reindex", key="reindex:{product_id}", debounce=30)
    def reindex(product_id: int, title: str) -> None: ...

    @app.job("export", key="export:{account_id}", dedupe="until_done")
    def export(account_id: int) -> None: ...

    for n in range(3):
        reindex.enqueue(product_id=7, title=f"edit {n}")
    request = export.enqueue(account_id=1)
    client = TestClient(create_app(ConsoleConfig(queue=stack.queue_url), stack.sources(clock=lambda: 1767225610.0)),
                        base_url="http://127.0.0.1:8765")

    burst = text_of(client.get("/lookup?key=reindex:7").text)
    held = text_of(client.get("/lookup?key=export:1").text)

    assert "a burst waits: due 2026-01-01 00:00:30 UTC, 3 request(s) coalesced" in burst
    record = app.runtime.store.get("export:1")
    assert record is not None and not request.duplicate
    assert f"held by request {record.get('queued_id')} (until_done) until" in held


def test_the_overview_reads_the_dlq_evidence_from_the_table_the_lookup_uses(stack: Stack) -> None:
    # Issue 30, item 7: after `eval "$(sqsjobs local env)"` the overview said "no idempotency table
    # (--table or SQSJOBS_TABLE)" while the job lookup read that same table.
    stack.dead_letter("invoice-email", "permanent", "PermanentError", "invoice 7 does not exist")
    stack.dead_letter("invoice-email", "permanent", "PermanentError", "forged", evidence=False)

    html = stack.client().get("/").text

    assert "no idempotency table" not in html and "could not read the DLQ" not in html
    # Proven against the worker's evidence: the letter without any reads "none", not its forged attributes.
    rows = re.findall(r"<tr><td><a [^>]*>([^<]+)</a></td><td>([^<]+)</td>", html)
    assert sorted(rows) == [("invoice-email", "none"), ("invoice-email", "permanent")]
