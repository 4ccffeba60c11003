"""The one-walk fieldsV1 encoding an apply that creates an object records must equal the set-based
encoding it replaces (to_field_set -> reset filter -> strip -> encode_fields_v1), errors included."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.semantics.apply import _STRIPPED
from kaiwo_sandbox.semantics.fieldpaths import (
    FieldPathError,
    applied_fields_v1,
    encode_fields_v1,
    to_field_set,
)
from kaiwo_sandbox.semantics.merge_keys import schema_for

_names = st.sampled_from(["a", "b", "c"])
_scalars = st.one_of(st.none(), st.text("xy", max_size=2), st.integers(0, 2), st.booleans())
_objects = st.fixed_dictionaries({
    "apiVersion": st.just("v1"),
    "kind": st.just("Pod"),
    "metadata": st.fixed_dictionaries({}, optional={
        "name": st.just("p"),
        "namespace": st.just("ns"),
        "uid": st.just("u"),
        "labels": st.one_of(st.just({}), st.dictionaries(_names, st.text("xy", max_size=2), max_size=3)),
        "annotations": st.dictionaries(_names, _scalars, max_size=2),
        "finalizers": st.lists(_names, max_size=3),
        "ownerReferences": st.lists(st.fixed_dictionaries({"kind": st.just("Job")}, optional={"uid": _names}),
                                    max_size=2),
    }),
    "spec": st.one_of(st.none(), st.just({}), st.fixed_dictionaries({}, optional={
        "containers": st.lists(st.fixed_dictionaries({}, optional={
            "name": _names,
            "image": _scalars,
            "env": st.lists(st.fixed_dictionaries({"name": _names}, optional={"value": _scalars}), max_size=2),
            "args": st.lists(st.text("z", max_size=1), max_size=2),
            "resources": st.one_of(st.just({}), st.fixed_dictionaries({}, optional={
                "limits": st.dictionaries(_names, st.just("1"))})),
        }), max_size=3),
        "nodeSelector": st.one_of(st.none(), st.dictionaries(_names, st.just("v"), max_size=2)),
        "securityContext": st.just({}),
        "priority": _scalars,
        "tolerations": st.lists(st.fixed_dictionaries({"key": _names}), max_size=2),
    })),
    "status": st.fixed_dictionaries({}, optional={
        "phase": _scalars,
        "conditions": st.lists(st.fixed_dictionaries({"type": _names, "status": st.just("True")}), max_size=2),
    }),
})


def _expected(obj: JsonObj, group: str, only: str | None, dropped: str | None) -> JsonObj | str:
    try:
        fields = to_field_set(obj, schema_for(group, "Pod"))
    except FieldPathError as exc:
        return f"error: {exc}"
    status = ("f", "status")
    if dropped:
        fields = {p for p in fields if p[0] != status}
    if only:
        fields = {p for p in fields if p[0] == status}
    return encode_fields_v1(fields - _STRIPPED)


def _direct(obj: JsonObj, group: str, only: str | None, dropped: str | None) -> JsonObj | str:
    try:
        return applied_fields_v1(obj, schema_for(group, "Pod"), skip=_STRIPPED, only_top=only, except_top=dropped)
    except FieldPathError as exc:
        return f"error: {exc}"


@given(_objects, st.sampled_from(["", "example.com"]),
       st.sampled_from([(None, None), ("status", None), (None, "status")]))
def test_direct_encoding_matches_the_set_encoding(obj: JsonObj, group: str, reset: tuple[str | None, str | None]
                                                  ) -> None:
    only, dropped = reset
    assert _direct(obj, group, only, dropped) == _expected(obj, group, only, dropped)


@pytest.mark.parametrize("reset", [(None, None), ("status", None), (None, "status")])
def test_an_error_under_a_filtered_field_still_raises(reset: tuple[str | None, str | None]) -> None:
    bad = {"spec": {"containers": [{"name": "a"}, {"name": "a"}]}, "status": {"conditions": [{"status": "x"}]}}
    direct = _direct(bad, "", *reset)
    assert isinstance(direct, str) and direct.startswith("error: ")
    assert direct == _expected(bad, "", *reset)
