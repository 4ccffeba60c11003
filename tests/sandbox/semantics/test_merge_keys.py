"""The built-in merge-key table, CRD schema translation, and the field-path machinery (fieldsV1
codec, path strings, the typed walks) that server-side apply stands on."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.semantics.fieldpaths import (
    Path,
    added_fields_v1,
    compare,
    decode_fields_v1,
    encode_fields_v1,
    fields_v1_has,
    merge_values,
    path_string,
    remove_items,
    to_field_set,
)
from kaiwo_sandbox.semantics.merge_keys import Schema, schema_for


def _at(schema: Schema, *path: str) -> Schema:
    for name in path:
        schema = schema.item_schema() if name == "[]" else schema.field_schema(name)
    return schema


@pytest.mark.parametrize(
    ("group", "kind", "path", "strategy", "merge_key", "list_type", "map_keys"),
    [
        ("", "Pod", ("spec", "containers"), "merge", "name", "map", ("name",)),
        ("", "Pod", ("spec", "initContainers"), "merge", "name", "map", ("name",)),
        ("", "Pod", ("spec", "volumes"), "merge", "name", "map", ("name",)),
        ("", "Pod", ("spec", "imagePullSecrets"), "merge", "name", "map", ("name",)),
        ("", "Pod", ("spec", "tolerations"), "", "", "atomic", ()),
        ("", "Pod", ("spec", "hostAliases"), "merge", "ip", "map", ("ip",)),
        ("", "Pod", ("spec", "topologySpreadConstraints"), "merge", "topologyKey", "map",
         ("topologyKey", "whenUnsatisfiable")),
        ("", "Pod", ("spec", "containers", "[]", "env"), "merge", "name", "map", ("name",)),
        ("", "Pod", ("spec", "containers", "[]", "volumeMounts"), "merge", "mountPath", "map", ("mountPath",)),
        ("", "Pod", ("spec", "containers", "[]", "ports"), "merge", "containerPort", "map",
         ("containerPort", "protocol")),
        ("", "Pod", ("spec", "containers", "[]", "args"), "", "", "atomic", ()),
        ("", "Pod", ("status", "conditions"), "merge", "type", "map", ("type",)),
        ("", "Pod", ("metadata", "finalizers"), "merge", "", "set", ()),
        ("", "Pod", ("metadata", "ownerReferences"), "merge", "uid", "map", ("uid",)),
        ("", "Node", ("spec", "taints"), "", "", "atomic", ()),
        ("", "Node", ("status", "conditions"), "merge", "type", "map", ("type",)),
        ("", "Service", ("spec", "ports"), "merge", "port", "map", ("port", "protocol")),
        ("apps", "Deployment", ("spec", "template", "spec", "containers"), "merge", "name", "map", ("name",)),
        ("batch", "Job", ("spec", "template", "spec", "containers", "[]", "env"), "merge", "name", "map", ("name",)),
        ("batch", "Job", ("status", "conditions"), "merge", "type", "atomic", ()),
        ("batch", "CronJob", ("spec", "jobTemplate", "spec", "template", "spec", "volumes"), "merge", "name", "map",
         ("name",)),
    ],
)
def test_builtin_merge_table(group: str, kind: str, path: tuple[str, ...], strategy: str, merge_key: str,
                             list_type: str, map_keys: tuple[str, ...]) -> None:
    schema = _at(schema_for(group, kind), *path)
    assert (schema.patch_strategy, schema.patch_merge_key) == (strategy, merge_key)
    assert (schema.list_type, schema.map_keys) == (list_type, map_keys)


def test_label_selectors_and_node_selectors_are_atomic_for_apply() -> None:
    assert _at(schema_for("apps", "Deployment"), "spec", "selector").atomic
    assert _at(schema_for("", "Pod"), "spec", "nodeSelector").atomic
    assert not _at(schema_for("", "Pod"), "metadata", "labels").atomic


def test_unknown_fields_are_structs_with_atomic_lists() -> None:
    schema = _at(schema_for("", "Pod"), "spec", "somethingNew")
    assert schema.is_named_field("x")
    assert not _at(schema, "list").associative


def test_custom_resources_use_their_openapi_schema() -> None:
    openapi: JsonObj = {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "groups": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "port"],
                       "items": {"type": "object", "properties": {
                           "name": {"type": "string"}, "port": {"type": "integer"},
                           "protocol": {"type": "string", "default": "TCP"}}}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "args": {"type": "array", "items": {"type": "string"}},
            "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                         "additionalProperties": {"type": "string"}},
            "resources": {"type": "object", "additionalProperties": {"type": "string"}},
            "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "embedded": {"type": "object", "x-kubernetes-embedded-resource": True,
                         "properties": {"spec": {"type": "object"}}},
        }},
    }}
    schema = schema_for("ray.io", "RayCluster", openapi)
    spec = schema.field_schema("spec")
    assert (spec.field_schema("groups").list_type, spec.field_schema("groups").map_keys) == ("map", ("name", "port"))
    assert spec.field_schema("tags").list_type == "set"
    assert spec.field_schema("args").atomic
    assert spec.field_schema("selector").atomic
    assert not spec.field_schema("resources").is_named_field("cpu")
    assert spec.field_schema("template").deduced
    assert spec.field_schema("embedded").field_schema("metadata").field_schema("finalizers").list_type == "set"
    assert schema.field_schema("metadata").field_schema("labels").kind == "map"


def test_custom_resource_schemas_are_translated_once_per_schema_object() -> None:
    openapi: JsonObj = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}}}}
    first = schema_for("example.com", "Thing", openapi)
    assert schema_for("example.com", "Thing", openapi) is first
    changed: JsonObj = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string"}}}}}}
    assert schema_for("example.com", "Thing", changed).field_schema("spec").field_schema("tags").atomic
    assert first.field_schema("spec").field_schema("tags").list_type == "set"


def test_custom_resources_without_a_schema_are_plain_structs() -> None:
    schema = schema_for("kaiwo.silogen.ai", "KaiwoJob")
    assert schema.field_schema("spec").is_named_field("gpus")
    assert not schema.field_schema("spec").field_schema("list").associative


# ----------------------------------------------------------------------------------------------
# field paths


def test_fields_v1_round_trip_and_member_markers() -> None:
    paths: set[Path] = {
        (("f", "metadata"), ("f", "labels")),
        (("f", "metadata"), ("f", "labels"), ("f", "app")),
        (("f", "spec"), ("f", "containers"), ("k", '{"name":"c"}')),
        (("f", "spec"), ("f", "containers"), ("k", '{"name":"c"}'), ("f", "image")),
        (("f", "metadata"), ("f", "finalizers"), ("v", '"x"')),
    }
    encoded = encode_fields_v1(paths)
    assert encoded == {
        "f:metadata": {"f:finalizers": {'v:"x"': {}}, "f:labels": {".": {}, "f:app": {}}},
        "f:spec": {"f:containers": {'k:{"name":"c"}': {".": {}, "f:image": {}}}},
    }
    assert decode_fields_v1(encoded) == paths
    assert fields_v1_has(encoded, (("f", "metadata"), ("f", "labels")))
    assert not fields_v1_has(encoded, (("f", "metadata"),)), "an ancestor is not a member"
    assert not fields_v1_has(encoded, (("f", "status"),))


def test_decoding_normalises_key_json() -> None:
    assert decode_fields_v1({'k:{"protocol": "TCP", "containerPort": 80}': {}}) == {
        (("k", '{"containerPort":80,"protocol":"TCP"}'),)}


def test_path_strings_as_in_conflict_messages() -> None:
    assert path_string((("f", "spec"), ("f", "template"), ("f", "spec"), ("f", "containers"),
                        ("k", '{"name":"app"}'), ("f", "image"))) == '.spec.template.spec.containers[name="app"].image'
    assert path_string((("f", "spec"), ("f", "ports"), ("k", '{"port":80,"protocol":"TCP"}'))) == \
        '.spec.ports[port=80,protocol="TCP"]'
    assert path_string((("f", "metadata"), ("f", "finalizers"), ("v", '"a"'))) == '.metadata.finalizers[="a"]'
    assert path_string((("f", "x"), ("i", 2))) == ".x[2]"


def test_to_field_set_marks_empty_and_null_fields_and_map_entries() -> None:
    schema = schema_for("", "Pod")
    fields = to_field_set({"metadata": {"labels": {"a": "1"}, "annotations": {}},
                           "spec": {"securityContext": {}, "nodeName": None}}, schema)
    assert fields == {
        (("f", "metadata"), ("f", "labels"), ("f", "a")),
        (("f", "metadata"), ("f", "annotations")),
        (("f", "spec"), ("f", "securityContext")),
        (("f", "spec"), ("f", "nodeName")),
    }


def test_remove_items_takes_subtrees() -> None:
    schema = schema_for("", "Pod")
    value = {"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b"}], "nodeName": "n"}}
    removed = remove_items(value, {(("f", "spec"), ("f", "containers"), ("k", '{"name":"a"}'))}, schema)
    assert removed == {"spec": {"containers": [{"name": "b"}], "nodeName": "n"}}
    assert value["spec"]["containers"][0] == {"name": "a", "image": "x"}


def test_merge_keeps_live_only_items_in_place() -> None:
    schema = _at(schema_for("", "Pod"), "spec", "containers")
    live = [{"name": "a"}, {"name": "injected"}, {"name": "b"}]
    applied = [{"name": "b", "image": "y"}, {"name": "a", "image": "x"}, {"name": "c"}]
    merged = merge_values(live, applied, schema)
    # structured-merge-diff: shared items in applied order, a live-only item before the shared
    # item it preceded once the applied order overtakes it, new items where the applier put them
    assert [c["name"] for c in merged] == ["injected", "b", "a", "c"]
    assert next(c for c in merged if c["name"] == "a") == {"name": "a", "image": "x"}


def test_merge_in_shared_order_with_live_only_item_between() -> None:
    schema = _at(schema_for("", "Pod"), "spec", "containers")
    live = [{"name": "a"}, {"name": "injected"}, {"name": "b"}]
    applied = [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]
    assert [c["name"] for c in merge_values(live, applied, schema)] == ["a", "injected", "b"]


def test_compare_reports_leaves_and_new_items() -> None:
    schema = schema_for("", "Pod")
    old = {"spec": {"containers": [{"name": "a", "image": "x"}]}}
    new = {"spec": {"containers": [{"name": "a", "image": "y"}, {"name": "b"}]}}
    added, modified, removed = compare(old, new, schema)
    b = (("f", "spec"), ("f", "containers"), ("k", '{"name":"b"}'))
    assert added == {b, (*b, ("f", "name"))}
    assert modified == {(("f", "spec"), ("f", "containers"), ("k", '{"name":"a"}'), ("f", "image"))}
    assert removed == set()


def test_compare_marks_what_a_typed_object_lacks() -> None:
    """Go's zero Pod has spec, status and spec.containers (null) but no securityContext; a
    custom resource's zero object is empty."""
    new = {"spec": {"containers": [{"name": "a", "resources": {}}], "securityContext": {"runAsUser": 1},
                    "nodeSelector": {"gpu": "yes"}}}
    added, _, _ = compare({}, new, schema_for("", "Pod"))
    spec = (("f", "spec"),)
    assert spec not in added
    assert (*spec, ("f", "containers")) not in added
    assert (*spec, ("f", "securityContext")) in added
    assert (*spec, ("f", "nodeSelector")) in added
    assert (*spec, ("f", "containers"), ("k", '{"name":"a"}'), ("f", "resources")) in added, "inside a new item"
    added_cr, _, _ = compare({}, new, schema_for("example.com", "Pod"))
    assert spec in added_cr and (*spec, ("f", "containers")) in added_cr
    # an existing container always carries resources (non-pointer), so adding limits marks only limits
    old = {"spec": {"containers": [{"name": "a"}]}}
    limits = {"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1"}}}]}}
    added, _, _ = compare(old, limits, schema_for("", "Pod"))
    item = (*spec, ("f", "containers"), ("k", '{"name":"a"}'))
    assert added == {(*item, ("f", "resources"), ("f", "limits")), (*item, ("f", "resources"), ("f", "limits"),
                                                                       ("f", "cpu"))}


