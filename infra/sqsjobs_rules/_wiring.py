"""Read queues, functions and the SQS event sources that join them from a template.

Both forms a user may lint are understood: SAM (``AWS::Serverless::Function``
with ``Events`` of type ``SQS`` and ``Globals``) and plain CloudFormation
(``AWS::Lambda::Function`` + ``AWS::Lambda::EventSourceMapping``). Numbers are
resolved from literals, ``Ref`` to a parameter (an override first, then its
``Default``) and ``Fn::FindInMap``; anything else is *unknown* (``None``), and
the rules skip a check they cannot decide rather than guess.

This module only reads a template dict: no cfn-lint import, so it is testable
on its own and loadable in any environment that has cfn-lint.

Example:
    >>> template = {"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {}}}}
    >>> Wiring(template).queues["Q"].visibility_timeout
    30
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

Path = tuple[str | int, ...]

# AWS defaults for properties a template may leave out.
DEFAULT_VISIBILITY_TIMEOUT = 30
DEFAULT_RETENTION = 345_600
DEFAULT_LAMBDA_TIMEOUT = 3
DEFAULT_BATCHING_WINDOW = 0

QUEUE_TYPE = "AWS::SQS::Queue"
FUNCTION_TYPES = ("AWS::Serverless::Function", "AWS::Lambda::Function")
MAPPING_TYPE = "AWS::Lambda::EventSourceMapping"
ALARM_TYPE = "AWS::CloudWatch::Alarm"
MAX_ATTEMPTS_VARIABLE = "SQSJOBS_MAX_ATTEMPTS"

_SUB_ARN = re.compile(r"^\$\{([A-Za-z0-9]+)\.Arn\}$")


class Resolver:
    """Turns property values into plain numbers and strings where that is certain.

    Example:
        >>> r = Resolver({"Parameters": {"N": {"Type": "Number", "Default": 5}}}, {"N": "7"})
        >>> r.number({"Ref": "N"}), r.number(3), r.number({"Fn::If": ["C", 1, 2]})
        (7, 3, None)

        A ``Ref`` to a Number parameter keys a mapping by its text, as in CloudFormation:

        >>> t = {"Parameters": {"N": {"Type": "Number", "Default": 5}},
        ...      "Mappings": {"Plus1": {"5": {"Value": 6}}}}
        >>> Resolver(t).number({"Fn::FindInMap": ["Plus1", {"Ref": "N"}, "Value"]})
        6
    """

    def __init__(self, template: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> None:
        self._parameters: Mapping[str, Any] = _mapping(template.get("Parameters"))
        self._mappings: Mapping[str, Any] = _mapping(template.get("Mappings"))
        self._conditions: Mapping[str, Any] = _mapping(template.get("Conditions"))
        self._overrides = dict(overrides or {})

    def branch(self, value: Any) -> Any:
        """``value`` with every ``Fn::If`` whose condition is known replaced by its branch (``AWS::NoValue``: None).

        An ``Fn::If`` whose condition cannot be decided is left as it is.

        Example:
            >>> t = {"Parameters": {"N": {"Type": "Number", "Default": 0}},
            ...      "Conditions": {"On": {"Fn::Not": [{"Fn::Equals": [{"Ref": "N"}, 0]}]}}}
            >>> value = {"Fn::If": ["On", {"A": 1}, {"Ref": "AWS::NoValue"}]}
            >>> Resolver(t).branch(value), Resolver(t, {"N": "2"}).branch(value)
            (None, {'A': 1})
        """
        if isinstance(value, Mapping):
            if set(value) == {"Ref"} and value["Ref"] == "AWS::NoValue":
                return None
            if set(value) == {"Fn::If"} and isinstance(value["Fn::If"], list) and len(value["Fn::If"]) == 3:
                name, chosen, other = value["Fn::If"]
                holds = self.condition(name) if isinstance(name, str) else None
                if holds is None:
                    return value
                return self.branch(chosen if holds else other)
            return {key: self.branch(item) for key, item in value.items()}
        return value

    def condition(self, name: str, _seen: frozenset[str] = frozenset()) -> bool | None:
        """Whether condition ``name`` holds with these parameter values (None: it cannot be decided here)."""
        if name in _seen:
            return None
        return self._holds(self._conditions.get(name), _seen | {name})

    def _holds(self, expression: Any, seen: frozenset[str]) -> bool | None:
        if not isinstance(expression, Mapping) or len(expression) != 1:
            return None
        (function, args), = expression.items()
        if function == "Condition" and isinstance(args, str):
            return self.condition(args, seen)
        if not isinstance(args, list):
            return None
        if function == "Fn::Equals" and len(args) == 2:
            left, right = (self.scalar(a) for a in args)
            if left is None or right is None or isinstance(left, Mapping) or isinstance(right, Mapping):
                return None
            return _text(left) == _text(right)
        values = [self._holds(a, seen) for a in args]
        if None in values:
            return None
        if function == "Fn::Not" and len(values) == 1:
            return not values[0]
        if function == "Fn::And":
            return all(values)
        if function == "Fn::Or":
            return any(values)
        return None

    def parameter(self, name: str) -> Any:
        """The value a deployment would give parameter ``name`` (override, else default)."""
        if name in self._overrides:
            return self._overrides[name]
        declared = self._parameters.get(name)
        if isinstance(declared, Mapping):
            return declared.get("Default")
        return None

    def declares(self, name: str) -> bool:
        """Whether the template declares parameter ``name``."""
        return name in self._parameters

    def scalar(self, value: Any) -> Any:
        """A literal, or the resolved value of a ``Ref``/``Fn::FindInMap``; else ``None``."""
        if isinstance(value, Mapping):
            if set(value) == {"Ref"} and isinstance(value["Ref"], str):
                return self.parameter(value["Ref"])
            if set(value) == {"Fn::FindInMap"}:
                return self._find_in_map(value["Fn::FindInMap"])
            return None
        if isinstance(value, list):
            return None
        return value

    def number(self, value: Any) -> int | None:
        """``value`` as a whole number, or ``None`` when it cannot be known statically."""
        resolved = self.scalar(value)
        if isinstance(resolved, bool):
            return None
        if isinstance(resolved, int | float):
            return int(resolved)
        if isinstance(resolved, str):
            try:
                return int(float(resolved))
            except ValueError:
                return None
        return None

    def _find_in_map(self, args: Any) -> Any:
        if not isinstance(args, list) or len(args) < 3:
            return None
        keys = [_map_key(self.scalar(a)) for a in args[:3]]
        if not all(isinstance(k, str) for k in keys):
            return None
        level: Any = self._mappings
        for key in keys:
            if not isinstance(level, Mapping) or key not in level:
                return None
            level = level[key]
        return level


@dataclass(frozen=True, kw_only=True)
class Queue:
    """An ``AWS::SQS::Queue`` as the rules see it (AWS defaults filled in).

    Example:
        >>> q = Wiring({"Resources": {"Q": {"Type": "AWS::SQS::Queue",
        ...     "Properties": {"FifoQueue": True}}}}).queues["Q"]
        >>> q.fifo, q.retention, q.has_redrive, q.property_path("VisibilityTimeout")
        (True, 345600, False, ('Resources', 'Q'))
    """

    logical_id: str
    properties: Mapping[str, Any]
    visibility_timeout: int | None
    retention: int | None
    fifo: bool
    has_redrive: bool
    dead_letter_id: str | None
    max_receive_count: Any  # raw value: compared by identity first, then resolved

    @property
    def path(self) -> Path:
        """Path of the resource in the template."""
        return ("Resources", self.logical_id)

    def property_path(self, name: str) -> Path:
        """Path of property ``name`` (the resource's path when the property is absent)."""
        if name in self.properties:
            return (*self.path, "Properties", name)
        return self.path


@dataclass(frozen=True, kw_only=True)
class Function:
    """A Lambda function (SAM or plain) with ``Globals`` merged in.

    Example:
        >>> t = {"Globals": {"Function": {"Timeout": 20}},
        ...      "Resources": {"F": {"Type": "AWS::Serverless::Function", "Properties": {}}}}
        >>> Wiring(t).functions["F"].timeout
        20
    """

    logical_id: str
    timeout: int | None
    environment: Mapping[str, Any]
    #: where each environment variable is written (the function's own Environment, or Globals)
    environment_paths: Mapping[str, Path] = field(default_factory=dict)

    def variable_path(self, name: str) -> Path:
        """Path of environment variable ``name`` (the function's path when it is not set).

        Example:
            >>> t = {"Globals": {"Function": {"Environment": {"Variables": {"A": "1"}}}},
            ...      "Resources": {"F": {"Type": "AWS::Serverless::Function", "Properties": {}}}}
            >>> Wiring(t).functions["F"].variable_path("A")
            ('Globals', 'Function', 'Environment', 'Variables', 'A')
        """
        return self.environment_paths.get(name, ("Resources", self.logical_id))


@dataclass(frozen=True, kw_only=True)
class SqsSource:
    """One SQS queue feeding one function: a SAM ``SQS`` event or an event source mapping.

    ``queue_id``/``function_id`` are ``None`` when that end is not a resource
    of the template (an imported ARN), so checks that need it are skipped.

    Example:
        >>> t = {"Resources": {"M": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {
        ...     "EventSourceArn": "arn:aws:sqs:us-east-1:1:q", "FunctionName": "f"}}}}
        >>> s = Wiring(t).sources[0]
        >>> s.label, s.queue_id, s.batching_window
        ('event source mapping M', None, 0)
    """

    label: str
    path: Path
    queue_id: str | None
    function_id: str | None
    batching_window: int | None
    response_types: Any
    properties: Mapping[str, Any] = field(repr=False)

    def property_path(self, name: str) -> Path:
        """Path of property ``name`` (the source's path when the property is absent)."""
        if name in self.properties:
            return (*self.path, name)
        return self.path


class Wiring:
    """Queues, functions, SQS sources and alarms of one template, resolved once.

    Example:
        >>> t = {"Resources": {
        ...     "Q": {"Type": "AWS::SQS::Queue"},
        ...     "F": {"Type": "AWS::Serverless::Function", "Properties": {"Timeout": 10,
        ...           "Events": {"E": {"Type": "SQS", "Properties": {"Queue": {"Fn::GetAtt": ["Q", "Arn"]}}}}}}}}
        >>> [(s.queue_id, s.function_id) for s in Wiring(t).sources]
        [('Q', 'F')]
    """

    def __init__(self, template: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> None:
        self.template = template
        self.resolve = Resolver(template, overrides)
        self.resources: Mapping[str, Any] = {
            k: v for k, v in _mapping(template.get("Resources")).items() if isinstance(v, Mapping)
        }
        self.queues = {k: self._queue(k, v) for k, v in self.resources.items() if v.get("Type") == QUEUE_TYPE}
        self.functions = {k: self._function(k, v) for k, v in self.resources.items() if v.get("Type") in FUNCTION_TYPES}
        self.sources = list(self._sources())

    def dead_letter_queues(self) -> Iterator[tuple[Queue, Queue]]:
        """``(source, dead-letter queue)`` for every redrive policy between two queues of the template."""
        for queue in self.queues.values():
            if queue.dead_letter_id in self.queues:
                yield queue, self.queues[queue.dead_letter_id]

    def dead_letter_queues_of(self, function_id: str) -> list[Queue]:
        """The DLQs whose letters concern function ``function_id``.

        Those of the queues it consumes, and of the queues its environment
        names (``Ref``/``Fn::GetAtt``): a queue that is itself a DLQ, or one
        that has a DLQ.

        Example:
            >>> t = {"Resources": {
            ...     "D": {"Type": "AWS::SQS::Queue"},
            ...     "Q": {"Type": "AWS::SQS::Queue", "Properties": {"RedrivePolicy": {
            ...           "deadLetterTargetArn": {"Fn::GetAtt": ["D", "Arn"]}, "maxReceiveCount": 6}}},
            ...     "F": {"Type": "AWS::Serverless::Function", "Properties": {
            ...           "Environment": {"Variables": {"QUEUE": {"Ref": "Q"}}}}}}}
            >>> [q.logical_id for q in Wiring(t).dead_letter_queues_of("F")]
            ['D']
        """
        dead_letter_ids = {dlq.logical_id for _, dlq in self.dead_letter_queues()}
        named = [s.queue_id for s in self.sources if s.function_id == function_id and s.queue_id]
        for value in self.functions[function_id].environment.values():
            named.extend(q for q in (_ref_target(value), _arn_target(value)) if q in self.queues)
        found: dict[str, Queue] = {}
        for queue_id in named:
            queue = self.queues[queue_id]
            if queue_id in dead_letter_ids:
                found[queue_id] = queue
            if queue.dead_letter_id in self.queues:
                found[queue.dead_letter_id] = self.queues[queue.dead_letter_id]
        return list(found.values())

    def alarms(self) -> Iterator[tuple[str, Mapping[str, Any]]]:
        """``(logical id, properties)`` of every CloudWatch alarm."""
        for logical_id, resource in self.resources.items():
            if resource.get("Type") == ALARM_TYPE:
                yield logical_id, _mapping(resource.get("Properties"))

    # ------------------------------------------------------------ reading
    def _queue(self, logical_id: str, resource: Mapping[str, Any]) -> Queue:
        props = _mapping(resource.get("Properties"))
        redrive = props.get("RedrivePolicy")
        if isinstance(redrive, str):
            # RedrivePolicy is a JSON-typed property: a string is legal too.
            try:
                redrive = json.loads(redrive)
            except ValueError:
                redrive = None
        redrive = _mapping(redrive)
        target = redrive.get("deadLetterTargetArn")
        visibility = props.get("VisibilityTimeout", DEFAULT_VISIBILITY_TIMEOUT)
        retention = props.get("MessageRetentionPeriod", DEFAULT_RETENTION)
        fifo = self.resolve.scalar(props.get("FifoQueue", False))
        return Queue(
            logical_id=logical_id,
            properties=props,
            visibility_timeout=self.resolve.number(visibility),
            retention=self.resolve.number(retention),
            fifo=fifo is True or str(fifo).lower() == "true",
            has_redrive=target is not None,
            dead_letter_id=_arn_target(target),
            max_receive_count=redrive.get("maxReceiveCount"),
        )

    def _function(self, logical_id: str, resource: Mapping[str, Any]) -> Function:
        props = dict(_mapping(resource.get("Properties")))
        env: dict[str, Any] = {}
        paths: dict[str, Path] = {}
        variables: Path = ("Environment", "Variables")
        if resource.get("Type") == "AWS::Serverless::Function":
            globals_ = _mapping(_mapping(self.template.get("Globals")).get("Function"))
            env.update(_variables(globals_))
            paths.update({name: ("Globals", "Function", *variables, name) for name in _variables(globals_)})
            props = {**globals_, **props}
        own = _variables(_mapping(resource.get("Properties")))
        env.update(own)
        paths.update({name: ("Resources", logical_id, "Properties", *variables, name) for name in own})
        return Function(
            logical_id=logical_id,
            timeout=self.resolve.number(props.get("Timeout", DEFAULT_LAMBDA_TIMEOUT)),
            environment=env,
            environment_paths=paths,
        )

    def _sources(self) -> Iterator[SqsSource]:
        for logical_id, resource in self.resources.items():
            props = _mapping(resource.get("Properties"))
            if resource.get("Type") == "AWS::Serverless::Function":
                for event_name, event in _mapping(props.get("Events")).items():
                    if not isinstance(event, Mapping) or event.get("Type") != "SQS":
                        continue
                    event_props = _mapping(event.get("Properties"))
                    yield self._source(
                        label=f"{logical_id}'s SQS event {event_name}",
                        path=("Resources", logical_id, "Properties", "Events", event_name, "Properties"),
                        queue_arn=event_props.get("Queue"),
                        function_id=logical_id,
                        props=event_props,
                    )
            elif resource.get("Type") == MAPPING_TYPE:
                queue_arn = props.get("EventSourceArn")
                if not self._is_sqs(queue_arn):
                    continue
                yield self._source(
                    label=f"event source mapping {logical_id}",
                    path=("Resources", logical_id, "Properties"),
                    queue_arn=queue_arn,
                    function_id=_function_target(props.get("FunctionName")),
                    props=props,
                )

    def _source(
        self, *, label: str, path: Path, queue_arn: Any, function_id: str | None, props: Mapping[str, Any]
    ) -> SqsSource:
        queue_id = _arn_target(queue_arn)
        return SqsSource(
            label=label,
            path=path,
            queue_id=queue_id if queue_id in self.queues else None,
            function_id=function_id if function_id in self.functions else None,
            batching_window=self.resolve.number(props.get("MaximumBatchingWindowInSeconds", DEFAULT_BATCHING_WINDOW)),
            response_types=props.get("FunctionResponseTypes"),
            properties=props,
        )

    def _is_sqs(self, arn: Any) -> bool:
        target = _arn_target(arn)
        if target is not None:
            return target in self.queues
        resolved = self.resolve.scalar(arn)
        return isinstance(resolved, str) and ":sqs:" in resolved


def _map_key(value: Any) -> Any:
    """A mapping key as CloudFormation looks it up: a ``Ref`` to a Number parameter is its text."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return str(int(value)) if float(value).is_integer() else str(value)
    return value


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str:
    """A value as Fn::Equals compares it: Number parameters are their text (``5`` and ``"5"`` are equal)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _variables(props: Mapping[str, Any]) -> dict[str, Any]:
    return dict(_mapping(_mapping(props.get("Environment")).get("Variables")))


def _arn_target(value: Any) -> str | None:
    """The logical id behind ``!GetAtt X.Arn`` (or ``!Sub "${X.Arn}"``), else ``None``."""
    if not isinstance(value, Mapping) or len(value) != 1:
        return None
    if "Fn::GetAtt" in value:
        att = value["Fn::GetAtt"]
        if isinstance(att, str):
            att = att.split(".", 1)
        if isinstance(att, list) and len(att) == 2 and att[1] == "Arn" and isinstance(att[0], str):
            return att[0]
    if "Fn::Sub" in value and isinstance(value["Fn::Sub"], str):
        match = _SUB_ARN.match(value["Fn::Sub"])
        if match:
            return match.group(1)
    return None


def _ref_target(value: Any) -> str | None:
    """The logical id (or parameter) behind ``!Ref X``, else ``None``."""
    if isinstance(value, Mapping) and set(value) == {"Ref"} and isinstance(value["Ref"], str):
        return value["Ref"]
    return None


def _function_target(value: Any) -> str | None:
    """The logical id behind an event source mapping's ``FunctionName``."""
    return _ref_target(value) or _arn_target(value)
