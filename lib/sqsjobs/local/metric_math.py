"""A small CloudWatch metric-math evaluator over one period's scalar values.

moto returns nothing for metric math, so alarms such as the failure rate
``IF(total > 0, failed / total, 0)`` are computed here. Supported: numbers,
query ids, ``+ - * /``, comparisons, ``AND``/``OR`` (also ``&&``/``||``),
parentheses, ``IF(c, a[, b])``, ``FILL(x, v)``, ``ABS``, ``MIN``/``MAX``/``SUM``/``AVG``
of arguments. ``None`` stands for a missing datapoint and propagates through
arithmetic, as a missing timestamp does in CloudWatch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

Value = float | None

_TOKEN = re.compile(r"\s*(?:(\d+\.?\d*(?:[eE][-+]?\d+)?)|([A-Za-z_][A-Za-z0-9_]*)|(>=|<=|==|!=|&&|\|\||[-+*/(),<>]))")


class MathError(ValueError):
    """Raised when an expression uses syntax or functions this evaluator lacks."""


def evaluate(expression: str, values: Mapping[str, Value]) -> Value:
    """Evaluate ``expression`` with query ids bound to ``values``.

    Example:
        >>> evaluate("IF((ok + failed) > 0, failed / (ok + failed), 0)", {"ok": 9.0, "failed": 1.0})
        0.1
        >>> evaluate("FILL(m, 0) + 1", {"m": None})
        1.0
    """
    parser = _Parser(_tokens(expression), values)
    result = parser.expression()
    if parser.position != len(parser.tokens):
        raise MathError(f"unexpected {parser.tokens[parser.position]!r} in {expression!r}")
    return result


def _tokens(expression: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    expression = expression.rstrip()
    while position < len(expression):
        match = _TOKEN.match(expression, position)
        if match is None or match.end() == position:
            raise MathError(f"cannot read {expression[position:]!r}")
        tokens.append(next(g for g in match.groups() if g is not None))
        position = match.end()
    return tokens


def _arith(op: str, left: Value, right: Value) -> Value:
    if left is None or right is None:
        return None
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    if right == 0:
        return None  # CloudWatch drops the point of a division by zero
    return left / right


_COMPARE = {
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


class _Parser:
    """Recursive descent: or > and > comparison > sum > product > unary > atom."""

    def __init__(self, tokens: list[str], values: Mapping[str, Value]) -> None:
        self.tokens = tokens
        self.values = values
        self.position = 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token.upper() != expected):
            raise MathError(f"expected {expected or 'more'}, found {token!r}")
        self.position += 1
        return token

    def expression(self) -> Value:
        left = self.conjunction()
        while (self.peek() or "").upper() in ("OR", "||"):
            self.take()
            right = self.conjunction()
            left = None if left is None or right is None else float(bool(left) or bool(right))
        return left

    def conjunction(self) -> Value:
        left = self.comparison()
        while (self.peek() or "").upper() in ("AND", "&&"):
            self.take()
            right = self.comparison()
            left = None if left is None or right is None else float(bool(left) and bool(right))
        return left

    def comparison(self) -> Value:
        left = self.sum()
        while self.peek() in _COMPARE:
            op = self.take()
            right = self.sum()
            left = None if left is None or right is None else float(_COMPARE[op](left, right))
        return left

    def sum(self) -> Value:
        left = self.product()
        while self.peek() in ("+", "-"):
            op = self.take()
            left = _arith(op, left, self.product())
        return left

    def product(self) -> Value:
        left = self.unary()
        while self.peek() in ("*", "/"):
            op = self.take()
            left = _arith(op, left, self.unary())
        return left

    def unary(self) -> Value:
        if self.peek() == "-":
            self.take()
            value = self.unary()
            return None if value is None else -value
        return self.atom()

    def atom(self) -> Value:
        token = self.take()
        if token == "(":
            value = self.expression()
            self.take(")")
            return value
        if token[0].isdigit():
            return float(token)
        if self.peek() == "(":
            return self.call(token.upper())
        if token not in self.values:
            raise MathError(f"unknown metric id {token!r}")
        return self.values[token]

    def call(self, name: str) -> Value:
        self.take("(")
        args: list[Value] = []
        if self.peek() != ")":
            args.append(self.expression())
            while self.peek() == ",":
                self.take(",")
                args.append(self.expression())
        self.take(")")
        present = [a for a in args if a is not None]
        if name == "IF":
            condition = args[0]
            if condition is None:
                return None
            if condition:
                return args[1]
            return args[2] if len(args) > 2 else None
        if name == "FILL":
            return args[1] if args[0] is None else args[0]
        if name == "ABS":
            return None if args[0] is None else abs(args[0])
        if name in ("MAX", "MIN", "SUM", "AVG"):
            if not present:
                return None
            if name == "MAX":
                return max(present)
            if name == "MIN":
                return min(present)
            if name == "SUM":
                return sum(present)
            return sum(present) / len(present)
        raise MathError(f"metric math function {name} is not supported locally")
