"""Shared pydantic building blocks: the strict wire-format base model and reusable field types."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

from kaiwo_ray.api.durations import GO_DURATION_PATTERN, parse_go_duration
from kaiwo_ray.api.quantity import QUANTITY_PATTERN, check_quantity_text, format_quantity, parse_quantity

DEFAULT_EMPTY_OBJECT: dict[str, Any] = {"default": {}}
"""`json_schema_extra` for sub-objects the CRD defaults to `{}`, so the API server fills their nested defaults."""


class WireModel(BaseModel):
    """Base of every Kaiwo API object: camelCase on the wire, snake_case in Python, strict about typos.

    Unknown keys are errors (like `kubectl --validate=strict`): a misspelt `gpuPerReplica` must not be
    silently dropped. Types are strict like the API server's: `gpus: "8"` is an error, not 8. Explicit `null`s are dropped before validation, mirroring the API server, which
    prunes nulls of non-nullable fields and then applies defaults (`replicas: null` means 1).
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="forbid",
        strict=True,
        use_attribute_docstrings=True,
        protected_namespaces=(),
    )

    @model_validator(mode="before")
    @classmethod
    def _drop_nulls(cls, data: Any) -> Any:
        if isinstance(data, dict) and None in data.values():
            return {key: value for key, value in data.items() if value is not None}
        return data

    def to_wire(self) -> dict[str, Any]:
        """JSON-ready dict with wire names, omitting unset optionals: what goes to the API server."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class OpenModel(WireModel):
    """A wire model that keeps fields it does not know (object metadata, Kubernetes-owned shapes)."""

    model_config = ConfigDict(extra="allow")


def _check_duration(value: Any) -> Any:
    if isinstance(value, str):
        parse_go_duration(value)
    return value


def _coerce_quantity(value: Any) -> Any:
    """Accept YAML numbers as quantities (`cpu: 2`) but keep the user's spelling as a string."""
    if isinstance(value, bool):
        raise ValueError(f"invalid quantity {value!r} (expected e.g. 2, 500m, 16Gi)")
    if isinstance(value, Decimal):
        return format_quantity(value)
    if isinstance(value, int | float):
        parse_quantity(value)
        return str(value)
    if isinstance(value, str):
        check_quantity_text(value)
    return value


def _check_quantity_string(value: Any) -> Any:
    if isinstance(value, str):
        check_quantity_text(value)
    return value


def _parse_time(value: Any) -> Any:
    """metav1.Time: RFC 3339 in UTC with second precision, so a round trip is exact."""
    if isinstance(value, str):
        try:
            value = datetime.datetime.fromisoformat(value)
        except ValueError as exc:
            raise ValueError(
                f'invalid timestamp "{value}" (expected RFC 3339, e.g. 2025-01-31T12:00:00Z)'
            ) from exc
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return value.astimezone(datetime.UTC).replace(microsecond=0)
    return value


def _format_time(value: datetime.datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


GoDuration = Annotated[
    str,
    BeforeValidator(_check_duration),
    WithJsonSchema({"type": "string", "pattern": GO_DURATION_PATTERN}),
]
"""A Go duration string (`1h30m`); validated on input, kept verbatim."""

Quantity = Annotated[
    str,
    BeforeValidator(_coerce_quantity),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    ),
]
"""A Kubernetes quantity that may be written as a number or a string; stored as its string spelling."""

QuantityString = Annotated[
    str,
    BeforeValidator(_check_quantity_string),
    WithJsonSchema({"type": "string", "pattern": QUANTITY_PATTERN}),
]
"""A quantity that upstream types as a plain string (storage sizes, head pod memory)."""

Time = Annotated[
    datetime.datetime,
    BeforeValidator(_parse_time),
    PlainSerializer(_format_time, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""metav1.Time (`2025-01-31T12:00:00Z`)."""

PreservedObject = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
]
"""A Kubernetes object kept whole as a plain dict (embedded Job, RayJob, ResourceRequirements, ...)."""
