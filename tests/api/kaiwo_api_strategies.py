"""Hypothesis strategies producing valid *wire* documents for any API model, derived from its fields.

Walking the model keeps the property tests honest as fields are added: a new field is generated
automatically, so a model whose dump does not parse back is caught without writing a new strategy.
"""

from __future__ import annotations

import datetime
import enum
import types
import typing
from typing import Any, Literal, Union

import annotated_types
from hypothesis import strategies as st
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from kaiwo_ray.api import _base, workloads
from kaiwo_ray.api.queueconfig import ResourceGroup, TopologySpec, WorkloadPriorityClassEntry

NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=8)
TEXT = st.text(max_size=8)
JSON_SCALAR = st.none() | st.booleans() | st.integers(-(2**31), 2**31) | TEXT
JSON = st.recursive(
    JSON_SCALAR,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(NAME, inner, max_size=2),
    max_leaves=6,
)
QUANTITY_TEXT = st.sampled_from(["1", "100m", "16Gi", "1e3", "500Ki", "2.5", "30923764531", "0"])
DURATION_TEXT = st.sampled_from(["1s", "5m", "1h30m", "500ms", "0", "2h45m30.5s", "-3s"])
TIME_TEXT = st.datetimes(
    min_value=datetime.datetime(2000, 1, 1),
    max_value=datetime.datetime(2100, 1, 1),
    timezones=st.just(datetime.UTC),
).map(lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ"))


def _resource_group() -> st.SearchStrategy[dict[str, Any]]:
    def build(covered: list[str]) -> st.SearchStrategy[dict[str, Any]]:
        flavor = st.fixed_dictionaries(
            {
                "name": NAME,
                "resources": st.tuples(*[QUANTITY_TEXT for _ in covered]).map(
                    lambda qs: [{"name": r, "nominalQuota": q} for r, q in zip(covered, qs, strict=True)]
                ),
            }
        )
        return st.fixed_dictionaries(
            {"coveredResources": st.just(covered), "flavors": st.lists(flavor, min_size=1, max_size=2)}
        )

    return st.lists(NAME, min_size=1, max_size=3, unique=True).flatmap(build)


def _topology_spec() -> st.SearchStrategy[dict[str, Any]]:
    return st.lists(NAME, min_size=1, max_size=4, unique=True).map(
        lambda ls: {"levels": [{"nodeLabel": x} for x in ls]}
    )


# Special types are recognised by identity before their Annotated wrapper is unwrapped.
_SPECIAL: dict[Any, st.SearchStrategy[Any]] = {
    _base.GoDuration: DURATION_TEXT,
    _base.Quantity: QUANTITY_TEXT | st.integers(0, 10**6),
    _base.QuantityString: QUANTITY_TEXT,
    _base.Time: TIME_TEXT,
    _base.PreservedObject: st.dictionaries(NAME, JSON, max_size=3),
    workloads.EnvVars: st.lists(st.fixed_dictionaries({"name": NAME}, optional={"value": TEXT}), max_size=2),
    workloads.ResourceRequirements: st.fixed_dictionaries(
        {},
        optional={
            section: st.dictionaries(
                st.sampled_from(["cpu", "memory", "amd.com/gpu"]),
                QUANTITY_TEXT | st.integers(0, 100),
                max_size=3,
            )
            for section in ("requests", "limits")
        },
    ),
    workloads.LocalObjectReferences: st.lists(st.fixed_dictionaries({"name": NAME}), max_size=2),
}
_MODEL_OVERRIDES: dict[type[BaseModel], st.SearchStrategy[dict[str, Any]]] = {
    ResourceGroup: _resource_group(),
    TopologySpec: _topology_spec(),
    WorkloadPriorityClassEntry: st.fixed_dictionaries(
        {"metadata": st.fixed_dictionaries({"name": NAME}), "value": st.integers(-(2**31), 2**31 - 1)},
        optional={"description": TEXT},
    ),
}
_SKIP_FIELDS = {
    ("ClusterQueueSpec", "cohort_name"),
    ("ClusterQueueSpec", "admission_checks_strategy"),  # exclusive with admissionChecks (Kueue rule)
    ("ClusterQueuePreemption", "borrow_within_cohort"),
}


def wire_documents(model: type[BaseModel]) -> st.SearchStrategy[dict[str, Any]]:
    """Valid wire dicts for `model` (every optional field sometimes present)."""
    if model in _MODEL_OVERRIDES:
        return _MODEL_OVERRIDES[model]
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for name, info in model.model_fields.items():
        if (model.__name__, name) in _SKIP_FIELDS:
            continue
        strategy = _for_field(info)
        (required if info.is_required() else optional)[info.alias or name] = strategy
    return st.fixed_dictionaries(required, optional=optional)


def _for_field(info: FieldInfo) -> st.SearchStrategy[Any]:
    return _for_type(info.annotation, list(info.metadata))


def _special(annotation: Any, metadata: list[Any]) -> st.SearchStrategy[Any] | None:
    """Pydantic strips a field's outer Annotated into `metadata`; recognise it by its marker objects."""
    for special, strategy in _SPECIAL.items():
        if annotation is special:
            return strategy
        markers = typing.get_args(special)[1:]
        if any(item is marker for item in metadata for marker in markers):
            return strategy
    return None


def _for_type(annotation: Any, metadata: list[Any]) -> st.SearchStrategy[Any]:
    special = _special(annotation, metadata)
    if special is not None:
        return special
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        extra: list[Any] = []
        for item in args[1:]:
            extra.extend(item.metadata if isinstance(item, FieldInfo) else [item])
        return _for_type(args[0], metadata + extra)
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        return st.one_of(*[_for_type(m, metadata) for m in members])
    bounds = _bounds(metadata)
    if origin is Literal:
        return st.sampled_from(args)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return st.sampled_from([member.value for member in annotation])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return wire_documents(annotation)
    if origin is list:
        return st.lists(
            _for_type(args[0], []),
            min_size=bounds.get("min_len", 0),
            max_size=min(bounds.get("max_len", 3), 3),
        )
    if origin is dict:
        return st.dictionaries(NAME, _for_type(args[1], []), max_size=min(bounds.get("max_len", 3), 3))
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return st.integers(bounds.get("ge", -(10**6)), bounds.get("le", 10**6))
    if annotation is float:
        return st.floats(bounds.get("ge", -1e6), bounds.get("le", 1e6), allow_nan=False)
    if annotation is str:
        if "pattern" in bounds:
            return st.from_regex(bounds["pattern"], fullmatch=True)
        return NAME if bounds.get("min_len") else TEXT
    if annotation is Any:
        return JSON
    raise NotImplementedError(f"no strategy for {annotation!r}")


def _bounds(metadata: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            out["ge"] = item.ge
        elif isinstance(item, annotated_types.Le):
            out["le"] = item.le
        elif isinstance(item, annotated_types.MinLen):
            out["min_len"] = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            out["max_len"] = item.max_length
        elif getattr(item, "pattern", None):
            out["pattern"] = item.pattern
    return out
