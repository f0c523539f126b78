"""An evaluator of GitHub Actions expressions, as far as the workflows' `if:` conditions use them.

Written from GitHub's reference ("Evaluate expressions in workflows and actions"): literals
(`null`, booleans, numbers, 'strings' with '' for a quote), property access with `.` and the
object filter `.*`, `!`, `<`, `<=`, `>`, `>=`, `==`, `!=`, `&&`, `||`, parentheses, the
functions `contains`, `startsWith`, `endsWith`, `join`, `fromJSON` and `toJSON`, and the status
functions (as in a run where nothing failed or was cancelled). As GitHub does: a missing
property is null, strings compare ignoring case, `&&` and `||` give one of their operands, and the
falsy values are false, 0, '' and null (an object or array is truthy).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<string>'(?:[^']|'')*')
    | (?P<number>-?\d+(?:\.\d+)?)
    | (?P<op>&&|\|\||==|!=|<=|>=|[<>!().,\[\]*])
    | (?P<name>[A-Za-z_][A-Za-z0-9_-]*)
    )""", re.VERBOSE)


def _tokens(text: str) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    at = 0
    text = text.strip()
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            raise ValueError(f"cannot read the expression at {text[at:at + 20]!r}")
        at = match.end()
        kind = match.lastgroup
        value = match.group(kind or "")
        if kind == "string":
            found.append(("value", value[1:-1].replace("''", "'")))
        elif kind == "number":
            found.append(("value", float(value)))
        elif kind == "name" and value in ("true", "false", "null"):
            found.append(("value", {"true": True, "false": False, "null": None}[value]))
        else:
            found.append((kind or "", value))
    return found


def truthy(value: Any) -> bool:
    return value not in (False, 0, "", None) or isinstance(value, (dict, list))


def _number(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip() or 0)
        except ValueError:
            return float("nan")
    return float("nan")


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return a is b
    if type(a) is type(b):
        return bool(a == b)
    return _number(a) == _number(b)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (dict, list)):
        return "Object" if isinstance(value, dict) else "Array"
    return str(value)


def _contains(search: Any, item: Any) -> bool:
    if isinstance(search, list):
        return any(_equal(element, item) for element in search)
    return _text(item).lower() in _text(search).lower()


_FUNCTIONS = {
    "contains": _contains,
    "startswith": lambda a, b: _text(a).lower().startswith(_text(b).lower()),
    "endswith": lambda a, b: _text(a).lower().endswith(_text(b).lower()),
    "join": lambda a, sep=",": (_text(sep).join(_text(x) for x in a)
                                if isinstance(a, list) else _text(a)),
    "fromjson": lambda text: json.loads(_text(text)),
    "tojson": lambda value: json.dumps(value),
    # The job status functions, for a run where nothing failed or was cancelled.
    "always": lambda: True,
    "success": lambda: True,
    "failure": lambda: False,
    "cancelled": lambda: False,
}


class _Parser:
    def __init__(self, text: str, context: Mapping[str, Any]) -> None:
        self.tokens = _tokens(text)
        self.at = 0
        self.context = context

    def peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> tuple[str, Any]:
        if self.at >= len(self.tokens):
            raise ValueError("the expression ends too soon")
        token = self.tokens[self.at]
        if expected is not None and (token[0] != "op" or token[1] != expected):
            raise ValueError(f"expected {expected!r}, found {token[1]!r}")
        self.at += 1
        return token

    def parse(self) -> Any:
        value = self.or_()
        if self.at != len(self.tokens):
            raise ValueError(f"unexpected {self.tokens[self.at][1]!r}")
        return value

    def or_(self) -> Any:
        value = self.and_()
        while self.peek() == "||":
            self.take()
            right = self.and_()
            value = value if truthy(value) else right
        return value

    def and_(self) -> Any:
        value = self.equality()
        while self.peek() == "&&":
            self.take()
            right = self.equality()
            value = right if truthy(value) else value
        return value

    def equality(self) -> Any:
        value = self.comparison()
        while self.peek() in ("==", "!="):
            op = self.take()[1]
            same = _equal(value, self.comparison())
            value = same if op == "==" else not same
        return value

    def comparison(self) -> Any:
        value = self.unary()
        while self.peek() in ("<", "<=", ">", ">="):
            op = self.take()[1]
            a, b = value, self.unary()
            if isinstance(a, str) and isinstance(b, str):
                a, b = a.lower(), b.lower()
            else:
                a, b = _number(a), _number(b)
            value = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
        return value

    def unary(self) -> Any:
        if self.peek() == "!":
            self.take()
            return not truthy(self.unary())
        return self.postfix()

    def postfix(self) -> Any:
        kind, value = self.take()
        if kind == "op" and value == "(":
            value = self.or_()
            self.take(")")
        elif kind == "name" and self.peek() == "(":
            self.take("(")
            args = [] if self.peek() == ")" else [self.or_()]
            while self.peek() == ",":
                self.take()
                args.append(self.or_())
            self.take(")")
            value = _FUNCTIONS[value.lower()](*args)
        elif kind == "name":
            value = self.context.get(value)
        elif kind != "value":
            raise ValueError(f"unexpected {value!r}")
        while self.peek() in (".", "["):
            if self.take()[1] == "[":
                key = self.or_()
                self.take("]")
                value = _index(value, key)
            elif self.peek() == "*":
                self.take()
                value = _filter(value)
            else:
                kind, name = self.take()
                if kind != "name":
                    raise ValueError(f"expected a property name, found {name!r}")
                value = _index(value, name)
        return value


class _Filtered(list):  # type: ignore[type-arg]
    """What `.*` gives: a property read after it is read of each element."""


def _index(value: Any, key: Any) -> Any:
    if isinstance(value, _Filtered):
        return _Filtered(_index(element, key) for element in value)
    if isinstance(value, list):
        number = _number(key)
        return value[int(number)] if number.is_integer() and 0 <= number < len(value) else None
    if isinstance(value, Mapping):
        for name, item in value.items():
            if isinstance(name, str) and name.lower() == _text(key).lower():
                return item
    return None


def _filter(value: Any) -> list[Any]:
    if isinstance(value, list):
        return _Filtered(value)
    if isinstance(value, Mapping):
        return _Filtered(value.values())
    return _Filtered()


def evaluate(expression: str, context: Mapping[str, Any]) -> Any:
    """The value of an expression (with or without `${{ }}` around it) in a context."""
    text = expression.strip()
    if text.startswith("${{") and text.endswith("}}"):
        text = text[3:-2]
    return _Parser(text, context).parse()