_names = st.sampled_from(["a", "b", "c"])
_pods = st.fixed_dictionaries({
    "metadata": st.fixed_dictionaries({}, optional={
        "labels": st.dictionaries(_names, st.text("xy", max_size=2), max_size=3),
        "finalizers": st.lists(_names, max_size=3, unique=True),
        "ownerReferences": st.lists(st.fixed_dictionaries({"uid": _names, "kind": st.just("Job")}), max_size=2,
                                    unique_by=lambda r: r["uid"]),
        "name": st.just("p"),
    }),
    "spec": st.fixed_dictionaries({}, optional={
        "containers": st.lists(st.fixed_dictionaries({"name": _names}, optional={
            "image": st.text("ab", max_size=2),
            "env": st.lists(st.fixed_dictionaries({"name": _names, "value": st.text("01", max_size=1)}), max_size=2,
                            unique_by=lambda e: e["name"]),
            "args": st.lists(st.text("z", max_size=1), max_size=2),
            "resources": st.fixed_dictionaries({}, optional={"limits": st.dictionaries(_names, st.just("1"))}),
        }), min_size=1, max_size=3, unique_by=lambda c: c["name"]),
        "nodeSelector": st.dictionaries(_names, st.just("v"), max_size=2),
        "securityContext": st.just({}),
        "priority": st.integers(0, 3),
    }),
})


