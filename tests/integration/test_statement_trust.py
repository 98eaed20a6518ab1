"""The store batches writes as PartiQL statements only where a probe shows DynamoDB's semantics
(store/_statement_trust.py); elsewhere every record write is its single conditional request.

What stock moto (5.2.5) does with each statement shape the store sends is measured here first: every
adversary below is grounded in one of these measurements. Then the probe's verdict on each endpoint, what
it costs, and the worker's guarantees on endpoints that accept statements and answer them wrongly: each of
those tests fails when the runtime believes an accepted statement (the "trusting" controls show the
failure is real, not hypothetical).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import boto3
import pytest
from aws_support import CallRecorder
from partiql_adversaries import duplicate_inserts_accepted, false_where_succeeds, moto_as_is, stock_moto

from sqsjobs import JobApp, Outcome
from sqsjobs.store import _statements as s
from sqsjobs.store._dynamodb import DynamoDBStore
from sqsjobs.store._lease_ops import Acquire, Annotate, Complete, HandOver, Release, Renew
from sqsjobs.store._statement_trust import WITNESS, StatementTrust, Trust
from sqsjobs.testing import moto_partiql, sqs_event

#: the aws fixture's idempotency table (tests/integration/conftest.py)
TABLE = "idempotency"
#: endpoints whose PartiQL answers the store's statements wrongly (or not at all)
UNTRUSTWORTHY: dict[str, Callable[[], AbstractContextManager[None]]] = {
    "stock moto": stock_moto, "moto's semantics, parsed": moto_as_is,
    "duplicate INSERTs accepted": duplicate_inserts_accepted, "false WHEREs succeed": false_where_succeeds}
#: those that accept a second INSERT of a key (the trusting control of the duplicate needs one)
ACCEPTING = {name: UNTRUSTWORTHY[name] for name in ("moto's semantics, parsed", "duplicate INSERTs accepted")}


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def store_warnings() -> Iterator[list[str]]:
    """What the store says at WARNING (its logger may not propagate: Powertools' ``sqsjobs`` logger is its parent)."""
    handler = Lines()
    logger = logging.getLogger("sqsjobs.store")
    logger.addHandler(handler)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)


def request(op: Any, table: str) -> dict[str, Any]:
    return s.bind(op, table)


def fresh_client() -> Any:
    """A client no store has probed yet (the verdict is kept per client and table)."""
    return boto3.client("dynamodb", region_name="us-east-1")


# ---------------------------------------------------------------- stock moto, measured
#: every shape the store batches (store/_statements.py kind_of), each refused by DynamoDB on a DONE item
SHAPES = {
    "claim (INSERT)": Acquire(key="k", owner="b", now=0.0, lease_until=60.0, expires_at=99.0, fresh=True),
    "completion": Complete(key="k", owner="b", expires_at=99.0),
    "release": Release(key="k", owner="b", expires_at=99.0),
    "release giving an attempt back": Release(key="k", owner="b", expires_at=99.0, attempts_delta=-1),
    "hand-over": HandOver(key="k", owner="b", to_owner="c", expires_at=99.0),
    "renewal": Renew(key="k", owner="b", lease_until=120.0, expires_at=99.0),
    "annotation": Annotate(key="k", now=0.0, data={"cancel_requested": "yes"}),
}
#: what stock moto does with each: raises out of the client call (in-process), or accepts it
STOCK_ANSWERS = {"claim (INSERT)": "TypeError", "completion": "AssertionError", "release": "AssertionError",
                 "release giving an attempt back": "AssertionError", "hand-over": "AssertionError",
                 "renewal": "AssertionError", "annotation": "success, nothing written"}


