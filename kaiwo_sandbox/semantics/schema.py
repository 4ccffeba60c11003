"""CRD structural schemas (OpenAPI v3) applied to custom resources as the apiextensions-apiserver does:
pruning unknown fields, structural defaulting, and validation with kube-openapi's error wording.

The store calls, in the apiserver's order: `prune` -> `apply_defaults` -> `validate`.

Deliberate gaps (documented so nobody relies on them):
- `x-kubernetes-validations` (CEL rules) are ignored: no CEL interpreter here.
- Ratcheting (an update keeps an unchanged invalid value, KEP-4008, on by default since 1.30) skips
  every check of an unchanged subtree, correlated through object properties and map keys (list items
  are not correlated: an unchanged list is skipped whole). The real server still reports `type`,
  `nullable` and `required` errors there; they can only arise when the schema changed since the
  value was stored. It is also what keeps a status write from re-validating an unchanged spec.
- Formats: only date-time, date, uuid, byte, ipv4, ipv6, cidr are checked; others are accepted, as
  kube-openapi accepts unknown formats.
"""

from __future__ import annotations

import base64
import ipaddress
import math
import re
import uuid
from datetime import datetime
from functools import lru_cache
from typing import Any

import orjson

try:  # the [sandbox] extra; the semantics stay importable without it
    import re2 as _re2  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - exercised only without the extra
    _re2 = None

from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.semantics import field_errors as fe

# ObjectMeta's wire fields: anything else under metadata is dropped, as typed decoding drops it.
OBJECT_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
    "ownerReferences", "finalizers", "managedFields",
})

_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_EMBEDDED = "x-kubernetes-embedded-resource"
_INT_OR_STRING = "x-kubernetes-int-or-string"


def _copy(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value))


def _sub(schema: JsonObj | None, key: str) -> JsonObj | None:
    value = schema.get(key) if schema else None
    return value if isinstance(value, dict) else None


def _props(schema: JsonObj) -> JsonObj:
    value = schema.get("properties")
    return value if isinstance(value, dict) else {}


def _additional(schema: JsonObj) -> JsonObj | None:
    """additionalProperties as a schema; `true` behaves as preserve-unknown."""
    value = schema.get("additionalProperties")
    if isinstance(value, dict):
        return value
    if value is True:
        return {_PRESERVE: True}
    return None


# --- pruning ------------------------------------------------------------------------------------------


def prune(schema: JsonObj, obj: JsonObj) -> JsonObj:
    """A copy of `obj` without the fields the schema does not specify (unless preserved).
    At the root and in embedded resources, apiVersion and kind are kept and metadata keeps only ObjectMeta
    fields."""
    result: JsonObj = _copy(obj)
    prune_in_place(schema, result)
    return result


def prune_in_place(schema: JsonObj, obj: JsonObj) -> None:
    """`prune` on an object the caller owns outright (no copy)."""
    _prune(obj, schema, root=True)


def _prune_meta(value: Any) -> None:
    if isinstance(value, dict):
        for key in [k for k in value if k not in OBJECT_META_FIELDS]:
            del value[key]


def _prune(value: Any, schema: JsonObj | None, *, root: bool = False) -> None:
    if isinstance(value, dict):
        if schema is None:
            return
        resource = root or bool(schema.get(_EMBEDDED))
        properties = _props(schema)
        additional = _additional(schema)
        preserve = bool(schema.get(_PRESERVE))
        for key in list(value):
            if resource and key in ("apiVersion", "kind"):
                continue
            if resource and key == "metadata":
                _prune_meta(value[key])
                continue
            prop = properties.get(key)
            if isinstance(prop, dict):
                _prune(value[key], prop)
            elif additional is not None:
                _prune(value[key], additional)
            elif not preserve:
                del value[key]
    elif isinstance(value, list):
        items = _sub(schema, "items")
        if items is not None:
            for item in value:
                _prune(item, items)


def unknown_fields(schema: JsonObj, obj: JsonObj) -> list[str]:
    """The paths `prune` would drop, as the apiserver names them for `fieldValidation=Strict` (a 400:
    `strict decoding error: unknown field "spec.bogus"`) and `Warn` (a `Warning` header per field)."""
    found: list[str] = []
    _collect_unknown(obj, schema, "", found, root=True)
    return found


