"""The botocore services a trimmed Lambda bundle keeps, against the clients its functions' code makes.

lib/sqsjobs/scaffold/bundle.py keeps only the runtime's services and those a ``botocore-services.txt``
beside the bundle's Makefile lists (a project's ``layer/``, this repository's ``infra/bundle/``): a client
of any other service fails in Lambda on its first use (``sqsjobs.client`` then names the file to edit,
sqsjobs/_clients.py). This finds it before the deploy. A function is trimmed by a list when it, or a layer
it references, is built by a ``makefile`` whose directory holds one. Its code (``CodeUri``, read with
``ast``: nothing is imported) is searched for ``client("s3")``, ``boto3.client("s3")``,
``session.create_client("s3")`` or ``resource("s3")`` with a literal name that the installed botocore knows
as a service; each one the list leaves out is an error, and so is a name in the list botocore does not know
(``sam build`` would refuse it later, with less to go on).

Example:
    >>> import pathlib, tempfile
    >>> base = pathlib.Path(tempfile.mkdtemp())
    >>> for name, text in {"layer/Makefile": "build-Layer:\\n", "layer/botocore-services.txt": "ses\\n",
    ...                    "handlers/app.py": "import sqsjobs\\nS3 = lambda: sqsjobs.client('s3')\\n"}.items():
    ...     (base / name).parent.mkdir(exist_ok=True)
    ...     _ = (base / name).write_text(text)
    >>> doc = {"Resources": {
    ...     "Layer": {"Type": "AWS::Serverless::LayerVersion", "Properties": {"ContentUri": "layer/"},
    ...               "Metadata": {"BuildMethod": "makefile"}},
    ...     "Worker": {"Type": "AWS::Serverless::Function",
    ...                "Properties": {"CodeUri": "handlers/", "Layers": [{"Ref": "Layer"}]}}}}
    >>> [(p.where, p.fix) for p in check_services(doc, base)]
    [('Worker', 'add s3 to layer/botocore-services.txt (one service a line), then sam build')]
"""

from __future__ import annotations

import ast
import difflib
import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqsjobs.validation.layout import SERVERLESS_LAYER, code_location, serverless_functions
from sqsjobs.validation.problems import Problem

#: the list lib/sqsjobs/scaffold/bundle.py reads beside the Makefile that builds a bundle (its ``--services``)
LISTING = "botocore-services.txt"
#: the calls that make a client or a resource of the service named by their first argument
CLIENT_CALLS = frozenset({"client", "resource", "create_client"})
#: directories of a function's code that Lambda never runs
NOT_CODE = frozenset({"tests", "test", "__pycache__", "node_modules", "site-packages"})


@dataclass(frozen=True)
class Listing:
    """A bundle's ``botocore-services.txt``: where it is (as the template's directory names it), what it keeps."""

    label: str
    kept: tuple[str, ...]


@dataclass(frozen=True)
class ClientCall:
    """A client (or resource) made in a function's code, with its service name written out."""

    file: str
    line: int
    service: str


def check_services(document: Mapping[str, Any], base: Path) -> list[Problem]:
    """Each trimmed function's clients of services its list leaves out; names in a list botocore lacks."""
    known = botocore_services()
    listings: dict[Path, Listing] = {}
    calls: dict[Path, list[ClientCall]] = {}  # functions often share one CodeUri (handlers/): read it once
    problems: list[Problem] = []
    for logical_id, properties, metadata in serverless_functions(document):
        directory = _listing_directory(document, properties, metadata, base)
        if directory is None:
            continue
        if directory not in listings:
            listings[directory] = _read(directory, base)
            problems += _unknown_names(listings[directory], known)
        listing = listings[directory]
        code = code_location(properties, base)
        if code is None or not code.is_dir():
            continue  # check_layout reports a missing CodeUri
        left_out: dict[str, ClientCall] = {}
        if code not in calls:
            calls[code] = list(client_calls(code, base))
        for call in calls[code]:
            if call.service in known and call.service not in listing.kept:
                left_out.setdefault(call.service, call)
        for service, call in sorted(left_out.items()):
            problems.append(Problem(
                where=logical_id,
                message=f"{call.file}:{call.line} makes a client of {service}, which {listing.label} leaves out of "
                        f"the bundle's botocore (it keeps {', '.join(listing.kept)}): in Lambda that client fails",
                fix=f"add {service} to {listing.label} (one service a line), then sam build"))
    return problems