def test_stock_moto_answers_no_statement_the_store_sends_as_dynamodb_does(aws: Any) -> None:
    done = {"pk": {"S": "k"}, "status": {"S": "DONE"}, "owner": {"S": "a"}, "attempts": {"N": "1"}}
    found = {}
    with stock_moto():
        for name, op in SHAPES.items():
            assert s.kind_of(op) is not None, name
            aws.dynamodb.put_item(TableName=aws.table, Item=done)
            try:
                (answer,) = aws.dynamodb.batch_execute_statement(Statements=[request(op, aws.table)])["Responses"]
            except Exception as error:  # not botocore's: in-process moto raises out of the call
                found[name] = type(error).__name__
                continue
            after = aws.dynamodb.get_item(TableName=aws.table, Key={"pk": {"S": "k"}})["Item"]
            found[name] = answer.get("Error", {}).get("Code") or (
                "success, nothing written" if after == done else "success, written")
    # DynamoDB refuses every one of them (DuplicateItem, ConditionalCheckFailed); moto refuses none.
    assert found == STOCK_ANSWERS


def test_stock_moto_overwrites_an_item_with_an_insert_and_says_a_false_where_succeeded(aws: Any) -> None:
    # The shapes its parser takes: what partiql_adversaries.moto_as_is answers the store's statements with.
    client = aws.dynamodb
    held = {"pk": {"S": "k"}, "status": {"S": "HELD"}, "owner": {"S": "a"}}
    with stock_moto():
        client.put_item(TableName=aws.table, Item=held)
        (stale,) = client.batch_execute_statement(Statements=[{
            "Statement": f'UPDATE "{aws.table}" SET "expires_at" = ?, "status" = ? WHERE "pk" = ? '
                         'AND "status" IS NOT MISSING AND ("owner" = ? AND "status" = ?)',
            "Parameters": [{"N": "9"}, {"S": "DONE"}, {"S": "k"}, {"S": "b"}, {"S": "HELD"}]}])["Responses"]
        assert "Error" not in stale  # a stale owner's completion "succeeded"...
        assert client.get_item(TableName=aws.table, Key={"pk": {"S": "k"}})["Item"] == held  # ...and wrote nothing
        (again,) = client.batch_execute_statement(Statements=[{
            "Statement": f"INSERT INTO \"{aws.table}\" VALUE {{'pk': 'k', 'status': 'HELD', 'owner': 'b'}}"}],
        )["Responses"]
        assert "Error" not in again
        assert client.get_item(TableName=aws.table, Key={"pk": {"S": "k"}})["Item"]["owner"] == {"S": "b"}


# ---------------------------------------------------------------- the probe's verdict
@pytest.mark.parametrize("endpoint", list(UNTRUSTWORTHY), ids=list(UNTRUSTWORTHY))
def test_the_probe_trusts_no_endpoint_that_answers_a_statement_wrongly(aws: Any, endpoint: str) -> None:
    client = fresh_client()  # kept: the verdict lives as long as its client
    with UNTRUSTWORTHY[endpoint]():
        trust = StatementTrust.of(client, aws.table)
        assert not trust.allows()
    assert trust.state is Trust.UNTRUSTED and trust.probes <= 2
    expected = {"stock moto": "TypeError", "moto's semantics, parsed": "WHERE was false succeeded",
                "duplicate INSERTs accepted": "second INSERT of one key succeeded",
                "false WHEREs succeed": "WHERE was false succeeded"}[endpoint]
    assert expected in str(trust.reason)


def test_the_emulation_is_trusted_after_two_probes_on_a_new_table_and_one_after(aws: Any) -> None:
    with moto_partiql():
        fresh_table = "another-idempotency"
        aws.dynamodb.create_table(TableName=fresh_table, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                                  AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                                  BillingMode="PAY_PER_REQUEST")
        clients = [fresh_client(), fresh_client()]
        first = StatementTrust.of(clients[0], fresh_table)
        assert first.allows() and first.probes == 2  # the witness written, then both statements refused
        witness = aws.dynamodb.get_item(TableName=fresh_table, Key={"pk": {"S": WITNESS}})["Item"]
        assert witness["status"] == {"S": "HELD"}  # a reserved key no job can claim, with its TTL
        second = StatementTrust.of(clients[1], fresh_table)
        assert second.allows() and second.probes == 1
        assert second.allows() and second.probes == 1  # decided: no more probes for this client


