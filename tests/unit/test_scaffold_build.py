"""A project `sqsjobs init` writes builds on any machine and lean (issue 30, item 3), in-process and fast.

- where the project takes sqsjobs from never names a path of this machine: a wheel is copied into it
  (``layer/wheels``), a source tree or a vanished wheel falls back to the index version with a note, a
  local path that is not a wheel is refused;
- ``layer/bundle.py`` (lib/sqsjobs/scaffold/bundle.py, copied as it is) deletes the tools and pip's record of
  where the wheel came from, keeps the runtime's botocore services, and compiles bytecode that names its
  sources relatively and is the same from build to build;
- ``sqsjobs init``'s "next:" line runs what docs/getting-started.md runs, in the same environment.

The builds themselves (``sam build`` of projects, the wheel's trial) are in tests/scaffold and tests/dist.
"""

from __future__ import annotations

import json
import marshal
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from doc_snippets import ROOT, SHELL, snippets
from scaffold_support import machine_paths, project_machine_paths

from sqsjobs import ConfigurationError
from sqsjobs.cli.init import DEV_MODULES, next_steps
from sqsjobs.scaffold import BUNDLER, Extra, ProjectOptions, render, write
from sqsjobs.scaffold import bundle as bundler
from sqsjobs.scaffold.source import SqsjobsSource, parse_spec, running_source
from sqsjobs.validation.layout import check_layout


def fake_wheel(directory: Path, version: str = "0.1.0") -> Path:
    wheel = directory / f"sqsjobs-{version}-py3-none-any.whl"
    wheel.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"sqsjobs-{version}.dist-info/METADATA", f"Name: sqsjobs\nVersion: {version}\n")
    return wheel


# ---------------------------------------------------------------- where sqsjobs comes from
def test_a_project_made_from_a_wheel_carries_it_and_names_no_path_of_this_machine(tmp_path: Path) -> None:
    wheel = fake_wheel(tmp_path / "far" / "away" / "dist", "0.3.1")
    project = tmp_path / "billing"
    written = write(project, ProjectOptions(name="billing", extras=frozenset(Extra), source=parse_spec(str(wheel))))

    carried = project / "layer" / "wheels" / wheel.name
    assert carried in written and carried.read_bytes() == wheel.read_bytes()
    assert (project / "layer" / "requirements.txt").read_text().splitlines()[-2:] == [
        "--find-links wheels", "sqsjobs==0.3.1"]
    assert 'dependencies = ["sqsjobs==0.3.1"]' in (project / "pyproject.toml").read_text()
    assert "pip install --find-links layer/wheels -e '.[dev]'" in (project / "README.md").read_text()
    assert project_machine_paths(project, (str(tmp_path),)) == {}


def test_the_scan_finds_what_init_used_to_write(tmp_path: Path) -> None:
    # Before issue 30: `sqsjobs @ file:///.../dist/sqsjobs-0.1.0-py3-none-any.whl` and the wheel's path in comments.
    wheel = tmp_path / "dist" / "sqsjobs-0.1.0-py3-none-any.whl"
    assert machine_paths(f"sqsjobs @ {wheel.as_uri()}\n") != []
    assert machine_paths(f"# sqsjobs from the wheel {wheel}\n") != []
    assert machine_paths("C:\\Users\\me\\sqsjobs.whl") != []
    # ...and not what a template legitimately says
    assert machine_paths("arn:${AWS::Partition}:scheduler:${AWS::Region}:x:schedule/${Group}/*") == []
    assert machine_paths("Lambda's /var/task and /opt are read-only; https://example.com/a/b") == []


@pytest.mark.parametrize("spec", ["sqsjobs @ {uri}", "{uri}", "{path}"])
def test_a_local_wheel_is_vendored_however_it_is_named(tmp_path: Path, spec: str) -> None:
    wheel = fake_wheel(tmp_path / "dist")
    source = parse_spec(spec.format(uri=wheel.as_uri(), path=wheel))
    assert (source.wheel, source.requirement(), source.url) == (wheel, "sqsjobs==0.1.0", None)
    assert source.what == "the wheel layer/wheels/sqsjobs-0.1.0-py3-none-any.whl"


@pytest.mark.parametrize("spec", ["{root}", "sqsjobs @ {root_uri}", "git+file://{root}@main",
                                  "{root}/pyproject.toml"])
def test_a_local_path_that_is_no_wheel_is_refused(spec: str) -> None:
    with pytest.raises(ConfigurationError, match="is a path of this machine, and not to a sqsjobs wheel"):
        parse_spec(spec.format(root=ROOT, root_uri=ROOT.as_uri()))