def _collect_unknown(value: Any, schema: JsonObj | None, path: str, found: list[str], *, root: bool = False) -> None:
    if isinstance(value, dict):
        if schema is None:
            return
        resource = root or bool(schema.get(_EMBEDDED))
        properties = _props(schema)
        additional = _additional(schema)
        preserve = bool(schema.get(_PRESERVE))
        for key, child in value.items():
            child_path = _child(path, key)
            if resource and key in ("apiVersion", "kind"):
                continue
            if resource and key == "metadata":
                if isinstance(child, dict):
                    found.extend(f"{child_path}.{k}" for k in child if k not in OBJECT_META_FIELDS)
                continue
            prop = properties.get(key)
            if isinstance(prop, dict):
                _collect_unknown(child, prop, child_path, found)
            elif additional is not None:
                _collect_unknown(child, additional, child_path, found)
            elif not preserve:
                found.append(child_path)
    elif isinstance(value, list):
        items = _sub(schema, "items")
        if items is not None:
            for i, item in enumerate(value):
                _collect_unknown(item, items, f"{path}[{i}]", found)


def strict_decoding_message(paths: list[str]) -> str:
    """The 400 message body after `<Kind> in version "<v>" cannot be handled as a <Kind>: `."""
    return "strict decoding error: " + ", ".join(f'unknown field "{p}"' for p in paths)


# --- defaulting ---------------------------------------------------------------------------------------


def apply_defaults(schema: JsonObj, obj: JsonObj) -> JsonObj:
    """Structural defaulting on a copy: a property that is absent, or null while not nullable, takes its
    default; defaults are applied top-down, so a defaulted object receives its own nested defaults.
    Nulls in non-nullable fields without a default are dropped first, as the apiserver does."""
    result: JsonObj = _copy(obj)
    default_in_place(schema, result)
    return result


def default_in_place(schema: JsonObj, obj: JsonObj) -> None:
    """`apply_defaults` on an object the caller owns outright, sharing nothing (no copy)."""
    _drop_non_nullable_nulls(obj, schema, root=True)
    _default(obj, schema, root=True)


def _drop_non_nullable_nulls(value: Any, schema: JsonObj | None, *, root: bool = False) -> None:
    if schema is None:
        return
    if isinstance(value, dict):
        properties = _props(schema)
        additional = _additional(schema)
        for key in list(value):
            if root and key == "metadata":
                continue
            prop = properties.get(key)
            sub = prop if isinstance(prop, dict) else additional
            if sub is None:
                continue
            child = value[key]
            if child is None:
                if not sub.get("nullable") and "default" not in sub:
                    del value[key]
            else:
                _drop_non_nullable_nulls(child, sub)
    elif isinstance(value, list):
        items = _sub(schema, "items")
        if items is not None:
            for item in value:
                _drop_non_nullable_nulls(item, items)


def _default(value: Any, schema: JsonObj | None, *, root: bool = False) -> None:
    if schema is None:
        return
    if isinstance(value, dict):
        properties = _props(schema)
        for key, prop in properties.items():
            if (root and key == "metadata") or not isinstance(prop, dict) or "default" not in prop:
                continue
            if key not in value or (value[key] is None and not prop.get("nullable")):
                value[key] = _copy(prop["default"])
        additional = _additional(schema)
        for key, child in value.items():
            if root and key == "metadata":
                continue
            prop = properties.get(key)
            if isinstance(prop, dict):
                _default(child, prop)
            elif additional is not None:
                _default(child, additional)
    elif isinstance(value, list):
        items = _sub(schema, "items")
        if items is not None:
            for item in value:
                _default(item, items)


# --- validation ---------------------------------------------------------------------------------------


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _is_type(value: Any, type_name: str) -> bool:
    if type_name == "object":
        return isinstance(value, dict)
    if type_name == "array":
        return isinstance(value, list)
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if type_name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value.is_integer())
    if type_name == "number":
        return isinstance(value, int | float)
    return True


