"""The operator console in a real browser (Debian's Chromium, driven by Playwright) against the local cloud.

The console serves the session's local cloud (template.yaml, the real worker)
from a thread of this process; the browser is headless Chromium from
/usr/bin/chromium (``make test`` installs the ``chromium`` package when it is
missing). Waits are on conditions with generous ceilings: the machine is shared.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sqsjobs.console.config import ConsoleConfig
from sqsjobs.console.server import ConsoleServer
from sqsjobs.console.sources import Sources
from sqsjobs.local.pytest_plugin import LocalCloudSession

CHROMIUM = Path("/usr/bin/chromium")
# Playwright gives every launch a fresh temporary profile (its own --user-data-dir).
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PATIENCE_MS = 60_000
XSS_BODY = '<script>window.__xss=1</script>"><img src=x onerror="window.__xss=2">'
XSS_JOB = '"><img src=x onerror="window.__xss=3">'
_ids = itertools.count(int(time.time()) % 100_000 * 10)


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Poll ``condition`` until it is truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: `make test` installs Debian's chromium package, which could not be "
                    "installed here (apt-get install chromium), so the console's browser tests cannot run")
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=PATIENCE_MS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        yield browser
        browser.close()


def serve(cloud: LocalCloudSession, **options: Any) -> Iterator[ConsoleServer]:
    config = ConsoleConfig.for_local_cloud(cloud.state(), **{"port": 0, "refresh_seconds": 1.0, **options})
    server = ConsoleServer.start(config, Sources.connect(config))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module", autouse=True)
def _leave_the_dlq_as_found(local_cloud: LocalCloudSession) -> Iterator[None]:
    """The session's DLQ is shared: letters these tests leave (bodies that are not even JSON) go at the end."""
    before = {m["MessageId"] for m in local_cloud.dead_letters()}
    yield
    local_cloud.drain()
    sqs, dlq = local_cloud.clients.get("sqs"), local_cloud.deployment.queue_by_arn(
        local_cloud.deployment.queues[local_cloud.app_queue()].dead_letter_arn).url
    kept = []
    while messages := sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10, VisibilityTimeout=120,
                                          WaitTimeSeconds=0).get("Messages", []):
        for message in messages:
            if message["MessageId"] in before:
                kept.append(message["ReceiptHandle"])  # held until the scan ends, then shown again
            else:
                sqs.delete_message(QueueUrl=dlq, ReceiptHandle=message["ReceiptHandle"])
    for start in range(0, len(kept), 10):
        sqs.change_message_visibility_batch(QueueUrl=dlq, Entries=[
            {"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": 0}
            for i, handle in enumerate(kept[start : start + 10])])


@pytest.fixture(scope="module")
def console(local_cloud: LocalCloudSession) -> Iterator[ConsoleServer]:
    yield from serve(local_cloud)


@pytest.fixture(scope="module")
def read_only_console(local_cloud: LocalCloudSession) -> Iterator[ConsoleServer]:
    yield from serve(local_cloud, read_only=True)


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    # The console's Content-Security-Policy would stop an injected script on its own; bypassing it here makes
    # the XSS test prove the escaping, and lets Playwright's wait_for_function poll the page.
    context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(PATIENCE_MS)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.dialogs = dialogs  # type: ignore[attr-defined]
    yield page
    context.close()


def at(server: ConsoleServer, path: str) -> str:
    return server.url.rstrip("/") + path


def refreshes(page: Any, count: int = 2) -> None:
    """Wait until the page has refreshed itself ``count`` more times."""
    start = int(page.evaluate("document.body.dataset.refreshed"))
    page.wait_for_function(f"Number(document.body.dataset.refreshed) >= {start + count}")


def dead_letter_count(cloud: LocalCloudSession) -> int:
    return len(cloud.dead_letters())


def metric_total(cloud: LocalCloudSession, name: str, job: str) -> float:
    dims = frozenset({("service", "sqsjobs"), ("Job", job)})
    return sum(v for (ns, metric, d), series in cloud.metrics.series().items()
               if ns == "sqsjobs" and metric == name and d == dims for _, v in series)


# -- the tests ------------------------------------------------------------------------------------------------


