"""E9110: an SQS event source's provisioned mode (``ProvisionedPollerConfig``) within what Lambda takes.

Neither cfn-lint (on the SAM form) nor the SAM translator checks these values,
so a wrong one first fails at deploy time. For an SQS source Lambda takes
``MinimumPollers`` 2..200 (default 2) and ``MaximumPollers`` 2..2,000 (default
200; CloudFormation's reference: the API reference now says up to 10,000 for
SQS), the minimum at most the maximum, and provisioned mode instead of
``ScalingConfig.MaximumConcurrency``, never with it. An ``Fn::If`` is decided
with the parameter values being checked.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from pathlib import Path as FilePath

try:
    from sqsjobs_rules import _base
except ImportError:  # pragma: no cover - loaded by path from a checkout, package not installed
    sys.path.append(str(FilePath(__file__).resolve().parent.parent))
    from sqsjobs_rules import _base

MINIMUM_POLLERS = (2, 200)
MAXIMUM_POLLERS = (2, 2000)
DEFAULTS = {"MinimumPollers": 2, "MaximumPollers": 200}


class ProvisionedPollersOutOfBounds(_base.WiringRule):
    """E9110: provisioned pollers out of Lambda's bounds, minimum above maximum, or with MaximumConcurrency.

    Example:
        >>> t = {"Resources": {"Q": {"Type": "AWS::SQS::Queue"},
        ...      "F": {"Type": "AWS::Serverless::Function", "Properties": {"Events": {"E": {"Type": "SQS",
        ...            "Properties": {"Queue": {"Fn::GetAtt": ["Q", "Arn"]},
        ...                           "ProvisionedPollerConfig": {"MinimumPollers": 50, "MaximumPollers": 10}}}}}}}}
        >>> [m[:70] for _, m in ProvisionedPollersOutOfBounds().check(_base.Wiring(t))]
        ["F's SQS event E (queue Q): ProvisionedPollerConfig.MinimumPollers 50 i"]
    """

    id = "E9110"
    shortdesc = "SQS event source provisioned mode out of bounds, or together with MaximumConcurrency"
    description = (
        "ProvisionedPollerConfig on an SQS source takes MinimumPollers 2..200 and MaximumPollers 2..2000 with "
        "minimum <= maximum, and replaces ScalingConfig.MaximumConcurrency; nothing else checks it before deploy."
    )

    def check(self, wiring: _base.Wiring) -> Iterator[tuple[_base.Path, str]]:
        for source in wiring.sources:
            config = wiring.resolve.branch(source.properties.get("ProvisionedPollerConfig"))
            if not isinstance(config, Mapping) or "Fn::If" in config:
                continue
            where = f"{source.label} (queue {source.queue_id or 'imported'})"
            path = source.property_path("ProvisionedPollerConfig")
            values: dict[str, int | None] = {}
            for name, (low, high) in (("MinimumPollers", MINIMUM_POLLERS), ("MaximumPollers", MAXIMUM_POLLERS)):
                raw = config.get(name, DEFAULTS[name])
                value = values[name] = wiring.resolve.number(raw)
                if value is not None and not low <= value <= high:
                    yield path, (f"{where}: ProvisionedPollerConfig.{name} {value} is outside {low}..{high}, what "
                                 f"Lambda takes for an SQS source. Fix: set {_target(raw, name)} within {low}..{high}.")
            low_value, high_value = values["MinimumPollers"], values["MaximumPollers"]
            if low_value is not None and high_value is not None and low_value > high_value:
                yield path, (f"{where}: ProvisionedPollerConfig.MinimumPollers {low_value} is above MaximumPollers "
                             f"{high_value}. Fix: raise {_target(config.get('MaximumPollers'), 'MaximumPollers')} "
                             f"to at least {low_value}, or lower the minimum.")
            scaling = wiring.resolve.branch(source.properties.get("ScalingConfig"))
            if isinstance(scaling, Mapping) and "MaximumConcurrency" in scaling:
                yield path, (f"{where}: ProvisionedPollerConfig and ScalingConfig.MaximumConcurrency are set "
                             "together; Lambda takes one or the other. Fix: drop ScalingConfig when provisioned mode "
                             "is on (an Fn::If on the same condition, as sqsjobs' template does).")


def _target(raw: object, name: str) -> str:
    """The parameter to change when the value comes from one, else the property."""
    if isinstance(raw, dict) and set(raw) == {"Ref"}:
        return f"parameter {raw['Ref']}"
    return f"ProvisionedPollerConfig.{name}"