def pattern_error(pattern: str) -> str | None:
    """Why `pattern` does not compile as Go's regexp (RE2) would refuse it, or None. Only with
    google-re2 installed (Python's re accepts other syntax)."""
    if _re2 is None:
        return None
    try:
        _re2.compile(pattern)
    except _re2.error as err:
        detail = err.args[0] if err.args else ""
        return detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)
    return None


@lru_cache(maxsize=1024)
def _regex(pattern: str) -> Any:
    """A CRD `pattern`, compiled as the apiserver does (Go's regexp: RE2, linear time, so a hostile
    pattern or value cannot stall the event loop; backreferences and lookaround do not compile).
    Python's backtracking `re` only where google-re2 is not installed. None: not a valid pattern."""
    if _re2 is not None:
        try:
            return _re2.compile(pattern)
        except _re2.error:
            return None
    try:
        return re.compile(pattern)
    except re.error:
        return None


_DATE_TIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _format_ok(fmt: str, value: str) -> bool:
    try:
        if fmt == "date-time":
            if not _DATE_TIME.match(value):
                return False
            datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00").replace("t", "T"))
        elif fmt == "date":
            if not _DATE.match(value):
                return False
            datetime.strptime(value, "%Y-%m-%d")
        elif fmt == "uuid":
            uuid.UUID(value)
        elif fmt == "byte":
            base64.b64decode(value, validate=True)
        elif fmt == "ipv4":
            ipaddress.IPv4Address(value)
        elif fmt == "ipv6":
            ipaddress.IPv6Address(value)
        elif fmt == "cidr":
            ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return True


def _bound(x: Any) -> str:
    """kube-openapi prints schema bounds (float64) with %v."""
    return fe.go_float(float(x)) if isinstance(x, int | float) else str(x)


def _enum_text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


_ABSENT: Any = object()  # "no old value": a create, or a field the old object did not have


def _unchanged(value: Any, old: Any) -> bool:
    """The same JSON value. `==` alone is not enough: Python has True == 1 and {"a": 1} == {"a": True},
    and a boolean where an integer was must not skip the type check, so an equal pair is confirmed on
    its serialization (C-fast; a different key order only costs a full check)."""
    if value is old:
        return True
    if value != old:
        return False
    try:
        return orjson.dumps(value) == orjson.dumps(old)
    except TypeError:  # not JSON (an object planted in-process): check it
        return False


def validate(schema: JsonObj, obj: JsonObj, old: JsonObj | None = None) -> list[JsonObj]:
    """Status causes for everything the schema rejects, in the apiserver's wording. Empty when valid.
    `old` (an update): its unchanged subtrees are not checked again (ratcheting)."""
    causes: list[JsonObj] = []
    _validate(obj, schema, "", causes, root=True, old=_ABSENT if old is None else old)
    return causes


def _type_names(schema: JsonObj) -> list[str]:
    if schema.get(_INT_OR_STRING):
        return ["integer", "string"]
    t = schema.get("type")
    if isinstance(t, str) and t:
        return [t]
    if isinstance(t, list):
        return [str(x) for x in t]
    return []


class _Plan:
    """What validating against one schema node can involve, read from the node once: a write
    validates the same CRD schema over and over, and most nodes carry one or two keywords, so
    looking up every keyword on every node each time was most of the validation's cost."""

    __slots__ = ("additional", "composition", "enum", "nullable", "number", "object", "properties", "schema",
                 "string", "types")

    def __init__(self, schema: JsonObj) -> None:
        self.schema = schema  # keeps the node alive, so its id() keys this plan and no other node's
        self.types = _type_names(schema)
        self.nullable = bool(schema.get("nullable"))
        self.composition = any(key in schema for key in ("allOf", "anyOf", "oneOf", "not"))
        enum = schema.get("enum")
        self.enum: list[Any] | None = enum if isinstance(enum, list) and enum else None
        self.string = any(key in schema for key in ("maxLength", "minLength", "pattern", "format"))
        self.number = any(key in schema for key in ("maximum", "minimum", "multipleOf"))
        self.object = any(key in schema for key in ("minProperties", "maxProperties", "required", _EMBEDDED))
        self.properties = _props(schema)
        self.additional = _sub(schema, "additionalProperties")


