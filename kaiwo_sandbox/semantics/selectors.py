"""Label and field selectors as the apiserver parses and matches them.

Label selectors follow k8s.io/apimachinery/pkg/labels: a hand-written lexer and recursive-descent parser
(equality `=`/`==`/`!=`, set-based `in`/`notin`, existence `key`/`!key`, and the integer `>`/`<` the parser
also accepts), with the same error strings, so a client sees exactly what a real server answers.
Field selectors follow k8s.io/apimachinery/pkg/fields (`=`, `==`, `!=` on per-kind selectable fields).
Parsing is cached: list and watch requests repeat the same few selector strings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kaiwo_sandbox.contracts import ApiError, JsonObj
from kaiwo_sandbox.semantics import field_errors as fe
from kaiwo_sandbox.semantics.metadata import is_label_key, is_label_value

# Operators, spelled as selection.Operator spells them.
IN = "in"
NOT_IN = "notin"
EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
EXISTS = "exists"
DOES_NOT_EXIST = "!"
GREATER_THAN = "gt"
LESS_THAN = "lt"

_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (IN, EQUALS, DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (NOT_IN, NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        if op in (GREATER_THAN, LESS_THAN):
            if self.key not in labels or len(self.values) != 1:
                return False
            try:
                have, want = int(labels[self.key]), int(self.values[0])
            except ValueError:
                return False
            return have > want if op == GREATER_THAN else have < want
        return False

    def __str__(self) -> str:
        op = self.operator
        if op == EXISTS:
            return self.key
        if op == DOES_NOT_EXIST:
            return "!" + self.key
        values = ",".join(sorted(self.values))
        if op in (IN, NOT_IN):
            return f"{self.key} {op} ({values})"
        symbol = {GREATER_THAN: ">", LESS_THAN: "<"}.get(op, op)
        return f"{self.key}{symbol}{values}"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A conjunction of requirements, sorted by key. `nothing` is the nil metav1.LabelSelector."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.nothing:
            return False
        present = labels or {}
        for requirement in self.requirements:  # noqa: SIM110  (a loop, not all() over a generator: 30% of a selected list)
            if not requirement.matches(present):
                return False
        return True

    def matches_object(self, obj: JsonObj) -> bool:
        labels = (obj.get("metadata") or {}).get("labels")
        return self.matches(labels if isinstance(labels, dict) else None)

    @property
    def empty(self) -> bool:
        """Selects everything (the store can skip matching)."""
        return not self.nothing and not self.requirements

    def requires_exact(self, key: str) -> str | None:
        """The single value `key` must have, if the selector pins it (lets a store use an index)."""
        for r in self.requirements:
            if r.key == key and r.operator in (EQUALS, DOUBLE_EQUALS, IN) and len(r.values) == 1:
                return r.values[0]
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(nothing=True)


# --- label selector lexer ---------------------------------------------------------------------------

_T_ERROR, _T_END, _T_CLOSE, _T_COMMA, _T_NOT, _T_DEQ, _T_EQ, _T_GT, _T_ID, _T_IN, _T_LT, _T_NEQ, _T_NOTIN, _T_OPEN = (
    range(14))

_STRING_TO_TOKEN = {")": _T_CLOSE, ",": _T_COMMA, "!": _T_NOT, "==": _T_DEQ, "=": _T_EQ, ">": _T_GT,
                    "in": _T_IN, "<": _T_LT, "!=": _T_NEQ, "notin": _T_NOTIN, "(": _T_OPEN}
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")


def _lex(s: str) -> list[tuple[int, str]]:
    items: list[tuple[int, str]] = []
    pos, n = 0, len(s)
    while True:
        while pos < n and s[pos] in _WHITESPACE:
            pos += 1
        if pos >= n:
            items.append((_T_END, ""))
            return items
        if s[pos] in _SPECIAL:
            # Longest run of special characters that still forms a known operator.
            buffer = ""
            last: tuple[int, str] | None = None
            while pos < n and s[pos] in _SPECIAL:
                buffer += s[pos]
                token = _STRING_TO_TOKEN.get(buffer)
                if token is not None:
                    last = (token, buffer)
                elif last is not None:
                    break
                pos += 1
            items.append(last if last is not None else (_T_ERROR, f"error expected: keyword found '{buffer}'"))
        else:
            start = pos
            while pos < n and s[pos] not in _SPECIAL and s[pos] not in _WHITESPACE:
                pos += 1
            word = s[start:pos]
            items.append((_STRING_TO_TOKEN.get(word, _T_ID), word))


class _SelectorSyntaxError(Exception):
    pass


class _Parser:
    """Keywords `in`/`notin` are identifiers where values are expected ('x in (in)' is valid)."""

    def __init__(self, items: list[tuple[int, str]]) -> None:
        self.items = items
        self.pos = 0

    @staticmethod
    def _as_value(tok: int) -> int:
        return _T_ID if tok in (_T_IN, _T_NOTIN) else tok

    def lookahead(self, values: bool = True) -> tuple[int, str]:
        tok, lit = self.items[self.pos]
        return (self._as_value(tok) if values else tok), lit

    def consume(self, values: bool = True) -> tuple[int, str]:
        tok, lit = self.items[self.pos]
        self.pos += 1
        return (self._as_value(tok) if values else tok), lit

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, lit = self.lookahead()
            if tok in (_T_ID, _T_NOT):
                try:
                    requirements.append(self.requirement())
                except _SelectorSyntaxError as err:
                    raise _SelectorSyntaxError(f"unable to parse requirement: {err}") from None
                t, lit2 = self.consume()
                if t == _T_END:
                    return requirements
                if t == _T_COMMA:
                    t2, l2 = self.lookahead()
                    if t2 not in (_T_ID, _T_NOT):
                        raise _SelectorSyntaxError(f"found '{l2}', expected: identifier after ','")
                else:
                    raise _SelectorSyntaxError(f"found '{lit2}', expected: ',' or 'end of string'")
            elif tok == _T_END:
                return requirements
            else:
                raise _SelectorSyntaxError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def requirement(self) -> Requirement:
        operator = ""
        tok, literal = self.consume()
        if tok == _T_NOT:
            operator = DOES_NOT_EXIST
            tok, literal = self.consume()
        if tok != _T_ID:
            raise _SelectorSyntaxError(f"found '{literal}', expected: identifier")
        key_errors = is_label_key(literal)
        if key_errors:
            raise _SelectorSyntaxError(f"<nil>: {fe.invalid('', literal, '; '.join(key_errors))['message']}")
        if self.lookahead()[0] in (_T_END, _T_COMMA) and operator != DOES_NOT_EXIST:
            operator = EXISTS
        if operator in (EXISTS, DOES_NOT_EXIST):
            return Requirement(literal, operator)
        op_tok, op_lit = self.consume(values=False)
        operator = {
            _T_IN: IN, _T_EQ: EQUALS, _T_DEQ: DOUBLE_EQUALS, _T_GT: GREATER_THAN, _T_LT: LESS_THAN,
            _T_NOTIN: NOT_IN, _T_NEQ: NOT_EQUALS,
        }.get(op_tok, "")
        if not operator:
            raise _SelectorSyntaxError(f"found '{op_lit}', expected: {_BINARY_OPERATORS}")
        values = self.set_values() if operator in (IN, NOT_IN) else self.exact_value()
        return _new_requirement(literal, operator, sorted(values))

    def set_values(self) -> set[str]:
        tok, lit = self.consume()
        if tok != _T_OPEN:
            raise _SelectorSyntaxError(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead()
        if tok in (_T_ID, _T_COMMA):
            values = self.identifiers()
            if self.consume()[0] != _T_CLOSE:
                raise _SelectorSyntaxError(f"found '{lit}', expected: ')'")
            return values
        if tok == _T_CLOSE:
            self.consume()
            return {""}
        raise _SelectorSyntaxError(f"found '{lit}', expected: ',', ')' or identifier")

    def identifiers(self) -> set[str]:
        values: set[str] = set()
        while True:
            tok, lit = self.consume()
            if tok == _T_ID:
                values.add(lit)
                tok2, lit2 = self.lookahead()
                if tok2 == _T_COMMA:
                    continue
                if tok2 == _T_CLOSE:
                    return values
                raise _SelectorSyntaxError(f"found '{lit2}', expected: ',' or ')'")
            if tok == _T_COMMA:
                if not values:
                    values.add("")
                tok2 = self.lookahead()[0]
                if tok2 in (_T_CLOSE, _T_COMMA):
                    values.add("")
                if tok2 == _T_CLOSE:
                    return values
            else:
                raise _SelectorSyntaxError(f"found '{lit}', expected: ',', or identifier")

    def exact_value(self) -> set[str]:
        tok = self.lookahead()[0]
        if tok in (_T_END, _T_COMMA):
            return {""}
        tok, lit = self.consume()
        if tok == _T_ID:
            return {lit}
        raise _SelectorSyntaxError(f"found '{lit}', expected: identifier")


def _new_requirement(key: str, operator: str, values: list[str]) -> Requirement:
    """labels.NewRequirement's checks on values (the key was checked while parsing)."""
    errors: list[str] = []
    if operator in (GREATER_THAN, LESS_THAN):
        for i, v in enumerate(values):
            try:
                int(v, 10)
            except ValueError:
                errors.append(fe.error_text(fe.invalid(
                    f"values[{i}]", v, "for 'Gt', 'Lt' operators, the value must be an integer")))
    for i, v in enumerate(values):
        msgs = is_label_value(v)
        if msgs:
            errors.append(fe.error_text(fe.invalid(f"values[{i}][{key}]", v, "; ".join(msgs))))
    if errors:
        raise _SelectorSyntaxError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    return Requirement(key, operator, tuple(values))


