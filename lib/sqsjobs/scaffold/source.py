"""Where a project ``sqsjobs init`` writes installs sqsjobs from: a spec that works on every machine.

The project must build in CI and on a colleague's laptop, so no file of it may
name a path of the machine that ran ``init``. Its ``pyproject.toml`` and
``layer/requirements.txt`` (what ``sam build`` puts into the functions' layer)
name sqsjobs by what the running sqsjobs was installed from, as pip recorded it
(PEP 610's ``direct_url.json``):

- a wheel file: the wheel is copied into the project (:data:`VENDORED`), and the
  project asks for ``sqsjobs==<its version>`` with ``--find-links`` to it;
- a VCS or ``https`` URL: that URL (``sqsjobs @ git+https://...@<commit>``);
- an index (no record): ``sqsjobs==<version>``;
- a source tree (``pip install -e .`` of a checkout) or a path that is gone: no
  other machine has it, so the project asks an index for ``sqsjobs==<version>``
  and ``sqsjobs init`` says so, with how to vendor a wheel instead.

``sqsjobs init --sqsjobs-spec`` chooses another: a requirement
(``sqsjobs==0.1.0``, ``sqsjobs @ git+https://git.example.com/sqsjobs.git@v0.1.0``),
a URL, or a wheel's path (vendored).

Example:
    >>> spec = parse_spec("sqsjobs==0.1.0")
    >>> spec.requirement(), spec.requirement(("check", "local"))
    ('sqsjobs==0.1.0', 'sqsjobs[check,local]==0.1.0')
    >>> parse_spec("git+https://git.example.com/sqsjobs.git@v0.1.0").requirement(("cli",))
    'sqsjobs[cli] @ git+https://git.example.com/sqsjobs.git@v0.1.0'
    >>> vendored = SqsjobsSource(specifiers="==0.1.0", wheel=Path("dist/sqsjobs-0.1.0-py3-none-any.whl"))
    >>> vendored.requirement(), vendored.vendored_path
    ('sqsjobs==0.1.0', 'layer/wheels/sqsjobs-0.1.0-py3-none-any.whl')
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from sqsjobs import ConfigurationError

NAME = "sqsjobs"
#: where a vendored wheel goes, relative to the project (inside layer/: sam build copies only that directory)
VENDORED = "layer/wheels"
_REQUIREMENT = re.compile(r"\s*sqsjobs\s*(?:\[[^\]]*\])?\s*(?P<rest>.*?)\s*", re.IGNORECASE)
#: what pip takes after a name: version specifiers, or a direct reference
_SPECIFIERS = re.compile(r"(?:(?:===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+\s*,?\s*)+")
_URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+")
#: a wheel's file name (PEP 427): name-version(-build)?-python-abi-platform.whl
_WHEEL = re.compile(r"(?P<name>[A-Za-z0-9_.]+)-(?P<version>[^-]+)(?:-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl")
EXAMPLES = ("'sqsjobs==0.1.0' (an index), 'sqsjobs @ git+https://git.example.com/sqsjobs.git@v0.1.0' (VCS) "
            "or a wheel's path (copied into the project)")


@dataclass(frozen=True, kw_only=True)
class SqsjobsSource:
    """Version specifiers (``==0.1.0``) or a direct-reference URL, a wheel to vendor, and what to tell the user."""

    specifiers: str = ""
    url: str | None = None
    #: a wheel file ``sqsjobs init`` copies into the project (to :data:`VENDORED`); the requirement is its version
    wheel: Path | None = None
    #: what ``sqsjobs init`` says about this choice, when it is not what the user asked for
    note: str | None = None

    def __post_init__(self) -> None:
        if self.url is not None and _is_local(self.url):
            raise ValueError(f"{self.url} names a path of this machine; a project must not")

    def requirement(self, extras: tuple[str, ...] = ()) -> str:
        """The PEP 508 requirement, with ``extras``."""
        name = NAME + (f"[{','.join(extras)}]" if extras else "")
        return f"{name} @ {self.url}" if self.url else f"{name}{self.specifiers}"

    @property
    def vendored_path(self) -> str | None:
        """Where the vendored wheel is in the project, or None."""
        return f"{VENDORED}/{self.wheel.name}" if self.wheel is not None else None

    @property
    def what(self) -> str:
        """Where the project's sqsjobs comes from, for its README and comments (never a path of this machine)."""
        if self.vendored_path is not None:
            return f"the wheel {self.vendored_path}"
        return self.url or "an index"


