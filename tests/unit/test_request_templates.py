"""The guard's cached request shapes equal what pynamodb builds per call, for any values."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sqsjobs.dynamodb_store import build_template
from sqsjobs.guard import COMPLETED, IN_PROGRESS
from sqsjobs.records import job_record_model

m = job_record_model("t")
keys = st.text(min_size=1, max_size=40).filter(lambda s: "\x00" not in s)
times = st.floats(min_value=0, max_value=4e9, allow_nan=False) | st.integers(min_value=0, max_value=4_000_000_000)


@settings(max_examples=200, deadline=None)
@given(key=keys, owner=keys, job=keys, lease=times, now=times, ttl=times)
def test_claim_matches_pynamodb(key: str, owner: str, job: str, lease: float, now: float, ttl: float) -> None:
    direct = m(key, status=IN_PROGRESS, owner=owner, lease_until=lease, job=job, expires_at=ttl)
    free = m.pk.does_not_exist() | ((m.status == IN_PROGRESS) & (m.lease_until < now)) | (m.expires_at < now)
    expected = direct.get_save_kwargs_from_instance(condition=free, return_values_on_condition_failure="ALL_OLD")
    filled = build_template(m, "claim+ttl").fill(key=key, owner=owner, job=job, lease_until=lease, now=now,
                                                 expires_at=ttl)
    assert filled == expected


@settings(max_examples=100, deadline=None)
@given(key=keys, owner=keys, ttl=times)
def test_complete_and_release_match_pynamodb(key: str, owner: str, ttl: float) -> None:
    complete = m(key).get_update_kwargs_from_instance(
        actions=[m.status.set(COMPLETED), m.expires_at.set(ttl)],
        condition=(m.owner == owner) & (m.status == IN_PROGRESS))
    assert build_template(m, "complete").fill(key=key, owner=owner, expires_at=ttl) == complete
    release = m(key).get_delete_kwargs_from_instance(condition=m.owner == owner)
    assert build_template(m, "release").fill(key=key, owner=owner) == release


def test_a_claim_without_ttl_has_no_expires_at_item_attribute() -> None:
    filled = build_template(m, "claim").fill(key="k", owner="o", job="j", lease_until=5, now=1)
    assert "expires_at" not in filled["Item"]
    assert filled["Item"]["lease_until"] == {"N": "5"}