@given(_pods, st.sampled_from([("", "Pod"), ("example.com", "Pod")]))
def test_direct_create_encoding_matches_compare(pod: JsonObj, group_kind: tuple[str, str]) -> None:
    schema = schema_for(*group_kind)
    added, modified, removed = compare({}, pod, schema)
    assert not modified and not removed
    skip = frozenset({(("f", "metadata"),), (("f", "metadata"), ("f", "name"))})
    assert added_fields_v1(pod, schema, skip=skip) == encode_fields_v1(added - skip)


@given(_pods)
def test_fields_v1_codec_round_trips(pod: JsonObj) -> None:
    fields = to_field_set(pod, schema_for("", "Pod"))
    assert decode_fields_v1(encode_fields_v1(fields)) == fields


@given(_pods, _pods)
@example(  # same owner reference, keys in another order: no change (found by hypothesis)
    {"metadata": {"finalizers": [], "name": "p", "labels": {},
                  "ownerReferences": [{"uid": "a", "kind": "Job"}, {"uid": "b", "kind": "Job"}]}, "spec": {}},
    {"metadata": {"ownerReferences": [{"kind": "Job", "uid": "b"}]}, "spec": {}},
)
def test_merge_is_idempotent_and_compare_sees_no_change_the_second_time(a: JsonObj, b: JsonObj) -> None:
    schema = schema_for("", "Pod")
    merged = merge_values(a, b, schema)
    again = merge_values(merged, b, schema)
    assert again == merged
    assert compare(merged, again, schema) == (set(), set(), set())
    if _keyed_lists_sorted(merged) != _keyed_lists_sorted(a):
        added, modified, removed = compare(a, merged, schema)
        assert added or modified or removed


_KEYED_LISTS = frozenset({"finalizers", "ownerReferences", "containers", "env"})


def _keyed_lists_sorted(value: object, key: str = "") -> object:
    """`value` with its set and map lists in a canonical order: their order is not a field, so a merge
    that only reorders them (finalizers ['a', 'b'] merged with ['b', 'a']) is rightly no change."""
    if isinstance(value, dict):
        return {k: _keyed_lists_sorted(v, k) for k, v in value.items()}
    if isinstance(value, list):
        items = [_keyed_lists_sorted(v) for v in value]
        # sorted by a key-order-blind text: {'uid': 'b', 'kind': 'Job'} and {'kind': 'Job', 'uid': 'b'}
        # are the same item (repr() told them apart and failed a merge that changed nothing)
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True)) if key in _KEYED_LISTS else items
    return value
