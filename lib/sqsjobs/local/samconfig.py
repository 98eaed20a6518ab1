"""Parameter overrides from ``samconfig.toml``, as ``sam deploy`` would use them.

``sam deploy --guided`` saves answers (``SenderEmail=...``) under
``[default.deploy.parameters] parameter_overrides``; ``sqsjobs local up``
reads the same place, so a stack deployed with SAM and its local twin get the
same parameters. Command-line ``--parameter`` values win.
"""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path
from typing import Any

from sqsjobs.local.errors import TemplateError


def parameter_overrides(template: Path, environment: str = "default") -> dict[str, str]:
    """Overrides saved in the ``samconfig.toml`` beside ``template`` (empty when there is none).

    Example:
        >>> parameter_overrides(Path("/nonexistent/template.yaml"))
        {}
    """
    path = template.resolve().parent / "samconfig.toml"
    if not path.exists():
        return {}
    try:
        config: dict[str, Any] = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TemplateError(f"cannot read {path}: {exc}") from exc
    section = config.get(environment, {})
    raw: Any = None
    for command in ("deploy", "global"):
        raw = section.get(command, {}).get("parameters", {}).get("parameter_overrides", raw)
    if raw is None:
        return {}
    items = raw if isinstance(raw, list) else shlex.split(str(raw))
    overrides = {}
    for item in items:
        name, sep, value = str(item).partition("=")
        if sep:
            overrides[name] = value
    return overrides