def test_remote_specs_are_kept_and_a_file_url_never_gets_in() -> None:
    assert parse_spec("sqsjobs @ git+https://git.example.com/sqsjobs.git@v1").url == (
        "git+https://git.example.com/sqsjobs.git@v1")
    assert parse_spec("sqsjobs>=0.1,<0.2").requirement(("check",)) == "sqsjobs[check]>=0.1,<0.2"
    with pytest.raises(ValueError, match="names a path of this machine"):
        SqsjobsSource(url="file:///srv/sqsjobs-0.1.0-py3-none-any.whl")


def _installed_from(monkeypatch: pytest.MonkeyPatch, record: dict[str, Any] | None) -> None:
    from importlib import metadata

    text = json.dumps(record) if record is not None else None
    monkeypatch.setattr(metadata, "distribution", lambda name: SimpleNamespace(read_text=lambda _: text))


def test_running_from_a_wheel_vendors_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    wheel = fake_wheel(tmp_path / "dist")
    _installed_from(monkeypatch, {"url": wheel.as_uri(), "archive_info": {}})
    assert (running_source("0.1.0").wheel, running_source("0.1.0").note) == (wheel, None)


@pytest.mark.parametrize("record", [
    {"url": "file:///work/sqsjobs", "dir_info": {"editable": True}},
    {"url": "file:///gone/dist/sqsjobs-0.1.0-py3-none-any.whl", "archive_info": {}},
    {"url": "file:///work/sqsjobs", "vcs_info": {"vcs": "git", "commit_id": "abc123"}},
])
def test_running_from_this_machine_alone_asks_an_index_and_says_so(monkeypatch: pytest.MonkeyPatch,
                                                                  record: dict[str, Any]) -> None:
    _installed_from(monkeypatch, record)
    source = running_source("0.1.0")
    assert (source.requirement(), source.wheel, source.url) == ("sqsjobs==0.1.0", None, None)
    assert source.note is not None and "other machines do not have" in source.note
    assert "--sqsjobs-spec" in source.note


def test_running_from_a_remote_source_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    _installed_from(monkeypatch, {"url": "https://git.example.com/sqsjobs.git",
                                  "vcs_info": {"vcs": "git", "commit_id": "abc123"}})
    assert running_source("0.1.0").url == "git+https://git.example.com/sqsjobs.git@abc123"
    _installed_from(monkeypatch, None)
    assert running_source("0.1.0").requirement() == "sqsjobs==0.1.0"


# ---------------------------------------------------------------- layer/bundle.py
def test_the_project_carries_this_very_bundle_script() -> None:
    files = render(ProjectOptions(name="billing", source=parse_spec("sqsjobs==0.1.0")))
    assert files[BUNDLER] == Path(bundler.__file__).read_text(encoding="utf-8")
    assert "build-SqsjobsLayer:" in files["layer/Makefile"]


