"""Whether a table's ``BatchExecuteStatement`` may carry real writes: earned by a probe, lost for good by a failure.

The batched path (``store/_statements.py``) believes each statement's answer:
an ``INSERT`` that succeeds is a claim, an ``UPDATE`` that succeeds is a fenced
completion. Those answers mean that only where the endpoint keeps DynamoDB's
documented semantics, and an endpoint that does not must never see a real
write as a statement. Stock moto does not (5.2.5, checked by
tests/integration/test_statement_trust.py against each shape the store sends):
in-process, ``INSERT ... VALUE {'a': ?}`` raises ``TypeError`` and two ``SET``
clauses ``AssertionError`` out of the client call; as a server both are an
HTTP 500; and the shapes it does parse are answered wrongly: a second
``INSERT`` of a key overwrites it, an ``UPDATE`` whose ``WHERE`` is false
succeeds. The endpoint URL proves nothing: in-process ``mock_aws`` answers the
real AWS endpoints.

So before the first batched write a store sends one **probe** whose every
correct answer is a refusal, built by the same renderer as the real
statements (``_statements.bind``):

- the ``INSERT`` a first delivery's claim sends, of the witness item
  ``sqsjobs#partiql`` (a reserved key: no job can claim it; a lease that
  ended at 0, so never a live run): once the witness exists DynamoDB answers
  ``DuplicateItem`` and writes nothing;
- the ``UPDATE`` a stale owner's completion sends, on the witness: its fence
  (owner and status) does not hold, so ``ConditionalCheckFailed`` with the
  witness as ``Error.Item`` (``ALL_OLD``).

On an endpoint that is not AWS's, one statement goes first: an ``UPDATE``
whose ``WHERE`` is false, in a shape moto's parser takes. Stock moto's server
answers the probe above with an HTTP 500, which botocore's legacy retry mode
(botocore 1.36's default) retries ten times over 25 s; this one it answers at
once, and wrongly: that decides. AWS endpoints skip it (the probe's cost
there stays one call), and under ``mock_aws`` moto raises out of the call,
with no retry.

When the ``INSERT`` wrote the witness (the table's first probe, or the
witness's TTL ran out) the probe is sent once more and must then be refused
twice. Answered as documented, statements are **trusted** for the life of the
client (one call and two write units per cold start; the witness once a month
more): the verdict is kept per client and table (``StatementTrust.of``), so
every store on them shares it, and a client built for another endpoint starts
unknown.
Any other answer makes them **untrusted** for good; so does a batched call
that later fails whole with an error that is not throttling (a validation or
server error, a denied ``PartiQLInsert``/``PartiQLUpdate``), or with an
exception that is not botocore's (in-process moto), or a statement refused
for such a reason. Untrusted, every record write is its own conditional
request (``store/_dynamodb.py`` ``write``, the reference semantics): the same
guarantees, more requests. It is said once a process and table, at WARNING,
with what to do. A probe that meets throttling or a lost connection decides
nothing: that batch goes single and the next one probes again.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sqsjobs.store import _statement_answers as answers
from sqsjobs.store import _statements as s
from sqsjobs.store._lease_ops import Acquire, Complete

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: the probe's witness item (``sqsjobs#``: reserved, ``store/_lease.py`` RESERVED_PREFIXES)
WITNESS = "sqsjobs#partiql"
#: the witness's owner; the probe's completion comes from another, so its fence fails
WITNESS_OWNER = "sqsjobs-probe"
#: the witness's TTL: the table keeps one small item, re-made by a probe after it expires
WITNESS_TTL = 30 * 86_400.0
#: whole-call error codes that say nothing about the statements (retried as store errors, the trust stays)
PASSING_CALL_ERRORS = frozenset({
    "ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded",
    "LimitExceededException", "ResourceNotFoundException", "UnrecognizedClientException",
    "ExpiredTokenException", "InvalidSignatureException", "MissingAuthenticationTokenException",
    "IncompleteSignatureException", "ServiceUnavailable", "ServiceUnavailableException",
})
#: a statement's own error codes that say nothing about the statements (retried: ``_statement_answers.read``)
PASSING_STATEMENT_ERRORS = frozenset({
    "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded", "TransactionConflict",
    "InternalServerError", "ResourceNotFound", "ItemCollectionSizeLimitExceeded",
})
#: the host names of AWS's own endpoints (``on_aws``)
AWS_HOSTS = (".amazonaws.com", ".amazonaws.com.cn", ".api.aws")
#: what the warning says to do when the endpoint refused PartiQL itself
GRANT = "grant dynamodb:PartiQLInsert and dynamodb:PartiQLUpdate on the table to batch them again"
#: what the warning says to do otherwise
ON_MOTO = ("on moto this is expected and needs nothing (under in-process mock_aws, "
           "sqsjobs.testing.moto_partiql() keeps the batched path: docs/testing.md, 'Testing with moto'); "
           "on AWS it is a bug of sqsjobs' statements: please report it")

log = logging.getLogger("sqsjobs.store")
_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()
#: each client's verdicts, by table (weak: a client dropped takes its verdicts with it)
_verdicts: weakref.WeakKeyDictionary[Any, dict[str, StatementTrust]] = weakref.WeakKeyDictionary()
_verdicts_lock = threading.Lock()


class Trust(StrEnum):
    """What a store knows of its table's ``BatchExecuteStatement``."""

    UNKNOWN = "unknown"  #: no probe answered yet
    TRUSTED = "trusted"  #: the probe was refused as DynamoDB documents
    UNTRUSTED = "untrusted"  #: a probe or a call showed otherwise: single requests for good


