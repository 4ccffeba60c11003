"""Kubernetes label selectors (`app=x,tier!=db,env in (a,b),!legacy`), parsed once, matched many times."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping

Matcher = Callable[[Mapping[str, str]], bool]
_SET = re.compile(r"^\s*([A-Za-z0-9./_-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ = re.compile(r"^\s*([A-Za-z0-9./_-]+)\s*(==|=|!=)\s*([A-Za-z0-9._-]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([A-Za-z0-9./_-]+)\s*$")


class SelectorError(ValueError):
    pass


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p for p in parts if p.strip()]


def _in(key: str, values: frozenset[str], negate: bool, labels: Mapping[str, str]) -> bool:
    return (labels.get(key) in values) != negate


def _equals(key: str, value: str, negate: bool, labels: Mapping[str, str]) -> bool:
    return (labels.get(key) == value) != negate


def _exists(key: str, negate: bool, labels: Mapping[str, str]) -> bool:
    return (key in labels) != negate


def parse_selector(text: str) -> Matcher:
    """A matcher for `text`; SelectorError names the requirement it cannot read."""
    tests: list[Matcher] = []
    for part in _split(text):
        if match := _SET.match(part):
            values = frozenset(v.strip() for v in match.group(3).split(","))
            tests.append(functools.partial(_in, match.group(1), values, match.group(2) == "notin"))
        elif match := _EQ.match(part):
            key, op, value = match.groups()
            tests.append(functools.partial(_equals, key, value, op == "!="))
        elif match := _EXISTS.match(part):
            tests.append(functools.partial(_exists, match.group(2), match.group(1) == "!"))
        else:
            raise SelectorError(f"unable to parse requirement {part.strip()!r}")
    return lambda labels: all(test(labels) for test in tests)
