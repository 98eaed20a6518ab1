"""``sqsjobs._loading.load_app``: the one way the CLI, the local cloud's fixture and the demo find the app."""

from __future__ import annotations

from pathlib import Path

import pytest

from sqsjobs import ConfigurationError, JobApp
from sqsjobs._loading import load_app

ROOT = Path(__file__).resolve().parents[2]


def test_the_reference_app_loads_from_the_project_root() -> None:
    app = load_app("handlers.app:app", root=ROOT)
    assert isinstance(app, JobApp)
    assert "invoice-email" in app.jobs


def test_the_attribute_defaults_to_app(tmp_path: Path) -> None:
    (tmp_path / "myjobs_default_attr.py").write_text("from sqsjobs import JobApp\napp = JobApp()\n")
    assert isinstance(load_app("myjobs_default_attr", root=tmp_path), JobApp)


@pytest.mark.parametrize(("spec", "message"), [
    ("", "'' is not module:attribute"),
    ("not a module:app", "'not a module:app' is not module:attribute"),
    ("no_such_module_here:app", "cannot import 'no_such_module_here' for the app 'no_such_module_here:app'"),
    ("sqsjobs.testing:nothing", "'sqsjobs.testing' has no attribute 'nothing'"),
    ("sqsjobs.testing:DEFAULT_ARN", "'sqsjobs.testing:DEFAULT_ARN' is a str, not a JobApp"),
])
def test_a_spec_that_leads_to_no_app_is_a_one_line_configuration_error(spec: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        load_app(spec, root=ROOT)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)
