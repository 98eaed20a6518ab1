"""Stories the model found at 5x its make-test size, replayed as they were shrunk (each ran in seconds).

At 1x the model's 200 stories do not reach them, so each is kept here as a plain test: the rules of
tests/model/test_runtime_model.py called in order, the model's invariants checked after each step and at the end.
"""

from __future__ import annotations

from typing import Any

import pytest
from model.test_runtime_model import RuntimeModel

Story = list[tuple[str, dict[str, Any]]]

AWAITED_GROUP = ("enqueue_group", {"alone": [False] * 4, "app": 0, "awaited": True, "callback": ("report", 0),
                                   "members": [("a", 0)], "on_success": False})
STORIES: dict[str, Story] = {
    # A group a workflow awaits, whose answer to the workflow failed once: its on_complete was sent while the
    # member's letter was held back (workflows/_stage.py: the workflow first, then the callbacks).
    "group callbacks wait for the workflow's answer": [
        ("callback_fault", {"times": 1}), ("advance", {"seconds": 1}), AWAITED_GROUP,
        ("dead_letter_then_redrive", {"app": 0, "kind": "deb", "n": 0}),
        ("dead_letter_then_redrive", {"app": 0, "kind": "deb", "n": 0})],
    # A copy that followed a run whose completion write failed told its workflow "succeeded" while the record
    # still said running (workflows/_callback_stage.py: a success is told from a DONE record).
    "a success is told from its record": [
        ("enqueue_items", {"app": 0, "job": "bat"}), ("enqueue", {"app": 0, "job": "a", "n": 0, "twice": True}),
        ("advance", {"seconds": 1}), ("enqueue_tick", {"app": 0, "hour": 0}), ("advance", {"seconds": 1}),
        ("store_fault", {"kind": "completion", "times": 50}),
        ("back_to_its_backstop", {"app": 0, "job": "a", "n": 0}),
        ("back_to_its_backstop", {"app": 0, "job": "a", "n": 0}),
        ("advance", {"seconds": 1}), ("advance", {"seconds": 1}),
        ("enqueue_chain", {"app": 0, "steps": [("a", 0), ("a", 1)]}),
        ("back_to_its_backstop", {"app": 0, "job": "a", "n": 0}),
        ("enqueue_awaited", {"again": False, "app": 0, "heartbeat": False, "job": "a", "n": 0, "twice": False}),
        ("back_to_its_backstop", {"app": 0, "job": "a", "n": 0}),
        ("deliver", {"app": 0, "nested": [], "remaining_ms": 60000, "size": 2, "story": []})],
}


@pytest.mark.parametrize("name", sorted(STORIES))
def test_a_story_the_model_found_holds(name: str) -> None:
    model = RuntimeModel()
    model.start(seed=0, skew=0.0)
    for rule, arguments in STORIES[name]:
        getattr(model, rule)(**arguments)
        model.holds()
    model.teardown()
