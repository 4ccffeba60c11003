"""Turn pydantic validation errors into short, wire-named, human messages.

`spec.storage.data.download.s3[0].endpointUrl: required` tells a user what to fix in their YAML;
pydantic's `Field required [type=missing, input_value=...]` does not. Paths use wire (camelCase)
names because those are what the user wrote.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Union

from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

_QUOTED = re.compile(r"'([^']*)'")
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class FieldError:
    """One problem: the wire path of the offending field and what is wrong with it."""

    path: str
    message: str
    reason: str = "FieldValueInvalid"
    """Kubernetes' cause type (field.ErrorType): FieldValueRequired, FieldValueNotSupported, ..."""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class NestedFieldError(ValueError):
    """Raised by validators of dict-typed fields to blame a spot *inside* the value.

    Pydantic reports a validator's error at the field itself; `loc` (wire names and list indexes)
    is appended so the user sees `spec.resources.requests.cpu: invalid quantity`, not just `spec.resources`.
    """

    def __init__(self, loc: tuple[int | str, ...], message: str) -> None:
        super().__init__(f"{format_path(loc)}: {message}")
        self.loc = loc
        self.message = message


class ManifestError(ValueError):
    """A manifest that is not a valid Kaiwo object. `str()` is one line; `.errors` holds every problem."""

    def __init__(self, errors: list[FieldError]) -> None:
        if not errors:
            raise ValueError("ManifestError needs at least one error")
        self.errors = errors
        first = str(errors[0])
        more = len(errors) - 1
        super().__init__(first if not more else f"{first} (and {more} more error{'s' if more > 1 else ''})")

    @classmethod
    def single(cls, path: str, message: str) -> ManifestError:
        return cls([FieldError(path, message)])

    def prefixed(self, prefix: str) -> ManifestError:
        """The same errors reported under a context such as `document 2`."""
        return ManifestError(
            [FieldError(f"{prefix}: {e.path}" if e.path else prefix, e.message, e.reason) for e in self.errors]
        )

    def details(self) -> str:
        """Every error, one per line."""
        return "\n".join(str(error) for error in self.errors)


def errors_from_validation(exc: ValidationError, model: type[BaseModel] | None = None) -> list[FieldError]:
    """Convert a pydantic ValidationError raised while validating wire data into FieldErrors."""
    out = []
    for error in exc.errors():
        nested = (error.get("ctx") or {}).get("error")
        if isinstance(nested, NestedFieldError):
            out.append(FieldError(format_path((*error["loc"], *nested.loc)), nested.message))
        else:
            out.append(FieldError(format_path(error["loc"]), _message(error, model), _reason(error["type"])))
    return out


# pydantic's error types -> the API server's cause types (k8s.io/apimachinery/pkg/util/validation/field)
_REASONS = {
    "missing": "FieldValueRequired",
    "literal_error": "FieldValueNotSupported", "enum": "FieldValueNotSupported",
    "too_long": "FieldValueTooMany", "string_too_long": "FieldValueTooLong",
    **{kind: "FieldValueTypeInvalid" for kind in (
        "int_type", "float_type", "bool_type", "string_type", "dict_type", "model_type", "model_attributes_type",
        "mapping_type", "list_type", "tuple_type", "iterable_type", "int_parsing", "float_parsing",
        "bool_parsing", "datetime_type")},
}


def _reason(kind: str) -> str:
    return _REASONS.get(kind, "FieldValueInvalid")


def format_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f'["{part}"]'
    return out


def _message(error: ErrorDetails, model: type[BaseModel] | None) -> str:
    kind = error["type"]
    ctx: dict[str, Any] = dict(error.get("ctx") or {})
    value = error.get("input")
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        return _unknown_field(error["loc"], model)
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        op = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[
            kind
        ]
        bound = next(iter(ctx.values()))
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)
        return f"must be {op} {bound} (got {_describe(value)})"
    if (
        kind in ("too_long", "too_short")
        and ctx.get("actual_length") is None
        and isinstance(value, dict | list)
    ):
        ctx["actual_length"] = len(value)
    if kind == "too_long":
        return f"must have at most {ctx.get('max_length')} {_items(ctx, ctx.get('max_length'))} (got {ctx.get('actual_length')})"
    if kind == "too_short":
        return f"must have at least {ctx.get('min_length')} {_items(ctx, ctx.get('min_length'))} (got {ctx.get('actual_length', 0)})"
    if kind == "string_too_short":
        return f"must be at least {ctx.get('min_length')} characters long"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters long"
    if kind in ("literal_error", "enum"):
        options = ", ".join(f'"{o}"' for o in _QUOTED.findall(str(ctx.get("expected", ""))))
        return f"must be one of {options} (got {_describe(value)})"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"must be an integer (got {_describe(value)})"
    if kind in ("float_type", "float_parsing", "finite_number"):
        return f"must be a number (got {_describe(value)})"
    if kind in ("bool_type", "bool_parsing"):
        return f"must be true or false (got {_describe(value)})"
    if kind in ("string_type", "string_unicode"):
        return f"must be a string (got {_describe(value)})"
    if kind in ("dict_type", "model_type", "model_attributes_type", "mapping_type"):
        return f"must be an object (got {_describe(value)})"
    if kind in ("list_type", "tuple_type", "iterable_type"):
        return f"must be a list (got {_describe(value)})"
    if kind == "string_pattern_mismatch":
        return f"must match {ctx.get('pattern')} (got {_describe(value)})"
    if kind == "datetime_type":
        return f"must be an RFC 3339 timestamp (got {_describe(value)})"
    message = error["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message[:1].lower() + message[1:]


def _items(ctx: dict[str, Any], count: Any) -> str:
    noun = "entr" if str(ctx.get("field_type", "")).lower() == "dictionary" else "item"
    if noun == "entr":
        return "entry" if count == 1 else "entries"
    return "item" if count == 1 else "items"


def _describe(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"' if len(value) <= 60 else f'"{value[:57]}..."'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return repr(value)


# --- "did you mean" for unknown fields ---------------------------------------------------------------


def _unknown_field(loc: tuple[int | str, ...], model: type[BaseModel] | None) -> str:
    key = loc[-1] if loc else ""
    owner = _model_at(model, loc[:-1]) if model is not None else None
    if owner is None:
        return "unknown field"
    renamed: dict[str, str] = getattr(owner, "RENAMED_FIELDS", {})
    if isinstance(key, str) and key in renamed:
        return f'unknown field (now called "{renamed[key]}")'
    known = [info.alias or name for name, info in owner.model_fields.items()]
    if isinstance(key, str) and known:
        camel = to_camel(key)
        close = [camel] if camel in known else difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        if not close:
            folded = {name.lower(): name for name in known}
            close = [folded[key.lower()]] if key.lower() in folded else []
        if close:
            return f'unknown field (did you mean "{close[0]}"?)'
    return "unknown field"


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class found by following `loc` (wire names, list indexes) from `model`, if any."""
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel) and isinstance(part, str):
            field = _field_by_wire_name(current, part)
            if field is None:
                return None
            current = field
        elif typing.get_origin(current) in (list, dict):
            args = typing.get_args(current)
            current = args[-1] if args else Any
        else:
            return None
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return current
    return None


def _field_by_wire_name(model: type[BaseModel], wire_name: str) -> Any:
    for name, info in model.model_fields.items():
        if wire_name in (name, info.alias):
            return info.annotation
    return None


def _unwrap(annotation: Any) -> Any:
    """Strip Annotated[...] and `X | None` down to X."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation
