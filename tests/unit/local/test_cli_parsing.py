"""The local commands' argument parsing."""

from __future__ import annotations

import pytest
import typer

from sqsjobs.cli.enqueue import parse_arguments
from sqsjobs.cli.options import parse_parameters


def test_enqueue_arguments_read_json_values_and_keep_other_text() -> None:
    assert parse_arguments(["invoice_id=42", "ratio=0.5", "name=Ann", "tags=[1, 2]", "empty="]) == {
        "invoice_id": 42, "ratio": 0.5, "name": "Ann", "tags": [1, 2], "empty": ""}


@pytest.mark.parametrize("bad", ["no-equals", "=1", "not a name=1"])
def test_enqueue_arguments_must_be_key_value(bad: str) -> None:
    with pytest.raises(typer.BadParameter):
        parse_arguments([bad])


def test_parameters_are_name_value() -> None:
    assert parse_parameters(["A=1", "B=x=y"]) == {"A": "1", "B": "x=y"}
    with pytest.raises(typer.BadParameter):
        parse_parameters(["A"])
