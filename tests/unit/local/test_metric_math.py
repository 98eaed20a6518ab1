"""Metric math as the template's alarms use it."""

from __future__ import annotations

import pytest

from sqsjobs.local.metric_math import MathError, evaluate


def test_the_failure_rate_expression_of_the_template() -> None:
    values = {"succeeded": 19.0, "failed": 1.0}
    values["failures"] = evaluate("FILL(failed, 0)", values)
    values["runs"] = evaluate("FILL(succeeded, 0) + failures", values)

    assert evaluate("IF(runs > 0, 100 * failures / runs, 0)", values) == 5.0


def test_missing_data_propagates_unless_filled() -> None:
    assert evaluate("a + 1", {"a": None}) is None
    assert evaluate("FILL(a, 0) + 1", {"a": None}) == 1.0


def test_division_by_zero_drops_the_point() -> None:
    assert evaluate("a / b", {"a": 1.0, "b": 0.0}) is None


def test_precedence_and_logic() -> None:
    assert evaluate("1 + 2 * 3 - -1", {}) == 8.0
    assert evaluate("a > 1 AND b < 1", {"a": 2.0, "b": 0.0}) == 1.0
    assert evaluate("MAX(a, b, 3)", {"a": 1.0, "b": None}) == 3.0


@pytest.mark.parametrize("expression", ["ANOMALY_DETECTION_BAND(m)", "m +", "unknown_id"])
def test_what_it_cannot_evaluate_is_an_error_naming_it(expression: str) -> None:
    with pytest.raises(MathError):
        evaluate(expression, {"m": 1.0})
