"""bench/batch_handlers.py puts its section and summary row into BENCHMARKS.md in place, once, however often it runs."""

from __future__ import annotations

from bench.batch_handlers import HEADING, SUMMARY, BatchFigures, render, splice, summary_row

REPORT = ("# Benchmarks\n\n## Summary\n\n| figure | value |\n|---|---|\n| other | 1 |\n\n"
          "## Groups\n\ng\n\n## Method\n\nm\n")


def figures(wall: float) -> BatchFigures:
    run = {"wall": wall, "busy": 1.0, "done": 1000, "one attempt": 1000, "written": 1000, "dead letters": 0,
           "invocations": 40}
    return BatchFigures(runs={"per-item jobs": {**run, "wall": 2 * wall}, "batch handler (25 a call)": run},
                        counts={"per-item jobs": {"PutItem": 1.0, "UpdateItem": 2.0, "requests": 3.0,
                                                  "round trips": 27.0, "ms": 10.0}})


def test_the_section_goes_before_the_method_and_a_second_run_replaces_it() -> None:
    once = splice(REPORT, render(figures(10.0), "1.00"), summary_row(figures(10.0)))
    twice = splice(once, render(figures(20.0), "2.00"), summary_row(figures(20.0)))
    assert once.index("## Groups") < once.index(HEADING) < once.index("## Method")
    assert twice.count(HEADING) == 1 and twice.count(SUMMARY) == 1
    assert "| 2.0 x |" in twice and "**2.0 x**" in twice and "load average at the end: 2.00" in twice
    assert "1.00" not in twice.split(HEADING)[1]
    assert "| other | 1 |\n" + SUMMARY in twice  # the row ends the summary table


def test_a_contender_that_did_not_run_is_reported_not_hidden() -> None:
    failed = BatchFigures(errors=["per-item jobs: TimeoutError: still pending"])
    assert failed.ratio() is None and "not measured" in summary_row(failed)
    assert "Not measured: per-item jobs: TimeoutError: still pending" in "\n".join(render(failed, "1.00"))
