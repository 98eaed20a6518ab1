"""Features own their options, and a job imports a feature only by setting one of its options.

``_job_options.OPTION_HOMES`` names, as text, the module that declares each
feature's ``JobOption``: ``declare_options`` imports it for the first job that
sets the option. The import is by name (importlib), so the layering test
(tests/unit/test_layering.py) cannot see it; these tests hold the map to the
code instead: every option a module declares is named with that module, and
each module named declares its options. Then: what a job leaves at its default
is neither checked nor kept, and bad input still gets one ``ConfigurationError``.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from importlib import import_module
from typing import Any

import pytest
from import_support import ROOT, modules

from sqsjobs import ConfigurationError, JobApp
from sqsjobs._job_options import FEATURE_OPTIONS, OPTION_HOMES, JobOption, feature_option, option_names

QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"


def declared_in_lib() -> dict[str, str]:
    """Every ``JobOption("name", ...)`` in lib/sqsjobs, read with ``ast``: option name → module."""
    found: dict[str, str] = {}
    for module, (path, _) in modules(ROOT).items():
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "JobOption"
                    and node.args and isinstance(node.args[0], ast.Constant) and module != "sqsjobs._job_options"):
                found[str(node.args[0].value)] = module
    return found


def test_every_option_a_feature_declares_is_named_with_its_module() -> None:
    assert declared_in_lib() == OPTION_HOMES
    assert {"callbacks", "debounce", "dedupe", "limits", "queue", "tenant_metrics"} <= set(OPTION_HOMES)


@pytest.mark.parametrize("name", sorted(OPTION_HOMES))
def test_each_module_named_declares_the_option(name: str) -> None:
    module = import_module(OPTION_HOMES[name])
    declared = [value for value in vars(module).values() if isinstance(value, JobOption) and value.name == name]
    assert declared == [FEATURE_OPTIONS[name]] == [feature_option(name)]


def test_the_callbacks_option_belongs_to_the_workflows_feature() -> None:
    from sqsjobs.workflows._callbacks import CALLBACKS

    assert OPTION_HOMES["callbacks"] == "sqsjobs.workflows._callbacks" and feature_option("callbacks") is CALLBACKS
    app = JobApp(queue_url=QUEUE_URL)

    @app.job("resize", store_result=True, callbacks=True)
    def resize(image_id: int) -> None: ...

    assert CALLBACKS.of(resize.options) is True and resize.options.sets("callbacks")


PROBE = """
import json, sys
from sqsjobs import JobApp

def features():
    return sorted(m for m in sys.modules if m.startswith(("sqsjobs.flow", "sqsjobs.workflows", "sqsjobs.schedules",
                                                          "sqsjobs.enqueue._debounce")))

app = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/jobs")
app.job("plain", key="plain:{n}", queue="default", limits=[], debounce=None, tenant_metrics=False)(lambda n: None)
plain = features()
app.job("awaited", store_result=True, callbacks=True)(lambda n: None)
print(json.dumps({"plain": plain, "awaited": features(),
                  "kept": dict(app.jobs["plain"].options.features)}))
"""


def test_a_job_imports_the_module_of_each_option_it_sets_and_no_other() -> None:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(PROBE)], capture_output=True, text=True, timeout=120,
                          env={"PATH": "", "AWS_DEFAULT_REGION": "us-east-1"})
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    # What a job gives is checked by its owner (limits=[]: flow/_limits.py is imported), but an option at its
    # default is not kept: the worker builds no stage for the job. Only callbacks=True imports workflows/.
    assert report["kept"] == {}
    assert "sqsjobs.flow._limits" in report["plain"] and not any(m.startswith("sqsjobs.workflows")
                                                                     for m in report["plain"])
    assert "sqsjobs.workflows._callbacks" in report["awaited"]


def test_options_left_at_their_defaults_are_not_kept() -> None:
    app = JobApp(queue_url=QUEUE_URL)

    @app.job("j", queue="default", limits=(), tenant_metrics=False, callbacks=False)
    def j(n: int) -> None: ...

    assert dict(j.options.features) == {}
    assert not any(j.options.sets(name) for name in OPTION_HOMES)


@pytest.mark.parametrize(("options", "fragment"), [
    ({"callbacks": "yes"}, "callbacks must be True or False, got 'yes'"),
    ({"callbacks": True, "debounce": 5}, "callbacks=True does not combine with debounce or dedupe"),
    ({"limits": ["sms"]}, "sms"),
    ({"queue": "no such queue!"}, "unknown queue"),
    ({"debounce": -1}, "debounce"),
    ({"dedupe": "sometimes"}, "dedupe"),
    ({"tenant_metrics": 1}, "tenant_metrics must be True or False"),
    ({"callback": True}, "unknown option(s) 'callback'"),
])
def test_bad_feature_options_get_one_clear_configuration_error(options: dict[str, Any], fragment: str) -> None:
    app = JobApp(queue_url=QUEUE_URL)
    with pytest.raises(ConfigurationError, match=r"^job 'j': ") as caught:
        app.job("j", **options)
    assert fragment in str(caught.value)


def test_an_unknown_option_names_every_feature_option_without_importing_them() -> None:
    assert set(OPTION_HOMES) <= set(option_names())
    with pytest.raises(ConfigurationError) as caught:
        JobApp(queue_url=QUEUE_URL).job("j", limts=["sms"])
    assert "'limts'" in str(caught.value) and "callbacks, debounce, dedupe, limits, queue" in str(caught.value)
