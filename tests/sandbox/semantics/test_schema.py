"""CRD structural schema: pruning, defaulting and validation with the apiserver's wording."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaiwo_sandbox.semantics.schema import (
    apply_defaults,
    prune,
    strict_decoding_message,
    unknown_fields,
    validate,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}}},
        "spec": {
            "type": "object",
            "required": ["image"],
            "properties": {
                "image": {"type": "string", "minLength": 1},
                "gpus": {"type": "integer", "minimum": 0, "maximum": 64, "default": 0},
                "ratio": {"type": "number", "exclusiveMinimum": True, "minimum": 0, "multipleOf": 0.5},
                "vendor": {"type": "string", "enum": ["amd", "nvidia"], "default": "amd"},
                "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
                "startAt": {"type": "string", "format": "date-time"},
                "size": {"x-kubernetes-int-or-string": True,
                         "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "note": {"type": "string", "nullable": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 2},
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set",
                         "maxItems": 3, "minItems": 1},
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "required": ["name"], "properties": {
                        "name": {"type": "string"},
                        "port": {"type": "integer", "default": 80},
                    }},
                },
                "storage": {
                    "type": "object",
                    "default": {},
                    "properties": {"size": {"type": "string", "default": "10Gi"},
                                   "class": {"type": "string"}},
                },
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                          "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}},
                "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                             "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}}},
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}


def _cr(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "x.io/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "d"},
            "spec": {"image": "busybox", **spec}}


def _messages(obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["field"], c["reason"], c["message"]) for c in validate(SCHEMA, obj)]


def test_valid_object_has_no_causes() -> None:
    assert validate(SCHEMA, _cr(gpus=8, vendor="nvidia", size="1Gi", tags=["a"], note=None)) == []
    assert validate(SCHEMA, _cr(size=3, ratio=1.5, startAt="2026-11-21T08:00:00Z")) == []


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"gpus": -1}, ("spec.gpus", "FieldValueInvalid",
                        "Invalid value: -1: spec.gpus in body should be greater than or equal to 0")),
        ({"gpus": 65}, ("spec.gpus", "FieldValueInvalid",
                        "Invalid value: 65: spec.gpus in body should be less than or equal to 64")),
        ({"gpus": "8"}, ("spec.gpus", "FieldValueTypeInvalid",
                         'Invalid value: "string": spec.gpus in body must be of type integer: "string"')),
        ({"gpus": 1.5}, ("spec.gpus", "FieldValueTypeInvalid",
                         'Invalid value: "number": spec.gpus in body must be of type integer: "number"')),
        ({"gpus": True}, ("spec.gpus", "FieldValueTypeInvalid",
                          'Invalid value: "boolean": spec.gpus in body must be of type integer: "boolean"')),
        ({"gpus": None}, ("spec.gpus", "FieldValueTypeInvalid",
                          'Invalid value: "null": spec.gpus in body must be of type integer: "null"')),
        ({"ratio": 0}, ("spec.ratio", "FieldValueInvalid",
                        "Invalid value: 0: spec.ratio in body should be greater than 0")),
        ({"ratio": 0.7}, ("spec.ratio", "FieldValueInvalid",
                          "Invalid value: 0.7: spec.ratio in body should be a multiple of 0.5")),
        ({"vendor": "intel"}, ("spec.vendor", "FieldValueNotSupported",
                               'Unsupported value: "intel": supported values: "amd", "nvidia"')),
        ({"name": "Abc"}, ("spec.name", "FieldValueInvalid",
                           "Invalid value: \"Abc\": spec.name in body should match '^[a-z]+$'")),
        ({"name": "abcdefghij"}, ("spec.name", "FieldValueTooLong", "Too long: may not be more than 8 bytes")),
        ({"image": ""}, ("spec.image", "FieldValueInvalid",
                         'Invalid value: "": spec.image in body should be at least 1 chars long')),
        ({"startAt": "yesterday"}, ("spec.startAt", "FieldValueTypeInvalid",
                                    'Invalid value: "yesterday": spec.startAt in body must be of type date-time: '
                                    '"yesterday"')),
        ({"size": 1.5}, ("spec.size", "FieldValueTypeInvalid",
                         'Invalid value: "number": spec.size in body must be of type integer,string: "number"')),
        ({"labels": {"a": 1}}, ("spec.labels.a", "FieldValueTypeInvalid",
                                'Invalid value: "integer": spec.labels.a in body must be of type string: "integer"')),
        ({"labels": {"a": "1", "b": "2", "c": "3"}}, ("spec.labels", "FieldValueTooMany",
                                                      "Too many: 3: must have at most 2 items")),
        ({"tags": []}, ("spec.tags", "FieldValueInvalid",
                        "Invalid value: 0: spec.tags in body should have at least 1 items")),
        ({"tags": ["a", "b", "c", "d"]}, ("spec.tags", "FieldValueTooMany", "Too many: 4: must have at most 3 items")),
        ({"tags": ["a", "a"]}, ("spec.tags[1]", "FieldValueDuplicate", 'Duplicate value: "a"')),
        ({"tags": [1]}, ("spec.tags[0]", "FieldValueTypeInvalid",
                         'Invalid value: "integer": spec.tags[0] in body must be of type string: "integer"')),
        ({"ports": [{"name": "http"}, {"name": "http", "port": 81}]},
         ("spec.ports[1]", "FieldValueDuplicate", 'Duplicate value: map[string]interface {}{"name":"http"}')),
        ({"ports": [{"port": 1}]}, ("spec.ports[0].name", "FieldValueRequired", "Required value")),
        ({"template": {"spec": {}}}, ("spec.template.apiVersion", "FieldValueRequired",
                                      "Required value: must not be empty")),
    ],
)
def test_each_violation_names_its_field(spec: dict[str, Any], expected: tuple[str, str, str]) -> None:
    assert expected in _messages(_cr(**spec))


def test_required_and_root_type_errors() -> None:
    obj = _cr()
    del obj["spec"]["image"]
    assert _messages(obj) == [("spec.image", "FieldValueRequired", "Required value")]
    assert _messages({**_cr(), "spec": "oops"}) == [
        ("spec", "FieldValueTypeInvalid", 'Invalid value: "string": spec in body must be of type object: "string"')]


def test_metadata_name_constraints_from_the_schema() -> None:
    obj = _cr()
    obj["metadata"]["name"] = "x" * 21
    assert _messages(obj) == [("metadata.name", "FieldValueTooLong", "Too long: may not be more than 20 bytes")]


def test_several_errors_are_all_reported() -> None:
    fields = {c["field"] for c in validate(SCHEMA, _cr(gpus=-1, vendor="x", name="A"))}
    assert fields == {"spec.gpus", "spec.vendor", "spec.name"}


def test_prune_drops_unknown_fields_but_keeps_preserved_and_resource_fields() -> None:
    obj = _cr(bogus=1, extra={"anything": {"goes": True}, "known": {"a": "x", "b": "dropped"}},
              template={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "junk": 1},
                        "spec": {"x": "1", "y": 2}},
              ports=[{"name": "a", "junk": True}])
    obj["metadata"]["junk"] = "x"
    obj["topLevelJunk"] = 1
    obj["status"] = {"phase": "Running", "junk": 1}
    pruned = prune(SCHEMA, obj)
    assert "topLevelJunk" not in pruned
    assert pruned["metadata"] == {"name": "w", "namespace": "d"}
    assert pruned["apiVersion"] == "x.io/v1" and pruned["kind"] == "Widget"
    spec = pruned["spec"]
    assert "bogus" not in spec
    assert spec["extra"] == {"anything": {"goes": True}, "known": {"a": "x"}}
    assert spec["template"] == {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": "1"}}
    assert spec["ports"] == [{"name": "a"}]
    assert pruned["status"] == {"phase": "Running"}


def test_defaults_apply_top_down_including_nested_defaults_of_defaulted_objects() -> None:
    out = apply_defaults(SCHEMA, _cr(ports=[{"name": "a"}]))
    spec = out["spec"]
    assert spec["gpus"] == 0
    assert spec["vendor"] == "amd"
    assert spec["storage"] == {"size": "10Gi"}
    assert spec["ports"] == [{"name": "a", "port": 80}]


def test_null_handling_in_defaulting() -> None:
    out = apply_defaults(SCHEMA, _cr(gpus=None, note=None, name=None))
    assert out["spec"]["gpus"] == 0  # null in a non-nullable field with a default takes the default
    assert out["spec"]["note"] is None  # nullable: kept
    assert "name" not in out["spec"]  # non-nullable without default: dropped
    assert validate(SCHEMA, out) == []


def test_explicit_values_are_not_overwritten() -> None:
    out = apply_defaults(SCHEMA, _cr(gpus=4, storage={"size": "1Ti"}))
    assert out["spec"]["gpus"] == 4
    assert out["spec"]["storage"] == {"size": "1Ti"}


def test_inputs_are_never_modified() -> None:
    obj = _cr(gpus=None, bogus=1, ports=[{"name": "a"}])
    before = copy.deepcopy(obj)
    prune(SCHEMA, obj)
    apply_defaults(SCHEMA, obj)
    validate(SCHEMA, obj)
    assert obj == before


_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 100) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(st.sampled_from(["gpus", "vendor", "storage", "ports", "extra", "junk", "note", "tags"]),
                       _values, max_size=5))
def test_defaulting_is_idempotent_and_pruning_keeps_valid_objects(spec: dict[str, Any]) -> None:
    obj = _cr(**spec)
    once = apply_defaults(SCHEMA, prune(SCHEMA, obj))
    assert apply_defaults(SCHEMA, once) == once
    assert prune(SCHEMA, once) == once  # defaults only add fields the schema knows


def _kaiwo_schema(kind_plural: str) -> dict[str, Any]:
    from kaiwo_ray.api.crd import all_crds

    for crd in all_crds():
        if crd["metadata"]["name"].startswith(kind_plural + "."):
            schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            return schema
    raise AssertionError(kind_plural)


def test_real_kaiwojob_schema_defaults_and_rejects_negative_gpus() -> None:
    schema = _kaiwo_schema("kaiwojobs")
    job = {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob", "metadata": {"name": "j"},
           "spec": {"image": "rocm/pytorch", "entrypoint": "python train.py", "gpus": 8, "unknownField": 1}}
    out = apply_defaults(schema, prune(schema, job))
    assert "unknownField" not in out["spec"]
    assert out["spec"]["replicas"] == 1
    assert out["spec"]["gpuVendor"] == "amd"
    assert validate(schema, out) == []
    bad = copy.deepcopy(out)
    bad["spec"]["gpus"] = -1
    assert validate(schema, bad) == [{
        "reason": "FieldValueInvalid", "field": "spec.gpus",
        "message": "Invalid value: -1: spec.gpus in body should be greater than or equal to 0"}]


def test_real_kaiwojob_duration_pattern() -> None:
    schema = _kaiwo_schema("kaiwojobs")
    job = {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob", "metadata": {"name": "j"},
           "spec": {"duration": "1h30m"}}
    assert validate(schema, apply_defaults(schema, job)) == []
    job["spec"]["duration"] = "soon"
    assert [c["field"] for c in validate(schema, apply_defaults(schema, job))] == ["spec.duration"]


def test_third_party_crd_schemas_accept_their_typical_objects() -> None:
    from kaiwo_ray.api.crd import all_crds
    from kaiwo_sandbox.cluster.crds import preinstalled_crds

    crds = [*all_crds(), *preinstalled_crds()]
    assert crds
    for crd in crds:
        for version in crd["spec"]["versions"]:
            schema = version["schema"]["openAPIV3Schema"]
            obj = {"apiVersion": f"{crd['spec']['group']}/{version['name']}", "kind": crd["spec"]["names"]["kind"],
                   "metadata": {"name": "x"}, "spec": {}}
            out = apply_defaults(schema, prune(schema, obj))
            assert out["kind"] == obj["kind"]
            assert isinstance(validate(schema, out), list)


def test_unknown_fields_name_what_pruning_drops() -> None:
    obj = _cr(bogus=1, extra={"free": 1, "known": {"b": 2}}, ports=[{"name": "a", "junk": 1}],
              template={"apiVersion": "v1", "kind": "Pod", "metadata": {"x": 1}, "spec": {"y": 2}})
    obj["metadata"]["junk"] = 1
    paths = unknown_fields(SCHEMA, obj)
    assert sorted(paths) == ["metadata.junk", "spec.bogus", "spec.extra.known.b", "spec.ports[0].junk",
                             "spec.template.metadata.x", "spec.template.spec.y"]
    assert strict_decoding_message(["spec.bogus"]) == 'strict decoding error: unknown field "spec.bogus"'
    assert unknown_fields(SCHEMA, prune(SCHEMA, obj)) == []


def test_an_update_ratchets_unchanged_invalid_values_and_checks_changed_ones() -> None:
    """Ratcheting (KEP-4008): an invalid value stored before the schema tightened stays acceptable
    while unchanged; a changed one, beside it or inside the same object, is checked."""
    stored = _cr(gpus=65, labels={"a": "1", "b": "2", "c": "3"})  # invalid under today's schema
    assert {c["field"] for c in validate(SCHEMA, stored)} == {"spec.gpus", "spec.labels"}
    status_write = {**copy.deepcopy(stored), "status": {"phase": "Running"}}
    assert validate(SCHEMA, status_write, stored) == []
    assert [c["field"] for c in validate(SCHEMA, {**status_write, "status": {"phase": 1}}, stored)] == ["status.phase"]
    edited = copy.deepcopy(stored)
    edited["spec"]["vendor"] = "intel"  # spec changed: the unchanged gpus and labels stay ratcheted
    assert {c["field"] for c in validate(SCHEMA, edited, stored)} == {"spec.vendor"}
    edited["spec"]["gpus"] = 66  # changed, still invalid: reported
    assert {c["field"] for c in validate(SCHEMA, edited, stored)} == {"spec.vendor", "spec.gpus"}


@pytest.mark.parametrize(("before", "after"), [(1, True), (0, False),
                                               ([{"name": "a", "port": 1}], [{"name": "a", "port": True}])])
def test_a_value_equal_only_to_python_is_checked(before: Any, after: Any) -> None:
    """True == 1 in Python, so equality alone would ratchet a boolean into an integer field."""
    key = "ports" if isinstance(before, list) else "gpus"
    stored = _cr(**{key: before})
    assert validate(SCHEMA, stored) == []
    assert validate(SCHEMA, _cr(**{key: after}), stored) != []