def test_a_trusted_client_s_first_batch_costs_one_probe_call_and_the_next_none(aws: Any, make_app: Any) -> None:
    client = fresh_client()  # the table's witness exists already (the aws fixture probed another client)
    app = make_app(dynamodb_client=client)

    @app.job("invoice-email", key="invoice-email:{invoice_id}")
    def send(invoice_id: int) -> None: ...

    recorder = CallRecorder(client)
    first = app.process_batch(sqs_event([json.loads(send.message(invoice_id=i).body) for i in range(10)]))
    second = app.process_batch(sqs_event([json.loads(send.message(invoice_id=i).body) for i in range(10, 20)]))
    assert [d.outcome for d in first.deliveries + second.deliveries] == [Outcome.SUCCEEDED] * 20
    # The probe, then each batch's claims and completions: 3 calls for the first batch, 2 for every other.
    assert [c["op"] for c in recorder.calls] == ["BatchExecuteStatement"] * 5


def test_an_untrusted_client_writes_each_record_alone_and_says_so_once(aws: Any, make_app: Any,
                                                                         store_warnings: list[str]) -> None:
    client = fresh_client()
    with stock_moto():
        recorder = CallRecorder(client)
        for attempt in range(2):
            app = make_app(dynamodb_client=client)

            @app.job("invoice-email", key="invoice-email:{invoice_id}")
            def send(invoice_id: int) -> None: ...

            bodies = [json.loads(send.message(invoice_id=100 * attempt + i).body) for i in range(3)]
            result = app.process_batch(sqs_event(bodies))
            assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED] * 3
            assert app.status(f"invoice-email:{100 * attempt}").state == "succeeded"
    # One probe (moto raised out of the call: botocore records no answer), then a conditional UpdateItem per
    # claim and per completion, for the second app on the same client too.
    assert StatementTrust.of(client, TABLE).probes == 1
    assert [c["op"] for c in recorder.calls if c["op"] != "GetItem"] == ["UpdateItem"] * 12  # GetItem: status
    assert len(store_warnings) <= 1  # once a process and table: an earlier test may have said it already
    assert all("sqsjobs.testing.moto_partiql()" in line for line in store_warnings)


# ---------------------------------------------------------------- the guarantees where statements lie
def worker(make_app: Any, client: Any, runs: list[str], *, statements: bool | None = None,
           during: Callable[[str], None] | None = None) -> JobApp:
    """An app as a Lambda container runs it, on ``client``; ``statements=True`` trusts the endpoint unprobed."""
    store = None if statements is None else DynamoDBStore(client, TABLE, statements=statements)
    app: JobApp = make_app(dynamodb_client=client, store=store)

    @app.job("receipt", key="receipt:{order_id}")
    def receipt(order_id: int) -> None:
        runs.append(f"receipt:{order_id}")
        if during is not None:
            during(f"receipt:{order_id}")

    return app


@pytest.fixture(params=list(UNTRUSTWORTHY), ids=list(UNTRUSTWORTHY))
def untrustworthy(request: pytest.FixtureRequest) -> Iterator[str]:
    with UNTRUSTWORTHY[request.param]():
        yield request.param


def duplicate_of_a_completed_key(make_app: Any, client: Any, *, statements: bool | None = None,
                                 orders: tuple[int, int] = (1, 2)) -> list[str]:
    """Order ``first`` runs; then a producer's second send of it comes in a batch with a new order ``other``:
    both are first deliveries (fresh claims), so a batch of statements may carry both claims.

    Returns every run, then the second batch's outcomes.
    """
    first, other = orders
    runs: list[str] = []
    app = worker(make_app, client, runs, statements=statements)
    (ran,) = app.process_batch(sqs_event([json.loads(app.message("receipt", order_id=first).body)])).deliveries
    assert ran.outcome is Outcome.SUCCEEDED
    again = [json.loads(app.message("receipt", order_id=n).body) for n in (first, other)]
    result = app.process_batch(sqs_event(again))
    return [*runs, *(f"{d.key}={d.outcome.value}" for d in result.deliveries)]