@lru_cache(maxsize=512)
def _parse_label_selector_cached(s: str) -> LabelSelector | str:
    try:
        requirements = _Parser(_lex(s)).parse()
    except _SelectorSyntaxError as err:
        return str(err)
    return LabelSelector(tuple(sorted(requirements, key=lambda r: r.key)))


def parse_label_selector(s: str) -> LabelSelector:
    """labels.Parse. Raises ApiError 400 BadRequest with the parser's message."""
    result = _parse_label_selector_cached(s)
    if isinstance(result, str):
        raise ApiError.bad_request(result)
    return result


_EXPRESSION_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def selector_from_dict(sel: JsonObj | None) -> LabelSelector:
    """metav1.LabelSelectorAsSelector: None selects nothing, {} selects everything.
    A malformed selector raises ApiError 400 (controllers treat it as selecting nothing)."""
    if sel is None:
        return NOTHING
    if not isinstance(sel, dict):
        raise ApiError.bad_request("invalid label selector: must be an object")
    requirements: list[Requirement] = []
    match_labels = sel.get("matchLabels") or {}
    expressions = sel.get("matchExpressions") or []
    if not isinstance(match_labels, dict) or not isinstance(expressions, list):
        raise ApiError.bad_request("invalid label selector: matchLabels must be an object and matchExpressions a list")
    for key in sorted(match_labels, key=str):
        requirements.append(_checked(str(key), EQUALS, [str(match_labels[key])]))
    for expr in expressions:
        if not isinstance(expr, dict):
            raise ApiError.bad_request("invalid label selector: each matchExpressions entry must be an object")
        op_name = str(expr.get("operator", ""))
        operator = _EXPRESSION_OPERATORS.get(op_name)
        if operator is None:
            raise ApiError.bad_request(f'"{op_name}" is not a valid label selector operator')
        raw_values = expr.get("values") or []
        values = [str(v) for v in raw_values] if isinstance(raw_values, list) else [str(raw_values)]
        requirements.append(_checked(str(expr.get("key", "")), operator, values))
    return LabelSelector(tuple(sorted(requirements, key=lambda r: r.key)))


