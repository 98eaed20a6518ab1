"""``sqsjobs._loading.load_app``: the one way the CLI, the local cloud's fixture and the demo find the app."""

from __future__ import annotations

import zlib
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


@pytest.mark.parametrize(("source", "line"), [
    ("from sqsjobs import JobApp\napp = JobApp(\n", "broken_app_{n}.py:2: SyntaxError: '(' was never closed"),
    ("from sqsjobs import JobApp\n\n    app = JobApp()\n", "broken_app_{n}.py:3: IndentationError: unexpected indent"),
    ("import os\nimport no_such_dependency_here\n",
     "broken_app_{n}.py:2: ModuleNotFoundError: No module named 'no_such_dependency_here'"),
    ("import os\nTABLE = os.environ['NO_SUCH_VARIABLE_HERE']\n",
     "broken_app_{n}.py:2: KeyError: 'NO_SUCH_VARIABLE_HERE'"),
])
def test_an_app_file_that_does_not_import_is_one_line_with_its_file_and_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, line: str) -> None:
    n = zlib.crc32(source.encode())
    (tmp_path / f"broken_app_{n}.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError) as raised:
        load_app(f"broken_app_{n}:app", root=tmp_path)
    assert str(raised.value) == f"{line.format(n=n)} (importing the app 'broken_app_{n}:app')"


def test_sqsjobs_enqueue_against_a_broken_app_prints_one_line_and_exits_2(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess
    import sys

    (tmp_path / "handlers").mkdir()
    (tmp_path / "handlers" / "__init__.py").write_text("")
    (tmp_path / "handlers" / "app.py").write_text("from sqsjobs import JobApp\n\napp = JobApp(\n")
    done = subprocess.run([sys.executable, "-c", "from sqsjobs.cli import main; main()", "enqueue", "greet", "x=1",
                           "--queue-url", "http://127.0.0.1:9/000000000000/q", "--region", "us-east-1"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: handlers/app.py:3: SyntaxError: '(' was never closed (importing the app 'handlers.app:app')"]
    assert done.stdout == ""