def running_source(version: str) -> SqsjobsSource:
    """Where the running sqsjobs was installed from (see the module); an index at ``version`` when pip says nothing.

    Example:
        >>> running_source("0.1.0").requirement().startswith("sqsjobs")
        True
    """
    try:
        recorded = metadata.distribution(NAME).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        recorded = None
    try:
        direct = json.loads(recorded) if recorded else None
    except ValueError:
        direct = None
    index = SqsjobsSource(specifiers=f"=={version}")
    if not isinstance(direct, dict) or not isinstance(direct.get("url"), str):
        return index
    url = direct["url"]
    vcs = direct.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs") and vcs.get("commit_id") and not _is_local(url):
        return SqsjobsSource(url=f"{vcs['vcs']}+{url}@{vcs['commit_id']}")
    if not _is_local(url):
        return SqsjobsSource(url=url)
    path = Path(unquote(urlparse(url).path))
    if path.suffix == ".whl" and path.is_file():
        return SqsjobsSource(specifiers=f"=={version}", wheel=path)
    kind = "source tree" if isinstance(direct.get("dir_info"), dict) or path.is_dir() else "file"
    return SqsjobsSource(specifiers=f"=={version}", note=(
        f"sqsjobs runs from the {kind} {path}, which other machines do not have: the project asks an index for "
        f"sqsjobs=={version}. To carry sqsjobs in the project instead, build a wheel (`python -m build`) and run "
        "`sqsjobs init --sqsjobs-spec PATH_TO_WHEEL` (the wheel is copied into the project)"))


def _is_local(url: str) -> bool:
    """Whether ``url`` names this machine's file system (``file://``, ``git+file://``)."""
    return urlparse(url).scheme.split("+")[-1] == "file"


def parse_spec(text: str) -> SqsjobsSource:
    """``--sqsjobs-spec``: a requirement on sqsjobs, a URL, or a wheel's path (vendored into the project).

    Example:
        >>> parse_spec("sqsjobs @ https://files.example.com/sqsjobs-0.1.0-py3-none-any.whl").url
        'https://files.example.com/sqsjobs-0.1.0-py3-none-any.whl'
        >>> parse_spec("requests")
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: --sqsjobs-spec 'requests' is not a requirement on sqsjobs, a URL or a path ...
    """
    spec = text.strip()
    match = _REQUIREMENT.fullmatch(spec)
    url: str | None = None
    if match is not None and not Path(spec).exists():
        rest = match.group("rest")
        if not rest:
            return SqsjobsSource()
        if rest.startswith("@"):
            url = rest[1:].strip()
        elif _SPECIFIERS.fullmatch(rest):
            return SqsjobsSource(specifiers=rest.replace(" ", ""))
    elif _URL.fullmatch(spec):
        url = spec
    elif Path(spec).exists():
        return _wheel_at(Path(spec), text)
    if url is not None and _URL.fullmatch(url):
        return _wheel_at(Path(unquote(urlparse(url).path)), text) if _is_local(url) else SqsjobsSource(url=url)
    raise ConfigurationError(f"--sqsjobs-spec {text!r} is not a requirement on sqsjobs, a URL or a path to a wheel; "
                             f"e.g. {EXAMPLES}")


def _wheel_at(path: Path, text: str) -> SqsjobsSource:
    """A local wheel to vendor; a source tree or anything else local is refused (no other machine has it)."""
    match = _WHEEL.fullmatch(path.name)
    if path.is_file() and match is not None and match.group("name").lower() == NAME:
        return SqsjobsSource(specifiers=f"=={match.group('version')}", wheel=path.resolve())
    raise ConfigurationError(
        f"--sqsjobs-spec {text!r} is a path of this machine, and not to a sqsjobs wheel: the project would not build "
        "anywhere else. Build a wheel (`python -m build` in the source tree) and pass its path (it is copied into "
        f"the project), or name an index or a VCS URL; e.g. {EXAMPLES}")