def test_the_overview_shows_the_right_counts(local_cloud: LocalCloudSession, browser: Any, page: Any) -> None:
    # A queue pair no function polls, so the counts stay put: 3 visible, 1 in flight, 2 delayed, 2 dead letters.
    sqs = local_cloud.clients.get("sqs")
    suffix = next(_ids)
    dlq = sqs.create_queue(QueueName=f"console-e2e-dlq-{suffix}")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue = sqs.create_queue(QueueName=f"console-e2e-{suffix}", Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "5"})})["QueueUrl"]
    for n in range(4):
        sqs.send_message(QueueUrl=queue, MessageBody=f"job {n}")
    assert sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=1, VisibilityTimeout=600)["Messages"]
    for n in range(2):
        sqs.send_message(QueueUrl=queue, MessageBody=f"later {n}", DelaySeconds=900)
        sqs.send_message(QueueUrl=dlq, MessageBody=f"dead {n}")
    state = {**local_cloud.state(), "app_env": {"SQSJOBS_QUEUE_URL": queue}}
    config = ConsoleConfig.for_local_cloud(state, port=0, refresh_seconds=1.0)
    server = ConsoleServer.start(config, Sources.connect(config))
    try:
        page.goto(at(server, "/"))
        row = page.locator(f'tr[data-queue="console-e2e-{suffix}"]')
        from playwright.sync_api import expect

        expect(row.locator('[data-test="visible"]')).to_have_text("3")
        expect(row.locator('[data-test="in-flight"]')).to_have_text("1")
        expect(row.locator('[data-test="delayed"]')).to_have_text("2")
        expect(page.locator('[data-test="dlq-count"]')).to_have_text("2")
        expect(page.locator(f'tr[data-queue="console-e2e-dlq-{suffix}"] [data-test="visible"]')).to_have_text("2")
    finally:
        server.stop()


def test_the_overview_of_the_stack_matches_sqs_and_shows_the_paging_alarm(
        local_cloud: LocalCloudSession, console: ConsoleServer, page: Any) -> None:
    from playwright.sync_api import expect

    local_cloud.enqueue("invoice-email", invoice_id=-next(_ids))  # a poison job: dead-lettered, pages
    local_cloud.drain()
    local_cloud.evaluate_alarms()
    wait_for(lambda: local_cloud.alarm_state("DeadLetterAlarm") == "ALARM", "the DLQ alarm to fire")
    expected = dead_letter_count(local_cloud)

    page.goto(at(console, "/"))

    expect(page.locator('[data-test="dlq-count"]')).to_have_text(str(expected))
    jobs = page.locator('tr[data-queue="sqsjobs-local-JobsQueue"]')
    expect(jobs.locator('[data-test="visible"]')).to_have_text("0")
    expect(page.locator('tr[data-alarm="sqsjobs-local-DeadLetterAlarm"] .state')).to_have_text("ALARM")
    expect(page.locator("figure.chart svg polyline.line")).to_have_count(2)


def test_the_dlq_page_shows_reasons(local_cloud: LocalCloudSession, console: ConsoleServer, page: Any) -> None:
    from playwright.sync_api import expect

    invoice = -next(_ids)
    local_cloud.enqueue("invoice-email", invoice_id=invoice)
    local_cloud.send("JobsQueue", "not an envelope at all")
    local_cloud.drain()

    page.goto(at(console, "/dlq"))

    permanent = page.locator('article.group[data-job="invoice-email"][data-reason="permanent"]')
    expect(permanent).to_be_visible()
    expect(permanent.locator(".error-type")).to_have_text("PermanentError")
    expect(permanent).to_contain_text(f"invoice {invoice} does not exist")
    expect(page.locator('article.group[data-reason="malformed"]')).to_contain_text("not an envelope at all")


def test_a_redrive_from_the_page_moves_the_letters_and_each_job_then_runs_once(
        local_cloud: LocalCloudSession, console: ConsoleServer, page: Any) -> None:
    from playwright.sync_api import expect

    orders = [next(_ids), next(_ids)]
    for order_id in orders:  # enqueued before their orders exist: dead-lettered as permanent
        local_cloud.enqueue("process-order", order_id=order_id)
    local_cloud.drain()
    letters = [m for m in local_cloud.dead_letters()
               if m["MessageAttributes"]["sqsjobs.job"]["StringValue"] == "process-order"]
    assert {json.loads(m["Body"])["args"]["order_id"] for m in letters} >= set(orders)
    table = local_cloud.function_env("WorkerFunction")["SQSJOBS_ORDERS_TABLE"]
    dynamodb = local_cloud.clients.get("dynamodb")
    for order_id in orders:  # the orders commit late; now the jobs can run
        dynamodb.put_item(TableName=table, Item={"pk": {"S": f"order#{order_id}"}, "status": {"S": "NEW"}})
    runnable = sum(1 for m in letters if "Item" in dynamodb.get_item(
        TableName=table, Key={"pk": {"S": f"order#{json.loads(m['Body'])['args']['order_id']}"}}))
    succeeded_before = metric_total(local_cloud, "JobSucceeded", "process-order")

    page.goto(at(console, "/dlq?job=process-order"))
    page.get_by_role("button", name="Preview a redrive of these letters").click()
    expect(page.locator('[data-test="would-move"]')).to_have_text(str(len(letters)))
    assert dead_letter_count(local_cloud) >= len(letters)  # the dry run moved nothing
    page.get_by_role("button", name=f"Redrive {len(letters)} letter").click()
    expect(page.locator('[data-test="moved"]')).to_have_text(str(len(letters)))
    local_cloud.drain()

    for order_id in orders:
        item = dynamodb.get_item(TableName=table, Key={"pk": {"S": f"order#{order_id}"}}, ConsistentRead=True)
        assert item["Item"]["status"]["S"] == "PROCESSED"
    wait_for(lambda: metric_total(local_cloud, "JobSucceeded", "process-order") >= succeeded_before + runnable,
             "the redriven jobs' success metrics")
    assert metric_total(local_cloud, "JobSucceeded", "process-order") == succeeded_before + runnable
    page.goto(at(console, f"/lookup?key=process-order:{orders[0]}"))
    # The guard's record today; the job lifecycle's outcome once it lands.
    expect(page.locator('[data-test="state"]')).to_have_text("succeeded")