_PLANS: dict[int, _Plan] = {}
_PLANS_LIMIT = 20_000  # schema nodes; CRD churn (tests) must not grow the cache without bound


def _plan(schema: JsonObj) -> _Plan:
    plan = _PLANS.get(id(schema))
    if plan is None or plan.schema is not schema:
        if len(_PLANS) >= _PLANS_LIMIT:
            _PLANS.clear()
        plan = _PLANS[id(schema)] = _Plan(schema)
    return plan


def _validate(value: Any, schema: JsonObj, path: str, causes: list[JsonObj], *, root: bool = False,
              old: Any = _ABSENT) -> None:
    if old is not _ABSENT and not root and _unchanged(value, old):
        return  # unchanged since it was stored: ratcheted (the root's metadata always changes)
    plan = _plan(schema)
    types = plan.types
    if value is None:
        if types and not plan.nullable:
            joined = ",".join(types)
            causes.append(fe.type_invalid(path, "null", f"{path} in body must be of type {joined}: \"null\""))
        return
    if types and not (_is_type(value, types[0]) if len(types) == 1 else any(_is_type(value, t) for t in types)):
        found = _json_type(value)
        causes.append(fe.type_invalid(path, found, f"{path} in body must be of type {','.join(types)}: {fe.go_quote(found)}"))
        return

    if plan.composition:
        _validate_composition(value, schema, path, causes)

    enum = plan.enum
    if enum is not None and value not in enum:
        causes.append(fe.not_supported(path, value, [_enum_text(v) for v in enum]))

    if isinstance(value, str):
        if plan.string:
            _validate_string(value, schema, path, causes)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if plan.number:
            _validate_number(value, schema, path, causes)
    elif isinstance(value, list):
        _validate_array(value, schema, path, causes)
    elif isinstance(value, dict):
        _validate_object(value, plan, path, causes, root=root, old=old if isinstance(old, dict) else None)


def _validate_string(value: str, schema: JsonObj, path: str, causes: list[JsonObj]) -> None:
    max_length = schema.get("maxLength")
    if isinstance(max_length, int) and len(value) > max_length:
        causes.append(fe.too_long(path, max_length))
    min_length = schema.get("minLength")
    if isinstance(min_length, int) and len(value) < min_length:
        causes.append(fe.invalid(path, value, f"{path} in body should be at least {min_length} chars long"))
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        compiled = _regex(pattern)
        if compiled is not None and not compiled.search(value):
            causes.append(fe.invalid(path, value, f"{path} in body should match '{pattern}'"))
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt and not _format_ok(fmt, value):
        causes.append(fe.type_invalid(path, value, f"{path} in body must be of type {fmt}: {fe.go_quote(value)}"))


def _validate_number(value: float, schema: JsonObj, path: str, causes: list[JsonObj]) -> None:
    maximum = schema.get("maximum")
    if isinstance(maximum, int | float):
        if schema.get("exclusiveMaximum") and value >= maximum:
            causes.append(fe.invalid(path, value, f"{path} in body should be less than {_bound(maximum)}"))
        elif value > maximum:
            causes.append(fe.invalid(path, value, f"{path} in body should be less than or equal to {_bound(maximum)}"))
    minimum = schema.get("minimum")
    if isinstance(minimum, int | float):
        if schema.get("exclusiveMinimum") and value <= minimum:
            causes.append(fe.invalid(path, value, f"{path} in body should be greater than {_bound(minimum)}"))
        elif value < minimum:
            causes.append(fe.invalid(path, value,
                                     f"{path} in body should be greater than or equal to {_bound(minimum)}"))
    multiple = schema.get("multipleOf")
    if isinstance(multiple, int | float) and multiple > 0:
        quotient = value / multiple
        if not math.isclose(quotient, round(quotient), rel_tol=0, abs_tol=1e-9):
            causes.append(fe.invalid(path, value, f"{path} in body should be a multiple of {_bound(multiple)}"))