def call_failure(error: BaseException) -> str | None:
    """Why a failed ``BatchExecuteStatement`` call shows the statements unusable (None: a passing failure).

    Example:
        >>> from botocore.exceptions import ClientError
        >>> call_failure(ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "X")) is None
        True
        >>> call_failure(ClientError({"Error": {"Code": "500", "Message": "<h1>Internal Server Error</h1>"}}, "X"))
        '500: Internal Server Error'
        >>> call_failure(TypeError('Unsupported type "Variable"'))
        'TypeError: Unsupported type "Variable"'
    """
    from botocore.exceptions import BotoCoreError, ClientError

    if isinstance(error, ClientError):
        details = error.response.get("Error", {})
        code = str(details.get("Code") or "")
        if code in PASSING_CALL_ERRORS:
            return None
        return f"{code}: {_short(str(details.get('Message') or ''))}"
    if isinstance(error, BotoCoreError):  # a connection lost, a read timeout: the call may be sent again
        return None
    return f"{type(error).__name__}: {_short(str(error))}"


def statement_failure(error: Mapping[str, Any]) -> str | None:
    """Why one statement's ``Error`` shows the statements unusable (None: a refusal, or a passing failure).

    Example:
        >>> statement_failure({"Code": "ConditionalCheckFailed"}) is None
        True
        >>> statement_failure({"Code": "ValidationError", "Message": "Unexpected from source"})
        'ValidationError: Unexpected from source'
    """
    code = str(error.get("Code") or "")
    if code in answers.REFUSALS or code in PASSING_STATEMENT_ERRORS:
        return None
    return f"{code or 'no code'}: {_short(str(error.get('Message') or ''))}"


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(re.sub(r"<[^>]*>", " ", text).split())  # a server's HTML error page: its words
    return text if len(text) <= limit else text[:limit - 3] + "..."


