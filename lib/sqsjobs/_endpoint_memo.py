"""Endpoint resolution once per (client, operation): the memo sqsjobs puts on its own clients.

botocore resolves a request's endpoint on every call: it builds the ruleset's
parameters (region, FIPS, dual-stack, account id, the operation's context
parameters), fires ``before-endpoint-resolution``, then looks the result up in
its rule cache. The lookup is cached; building its key is not, and costs
about 20-50 µs a call (the benchmark's "endpoint memo" row measures it). For
one client the answer changes only with those parameters, so this memo keeps
it per operation, and per the values of its context parameters (a DynamoDB
``UpdateItem`` resolves by ``TableName``):

- an operation with no context parameters (``BatchExecuteStatement``, every
  SQS call) is resolved once per client;
- one whose context parameters are members of the request (``PutItem``,
  ``UpdateItem``: ``TableName``) is resolved once per distinct value;
- one whose context parameters are JMESPath expressions over the request
  (``TransactWriteItems``' list of tables) goes through botocore every time.

What is skipped on a memo hit: the ``before-endpoint-resolution`` event (so a
handler registered on a client after its first call of an operation is not
consulted for it; sqsjobs registers none, and it is installed only on the
runtime's DynamoDB, SQS and Scheduler clients, never on a job's S3 client,
whose endpoint hooks follow redirects) and the User-Agent feature ids of the
account-id mode. Credentials that change account would need a new client
anyway: the runtime's role is its account.

The hook is botocore's private ``client._ruleset_resolver.construct_endpoint``
(botocore/client.py ``_resolve_endpoint_ruleset`` calls it). ``install``
checks its shape and leaves the client alone when it differs, so a botocore
that moved it only loses the saving; pyproject.toml pins botocore to the
minor versions tested, and tests/unit/test_endpoint_memo.py fails when the
attribute or its signature change.

Example (the Stubber answers; the second call of an operation resolves nothing):
    >>> from botocore.session import Session
    >>> from botocore.stub import Stubber
    >>> sqs = Session().create_client("sqs", region_name="eu-west-1", aws_access_key_id="k",
    ...                               aws_secret_access_key="s")
    >>> memo = install(sqs)
    >>> with Stubber(sqs) as stub:
    ...     for _ in range(3):
    ...         stub.add_response("get_queue_url", {"QueueUrl": "https://q"})
    ...         _ = sqs.get_queue_url(QueueName="jobs")
    >>> memo.resolved, memo.hits
    (1, 2)
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Hashable
from typing import Any

#: the private attribute of a botocore client that resolves endpoints, and its method
RESOLVER_ATTRIBUTE = "_ruleset_resolver"
RESOLVER_METHOD = "construct_endpoint"
#: the parameters botocore passes to it (botocore/client.py ``_resolve_endpoint_ruleset``)
RESOLVER_PARAMETERS = ("operation_model", "call_args", "request_context")
#: answers kept per client (a client names few operations and tables; past this, botocore resolves)
MAX_ENTRIES = 256


class EndpointMemo:
    """A client's ``construct_endpoint``, answered from memory for the same operation and context values."""

    def __init__(self, resolve: Callable[..., Any]) -> None:
        self._resolve = resolve
        self._answers: dict[Hashable, Any] = {}
        self._lock = threading.Lock()
        #: how many resolutions went to botocore, and how many were answered here (tests and the bench read them)
        self.resolved = 0
        self.hits = 0

    def __call__(self, operation_model: Any, call_args: Any, request_context: Any) -> Any:
        key = memo_key(operation_model, call_args)
        if key is not None:
            answer = self._answers.get(key)
            if answer is not None:
                self.hits += 1
                return answer
        answer = self._resolve(operation_model=operation_model, call_args=call_args,
                               request_context=request_context)
        self.resolved += 1
        if key is not None:
            with self._lock:
                if len(self._answers) < MAX_ENTRIES:
                    self._answers[key] = answer
        return answer


def memo_key(operation_model: Any, call_args: Any) -> Hashable | None:
    """What the endpoint of one call depends on beyond the client: the operation and its context values.

    None when botocore must resolve it (JMESPath context parameters, or a value that is not a string).

    Example:
        >>> from botocore.session import Session
        >>> ddb = Session().get_service_model("dynamodb")
        >>> memo_key(ddb.operation_model("BatchExecuteStatement"), {"Statements": []})
        ('BatchExecuteStatement',)
        >>> memo_key(ddb.operation_model("UpdateItem"), {"TableName": "jobs", "Key": {}})
        ('UpdateItem', 'jobs')
        >>> memo_key(ddb.operation_model("TransactWriteItems"), {"TransactItems": []}) is None
        True
    """
    if operation_model.operation_context_parameters:
        return None
    values: list[str] = [operation_model.name]
    for parameter in operation_model.context_parameters:
        value = (call_args or {}).get(parameter.member_name)
        if value is not None and not isinstance(value, str):
            return None
        values.append(value or "")
    # Static context parameters are constants of the operation: its name covers them.
    return tuple(values)


def install(client: Any) -> EndpointMemo | None:
    """Put an ``EndpointMemo`` on ``client``'s resolver; None (client untouched) when botocore's hook differs."""
    resolver = getattr(client, RESOLVER_ATTRIBUTE, None)
    method = getattr(resolver, RESOLVER_METHOD, None)
    if resolver is None or not callable(method) or not hook_has_expected_shape(method):
        return None
    memo = EndpointMemo(method)
    setattr(resolver, RESOLVER_METHOD, memo)
    return memo


def hook_has_expected_shape(method: Callable[..., Any]) -> bool:
    """Whether ``method`` takes exactly botocore's three keyword parameters (the shape this memo wraps)."""
    try:
        parameters = tuple(inspect.signature(method).parameters)
    except (TypeError, ValueError):
        return False
    return parameters == RESOLVER_PARAMETERS
