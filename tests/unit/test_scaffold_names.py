"""`sqsjobs init --name`: every name it accepts gives a project pip can install; every other gets one line and a name.

Issue 22, finding 10: `--name jobs-` was accepted and wrote a pyproject.toml that does not install.
"""

from __future__ import annotations

import keyword
import re
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from packaging.metadata import Metadata
from packaging.utils import canonicalize_name, is_normalized_name

from sqsjobs import ConfigurationError
from sqsjobs.scaffold import ProjectOptions, default_name, render
from sqsjobs.scaffold.names import PROJECT_NAME, check_name, is_allowed, suggest_name

#: CloudFormation's stack name pattern and length
STACK_NAME = re.compile(r"[a-zA-Z][-a-zA-Z0-9]{0,127}")

names = st.one_of(
    st.from_regex(PROJECT_NAME, fullmatch=True),
    st.text(alphabet="abcxyz019-_. AZ", max_size=70),
    st.text(max_size=20),
    st.sampled_from(["sqsjobs", "boto3", "pytest", "moto", "class", "import", "jobs-", "-jobs", "a--b", "x" * 64]),
)


def pyproject_metadata(text: str) -> Metadata:
    """The core metadata a build backend would write from this pyproject.toml, validated by `packaging`."""
    project = tomllib.loads(text)["project"]
    extras = project.get("optional-dependencies", {})
    raw = {
        "metadata_version": "2.3",
        "name": project["name"],
        "version": project["version"],
        "requires_python": project["requires-python"],
        "requires_dist": [*project["dependencies"],
                          *(f"{r} ; extra == {e!r}" for e, rs in extras.items() for r in rs)],
        "provides_extra": list(extras),
    }
    return Metadata.from_raw(raw, validate=True)  # type: ignore[arg-type]


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names)
@example("jobs-")
@example("billing-jobs")
def test_an_accepted_name_installs_and_a_refused_one_gets_one_line_with_a_name_that_is_accepted(name: str) -> None:
    try:
        options = ProjectOptions(name=name)
    except ConfigurationError as error:
        text = str(error)
        assert "\n" not in text and text.startswith(f"project name {name!r} is not allowed: ")
        suggestion = text.rsplit("try --name ", 1)[1]
        assert is_allowed(suggestion), text
        return
    metadata = pyproject_metadata(render(options)["pyproject.toml"])
    assert metadata.name == name and is_normalized_name(name) and canonicalize_name(name) == name
    module = name.replace("-", "_")
    assert module.isidentifier() and not keyword.iskeyword(module)
    assert STACK_NAME.fullmatch(name)
    assert f'stack_name = "{name}"' in render(options)["samconfig.toml"]


@pytest.mark.parametrize("name, problem, suggestion", [
    ("jobs-", "it ends with '-'", "jobs"),
    ("a--b", "it has '--'", "a-b"),
    ("My_Jobs", "it has 'J', 'M', '_'", "my-jobs"),
    ("9lives", "it does not start with a letter", "jobs-9lives"),
    ("class", "class is a Python keyword", "class-jobs"),
    ("sqsjobs", "the project installs a package of that name (sqsjobs)", "sqsjobs-app"),
    ("boto3", "the project installs a package of that name (boto3)", "boto3-app"),
])
def test_a_refused_name_says_why_and_what_to_pass(name: str, problem: str, suggestion: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        check_name(name)
    assert f"is not allowed: {problem};" in str(caught.value)
    assert str(caught.value).endswith(f"try --name {suggestion}")


@given(st.text(max_size=80))
def test_the_suggested_name_is_always_accepted(text: str) -> None:
    assert is_allowed(suggest_name(text))


def test_the_name_from_the_directory_is_a_suggestion(tmp_path: Path) -> None:
    assert default_name(tmp_path / "Billing Jobs-") == "billing-jobs"
