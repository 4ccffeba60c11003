"""Field errors as the apiserver words them: metav1.StatusCause dicts built the way
k8s.io/apimachinery/pkg/util/validation/field does (`ErrorBody()` for the message, the field path
apart), plus Go's `%q` / `%v` value formatting so a bad value prints exactly as a Go server prints it.

A cause is `{"reason": "FieldValueInvalid", "message": 'Invalid value: -1: must be ...', "field": "spec.x"}`.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from kaiwo_sandbox.contracts import JsonObj

REQUIRED = "FieldValueRequired"
INVALID = "FieldValueInvalid"
TYPE_INVALID = "FieldValueTypeInvalid"
NOT_SUPPORTED = "FieldValueNotSupported"
DUPLICATE = "FieldValueDuplicate"
FORBIDDEN = "FieldValueForbidden"
TOO_LONG = "FieldValueTooLong"
TOO_MANY = "FieldValueTooMany"
NOT_FOUND = "FieldValueNotFound"

_GO_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\a": "\\a",
               "\b": "\\b", "\f": "\\f", "\v": "\\v"}


def go_quote(s: str) -> str:
    """strconv.Quote: printable runes stay as they are, the rest are escaped."""
    out = ['"']
    for ch in s:
        esc = _GO_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def go_float(x: float) -> str:
    """fmt's %v for a float64: shortest digits, exponent form below 1e-4 and from 1e6 up (so a schema bound
    of 2147483647 prints as 2.147483647e+09, as kube-openapi's messages show it)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    sign, digits, exponent = Decimal(repr(x)).normalize().as_tuple()
    assert isinstance(exponent, int)
    ds = "".join(map(str, digits))
    exp10 = len(ds) + exponent - 1  # position of the leading digit
    neg = "-" if sign else ""
    if exp10 < -4 or exp10 >= 6:
        mantissa = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{neg}{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    if exponent >= 0:
        return neg + ds + "0" * exponent
    point = len(ds) + exponent
    if point > 0:
        return neg + ds[:point] + "." + ds[point:]
    return neg + "0." + "0" * (-point) + ds


def go_value(value: Any) -> str:
    """How field.Error prints a bad value: strings %q, numbers and bools %v, null as null,
    and composite JSON values roughly as Go's %#v prints unstructured data."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(_go_sharp(v) for v in value) + "}"
    if isinstance(value, dict):
        inner = ", ".join(f"{go_quote(str(k))}:{_go_sharp(v)}" for k, v in sorted(value.items()))
        return "map[string]interface {}{" + inner + "}"
    return go_quote(str(value))


def _go_sharp(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value}"
    return go_value(value)


def go_json_kind(value: Any) -> str:
    """How Go's encoding/json names a JSON value in "json: cannot unmarshal <kind> into ..."."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def cause(reason: str, field: str, message: str) -> JsonObj:
    return {"reason": reason, "message": message, "field": field}


def required(field: str, detail: str = "") -> JsonObj:
    return cause(REQUIRED, field, "Required value" + (f": {detail}" if detail else ""))


def invalid(field: str, value: Any, detail: str = "") -> JsonObj:
    return cause(INVALID, field, f"Invalid value: {go_value(value)}" + (f": {detail}" if detail else ""))


def type_invalid(field: str, value: Any, detail: str) -> JsonObj:
    return cause(TYPE_INVALID, field, f"Invalid value: {go_value(value)}: {detail}")


def not_supported(field: str, value: Any, valid: list[str]) -> JsonObj:
    detail = ("supported values: " + ", ".join(go_quote(v) for v in valid)) if valid else ""
    return cause(NOT_SUPPORTED, field, f"Unsupported value: {go_value(value)}" + (f": {detail}" if detail else ""))


def duplicate(field: str, value: Any) -> JsonObj:
    return cause(DUPLICATE, field, f"Duplicate value: {go_value(value)}")


def forbidden(field: str, detail: str) -> JsonObj:
    return cause(FORBIDDEN, field, "Forbidden" + (f": {detail}" if detail else ""))


def too_long(field: str, max_length: int) -> JsonObj:
    """field.TooLong (used for CRD maxLength too): the value itself is not repeated (it may be huge)."""
    unit = "byte" if max_length == 1 else "bytes"
    return cause(TOO_LONG, field, f"Too long: may not be more than {max_length} {unit}")


def too_many(field: str, actual: int | None, max_items: int) -> JsonObj:
    shown = f": {actual}" if actual is not None else ""
    return cause(TOO_MANY, field, f"Too many{shown}: must have at most {max_items} items")


def not_found(field: str, value: Any) -> JsonObj:
    return cause(NOT_FOUND, field, f"Not found: {go_value(value)}")


def error_text(c: JsonObj) -> str:
    """field.Error.Error(): `<field>: <message>`."""
    return f"{c.get('field', '')}: {c.get('message', '')}"


def aggregate_text(causes: list[JsonObj]) -> str:
    """utilerrors.Aggregate.Error(): one error bare, several bracketed, duplicates dropped."""
    seen: list[str] = []
    for c in causes:
        text = error_text(c)
        if text not in seen:
            seen.append(text)
    if len(seen) == 1:
        return seen[0]
    return "[" + ", ".join(seen) + "]"