def test_a_duplicate_of_a_completed_key_never_runs_where_statements_lie(make_app: Any, untrustworthy: str) -> None:
    assert duplicate_of_a_completed_key(make_app, fresh_client()) == [
        "receipt:1", "receipt:2", "receipt:1=duplicate", "receipt:2=succeeded"]


@pytest.mark.parametrize("endpoint", list(ACCEPTING), ids=list(ACCEPTING))
def test_control_a_runtime_that_trusted_the_acceptance_would_run_the_duplicate(make_app: Any, endpoint: str) -> None:
    with ACCEPTING[endpoint]():
        outcome = duplicate_of_a_completed_key(make_app, fresh_client(), statements=True)
    assert outcome.count("receipt:1") == 2  # the guarantee the probe keeps is broken without it


def stale_completions(make_app: Any, clock: Any, client: Any, *, statements: bool | None = None,
                      orders: tuple[int, ...] = (1, 2, 3)) -> tuple[int, list[str], list[str]]:
    """Container A runs ``orders``; in the first job its lease runs out, container B takes every order over
    and finishes them; then A's completions arrive, fenced on a lease it no longer holds. They are written
    together: each is submitted when its job ends, after the clock's jump, so none has waited ``flush_after``
    (worker/_record_writes.py).

    Returns A's lost fences, every run, and B's outcomes.
    """
    runs: list[str] = []
    taken_over: list[str] = []
    b = worker(make_app, client, runs, statements=statements)

    def slow(key: str) -> None:
        if key == f"receipt:{orders[0]}" and not taken_over:
            clock.advance(10_000)
            redelivered = sqs_event(bodies, attempt=2)  # SQS gives the messages to B (receive count 2)
            taken_over.extend(f"{d.key}={d.outcome.value}" for d in b.process_batch(redelivered).deliveries)

    a = worker(make_app, client, runs, statements=statements, during=slow)
    bodies = [json.loads(a.message("receipt", order_id=n).body) for n in orders]
    result = a.process_batch(sqs_event(bodies))
    return result.fence_lost, runs, taken_over


def test_a_stale_owner_s_completions_are_refused_where_statements_lie(make_app: Any, clock: Any,
                                                                       untrustworthy: str) -> None:
    lost, runs, taken_over = stale_completions(make_app, clock, fresh_client())
    assert taken_over == ["receipt:1=succeeded", "receipt:2=succeeded", "receipt:3=succeeded"]
    assert runs.count("receipt:1") == 2  # a run whose lease ran out may run again: the lease is the guard
    assert lost == 3  # ...and every completion of A is refused: B holds the records, and they say succeeded
    app = worker(make_app, fresh_client(), [])
    assert {app.status(f"receipt:{n}").state for n in (1, 2, 3)} == {"succeeded"}


def test_control_a_runtime_that_trusted_the_acceptance_would_take_stale_completions(make_app: Any,
                                                                                     clock: Any) -> None:
    with false_where_succeeds():
        lost, _, taken_over = stale_completions(make_app, clock, fresh_client(), statements=True)
    assert len(taken_over) == 3
    assert lost == 0  # the three sent together "succeeded": fences the endpoint never checked


