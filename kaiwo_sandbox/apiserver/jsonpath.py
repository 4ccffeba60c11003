"""The subset of Kubernetes JSONPath that CRD additionalPrinterColumns use: dotted fields, `[n]` indexes,
`[*]` wildcards and `[?(@.field=="value")]` filters, e.g. `.status.conditions[?(@.type=="Ready")].status`.

`find(expr, obj)` returns every match in document order; the table code uses the first, as the apiserver does.
Compiled expressions are cached: the same few columns are evaluated for every row of every list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


@dataclass(frozen=True, slots=True)
class _Field:
    name: str


@dataclass(frozen=True, slots=True)
class _Index:
    index: int


@dataclass(frozen=True, slots=True)
class _Wildcard:
    pass


@dataclass(frozen=True, slots=True)
class _Filter:
    path: tuple[str, ...]
    op: str
    value: Any


_Step = _Field | _Index | _Wildcard | _Filter

_FILTER = re.compile(r"""^\?\(@((?:\.[^.=!<>\s]+)+)\s*(==|!=)\s*(?:"([^"]*)"|'([^']*)'|(-?\d+)|(true|false))\s*\)$""")
_EXISTS_FILTER = re.compile(r"^\?\(@((?:\.[^.=!<>\s]+)+)\)$")


class JsonPathError(ValueError):
    pass


@lru_cache(maxsize=256)
def compile_path(expr: str) -> tuple[_Step, ...]:
    text = expr.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    if text.startswith("$"):
        text = text[1:]
    steps: list[_Step] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == ".":
            j = i + 1
            while j < len(text) and text[j] not in ".[":
                j += 1
            name = text[i + 1:j]
            if name == "*":
                steps.append(_Wildcard())
            elif name:
                steps.append(_Field(name))
            i = j
        elif ch == "[":
            j = text.find("]", i)
            if j < 0:
                raise JsonPathError(f"unterminated array notation in {expr!r}")
            inner = text[i + 1:j].strip()
            # A filter may itself contain ']' inside quotes; extend to the matching ')]'.
            if inner.startswith("?(") and not inner.endswith(")"):
                j = text.find(")]", i)
                if j < 0:
                    raise JsonPathError(f"unterminated filter in {expr!r}")
                inner = text[i + 1:j + 1].strip()
                j += 1
            steps.append(_parse_bracket(inner, expr))
            i = j + 1
        else:
            # A leading bare field ("status.x") is accepted too.
            j = i
            while j < len(text) and text[j] not in ".[":
                j += 1
            steps.append(_Field(text[i:j]))
            i = j
    return tuple(steps)


def _parse_bracket(inner: str, expr: str) -> _Step:
    if inner == "*":
        return _Wildcard()
    if re.fullmatch(r"-?\d+", inner):
        return _Index(int(inner))
    if (inner.startswith("'") and inner.endswith("'")) or (inner.startswith('"') and inner.endswith('"')):
        return _Field(inner[1:-1])
    m = _FILTER.match(inner)
    if m:
        path = tuple(p for p in m.group(1).split(".") if p)
        if m.group(3) is not None or m.group(4) is not None:
            value: Any = m.group(3) if m.group(3) is not None else m.group(4)
        elif m.group(5) is not None:
            value = int(m.group(5))
        else:
            value = m.group(6) == "true"
        return _Filter(path, m.group(2), value)
    m = _EXISTS_FILTER.match(inner)
    if m:
        return _Filter(tuple(p for p in m.group(1).split(".") if p), "exists", None)
    raise JsonPathError(f"unsupported JSONPath expression {inner!r} in {expr!r}")


def _get(value: Any, path: tuple[str, ...]) -> tuple[bool, Any]:
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return False, None
        value = value[key]
    return True, value


def _step(values: list[Any], step: _Step) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if isinstance(step, _Field):
            if isinstance(v, dict) and step.name in v:
                out.append(v[step.name])
        elif isinstance(step, _Index):
            if isinstance(v, list) and -len(v) <= step.index < len(v):
                out.append(v[step.index])
        elif isinstance(step, _Wildcard):
            if isinstance(v, list):
                out.extend(v)
            elif isinstance(v, dict):
                out.extend(v.values())
        else:
            items = v if isinstance(v, list) else [v]
            for item in items:
                found, got = _get(item, step.path)
                if step.op == "exists":
                    keep = found
                elif step.op == "==":
                    keep = found and got == step.value
                else:
                    keep = found and got != step.value
                if keep:
                    out.append(item)
    return out


def find(expr: str, obj: Any) -> list[Any]:
    """All values `expr` selects in `obj` (empty when nothing matches). Raises JsonPathError on syntax."""
    values = [obj]
    for step in compile_path(expr):
        values = _step(values, step)
        if not values:
            break
    return values