class StatementTrust:
    """The trust one store (one client, one table) puts in ``BatchExecuteStatement``.

    ``trusted`` decides without a probe: ``True`` (the caller vouches for the
    endpoint: a test that stubs the calls), ``False`` (single requests always).

    Example:
        >>> from botocore.stub import Stubber
        >>> from sqsjobs._clients import dynamodb_client
        >>> client = dynamodb_client(region_name="eu-west-1")
        >>> trust = StatementTrust(client, "jobs", clock=lambda: 0.0)
        >>> witness = {"pk": {"S": WITNESS}, "status": {"S": "HELD"}, "owner": {"S": WITNESS_OWNER}}
        >>> with Stubber(client) as stub:  # DynamoDB's answers: both statements refused
        ...     stub.add_response("batch_execute_statement", {"Responses": [
        ...         {"Error": {"Code": "DuplicateItem"}},
        ...         {"Error": {"Code": "ConditionalCheckFailed", "Item": witness}}]})
        ...     trust.allows()
        True
        >>> trust.state.value
        'trusted'
    """

    def __init__(self, client: DynamoDBClient, table: str, *, trusted: bool | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        #: weak: the shared registry keys on the client, and a strong reference here would keep it alive
        self._client = weakref.ref(client)
        #: where the client sends its requests (said in the warning)
        self.endpoint = str(getattr(getattr(client, "meta", None), "endpoint_url", "") or "")
        self.table = table
        self.clock = clock
        self.state = Trust.UNKNOWN if trusted is None else Trust.TRUSTED if trusted else Trust.UNTRUSTED
        #: why the statements are untrusted (None: they are not)
        self.reason: str | None = None
        #: probe calls sent (each one ``BatchExecuteStatement`` of two statements)
        self.probes = 0
        self._lock = threading.RLock()  # the probe, under it, may lose the trust

    @property
    def client(self) -> DynamoDBClient:
        """The client the probe goes through (a store using this trust keeps it alive)."""
        client = self._client()
        if client is None:
            raise ReferenceError("the client of this StatementTrust is gone")
        return client

    def serves(self, client: DynamoDBClient) -> bool:
        """Whether this is the trust of ``client``."""
        return self._client() is client

    @classmethod
    def of(cls, client: DynamoDBClient, table: str, *, trusted: bool | None = None) -> StatementTrust:
        """The trust shared by every store on ``client`` and ``table``; one of its own when ``trusted`` decides."""
        if trusted is not None:
            return cls(client, table, trusted=trusted)
        with _verdicts_lock:
            tables = _verdicts.setdefault(client, {})
            found = tables.get(table)
            if found is None:
                found = tables[table] = cls(client, table)
            return found

    def allows(self) -> bool:
        """Whether a batch's writes may go as statements; the first call probes (once, under a lock)."""
        if self.state is Trust.UNKNOWN:
            with self._lock:
                if self.state is Trust.UNKNOWN:
                    self._probe()
        return self.state is Trust.TRUSTED

    def lose(self, why: str) -> None:
        """Untrusted for good, because of ``why`` (said once a process and table, at WARNING)."""
        with self._lock:
            if self.state is Trust.UNTRUSTED:
                return
            self.state, self.reason = Trust.UNTRUSTED, why
        with _warned_lock:
            if (self.endpoint, self.table) in _warned:
                return
            _warned.add((self.endpoint, self.table))
        advice = GRANT if "AccessDenied" in why else ON_MOTO
        log.warning("DynamoDB BatchExecuteStatement on table %r at %s does not answer as DynamoDB documents (%s): "
                    "each job record is written with its own conditional request instead (the same guarantees, "
                    "one request a record instead of one a batch); %s",
                    self.table, self.endpoint or "the default endpoint", why, advice)

    # ------------------------------------------------------------------ the probe
    def _probe(self) -> None:
        if not on_aws(self.endpoint) and not self._first_look():
            return
        now = self.clock()
        # A lease that ended in 1970: whatever clock a reader keeps, the witness is never a live run.
        insert = s.bind(Acquire(key=WITNESS, owner=WITNESS_OWNER, now=0.0, lease_until=0.0,
                                expires_at=now + WITNESS_TTL, fresh=True), self.table)
        stale = Complete(key=WITNESS, owner=f"sqsjobs-probe-{uuid.uuid4().hex}", expires_at=now + WITNESS_TTL)
        update = s.bind(stale, self.table)
        for first in (True, False):
            answer = self._send([insert, update])
            if answer is None:  # a passing failure: nothing decided, the next batch probes again
                return
            if isinstance(answer, str):
                self.lose(answer)
                return
            inserted, refused = answer[0], answer[1]
            verdict = _refused_update(refused, need_item=not (first and inserted is None))
            if verdict is not None:
                self.lose(verdict)
                return
            if inserted is None:  # the witness was written now: the same probe must be refused twice
                if first:
                    continue
                self.lose("a second INSERT of one key succeeded")
                return
            failure = statement_failure(inserted)
            if failure is not None or inserted.get("Code") != "DuplicateItem":
                self.lose(failure or f"an INSERT of an existing key answered {inserted.get('Code')}")
                return
            self.state = Trust.TRUSTED
            return

    def _first_look(self) -> bool:
        """Whether the probe is worth sending to an endpoint that is not AWS's (False: decided, or undecided).

        Stock moto's server answers the probe's statements with an HTTP 500, which botocore retries: with
        botocore's legacy retry mode (1.36's default; 1.44's is standard) that is ten tries and 25 s of
        backoff. A false ``WHERE`` in a shape its parser takes is answered at once, and wrongly (success):
        enough to decide, without a retry.
        """
        answer = self._send([{
            "Statement": f'UPDATE "{self.table}" SET "owner" = ? WHERE "pk" = ? AND "status" IS NOT MISSING '
                         'AND "owner" = ?',
            "Parameters": [{"S": WITNESS_OWNER}, {"S": WITNESS}, {"S": f"sqsjobs-probe-{uuid.uuid4().hex}"}],
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}])
        if answer is None:
            return False
        why = answer if isinstance(answer, str) else _refused_update(answer[0], need_item=False)
        if why is not None:
            self.lose(why)
            return False
        return True

    def _send(self, statements: list[dict[str, Any]]) -> list[Mapping[str, Any] | None] | str | None:
        """Each statement's error (None: succeeded), or why the call shows them unusable, or None (passing)."""
        self.probes += 1
        try:
            response = self.client.batch_execute_statement(Statements=statements)  # type: ignore[arg-type]
        except Exception as error:  # in-process moto raises its own exceptions out of the call
            return call_failure(error)
        answers = list(response.get("Responses") or [])
        if len(answers) != len(statements):
            return f"{len(answers)} answers to {len(statements)} statements"
        errors: list[Mapping[str, Any] | None] = [a.get("Error") or None for a in answers]
        if any(e is not None and str(e.get("Code") or "") in PASSING_STATEMENT_ERRORS for e in errors):
            return None
        return errors


def on_aws(endpoint: str) -> bool:
    """Whether ``endpoint`` is one of AWS's own (moto's in-process ``mock_aws`` answers those too).

    It only orders the probe (``StatementTrust._first_look``); it never decides a trust.

    Example:
        >>> on_aws("https://dynamodb.eu-west-1.amazonaws.com"), on_aws("http://127.0.0.1:5000")
        (True, False)
    """
    host = (urlsplit(endpoint).hostname or "").lower()
    return host.endswith(AWS_HOSTS)


def _refused_update(error: Mapping[str, Any] | None, *, need_item: bool) -> str | None:
    """Why the probe's fenced ``UPDATE`` answer is not DynamoDB's (None: it is)."""
    if error is None:
        return "an UPDATE whose WHERE was false succeeded"
    failure = statement_failure(error)
    if failure is not None:
        return failure
    if error.get("Code") != "ConditionalCheckFailed":
        return f"an UPDATE whose WHERE was false answered {error.get('Code')}"
    item = error.get("Item") or {}
    if item.get("pk") == {"S": WITNESS}:
        return None
    if need_item:
        return "a refused UPDATE did not return the item (ReturnValuesOnConditionCheckFailure=ALL_OLD)"
    return None