def test_a_batch_of_only_updates_on_stock_moto_is_answered_as_the_single_requests_answer(aws: Any) -> None:
    # Stock moto parses an annotation's one-SET UPDATE and says it succeeded on an item whose WHERE is false.
    done = {"pk": {"S": "k"}, "status": {"S": "DONE"}}
    notes = [Annotate(key=k, now=0.0, data={"cancel_requested": "yes"}) for k in ("k", "l")]
    results = {}
    for trusted in (None, True):
        with stock_moto():
            for key in ("k", "l"):
                aws.dynamodb.put_item(TableName=aws.table, Item={**done, "pk": {"S": key}})
            client = fresh_client()
            store = DynamoDBStore(client, aws.table, statements=trusted)
            results[trusted] = [w.ok for w in store.write_batch(notes)]
            store.close()
    assert results[None] == [False, False]  # refused: nobody holds these keys
    assert results[True] == [True, True]  # the trusting control: moto's "success"


def test_a_throttled_probe_decides_nothing_and_the_batch_goes_single(aws: Any) -> None:
    from botocore.stub import Stubber

    client = fresh_client()
    trust = StatementTrust.of(client, aws.table)
    with Stubber(client) as stub:
        stub.add_client_error("batch_execute_statement", "ThrottlingException", "slow down")
        assert not trust.allows() and trust.state is Trust.UNKNOWN
        stub.add_response("batch_execute_statement", {"Responses": [
            {"Error": {"Code": "DuplicateItem"}},
            {"Error": {"Code": "ConditionalCheckFailed", "Item": {"pk": {"S": WITNESS}}}}]})
        assert trust.allows() and trust.probes == 2


@pytest.mark.parametrize(("code", "advice"), [("AccessDeniedException", "PartiQLInsert"),
                                              ("ValidationException", "moto_partiql")])
def test_a_refused_probe_says_what_to_do(aws: Any, code: str, advice: str, store_warnings: list[str]) -> None:
    from botocore.stub import Stubber

    table = f"refused-{code}"
    client = fresh_client()
    trust = StatementTrust.of(client, table)
    with Stubber(client) as stub:
        stub.add_client_error("batch_execute_statement", code, "no")
        assert not trust.allows()
    (warning,) = store_warnings
    assert code in warning and advice in warning and table in warning


def test_the_emulation_keeps_the_guarantees_too(make_app: Any, clock: Any) -> None:
    # The same scenarios on an endpoint that earns the trust: the batched path answers as the single one.
    assert duplicate_of_a_completed_key(make_app, fresh_client(), orders=(11, 12)) == [
        "receipt:11", "receipt:12", "receipt:11=duplicate", "receipt:12=succeeded"]
    lost, _, taken_over = stale_completions(make_app, clock, fresh_client(), orders=(13, 14, 15))
    assert len(taken_over) == 3 and lost == 3


def test_moto_partiql_answers_the_statements_for_its_block_only(aws: Any) -> None:
    from sqsjobs.local import moto_partiql as emulation

    with stock_moto():
        before = fresh_client()
        assert not StatementTrust.of(before, aws.table).allows()
        with moto_partiql():
            assert emulation.installed()
            inside = fresh_client()
            assert StatementTrust.of(inside, aws.table).allows()
        assert not emulation.installed()  # put back: the next client meets moto's own PartiQL again
        after = fresh_client()
        assert not StatementTrust.of(after, aws.table).allows()


def test_on_a_moto_server_one_statement_decides_before_any_http_500(aws: Any) -> None:
    # Stock moto's server answers the probe's own statements with an HTTP 500, which botocore's legacy retry
    # mode (botocore 1.36's default) retries ten times over 25 s: a first statement it parses decides first.
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=f"http://{host}:{port}")
        recorder = CallRecorder(client)
        with stock_moto():
            stock = StatementTrust.of(client, aws.table)
            assert not stock.allows() and stock.probes == 1
        assert "WHERE was false succeeded" in str(stock.reason)
        assert [c["op"] for c in recorder.calls] == ["BatchExecuteStatement"]  # answered, never a 500

        emulated = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=f"http://{host}:{port}")
        with moto_partiql():
            trust = StatementTrust.of(emulated, aws.table)
            assert trust.allows() and trust.probes == 2  # the first statement, then the probe (witness there)
    finally:
        server.stop()