@functools.cache
def botocore_services() -> frozenset[str]:
    """The service names the installed botocore has models of (the names ``client()`` takes).

    Read once a process: listing botocore's ~450 model directories takes about 0.1 s, and one run of
    tests/scaffold/test_init_matrix.py validates 256 projects.
    """
    from botocore.loaders import Loader

    return frozenset(Loader().list_available_services("service-2"))


def client_calls(code: Path, base: Path) -> Iterator[ClientCall]:
    """Every ``client("name")``-like call with a literal name in the Python files under ``code``."""
    for path in sorted(code.rglob("*.py")):
        relative = path.relative_to(code)
        if any(part in NOT_CODE or part.startswith(".") for part in relative.parts[:-1]):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if not any(f"{name}(" in text for name in CLIENT_CALLS):
            continue  # most modules make no client: not worth a parse
        try:
            tree = ast.parse(text, filename=str(path))
        except SyntaxError:
            continue  # the import check (app_consistency) reports code that does not parse
        shown = path.relative_to(base).as_posix() if path.is_relative_to(base) else path.as_posix()
        found = [(getattr(node, "lineno", 0), _service_of(node)) for node in ast.walk(tree)]
        yield from (ClientCall(shown, line, service) for line, service in sorted(found, key=lambda f: f[0])
                    if service is not None)


def _service_of(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    function = node.func
    name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
    if name not in CLIENT_CALLS:
        return None
    arguments = [*node.args[:1], *(k.value for k in node.keywords if k.arg == "service_name")]
    for argument in arguments:
        if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
            return argument.value
    return None


def _listing_directory(document: Mapping[str, Any], properties: Mapping[str, Any], metadata: Mapping[str, Any],
                       base: Path) -> Path | None:
    """The directory of the list that trims this function's botocore: its own Makefile's, or a layer's."""
    own = _makefile_directory(metadata, properties.get("CodeUri", "."), base)
    if own is not None:
        return own
    resources = document.get("Resources")
    for layer in properties.get("Layers") or []:
        target = layer.get("Ref") if isinstance(layer, Mapping) else None
        resource = resources.get(target) if isinstance(resources, Mapping) and isinstance(target, str) else None
        if isinstance(resource, Mapping) and resource.get("Type") == SERVERLESS_LAYER:
            props = resource.get("Properties")
            uri = props.get("ContentUri") if isinstance(props, Mapping) else None
            found = _makefile_directory(resource.get("Metadata") or {}, uri, base)
            if found is not None:
                return found
    return None


def _makefile_directory(metadata: Any, uri: Any, base: Path) -> Path | None:
    if not isinstance(metadata, Mapping) or metadata.get("BuildMethod") != "makefile":
        return None
    context = metadata.get("ContextPath", uri)
    if not isinstance(context, str):
        return None
    directory = (base / context).resolve()
    return directory if (directory / LISTING).is_file() else None


def _read(directory: Path, base: Path) -> Listing:
    from sqsjobs.scaffold.bundle import kept_services

    path = directory / LISTING
    label = path.relative_to(base.resolve()).as_posix() if path.is_relative_to(base.resolve()) else str(path)
    return Listing(label, tuple(kept_services(path)))


def _unknown_names(listing: Listing, known: frozenset[str]) -> list[Problem]:
    problems = []
    for name in listing.kept:
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=3)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            problems.append(Problem(
                where=listing.label, message=f"{name!r} is no service of this botocore{hint}",
                fix=f"write the name client() takes, or remove {name} from {listing.label}"))
    return problems
