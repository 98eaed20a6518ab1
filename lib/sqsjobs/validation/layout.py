"""What the template points at on disk: each function's ``CodeUri``, its handler module and its build Makefile.

A layer's ``ContentUri`` and build Makefile are checked the same way (``sqsjobs init`` projects build
``SqsjobsLayer`` with ``layer/Makefile``).

``sam build`` fails late (or, for a ``ContextPath`` that exists only in
another checkout, far from here) when these are wrong; the local cloud runs
from ``CodeUri`` directly. Checked before either.

Example:
    >>> doc = {"Resources": {"Worker": {"Type": "AWS::Serverless::Function",
    ...        "Properties": {"CodeUri": "nowhere/", "Handler": "worker.handler", "Runtime": "python3.12"}}}}
    >>> [p.message for p in check_layout(doc, Path("/tmp"))]
    ['CodeUri nowhere/ does not exist (/tmp/nowhere)']
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from sqsjobs.validation.problems import Problem

SERVERLESS_FUNCTION = "AWS::Serverless::Function"
SERVERLESS_LAYER = "AWS::Serverless::LayerVersion"


def serverless_functions(document: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """``(logical id, properties with Globals merged, metadata)`` of every SAM function."""
    globals_ = _mapping(_mapping(document.get("Globals")).get("Function"))
    for logical_id, resource in _mapping(document.get("Resources")).items():
        if isinstance(resource, Mapping) and resource.get("Type") == SERVERLESS_FUNCTION:
            yield logical_id, {**globals_, **_mapping(resource.get("Properties"))}, _mapping(resource.get("Metadata"))


def code_location(properties: Mapping[str, Any], base: Path) -> Path | None:
    """The local directory a function's code comes from, or None (inline, S3, an image, an intrinsic)."""
    if "InlineCode" in properties or properties.get("PackageType") == "Image":
        return None
    uri = properties.get("CodeUri", ".")
    if not isinstance(uri, str) or uri.startswith("s3://"):
        return None
    return (base / uri).resolve()


def handler_module(properties: Mapping[str, Any]) -> str | None:
    """The Python module of a python function's ``Handler`` (``worker.handler`` -> ``worker``)."""
    handler = properties.get("Handler")
    runtime = properties.get("Runtime")
    if not isinstance(handler, str) or "." not in handler:
        return None
    if isinstance(runtime, str) and not runtime.startswith("python"):
        return None
    return handler.rsplit(".", 1)[0].replace("/", ".")


def check_layout(document: Mapping[str, Any], base: Path) -> list[Problem]:
    """Missing ``CodeUri`` and ``ContentUri`` directories, handler modules and ``ContextPath`` Makefiles."""
    problems: list[Problem] = []
    for logical_id, properties, metadata in serverless_functions(document):
        code_dir = code_location(properties, base)
        uri = properties.get("CodeUri", ".")
        if code_dir is not None and not code_dir.exists():
            problems.append(Problem(where=logical_id, message=f"CodeUri {uri} does not exist ({code_dir})",
                                    fix="point CodeUri at the directory holding the function's code, relative to "
                                        "the template"))
            continue
        module = handler_module(properties)
        if code_dir is not None and module is not None and not module_exists(code_dir, module):
            problems.append(Problem(
                where=logical_id, message=f"Handler {properties.get('Handler')} names module {module}, which is "
                                          f"not in CodeUri {uri} ({code_dir})",
                fix=f"add {module.replace('.', '/')}.py to {uri}, or correct Handler"))
        if metadata.get("BuildMethod") == "makefile":
            problems += _check_makefile(logical_id, metadata.get("ContextPath", uri), base)
    for logical_id, resource in _mapping(document.get("Resources")).items():
        if not isinstance(resource, Mapping) or resource.get("Type") != SERVERLESS_LAYER:
            continue
        uri = _mapping(resource.get("Properties")).get("ContentUri")
        metadata = _mapping(resource.get("Metadata"))
        if not isinstance(uri, str) or uri.startswith("s3://"):
            continue
        content = (base / uri).resolve()
        if not content.is_dir():
            problems.append(Problem(where=logical_id, message=f"ContentUri {uri} does not exist ({content})",
                                    fix="point ContentUri at the layer's directory, relative to the template"))
        elif metadata.get("BuildMethod") == "makefile":
            problems += _check_makefile(logical_id, metadata.get("ContextPath", uri), base)
    return problems


def _check_makefile(logical_id: str, context: Any, base: Path) -> list[Problem]:
    if not isinstance(context, str):
        return []
    makefile = (base / context / "Makefile").resolve()
    where = f"{logical_id} Metadata.ContextPath"
    fix = (f"point ContextPath at the directory of the Makefile that has a build-{logical_id} target, or remove "
           "BuildMethod: makefile so sam build installs the code directory's requirements.txt")
    if not makefile.is_file():
        return [Problem(where=where, message=f"{context} holds no Makefile ({makefile}), so sam build cannot build "
                                             "this function", fix=fix)]
    text = makefile.read_text(errors="replace")
    if not re.search(rf"^build-({re.escape(logical_id)}|%)\s*:", text, re.M):
        return [Problem(where=where, message=f"{makefile} has no build-{logical_id} (or build-%) target", fix=fix)]
    return []


def module_exists(code_dir: Path, module: str) -> bool:
    """Whether ``module`` (dotted) is a file or package under ``code_dir``."""
    relative = Path(*module.split("."))
    return (code_dir / relative.with_suffix(".py")).is_file() or (code_dir / relative / "__init__.py").is_file()


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
