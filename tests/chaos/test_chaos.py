"""The chaos run at a few hundred jobs: nothing lost under injected faults (2% of DynamoDB calls failing after
botocore's retries among them), duplicates within their bound, and each job group's counts and callbacks exact
(``make chaos`` runs 10,000 jobs, 2,000 of them in groups, and writes CHAOS.md)."""

from __future__ import annotations

from chaos.harness import ChaosConfig, run_chaos

#: a seed under which every kind of fault happens at this size (checked below)
SEED = 8
JOBS = 400


def test_no_job_is_lost_under_injected_faults() -> None:
    ledger = run_chaos(ChaosConfig(jobs=JOBS, seed=SEED, fail=0.02))
    print(ledger.render())

    assert ledger.problems == []
    assert ledger.lost == 0
    assert ledger.jobs == ledger.completed_keys + ledger.dead_lettered_keys - ledger.completed_and_dead_lettered_keys
    # The run must really have exercised every fault, or a pass proves little.
    for fault in ("transient", "permanent", "killed before the side effect", "killed after the side effect"):
        assert ledger.faults[fault] > 0, fault
    assert ledger.duplicates_sent > 0 and ledger.outcomes["duplicate"] > 0
    assert ledger.throttles_injected > 0
    # Calls failed after botocore's retries, each attempt refused, and the worker saw those errors.
    assert sum(ledger.doomed_calls.values()) > 0 and ledger.retry_sleeps >= 10 * sum(ledger.doomed_calls.values())
    assert ledger.store_unavailable_retries > 0
    assert ledger.duplicate_effects <= ledger.exposed_effects + ledger.unrecorded
    assert ledger.dlq_moved_by_queue == ledger.dlq_moved_after_a_kill
    assert ledger.retry_delays_checked > 0 and not ledger.retry_delays_out_of_bounds
    assert ledger.dlq_by_reason["permanent"] > 0
    # Groups: some ran, each callback exactly once (the ledger's problems say otherwise).
    assert ledger.groups > 0 and ledger.group_members == ledger.groups * ledger.config.group_size
    assert sum(n for (_, kind), n in ledger.callback_runs.items() if kind == "on_complete") >= ledger.groups