def _validate_array(value: list[Any], schema: JsonObj, path: str, causes: list[JsonObj]) -> None:
    items = _sub(schema, "items")
    if items is not None:
        for i, item in enumerate(value):
            _validate(item, items, f"{path}[{i}]", causes)
    min_items = schema.get("minItems")
    if isinstance(min_items, int) and len(value) < min_items:
        causes.append(fe.invalid(path, len(value), f"{path} in body should have at least {min_items} items"))
    max_items = schema.get("maxItems")
    if isinstance(max_items, int) and len(value) > max_items:
        causes.append(fe.too_many(path, len(value), max_items))
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set":
        seen: list[Any] = []
        for i, item in enumerate(value):
            if item in seen:
                causes.append(fe.duplicate(f"{path}[{i}]", item))
            else:
                seen.append(item)
    elif list_type == "map":
        map_keys = schema.get("x-kubernetes-list-map-keys")
        keys = [k for k in map_keys if isinstance(k, str)] if isinstance(map_keys, list) else []
        seen_keys: list[dict[str, Any]] = []
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            key_values = {k: item[k] for k in keys if k in item}
            if key_values in seen_keys:
                causes.append(fe.duplicate(f"{path}[{i}]", key_values))
            else:
                seen_keys.append(key_values)


def _validate_object(value: JsonObj, plan: _Plan, path: str, causes: list[JsonObj], *, root: bool,
                     old: JsonObj | None = None) -> None:
    schema = plan.schema
    if plan.object:
        n = len(value)
        min_props = schema.get("minProperties")
        if isinstance(min_props, int) and n < min_props:
            causes.append(fe.invalid(path, n, f"{path} in body should have at least {min_props} properties"))
            return
        max_props = schema.get("maxProperties")
        if isinstance(max_props, int) and n > max_props:
            causes.append(fe.too_many(path, n, max_props))
            return
    properties = plan.properties
    for key, prop in properties.items():
        if key in value and isinstance(prop, dict):
            if root and key == "metadata":
                _validate_root_metadata(value[key], prop, causes)
                continue
            _validate(value[key], prop, f"{path}.{key}" if path else key, causes,
                      old=_ABSENT if old is None else old.get(key, _ABSENT))
    additional = plan.additional
    if additional is not None:
        for key in sorted(value):
            if key not in properties:
                _validate(value[key], additional, _child(path, key), causes,
                          old=_ABSENT if old is None else old.get(key, _ABSENT))
    if not plan.object:
        return
    required = schema.get("required")
    for key in required if isinstance(required, list) else []:
        if isinstance(key, str) and key not in value:
            causes.append(fe.required(_child(path, key)))
    if schema.get(_EMBEDDED):
        for key in ("apiVersion", "kind"):
            if not value.get(key):
                causes.append(fe.required(_child(path, key), "must not be empty"))


def _validate_root_metadata(meta: Any, schema: JsonObj, causes: list[JsonObj]) -> None:
    """Only metadata.name and generateName may carry schema constraints; the rest is ObjectMeta's business."""
    if not isinstance(meta, dict):
        return
    properties = _props(schema)
    for key in ("name", "generateName"):
        prop = properties.get(key)
        if isinstance(prop, dict) and key in meta:
            _validate(meta[key], prop, f"metadata.{key}", causes)


def _quiet(value: Any, schema: JsonObj, path: str) -> bool:
    probe: list[JsonObj] = []
    _validate(value, schema, path, probe)
    return not probe


def _validate_composition(value: Any, schema: JsonObj, path: str, causes: list[JsonObj]) -> None:
    for sub in _list(schema.get("allOf")):
        if isinstance(sub, dict):
            _validate(value, sub, path, causes)
    any_of = [s for s in _list(schema.get("anyOf")) if isinstance(s, dict)]
    if any_of and not any(_quiet(value, s, path) for s in any_of):
        causes.append(fe.invalid(path, value, f"{path} in body must validate at least one schema (anyOf)"))
    one_of = [s for s in _list(schema.get("oneOf")) if isinstance(s, dict)]
    if one_of and sum(_quiet(value, s, path) for s in one_of) != 1:
        causes.append(fe.invalid(path, value, f"{path} in body must validate one and only one schema (oneOf)"))
    not_schema = _sub(schema, "not")
    if not_schema is not None and _quiet(value, not_schema, path):
        causes.append(fe.invalid(path, value, f"{path} in body should not validate the schema (not)"))
