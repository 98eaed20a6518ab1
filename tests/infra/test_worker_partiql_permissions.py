"""The worker's role lets it send the statements its batches use (store/_statement_trust.py).

A role without ``dynamodb:PartiQLInsert``/``dynamodb:PartiQLUpdate`` is refused every
``BatchExecuteStatement``; the worker then writes each record with its own request and says so at WARNING,
which keeps every guarantee and doubles the calls of a batch of successes (2 → 20). Both templates grant
them: the repository's and the one ``sqsjobs init`` writes.
"""

from __future__ import annotations

from typing import Any

import pytest
from template_support import load_template, policy_statements

from sqsjobs.scaffold import ProjectOptions, render

PARTIQL = {"dynamodb:PartiQLInsert", "dynamodb:PartiQLUpdate"}


def scaffolded() -> dict[str, Any]:
    from samtranslator.yaml_helper import yaml_parse

    document: dict[str, Any] = yaml_parse(render(ProjectOptions(name="shop"))["template.yaml"])
    return document


@pytest.mark.parametrize("template", [load_template, scaffolded], ids=["template.yaml", "sqsjobs init"])
def test_the_worker_may_send_its_batches_statements_to_the_idempotency_table(template: Any) -> None:
    statements = policy_statements(template()["Resources"]["WorkerFunction"]["Properties"]["Policies"][0])
    granted = set()
    for statement in statements:
        if statement["Effect"] == "Allow" and statement["Resource"] == {"Fn::GetAtt": ["IdempotencyTable", "Arn"]}:
            actions = statement["Action"]
            granted |= set(actions if isinstance(actions, list) else [actions])
    assert granted >= PARTIQL
