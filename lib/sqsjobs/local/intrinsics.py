"""Resolve CloudFormation intrinsic functions against locally created resources.

Supported: Ref, Fn::GetAtt, Fn::Sub (both forms), Fn::Join, Fn::Select,
Fn::Split, Fn::If, Fn::Equals, Fn::And, Fn::Or, Fn::Not, Fn::FindInMap,
Fn::ToJsonString, Fn::Base64 and the pseudo parameters. Anything else raises
:class:`TemplateError` naming the function, never a silent ``None``.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqsjobs.local.errors import TemplateError

NO_VALUE = object()
"""What ``Ref: AWS::NoValue`` resolves to: the property is dropped."""

_SUB_VARIABLE = re.compile(r"\$\{([^}!][^}]*)\}")


@dataclass
class Resolver:
    """Resolves intrinsics given parameters, pseudo parameters and resource attributes.

    ``refs`` maps a logical id to what ``Ref`` returns; ``attributes`` maps
    ``(logical id, attribute)`` to what ``Fn::GetAtt`` returns.

    Example:
        >>> r = Resolver(parameters={"Env": "dev"}, pseudo={"AWS::Region": "us-east-1"})
        >>> r.resolve({"Fn::Sub": "${Env}-${AWS::Region}"})
        'dev-us-east-1'
    """

    parameters: dict[str, Any] = field(default_factory=dict)
    pseudo: dict[str, Any] = field(default_factory=dict)
    refs: dict[str, Any] = field(default_factory=dict)
    attributes: dict[tuple[str, str], Any] = field(default_factory=dict)
    conditions: dict[str, Any] = field(default_factory=dict)
    mappings: dict[str, Any] = field(default_factory=dict)

    def resolve(self, value: Any) -> Any:
        """Return ``value`` with every intrinsic replaced by its local value."""
        if isinstance(value, list):
            items = [self.resolve(v) for v in value]
            return [v for v in items if v is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (key, argument), = value.items()
            handler = _FUNCTIONS.get(key)
            if handler is not None:
                return handler(self, argument)
            if key.startswith("Fn::"):
                raise TemplateError(f"intrinsic {key} is not supported by the local cloud")
        resolved = {k: self.resolve(v) for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v is not NO_VALUE}

    def condition(self, name: str) -> bool:
        """Evaluate the template condition ``name``."""
        if name not in self.conditions:
            raise TemplateError(f"unknown condition {name!r}")
        return bool(self.resolve(self.conditions[name]))

    def ref(self, name: str) -> Any:
        """What ``Ref: name`` is locally."""
        if name == "AWS::NoValue":
            return NO_VALUE
        for table in (self.pseudo, self.parameters, self.refs):
            if name in table:
                return table[name]
        raise TemplateError(f"Ref {name!r} names nothing the local cloud created (or it is created later)")

    def get_att(self, logical_id: str, attribute: str) -> Any:
        """What ``Fn::GetAtt: [logical_id, attribute]`` is locally."""
        try:
            return self.attributes[(logical_id, attribute)]
        except KeyError:
            raise TemplateError(f"Fn::GetAtt {logical_id}.{attribute} is not available locally") from None

    def sub(self, template: str, variables: Mapping[str, Any]) -> str:
        """Substitute ``${Name}`` and ``${Res.Attr}`` in ``template``; ``${!x}`` stays literal."""

        def replace(match: re.Match[str]) -> str:
            name = match.group(1).strip()
            if name in variables:
                return str(variables[name])
            if "." in name and not name.startswith("AWS::"):
                logical_id, attribute = name.split(".", 1)
                return str(self.get_att(logical_id, attribute))
            return str(self.ref(name))

        return _SUB_VARIABLE.sub(replace, template).replace("${!", "${")


def _ref(r: Resolver, argument: Any) -> Any:
    return r.ref(str(argument))


def _get_att(r: Resolver, argument: Any) -> Any:
    if isinstance(argument, str):
        argument = argument.split(".", 1)
    logical_id, attribute = (r.resolve(a) for a in argument)
    return r.get_att(str(logical_id), str(attribute))


def _sub(r: Resolver, argument: Any) -> Any:
    if isinstance(argument, str):
        return r.sub(argument, {})
    template, variables = argument
    return r.sub(template, {k: r.resolve(v) for k, v in variables.items()})


def _join(r: Resolver, argument: Any) -> Any:
    delimiter, items = argument
    return _delimiter("Fn::Join", delimiter).join(str(v) for v in r.resolve(items))


def _select(r: Resolver, argument: Any) -> Any:
    index, items = argument
    return r.resolve(items)[int(r.resolve(index))]


def _split(r: Resolver, argument: Any) -> Any:
    delimiter, text = argument
    return str(r.resolve(text)).split(_delimiter("Fn::Split", delimiter))


def _delimiter(function: str, delimiter: Any) -> str:
    """A delimiter as CloudFormation takes it: a literal string, never a function (a deploy would refuse one)."""
    if not isinstance(delimiter, str):
        raise TemplateError(f"{function}'s delimiter must be a literal string, not {delimiter!r}")
    return delimiter


def _if(r: Resolver, argument: Any) -> Any:
    name, when_true, when_false = argument
    return r.resolve(when_true if r.condition(name) else when_false)


def _equals(r: Resolver, argument: Any) -> Any:
    left, right = (r.resolve(a) for a in argument)
    return str(left) == str(right)


def _and(r: Resolver, argument: Any) -> Any:
    return all(_truth(r, a) for a in argument)


def _or(r: Resolver, argument: Any) -> Any:
    return any(_truth(r, a) for a in argument)


def _not(r: Resolver, argument: Any) -> Any:
    return not _truth(r, argument[0])


def _truth(r: Resolver, item: Any) -> bool:
    if isinstance(item, dict) and set(item) == {"Condition"}:
        return r.condition(item["Condition"])
    return bool(r.resolve(item))


def _find_in_map(r: Resolver, argument: Any) -> Any:
    # Keys are looked up by their text, as CloudFormation does: a Number parameter's
    # default is an int here (YAML), but "5" in the Mappings.
    name, top, second = (_text(r.resolve(a)) for a in argument[:3])
    try:
        return r.mappings[name][top][second]
    except KeyError:
        raise TemplateError(f"Fn::FindInMap {name}/{top}/{second} is not in Mappings") from None


def _text(value: Any) -> Any:
    """A scalar as CloudFormation passes it on: numbers become their text (``5`` -> ``"5"``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    return str(int(value)) if float(value).is_integer() else str(value)


def _to_json(r: Resolver, argument: Any) -> Any:
    return json.dumps(r.resolve(argument), separators=(",", ":"))


def _base64(r: Resolver, argument: Any) -> Any:
    return base64.b64encode(str(r.resolve(argument)).encode()).decode()


def _condition(r: Resolver, argument: Any) -> Any:
    return r.condition(str(argument))


_FUNCTIONS: dict[str, Callable[[Resolver, Any], Any]] = {
    "Ref": _ref,
    "Fn::GetAtt": _get_att,
    "Fn::Sub": _sub,
    "Fn::Join": _join,
    "Fn::Select": _select,
    "Fn::Split": _split,
    "Fn::If": _if,
    "Fn::Equals": _equals,
    "Fn::And": _and,
    "Fn::Or": _or,
    "Fn::Not": _not,
    "Fn::FindInMap": _find_in_map,
    "Fn::ToJsonString": _to_json,
    "Fn::Base64": _base64,
    "Condition": _condition,
}


def references(value: Any) -> set[str]:
    """The logical ids (and parameters) ``value`` refers to, for creation order.

    Example:
        >>> sorted(references({"Fn::Sub": "${Queue.Arn}-${Table}"}))
        ['Queue', 'Table']
    """
    found: set[str] = set()
    if isinstance(value, list):
        for item in value:
            found |= references(item)
    elif isinstance(value, dict):
        for key, argument in value.items():
            if key == "Ref" and isinstance(argument, str):
                found.add(argument)
            elif key == "Fn::GetAtt":
                target = argument.split(".", 1)[0] if isinstance(argument, str) else argument[0]
                if isinstance(target, str):
                    found.add(target)
            elif key == "Fn::Sub":
                text = argument if isinstance(argument, str) else argument[0]
                for name in _SUB_VARIABLE.findall(text):
                    found.add(name.split(".", 1)[0])
                if not isinstance(argument, str):
                    found |= references(argument[1])
            else:
                found |= references(argument)
    return found
