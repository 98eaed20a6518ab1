"""`local up --reload` (issue 14): which files count as a change, and a pool that loads its code again."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from sqsjobs.local.invoker import FunctionPool
from sqsjobs.local.model import FunctionSpec
from sqsjobs.local.reload import CodeWatcher


def test_added_edited_and_deleted_files_are_changes_caches_are_not(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("A = 1\n")
    (tmp_path / "data.json").write_text("{}")
    watcher = CodeWatcher([tmp_path])
    assert watcher.poll() == []

    (tmp_path / "app.py").write_text("A = 22\n")
    (tmp_path / "worker.py").write_text("")
    (tmp_path / "data.json").unlink()
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "notes.swp").write_text("")
    assert [p.name for p in watcher.poll()] == ["app.py", "data.json", "worker.py"]
    assert watcher.poll() == []


def test_same_size_edits_count_through_the_modification_time(tmp_path: Path) -> None:
    path = tmp_path / "app.py"
    path.write_text("A = 1\n")
    watcher = CodeWatcher([tmp_path])
    path.write_text("A = 2\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # a coarse filesystem clock
    assert watcher.poll() == [path.resolve()]


def test_a_restarted_pool_runs_the_new_code_and_keeps_nothing_of_the_old(tmp_path: Path) -> None:
    handler = tmp_path / "handler.py"
    handler.write_text("def handler(event, context):\n    return 'one'\n")
    spec = FunctionSpec(logical_id="Fn", name="local-Fn", handler="handler.handler", code_dir=tmp_path, timeout=30)
    lines: list[str] = []
    pool = FunctionPool(spec, base_env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                        log=lambda function, line: lines.append(line))
    try:
        assert pool.invoke({}).payload == "one"
        handler.write_text("def handler(event, context):\n    return 'two, a longer answer'\n")
        assert pool.invoke({}).payload == "one"  # a warm worker keeps the module it imported
        pool.restart()
        assert pool.invoke({}).payload == "two, a longer answer"
        assert pool.cold_starts == 2
    finally:
        pool.close()


def test_code_that_no_longer_imports_is_said_in_one_line_and_the_previous_code_keeps_serving(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path.parent)  # the project: paths in the line are relative to it
    handler = tmp_path / "handler.py"
    handler.write_text("def handler(event, context):\n    return 'one'\n")
    spec = FunctionSpec(logical_id="Fn", name="local-Fn", handler="handler.handler", code_dir=tmp_path, timeout=30)
    pool = FunctionPool(spec, base_env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                        log=lambda function, line: None)
    try:
        assert pool.invoke({}).payload == "one"
        handler.write_text("def handler(event, context):\n    return 'two'\n\ndef broken(:\n")

        failure = pool.reload()

        assert failure is not None and failure.init_error
        assert failure.one_line() == f"{tmp_path.name}/handler.py:4: SyntaxError: invalid syntax"
        assert pool.stale is failure and pool.init_error is None
        starts = pool.cold_starts
        assert [pool.invoke({}).payload for _ in range(3)] == ["one"] * 3  # the previous code, no cold start
        assert pool.cold_starts == starts
        assert pool.report_once(failure) and not pool.report_once(failure)  # said once

        handler.write_text("def handler(event, context):\n    return 'three'\n")
        assert pool.reload() is None
        assert pool.stale is None and pool.invoke({}).payload == "three"
    finally:
        pool.close()
