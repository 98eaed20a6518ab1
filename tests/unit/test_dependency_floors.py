"""boto3 and botocore are admitted from 1.36 on, with no bound below 2, and the oldest-tier pin is that floor.

``make check-oldest`` (part of ``make test``) runs the fast tier with tests/oldest-constraints.txt: if the
floor in pyproject.toml moved and the pin did not, the oldest tier would test a version nobody installs.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def requirements() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    parsed = (Requirement(line) for line in project["dependencies"])
    return {r.name: r for r in parsed}


def pins() -> dict[str, Version]:
    lines = (ROOT / "tests" / "oldest-constraints.txt").read_text().splitlines()
    pairs = (line.split("==") for line in lines if line and not line.startswith("#"))
    return {name.strip(): Version(version.strip()) for name, version in pairs}


def test_boto3_and_botocore_admit_every_version_from_the_floor_to_2() -> None:
    found = requirements()
    for name in ("boto3", "botocore"):
        spec = found[name].specifier
        assert Version("1.36.0") in spec and Version("1.35.99") not in spec
        assert Version("1.99.0") in spec and Version("2.0.0") not in spec  # any minor: no one-minor pin


def test_the_oldest_tier_pins_exactly_the_floor() -> None:
    found, pinned = requirements(), pins()
    assert set(pinned) == {"boto3", "botocore"}
    for name, version in pinned.items():
        floors = [Version(s.version) for s in found[name].specifier if s.operator == ">="]
        assert floors == [Version(f"{version.major}.{version.minor}")] and version.micro == 0
