"""Where a project ``sqsjobs init`` writes installs sqsjobs from: where the running sqsjobs came from.

``pip install sqsjobs==0.1.0`` only works where an index serves sqsjobs. So the
new project's ``pyproject.toml`` and ``handlers/requirements.txt`` (what
``sam build`` puts into every function) name the source the running sqsjobs was
installed from, as pip recorded it (PEP 610's ``direct_url.json``):

- a wheel file: ``sqsjobs @ file:///.../sqsjobs-0.1.0-py3-none-any.whl``;
- a source tree (``pip install -e .`` of a checkout): ``sqsjobs @ file:///...``;
- a VCS URL: ``sqsjobs @ git+https://...@<commit>``;
- an index (no record): ``sqsjobs==<version>``.

``sqsjobs init --sqsjobs-spec`` chooses another: a requirement
(``sqsjobs==0.1.0``, ``sqsjobs @ git+https://git.example.com/sqsjobs.git@v0.1.0``),
a URL, or a wheel's path.

Example:
    >>> spec = parse_spec("sqsjobs==0.1.0")
    >>> spec.requirement(), spec.requirement(("check", "local"))
    ('sqsjobs==0.1.0', 'sqsjobs[check,local]==0.1.0')
    >>> parse_spec("git+https://git.example.com/sqsjobs.git@v0.1.0").requirement(("cli",))
    'sqsjobs[cli] @ git+https://git.example.com/sqsjobs.git@v0.1.0'
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from sqsjobs._errors import ConfigurationError

NAME = "sqsjobs"
_REQUIREMENT = re.compile(r"\s*sqsjobs\s*(?:\[[^\]]*\])?\s*(?P<rest>.*?)\s*", re.IGNORECASE)
#: what pip takes after a name: version specifiers, or a direct reference
_SPECIFIERS = re.compile(r"(?:(?:===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+\s*,?\s*)+")
_URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+")
EXAMPLES = ("'sqsjobs==0.1.0' (an index), 'sqsjobs @ git+https://git.example.com/sqsjobs.git@v0.1.0' (VCS) "
            "or a wheel's path")


@dataclass(frozen=True, kw_only=True)
class SqsjobsSource:
    """Version specifiers (``==0.1.0``) or a direct-reference URL, and what it is, for ``sqsjobs init``'s summary."""

    specifiers: str = ""
    url: str | None = None
    what: str = "an index"

    def requirement(self, extras: tuple[str, ...] = ()) -> str:
        """The PEP 508 requirement, with ``extras``."""
        name = NAME + (f"[{','.join(extras)}]" if extras else "")
        return f"{name} @ {self.url}" if self.url else f"{name}{self.specifiers}"


def running_source(version: str) -> SqsjobsSource:
    """Where the running sqsjobs was installed from (see the module); an index at ``version`` when pip says nothing.

    Example:
        >>> running_source("0.1.0").requirement().startswith("sqsjobs")
        True
    """
    from importlib import metadata

    try:
        recorded = metadata.distribution(NAME).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        recorded = None
    try:
        direct = json.loads(recorded) if recorded else None
    except ValueError:
        direct = None
    if not isinstance(direct, dict) or not isinstance(direct.get("url"), str):
        return SqsjobsSource(specifiers=f"=={version}")
    url = direct["url"]
    vcs = direct.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs") and vcs.get("commit_id"):
        return SqsjobsSource(url=f"{vcs['vcs']}+{url}@{vcs['commit_id']}", what=f"{url} at {vcs['commit_id'][:12]}")
    where = _path_of(url)
    if isinstance(direct.get("dir_info"), dict):
        return SqsjobsSource(url=url, what=f"the source tree {where}")
    return SqsjobsSource(url=url, what=f"the wheel {where}" if url.endswith(".whl") else f"the archive {where}")


def _path_of(url: str) -> str:
    """A ``file://`` URL as the path it names (other URLs as they are)."""
    from urllib.parse import unquote, urlparse

    parsed = urlparse(url)
    return unquote(parsed.path) if parsed.scheme == "file" else url


def parse_spec(text: str) -> SqsjobsSource:
    """``--sqsjobs-spec``: a requirement on sqsjobs, a URL, or a wheel's (or source tree's) path.

    Example:
        >>> parse_spec("sqsjobs @ file:///dist/sqsjobs-0.1.0-py3-none-any.whl").url
        'file:///dist/sqsjobs-0.1.0-py3-none-any.whl'
        >>> parse_spec("requests")
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: --sqsjobs-spec 'requests' is not a requirement on sqsjobs, a URL or a path ...
    """
    spec = text.strip()
    match = _REQUIREMENT.fullmatch(spec)
    if match is not None and not Path(spec).exists():
        rest = match.group("rest")
        if not rest:
            return SqsjobsSource(what="an index")
        if rest.startswith("@"):
            url = rest[1:].strip()
            if _URL.fullmatch(url):
                return SqsjobsSource(url=url, what=url)
        elif _SPECIFIERS.fullmatch(rest):
            return SqsjobsSource(specifiers=rest.replace(" ", ""), what="an index")
    elif _URL.fullmatch(spec):
        return SqsjobsSource(url=spec, what=spec)
    elif Path(spec).exists() and (spec.endswith(".whl") or (Path(spec) / "pyproject.toml").is_file()):
        path = Path(spec).resolve()
        kind = "wheel" if spec.endswith(".whl") else "source tree"
        return SqsjobsSource(url=path.as_uri(), what=f"the {kind} {path}")
    raise ConfigurationError(f"--sqsjobs-spec {text!r} is not a requirement on sqsjobs, a URL or a path to a wheel "
                             f"or a source tree; e.g. {EXAMPLES}")
