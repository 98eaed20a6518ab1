"""Read a SAM template and translate it to plain CloudFormation.

moto's CloudFormation skips the SAM transform, so the local cloud runs
``samtranslator`` itself, the way ``sam deploy`` has CloudFormation do it.
Local ``CodeUri`` paths are swapped for placeholder S3 locations first (the
translator insists on S3) and remembered, so functions run from the source
tree, like ``sam local``; a layer's local ``ContentUri`` too (locally the
functions import this environment's packages, not the layer's).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqsjobs.local.errors import TemplateError

SERVERLESS_FUNCTION = "AWS::Serverless::Function"
SERVERLESS_LAYER = "AWS::Serverless::LayerVersion"
_PLACEHOLDER_BUCKET = "sqsjobs-local-code"


@dataclass(frozen=True, kw_only=True)
class Template:
    """A translated template: CloudFormation resources plus where each function's code lives."""

    path: Path
    resources: dict[str, dict[str, Any]]
    parameters: dict[str, dict[str, Any]]
    conditions: dict[str, Any]
    mappings: dict[str, Any]
    outputs: dict[str, Any]
    code_dirs: dict[str, Path]

    @classmethod
    def load(cls, path: str | Path) -> Template:
        """Parse, remember code locations, and translate ``path``."""
        from sqsjobs.validation import load_document

        template_path = Path(path).resolve()
        try:
            document = load_document(template_path)
        except ValueError as exc:
            raise TemplateError(f"template {path}: {exc}") from None
        code_dirs = _swap_code_uris(document, template_path.parent)
        translated = _translate(document) if _is_sam(document) else document
        return cls(
            path=template_path,
            resources=dict(translated.get("Resources", {})),
            parameters=dict(translated.get("Parameters", {}) or {}),
            conditions=dict(translated.get("Conditions", {}) or {}),
            mappings=dict(translated.get("Mappings", {}) or {}),
            outputs=dict(translated.get("Outputs", {}) or {}),
            code_dirs=code_dirs,
        )


def _is_sam(document: dict[str, Any]) -> bool:
    transform = document.get("Transform")
    names = transform if isinstance(transform, list) else [transform]
    return any(isinstance(n, str) and n.startswith("AWS::Serverless") for n in names)


def _swap_code_uris(document: dict[str, Any], base: Path) -> dict[str, Path]:
    """Replace local CodeUri values with S3 placeholders; return logical id → code directory."""
    globals_function = (document.get("Globals") or {}).get("Function") or {}
    default_uri = globals_function.pop("CodeUri", None) if isinstance(globals_function, dict) else None
    code_dirs: dict[str, Path] = {}
    for logical_id, resource in document["Resources"].items():
        if not isinstance(resource, dict) or resource.get("Type") != SERVERLESS_FUNCTION:
            continue
        properties = resource.setdefault("Properties", {})
        if "InlineCode" in properties:
            raise TemplateError(f"{logical_id}: InlineCode is not supported locally; use CodeUri")
        uri = properties.get("CodeUri", default_uri)
        if uri is None:
            uri = "."
        if not isinstance(uri, str):
            raise TemplateError(f"{logical_id}: CodeUri must be a local path for the local cloud, got {uri!r}")
        if uri.startswith("s3://"):
            raise TemplateError(f"{logical_id}: CodeUri {uri} is in S3; the local cloud runs code from local paths")
        code_dirs[logical_id] = (base / uri).resolve()
        properties["CodeUri"] = f"s3://{_PLACEHOLDER_BUCKET}/{logical_id}"
    for logical_id, resource in document["Resources"].items():
        # A layer's packages are this environment's locally (the functions run with it): only the translator
        # needs its ContentUri, and in S3.
        if isinstance(resource, dict) and resource.get("Type") == SERVERLESS_LAYER:
            properties = resource.setdefault("Properties", {})
            if isinstance(properties.get("ContentUri"), str):
                properties["ContentUri"] = f"s3://{_PLACEHOLDER_BUCKET}/{logical_id}"
    return code_dirs


class _NoManagedPolicies:
    """Managed policy names stay names: locally nothing checks IAM."""

    def load(self) -> dict[str, str]:
        return {}


def _translate(document: dict[str, Any]) -> dict[str, Any]:
    from samtranslator.model.exceptions import InvalidDocumentException
    from samtranslator.translator.transform import transform

    # The translator builds ARNs from the session's region.
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    try:
        result: dict[str, Any] = transform(copy.deepcopy(document), {}, _NoManagedPolicies())
    except InvalidDocumentException as exc:
        causes = "; ".join(str(cause) for cause in exc.causes)
        raise TemplateError(f"the SAM transform rejected the template: {causes}") from exc
    return result
