"""E9109 (a function's message limit fits its queues) and E9110 (provisioned pollers), issue 25 "Also".

Both run inside cfn-lint with the sqsjobs rules, on the small SAM template of template_support, on plain
CloudFormation, and on the shipped template with the parameter values `sqsjobs check -p` passes.
"""

from __future__ import annotations

import pytest
from template_support import cfn_template, ids, lint, load_template, mutate, sam_template

MIB = 1_048_576
LIMIT = "Resources/Worker/Properties/Environment/Variables/SQSJOBS_MAX_MESSAGE_BYTES"


# ------------------------------------------------------------------ E9109
def test_a_function_limit_over_its_queues_size_is_an_error_naming_both_and_the_fix() -> None:
    found = lint(mutate(sam_template(), LIMIT, MIB))
    assert ids(found) == ["E9109", "E9109"]  # the jobs queue it reads, and its DLQ
    message = dict(found)["E9109"]
    assert "Worker sends messages of up to 1048576 bytes (SQSJOBS_MAX_MESSAGE_BYTES)" in message
    assert "takes at most 262144 (MaximumMessageSize unset)" in message
    assert "Fix: give" in message and "the same value" in message


def test_a_queue_as_large_as_the_limit_passes_and_a_smaller_one_fails() -> None:
    template = mutate(sam_template(), LIMIT, MIB)
    for queue in ("Jobs", "Dlq"):
        template = mutate(template, f"Resources/{queue}/Properties/MaximumMessageSize", MIB)
    assert lint(template) == []
    found = lint(mutate(template, "Resources/Dlq/Properties/MaximumMessageSize", 524_288))
    assert ids(found) == ["E9109"] and "Dlq takes at most 524288 (MaximumMessageSize)" in dict(found)["E9109"]


def test_without_the_variable_the_apps_default_must_fit_too() -> None:
    found = lint(mutate(sam_template(), "Resources/Jobs/Properties/MaximumMessageSize", 65_536))
    assert ids(found) == ["E9109"]
    assert "(SQSJOBS_MAX_MESSAGE_BYTES unset: 262144)" in dict(found)["E9109"]


def test_plain_cloudformation_is_checked_the_same_way() -> None:
    template = mutate(cfn_template(), "Resources/Worker/Properties/Environment",
                      {"Variables": {"SQSJOBS_MAX_ATTEMPTS": 6, "SQSJOBS_MAX_MESSAGE_BYTES": 600_000}})
    assert "E9109" in ids(lint(template))


@pytest.mark.slow
def test_the_shipped_template_feeds_queues_and_functions_one_size_whatever_the_value() -> None:
    for size in ("1024", "262144", "1048576"):
        assert lint(load_template(), parameters={"MaximumMessageSize": size}) == []


# ------------------------------------------------------------------ E9110
PPC = "Resources/Worker/Properties/Events/Jobs/Properties/ProvisionedPollerConfig"
SCALING = "Resources/Worker/Properties/Events/Jobs/Properties/ScalingConfig"


@pytest.mark.parametrize("config, expected", [
    ({"MinimumPollers": 1, "MaximumPollers": 10}, "MinimumPollers 1 is outside 2..200"),
    ({"MinimumPollers": 2, "MaximumPollers": 2001}, "MaximumPollers 2001 is outside 2..2000"),
    ({"MinimumPollers": 300}, "MinimumPollers 300 is outside 2..200"),
    ({"MinimumPollers": 50, "MaximumPollers": 10}, "MinimumPollers 50 is above MaximumPollers 10"),
    ({"MinimumPollers": 250}, "MinimumPollers 250 is above MaximumPollers 200"),  # the default maximum
])
def test_pollers_out_of_lambdas_bounds_are_an_error(config: dict[str, int], expected: str) -> None:
    found = lint(mutate(sam_template(), PPC, config))
    assert "E9110" in ids(found) and any(expected in m for rule, m in found if rule == "E9110")


def test_provisioned_mode_within_bounds_passes_and_with_maximum_concurrency_fails() -> None:
    template = mutate(sam_template(), PPC, {"MinimumPollers": 5, "MaximumPollers": 100})
    assert lint(template) == []
    found = lint(mutate(template, SCALING, {"MaximumConcurrency": 10}))
    assert ids(found) == ["E9110"] and "Lambda takes one or the other" in dict(found)["E9110"]


@pytest.mark.slow
def test_the_shipped_template_is_off_by_default_and_checked_with_the_values_given() -> None:
    template = load_template()
    jobs = template["Resources"]["WorkerFunction"]["Properties"]["Events"]["Jobs"]["Properties"]
    assert jobs["ProvisionedPollerConfig"]["Fn::If"][0] == "UseProvisionedPollers"
    assert lint(template) == []
    assert lint(template, parameters={"ProvisionedMinimumPollers": "20", "ProvisionedMaximumPollers": "400"}) == []
    found = lint(template, parameters={"ProvisionedMinimumPollers": "50", "ProvisionedMaximumPollers": "10"})
    assert ids(found) == ["E9110"]
    assert "raise parameter ProvisionedMaximumPollers to at least 50" in dict(found)["E9110"]
    assert "set parameter ProvisionedMinimumPollers within 2..200" in dict(
        lint(template, parameters={"ProvisionedMinimumPollers": "1"}))["E9110"]