def _checked(key: str, operator: str, values: list[str]) -> Requirement:
    errors = [fe.error_text(fe.invalid("key", key, m)) for m in is_label_key(key)]
    if operator in (IN, NOT_IN) and not values:
        errors.append("values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty")
    if operator in (EXISTS, DOES_NOT_EXIST) and values:
        errors.append(f"values: Invalid value: []string{{{', '.join(fe.go_quote(v) for v in values)}}}: "
                      "values set must be empty for exists and does not exist")
    for i, v in enumerate(values):
        errors.extend(fe.error_text(fe.invalid(f"values[{i}][{key}]", v, m)) for m in is_label_value(v))
    if errors:
        raise ApiError.bad_request(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    return Requirement(key, operator, tuple(values))


# --- field selectors --------------------------------------------------------------------------------


def _path(*keys: str) -> Callable[[JsonObj], str]:
    def get(obj: JsonObj) -> str:
        cur: Any = obj
        for k in keys:
            if not isinstance(cur, dict):
                return ""
            cur = cur.get(k)
        return _field_string(cur)

    return get


def _field_string(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _first(*getters: Callable[[JsonObj], str]) -> Callable[[JsonObj], str]:
    def get(obj: JsonObj) -> str:
        for g in getters:
            v = g(obj)
            if v:
                return v
        return ""

    return get


def _event_object(field: str) -> Callable[[JsonObj], str]:
    # events.k8s.io/v1 calls involvedObject `regarding`; the selectable field names stay core's.
    return _first(_path("involvedObject", field), _path("regarding", field))


def _successful(obj: JsonObj) -> str:
    return str((obj.get("status") or {}).get("successful") or 0)


_EVENT_FIELDS: dict[str, Callable[[JsonObj], str]] = {
    **{f"involvedObject.{f}": _event_object(f) for f in
       ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
    "reason": _path("reason"),
    "reportingComponent": _first(_path("reportingComponent"), _path("reportingController")),
    "source": _first(_path("source", "component"), _path("reportingController")),
    "type": _path("type"),
    # events.k8s.io/v1 spells them after its own fields and converts to the core names.
    **{f"regarding.{f}": _event_object(f) for f in
       ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
    "reportingController": _first(_path("reportingController"), _path("reportingComponent")),
}

# Selectable fields per kind beyond metadata.name / metadata.namespace (pkg/registry/*/strategy.go).
_KIND_FIELDS: dict[str, dict[str, Callable[[JsonObj], str]]] = {
    "pod": {
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": lambda o: "true" if (o.get("spec") or {}).get("hostNetwork") else "false",
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    "event": _EVENT_FIELDS,
    "secret": {"type": _path("type")},
    "namespace": {"status.phase": _path("status", "phase")},
    "node": {"spec.unschedulable": lambda o: "true" if (o.get("spec") or {}).get("unschedulable") else "false"},
    "job": {"status.successful": _successful},
    "replicaset": {"status.replicas": lambda o: str((o.get("status") or {}).get("replicas") or 0)},
    "replicationcontroller": {"status.replicas": lambda o: str((o.get("status") or {}).get("replicas") or 0)},
    "service": {"spec.clusterIP": _path("spec", "clusterIP"), "spec.type": _path("spec", "type")},
}

_KIND_ALIASES = {"pods": "pod", "events": "event", "secrets": "secret", "namespaces": "namespace",
                 "nodes": "node", "jobs": "job", "replicasets": "replicaset", "services": "service",
                 "replicationcontrollers": "replicationcontroller"}


def _fields_for(kind: str) -> dict[str, Callable[[JsonObj], str]]:
    k = kind.lower()
    k = _KIND_ALIASES.get(k, k)
    fields: dict[str, Callable[[JsonObj], str]] = {
        "metadata.name": _path("metadata", "name"),
        "metadata.namespace": _path("metadata", "namespace"),
    }
    fields.update(_KIND_FIELDS.get(k, {}))
    return fields


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    operator: str  # "=" or "!="
    value: str
    getter: Callable[[JsonObj], str]

    def matches(self, obj: JsonObj) -> bool:
        have = self.getter(obj)
        return have == self.value if self.operator == EQUALS else have != self.value


@dataclass(frozen=True, slots=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: JsonObj) -> bool:
        return all(r.matches(obj) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def requires_exact(self, field: str) -> str | None:
        for r in self.requirements:
            if r.field == field and r.operator == EQUALS:
                return r.value
        return None

    def __str__(self) -> str:
        return ",".join(f"{r.field}{r.operator}{_escape_field_value(r.value)}" for r in self.requirements)


def _escape_field_value(v: str) -> str:
    return v.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _split_terms(s: str) -> list[str]:
    """Split on unescaped commas, keeping escapes for the later unescape."""
    terms: list[str] = []
    start, escaped = 0, False
    for i, ch in enumerate(s):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            terms.append(s[start:i])
            start = i + 1
    terms.append(s[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    escaped = False
    for i, ch in enumerate(term):
        if escaped:
            escaped = False
            continue
        if ch == "\\":
            escaped = True
            continue
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
    return None


def _unescape(value: str) -> str:
    out: list[str] = []
    escaped = False
    for ch in value:
        if escaped:
            if ch not in "\\,=":
                raise ApiError.bad_request(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise ApiError.bad_request(f"invalid field selector: unescaped character {ch}")
        else:
            out.append(ch)
    if escaped:
        raise ApiError.bad_request("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _selectable(json_path: str) -> Callable[[JsonObj], str]:
    keys = tuple(k for k in json_path.strip().lstrip(".").split(".") if k)
    return _path(*keys)


def parse_field_selector(s: str, *, kind: str, selectable_fields: Sequence[JsonObj] | None = None) -> FieldSelector:
    """fields.ParseSelector plus the kind's field label conversion: an unknown field is a 400
    `field label not supported: <field>`, exactly as kubectl reports it from a real server.
    `selectable_fields` is a CRD version's `selectableFields` ([{"jsonPath": ".spec.color"}]): those paths
    become selectable as `spec.color`."""
    supported = _fields_for(kind)
    for entry in selectable_fields or ():
        path = entry.get("jsonPath") if isinstance(entry, dict) else None
        if isinstance(path, str) and path.strip(". "):
            supported[path.strip().lstrip(".")] = _selectable(path)
    requirements: list[FieldRequirement] = []
    for term in sorted(_split_terms(s)):
        if not term:
            continue
        split = _split_term(term)
        if split is None:
            raise ApiError.bad_request(f"invalid selector: '{s}'; can't understand '{term}'")
        lhs, op, rhs = split
        value = _unescape(rhs)
        getter = supported.get(lhs)
        if getter is None:
            raise ApiError.bad_request(f"field label not supported: {lhs}")
        requirements.append(FieldRequirement(lhs, NOT_EQUALS if op == "!=" else EQUALS, value, getter))
    return FieldSelector(tuple(requirements))
