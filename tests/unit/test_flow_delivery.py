"""A delivery's tenant and its deferral: a standard queue's group id is a tenant, a FIFO queue's an order; a
deferral is a move of its own, and its re-send keeps the delay and the tenant and counts no re-send."""

from __future__ import annotations

from typing import Any

import pytest

from sqsjobs.enqueue._message import ATTR_RESENDS
from sqsjobs.testing import DEFAULT_ARN, DEFAULT_FIFO_ARN, sqs_record
from sqsjobs.worker._decision import SETTLES_TO, Action, Decision, Ending, Facts, decide
from sqsjobs.worker._delivery import Delivery, IllegalTransition, Outcome, State
from sqsjobs.worker._send_back import resend_entry


def delivery(**options: Any) -> Delivery:
    return Delivery.parse(sqs_record({"v": 1}, **options), 0)


def decoded(**options: Any) -> Delivery:
    d = delivery(**options)
    d.decoded(envelope=None, job=None, args={}, key="k", fingerprint="f")  # type: ignore[arg-type]
    return d


def test_a_standard_queues_group_id_is_a_tenant_and_a_fifo_queues_an_order() -> None:
    fair = delivery(tenant="acme")
    assert (fair.tenant, fair.group_id, fair.event_source_arn) == ("acme", None, DEFAULT_ARN)
    ordered = delivery(group_id="account-7")
    assert (ordered.tenant, ordered.group_id, ordered.event_source_arn) == (None, "account-7", DEFAULT_FIFO_ARN)
    record = sqs_record({"v": 1}, group_id="account-7")
    del record["eventSourceARN"]  # no ARN to tell: a group id is taken for an order, as before fair queues
    assert Delivery.parse(record, 0).group_id == "account-7"
    with pytest.raises(ValueError, match="either a FIFO group_id or a tenant"):
        sqs_record({}, group_id="a", tenant="b")


def deferral(limiter: str, delay: float) -> Decision:
    return decide(Facts(ending=Ending.DEFERRED, wait=delay, limiter=limiter))


def test_a_deferral_goes_back_from_decoded_or_claimed_and_nowhere_else() -> None:
    before_claim = decoded()
    before_claim.decided(deferral("ses", 2))
    assert (before_claim.action, before_claim.outcome, before_claim.deferred_by, before_claim.delay) == (
        Action.RETURN, Outcome.DEFERRED, "ses", 2)
    claimed = decoded()
    claimed.claimed(attempt=1, took_over=False, previous=None)
    claimed.decided(deferral("pdf", 1))
    assert claimed.outcome is Outcome.DEFERRED and claimed.holds_lease
    done = decoded()
    done.decided(decide(Facts(ending=Ending.DUPLICATE)))
    with pytest.raises(IllegalTransition, match="decided twice"):
        done.decided(deferral("ses", 1))


def test_a_deferred_resend_keeps_its_delay_and_tenant_and_counts_no_resend() -> None:
    d = decoded(tenant="acme", attributes={ATTR_RESENDS: "3"})
    d.decided(deferral("ses", 7))
    entry = resend_entry(d, "0", fifo=False)
    assert entry["DelaySeconds"] == 7 and entry["MessageGroupId"] == "acme"
    assert entry["MessageAttributes"][ATTR_RESENDS]["StringValue"] == "3"
    waited = decoded()
    waited.decided(decide(Facts(ending=Ending.NO_TIME)))
    assert resend_entry(waited, "0", fifo=False)["MessageAttributes"][ATTR_RESENDS]["StringValue"] == "1"
    fresh = decoded()
    fresh.decided(deferral("ses", 1))
    assert ATTR_RESENDS not in resend_entry(fresh, "0", fifo=False)["MessageAttributes"]


@pytest.mark.parametrize("was", list(Action))
@pytest.mark.parametrize("to", list(Action))
def test_settling_turns_a_decided_action_only_as_settles_to_allows(was: Action, to: Action) -> None:
    d = decoded()
    d.decided(Decision(action=was, outcome=Outcome.RETRY))
    assert (d.state, d.action) == (State.DECIDED, was)
    if to is was or to in SETTLES_TO[was]:
        d.settled(Decision(action=to, outcome=Outcome.RETRY))
        assert (d.state, d.action) == (State.DECIDED, to)
    else:
        with pytest.raises(IllegalTransition, match="is not a legal move"):
            d.settled(Decision(action=to, outcome=Outcome.RETRY))
        assert d.action is was
    d.finished()
    assert d.action is None and d.state in (State.ACKED, State.RETURNED)