def test_prune_deletes_the_tools_and_where_the_wheel_came_from(tmp_path: Path) -> None:
    kept = ["sqsjobs/__init__.py", "sqsjobs/app.py", "boto3/__init__.py"]
    tools = ["sqsjobs/cli/__init__.py", "sqsjobs/local/cloud.py", "sqsjobs/testing/pytest_plugin.py",
             "sqsjobs_rules/rule.py", "bin/sqsjobs"]
    info = "sqsjobs-0.1.0.dist-info"
    for name in [*kept, *tools, f"{info}/direct_url.json", f"{info}/METADATA"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    listed = [*kept, *tools, f"{info}/direct_url.json", f"{info}/METADATA", "../../bin/sqsjobs", f"{info}/RECORD"]
    (tmp_path / info / "RECORD").write_text("".join(f"{name},sha256=x,1\n" for name in listed))

    deleted = bundler.prune(tmp_path)

    assert f"{info}/direct_url.json" in deleted and {"sqsjobs/cli", "sqsjobs_rules", "bin"} <= set(deleted)
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert left == sorted([*kept, f"{info}/METADATA", f"{info}/RECORD"])
    assert [line.split(",")[0] for line in (tmp_path / info / "RECORD").read_text().splitlines()] == [
        *kept, f"{info}/METADATA", f"{info}/RECORD"]


def test_bytecode_is_hash_based_names_its_source_relatively_and_is_reproducible(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("VALUE = 1\n")
    (tmp_path / "top.py").write_text("import pkg.mod\n")

    assert bundler.compile_tree(tmp_path, top_level=True)
    assert [p.name.split(".")[0] for p in tmp_path.rglob("*.pyc")] == ["top"]
    assert bundler.compile_tree(tmp_path)
    (pyc,) = (tmp_path / "pkg" / "__pycache__").glob("mod.*.pyc")
    first = pyc.read_bytes()
    assert int.from_bytes(first[4:8], "little") == 0b01  # hash-based, not checked: no timestamp inside
    assert marshal.loads(first[16:]).co_filename == "pkg/mod.py"
    assert str(tmp_path).encode() not in first
    pyc.unlink()
    assert bundler.compile_tree(tmp_path) and pyc.read_bytes() == first


def test_the_runtime_services_are_always_kept(tmp_path: Path) -> None:
    listing = tmp_path / "botocore-services.txt"
    listing.write_text("# the jobs' own\ns3   # uploads\n\n")
    assert bundler.kept_services(listing) == ["dynamodb", "lambda", "s3", "scheduler", "sqs", "stepfunctions"]
    data = tmp_path / "data"
    for name in ("dynamodb", "lambda", "s3", "scheduler", "sqs", "stepfunctions", "ec2", "iam"):
        (data / name).mkdir(parents=True)
    for name in bundler.SHARED_FILES:
        (data / name).write_text("{}")
    assert bundler.trim(data, bundler.kept_services(listing)) == ["ec2", "iam"]
    with pytest.raises(SystemExit, match="has no ses"):
        bundler.trim(data, ["ses"])


def test_install_runs_only_under_the_functions_python(tmp_path: Path) -> None:
    # The bytecode is for the interpreter that loads it: this suite's python is not Lambda's 3.12.
    with pytest.raises(SystemExit, match=r"run me with python3\.12"):
        bundler.main(["install", "--target", str(tmp_path / "out"), "sqsjobs==0.1.0"])
    with pytest.raises(SystemExit):
        bundler.main(["install", "--target", str(tmp_path / "out")])  # nothing to install: a usage error


def test_sqsjobs_check_finds_a_layer_that_sam_cannot_build(tmp_path: Path) -> None:
    def layer(metadata: dict[str, str]) -> dict[str, Any]:
        return {"Resources": {"SqsjobsLayer": {"Type": "AWS::Serverless::LayerVersion", "Metadata": metadata,
                                               "Properties": {"ContentUri": "layer/"}}}}

    makefile = {"BuildMethod": "makefile"}
    assert [p.message for p in check_layout(layer(makefile), tmp_path)] == [
        f"ContentUri layer/ does not exist ({tmp_path / 'layer'})"]
    (tmp_path / "layer").mkdir()
    (tmp_path / "layer" / "Makefile").write_text("build-OtherLayer:\n\ttrue\n")
    (problem,) = check_layout(layer(makefile), tmp_path)
    assert "has no build-SqsjobsLayer" in problem.message
    (tmp_path / "layer" / "Makefile").write_text("build-SqsjobsLayer:\n\ttrue\n")
    assert check_layout(layer(makefile), tmp_path) == []


# ---------------------------------------------------------------- init's "next:" line
def _page_commands() -> str:
    return "\n".join(s.code for s in snippets(ROOT / "docs" / "getting-started.md") if s.language in SHELL)


def test_next_runs_what_getting_started_runs_in_the_same_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    line = next_steps(Path("billing-jobs"), parse_spec("sqsjobs==0.1.0"))
    steps = line.split(" && ")
    assert steps[0] == "cd billing-jobs" and "venv" not in line and "pip install" not in line
    page = _page_commands()
    assert all(step in page for step in steps[1:]), (steps, "docs/getting-started.md runs each of them")

    # An environment without the [dev] extra installs the project into itself first: no second venv.
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == DEV_MODULES[1] else object())
    vendored = SqsjobsSource(specifiers="==0.1.0", wheel=Path("dist/sqsjobs-0.1.0-py3-none-any.whl"))
    assert next_steps(Path("shop"), vendored).split(" && ")[:2] == [
        "cd shop", "pip install --find-links layer/wheels -e '.[dev]'"]
    assert "venv" not in next_steps(Path("shop"), vendored)


def test_the_getting_started_install_has_every_extra_the_page_uses() -> None:
    (install,) = [s for s in snippets(ROOT / "docs" / "getting-started.md")
                  if "tests/dist/test_from_the_wheel.py" in s.directives.get("skip", "")]
    assert "[check,local,console]" in install.code
    assert "sqsjobs console" in (ROOT / "docs" / "getting-started.md").read_text()