def test_a_post_without_the_csrf_token_is_refused_with_403(local_cloud: LocalCloudSession,
                                                           console: ConsoleServer, page: Any) -> None:
    local_cloud.enqueue("invoice-email", invoice_id=-next(_ids))
    local_cloud.drain()
    page.goto(at(console, "/dlq?job=invoice-email"))
    page.evaluate("document.querySelectorAll('input[name=csrf]').forEach(field => field.remove())")

    with page.expect_response(lambda r: r.url.endswith("/dlq/preview")) as answer:
        page.get_by_role("button", name="Preview a redrive of these letters").click()
    from_script = page.evaluate("""fetch('/dlq/redrive', {method: 'POST', body: new URLSearchParams(
        {job: 'invoice-email', max: '1'})}).then(r => r.status)""")

    assert answer.value.status == 403
    assert from_script == 403


def test_read_only_mode_has_no_buttons(local_cloud: LocalCloudSession, read_only_console: ConsoleServer,
                                       page: Any) -> None:
    local_cloud.enqueue("invoice-email", invoice_id=-next(_ids))
    local_cloud.drain()

    for path in ("/", "/dlq", "/dlq?job=invoice-email", "/jobs", "/lookup?key=invoice-email:1", "/runs"):
        page.goto(at(read_only_console, path))
        page.wait_for_selector("h1")
        assert page.locator("button, input[type=submit], form[method=post]").count() == 0, path
    page.goto(at(read_only_console, "/dlq"))
    assert page.locator("article.group").count() >= 1  # everything is shown, nothing can be changed
    assert page.evaluate("fetch('/dlq/preview', {method: 'POST'}).then(r => r.status)") == 403


def test_an_xss_body_is_inert(local_cloud: LocalCloudSession, console: ConsoleServer, page: Any) -> None:
    from playwright.sync_api import expect

    local_cloud.send("JobsQueue", XSS_BODY)
    local_cloud.send("JobsQueue", json.dumps({"v": 1, "job": XSS_JOB, "key": "x", "args": {}}),
                     {"sqsjobs.job": XSS_JOB})
    local_cloud.drain()

    for path in ("/", "/dlq"):
        page.goto(at(console, path))
        refreshes(page)  # the swapped-in copies too
        assert page.evaluate("window.__xss") is None
        assert page.locator("img[src='x'], script:not([src])").count() == 0
    expect(page.locator("pre.body", has_text=XSS_BODY).first).to_be_visible()
    expect(page.locator(".filters a", has_text=XSS_JOB)).to_be_visible()
    assert page.dialogs == []  # type: ignore[attr-defined]


def test_the_page_refreshes_itself_without_losing_the_scroll_position(
        local_cloud: LocalCloudSession, console: ConsoleServer, page: Any) -> None:
    for _ in range(3):
        local_cloud.enqueue("invoice-email", invoice_id=-next(_ids))
    local_cloud.drain()
    page.set_viewport_size({"width": 1280, "height": 400})
    page.goto(at(console, "/dlq"))
    page.evaluate("window.scrollTo(0, 300)")
    page.wait_for_function("window.scrollY === 300")
    marker = -next(_ids)

    local_cloud.enqueue("invoice-email", invoice_id=marker)  # new content arrives while the reader is scrolled
    local_cloud.drain()
    page.wait_for_function(f"document.body.textContent.includes('invoice {marker} does not exist')")
    refreshes(page)

    assert page.evaluate("window.scrollY") == 300
