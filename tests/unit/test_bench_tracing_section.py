"""bench/tracing.py's section: the three modes and their ratios, put in place once however often it runs."""

from __future__ import annotations

from bench.tracing import HEADING, MODES, TracingFigures, render, splice

REPORT = "# Benchmarks\n\n## Groups\n\ng\n\n## Method\n\nm\n"


def figures(sdk: float) -> TracingFigures:
    f = TracingFigures(spans_per_message=2.1)
    f.us = {"absent": [100.0, 200.0], "api": [100.0, 200.0], "sdk": [sdk, 2 * sdk]}
    return f


def test_the_section_states_each_mode_against_no_opentelemetry_and_a_second_run_replaces_it() -> None:
    once = splice(REPORT, render(figures(150.0)))
    twice = splice(once, render(figures(300.0)))
    assert once.index("## Groups") < once.index(HEADING) < once.index("## Method")
    assert twice.count(HEADING) == 1 and "1.50x" not in twice and "| 3.00x (" in twice
    assert len([line for line in twice.split("\n") if line.startswith("| ") and "IQR" in line]) == len(MODES)
    assert "2.10 spans" in twice
