"""JSON patch (RFC 6902, evanphx/json-patch semantics) and JSON merge patch (RFC 7386), with the
apiserver's error answers."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaiwo_sandbox.contracts import ApiError, JsonObj
from kaiwo_sandbox.semantics.patching import REJECTED_MESSAGE, apply_json_patch, apply_merge_patch


def _job() -> JsonObj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "labels": {"app": "train", "kaiwo.silogen.ai/user": "alice"},
            "annotations": {"a/b": "slash", "t~x": "tilde"},
            "finalizers": ["kaiwo.silogen.ai/finalizer"],
            "resourceVersion": "7",
        },
        "spec": {
            "suspend": True,
            "parallelism": 1,
            "template": {"spec": {"containers": [{"name": "main", "image": "rocm/pytorch", "args": ["a", "b"]}]}},
        },
    }


@pytest.mark.parametrize(
    ("ops", "check"),
    [
        ([{"op": "replace", "path": "/spec/suspend", "value": False}],
         lambda d: d["spec"]["suspend"] is False),
        ([{"op": "add", "path": "/metadata/labels/team", "value": "ml"}],
         lambda d: d["metadata"]["labels"]["team"] == "ml"),
        ([{"op": "remove", "path": "/metadata/labels/app"}],
         lambda d: "app" not in d["metadata"]["labels"]),
        # "-" appends, an index inserts before, negative indices count from the end
        ([{"op": "add", "path": "/metadata/finalizers/-", "value": "x"}],
         lambda d: d["metadata"]["finalizers"] == ["kaiwo.silogen.ai/finalizer", "x"]),
        ([{"op": "add", "path": "/metadata/finalizers/0", "value": "x"}],
         lambda d: d["metadata"]["finalizers"] == ["x", "kaiwo.silogen.ai/finalizer"]),
        ([{"op": "add", "path": "/spec/template/spec/containers/0/args/1", "value": "mid"}],
         lambda d: d["spec"]["template"]["spec"]["containers"][0]["args"] == ["a", "mid", "b"]),
        ([{"op": "remove", "path": "/spec/template/spec/containers/0/args/-1"}],
         lambda d: d["spec"]["template"]["spec"]["containers"][0]["args"] == ["a"]),
        # ~1 is '/', ~0 is '~' (annotation keys with a slash are the everyday case)
        ([{"op": "replace", "path": "/metadata/annotations/a~1b", "value": "changed"}],
         lambda d: d["metadata"]["annotations"]["a/b"] == "changed"),
        ([{"op": "remove", "path": "/metadata/annotations/t~0x"}],
         lambda d: "t~x" not in d["metadata"]["annotations"]),
        ([{"op": "add", "path": "/metadata/labels/kaiwo.silogen.ai~1queue", "value": "q"}],
         lambda d: d["metadata"]["labels"]["kaiwo.silogen.ai/queue"] == "q"),
        ([{"op": "move", "from": "/metadata/labels/app", "path": "/metadata/labels/name"}],
         lambda d: d["metadata"]["labels"].get("name") == "train" and "app" not in d["metadata"]["labels"]),
        ([{"op": "copy", "from": "/spec/template/spec/containers/0", "path": "/spec/template/spec/containers/-"}],
         lambda d: len(d["spec"]["template"]["spec"]["containers"]) == 2),
        # the finalizer-removal idiom: test the list, then remove the entry (optimistic lock)
        ([{"op": "test", "path": "/metadata/finalizers/0", "value": "kaiwo.silogen.ai/finalizer"},
          {"op": "remove", "path": "/metadata/finalizers/0"}],
         lambda d: d["metadata"]["finalizers"] == []),
        ([{"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
          {"op": "replace", "path": "/spec/parallelism", "value": 4}],
         lambda d: d["spec"]["parallelism"] == 4),
        # evanphx/json-patch: a missing key tests equal to null
        ([{"op": "test", "path": "/metadata/labels/absent", "value": None}], lambda d: True),
        ([], lambda d: d == _job()),
    ],
)
def test_json_patch_operations(ops: list[JsonObj], check: Any) -> None:
    doc = _job()
    before = copy.deepcopy(doc)
    ops_before = copy.deepcopy(ops)
    result = apply_json_patch(doc, ops)
    assert check(result)
    assert doc == before, "the input document must not be modified"
    assert ops == ops_before, "the patch must not be modified"


def test_json_patch_result_shares_nothing_with_the_input() -> None:
    doc = _job()
    result = apply_json_patch(doc, [{"op": "add", "path": "/x", "value": {"y": [1]}}])
    result["metadata"]["labels"]["app"] = "mutated"
    result["x"]["y"].append(2)
    assert doc["metadata"]["labels"]["app"] == "train"


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/spec/suspend", "value": False}],
        [{"op": "test", "path": "/metadata/resourceVersion", "value": "6"}, {"op": "remove", "path": "/spec"}],
        [{"op": "test", "path": "/spec/parallelism", "value": True}],  # JSON true is not 1
        [{"op": "remove", "path": "/metadata/labels/absent"}],
        [{"op": "replace", "path": "/spec/absent", "value": 1}],
        [{"op": "add", "path": "/spec/missing/deeper", "value": 1}],
        [{"op": "add", "path": "/metadata/finalizers/5", "value": "x"}],
        [{"op": "remove", "path": "/metadata/finalizers/1"}],
        [{"op": "add", "path": "/metadata/finalizers/x", "value": "x"}],
        [{"op": "move", "from": "/nope", "path": "/spec/x"}],
        [{"op": "copy", "from": "/nope", "path": "/spec/x"}],
        [{"op": "frobnicate", "path": "/spec"}],
        [{"op": "add", "value": 1}],
        [{"op": "add", "path": "", "value": {}}],
    ],
)
def test_json_patch_failures_are_the_apiservers_generic_422(ops: list[JsonObj]) -> None:
    doc = _job()
    with pytest.raises(ApiError) as caught:
        apply_json_patch(doc, ops)
    status = caught.value.status()
    assert (status["code"], status["reason"], status["message"]) == (422, "Invalid", REJECTED_MESSAGE)
    assert status["details"] == {}
    assert caught.value.__cause__ is not None, "the library's reason is kept for debugging"
    assert doc == _job()


def test_a_failed_operation_applies_nothing() -> None:
    doc = _job()
    with pytest.raises(ApiError):
        apply_json_patch(doc, [{"op": "replace", "path": "/spec/suspend", "value": False},
                               {"op": "test", "path": "/spec/parallelism", "value": 99}])
    assert doc["spec"]["suspend"] is True


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"op": "add"}, "json: cannot unmarshal object into Go value of type jsonpatch.Patch"),
        ("add", "json: cannot unmarshal string into Go value of type jsonpatch.Patch"),
        (["add"], "json: cannot unmarshal string into Go value of type jsonpatch.Operation"),
        ([[]], "json: cannot unmarshal array into Go value of type jsonpatch.Operation"),
    ],
)
def test_json_patch_that_is_not_a_list_of_operations_is_400(body: Any, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        apply_json_patch(_job(), body)
    assert (caught.value.code, caught.value.reason, caught.value.message) == (400, "BadRequest", message)


def test_json_patch_with_too_many_operations_is_413() -> None:
    ops = [{"op": "test", "path": "/kind", "value": "Job"}] * 10001
    with pytest.raises(ApiError) as caught:
        apply_json_patch(_job(), ops)
    assert (caught.value.code, caught.value.reason) == (413, "RequestEntityTooLarge")
    assert caught.value.message.endswith("The allowed maximum operations in a JSON patch is 10000, got 10001")
    assert apply_json_patch(_job(), ops[:10000]) == _job()


def test_json_patch_null_body_is_an_empty_patch() -> None:
    assert apply_json_patch(_job(), None) == _job()


# ----------------------------------------------------------------------------------------------
# merge patch


@pytest.mark.parametrize(
    ("patch", "check"),
    [
        ({"spec": {"suspend": False}}, lambda d: d["spec"]["suspend"] is False and d["spec"]["parallelism"] == 1),
        ({"metadata": {"labels": {"team": "ml"}}}, lambda d: d["metadata"]["labels"]
         == {"app": "train", "kaiwo.silogen.ai/user": "alice", "team": "ml"}),
        # kubectl label foo- : null deletes
        ({"metadata": {"labels": {"app": None}}}, lambda d: "app" not in d["metadata"]["labels"]),
        ({"metadata": {"labels": None}}, lambda d: "labels" not in d["metadata"]),
        # lists are replaced whole (the finalizer-removal idiom with the resourceVersion lock)
        ({"metadata": {"finalizers": [], "resourceVersion": "7"}}, lambda d: d["metadata"]["finalizers"] == []),
        ({"spec": {"template": {"spec": {"containers": [{"name": "other"}]}}}},
         lambda d: d["spec"]["template"]["spec"]["containers"] == [{"name": "other"}]),
        # nulls inside new objects are dropped (RFC 7386)
        ({"status": {"active": 1, "failed": None}}, lambda d: d["status"] == {"active": 1}),
        ({"spec": "replaced"}, lambda d: d["spec"] == "replaced"),
        ({"metadata": {"absent": None}}, lambda d: "absent" not in d["metadata"]),
        ({}, lambda d: d == _job()),
    ],
)
def test_merge_patch(patch: JsonObj, check: Any) -> None:
    doc = _job()
    patch_before = copy.deepcopy(patch)
    result = apply_merge_patch(doc, patch)
    assert check(result)
    assert doc == _job()
    assert patch == patch_before


def test_merge_patch_result_shares_nothing_with_its_inputs() -> None:
    doc = _job()
    patch: JsonObj = {"spec": {"new": {"deep": [1]}}}
    result = apply_merge_patch(doc, patch)
    result["spec"]["new"]["deep"].append(2)
    result["metadata"]["labels"]["app"] = "x"
    assert patch == {"spec": {"new": {"deep": [1]}}}
    assert doc == _job()


@pytest.mark.parametrize("patch", [None, "x", 3, True])
def test_merge_patch_that_is_not_an_object_is_400(patch: Any) -> None:
    with pytest.raises(ApiError) as caught:
        apply_merge_patch(_job(), patch)
    assert (caught.value.code, caught.value.message) == (400, "Invalid JSON Patch")


def test_merge_patch_with_a_list_body_is_invalid() -> None:
    with pytest.raises(ApiError) as caught:
        apply_merge_patch(_job(), [{"op": "add"}])
    assert (caught.value.code, caught.value.reason) == (422, "Invalid")
    assert caught.value.message.startswith(' "" is invalid: patch: Invalid value: "[{\\"op\\":\\"add\\"}]": ')


# ----------------------------------------------------------------------------------------------
# properties

_scalars = st.one_of(st.integers(-5, 5), st.text(max_size=3), st.booleans())
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text("abc/~", max_size=3), inner, max_size=3)),
    max_leaves=12,
)
_docs = st.dictionaries(st.text("abcd/~", min_size=1, max_size=3), _json, max_size=4)


def _merge_diff(a: Any, b: Any) -> Any:
    """The RFC 7386 patch that turns a into b (b without nulls)."""
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return b
    patch: JsonObj = {key: None for key in a if key not in b}
    for key, value in b.items():
        if key not in a:
            patch[key] = value
        elif a[key] != value or type(a[key]) is not type(value):
            patch[key] = _merge_diff(a[key], value)
    return patch


@given(_docs, _docs)
def test_merge_patch_of_a_diff_turns_a_into_b(a: JsonObj, b: JsonObj) -> None:
    assert apply_merge_patch(a, _merge_diff(a, b)) == b


def _pointer(key: str) -> str:
    return "/" + key.replace("~", "~0").replace("/", "~1")


@given(_docs, st.text("abcd/~", min_size=1, max_size=3), _json)
def test_json_patch_add_then_remove_round_trips(doc: JsonObj, key: str, value: Any) -> None:
    if key in doc:
        return
    added = apply_json_patch(doc, [{"op": "add", "path": _pointer(key), "value": value}])
    assert added[key] == value
    assert apply_json_patch(added, [{"op": "test", "path": _pointer(key), "value": value},
                                    {"op": "remove", "path": _pointer(key)}]) == doc


@given(_docs, st.text("xyz", min_size=1, max_size=2))
def test_json_patch_move_there_and_back_round_trips(doc: JsonObj, target: str) -> None:
    if not doc or target in doc:
        return
    source = sorted(doc)[0]
    moved = apply_json_patch(doc, [{"op": "move", "from": _pointer(source), "path": _pointer(target)}])
    assert source not in moved
    back = apply_json_patch(moved, [{"op": "move", "from": _pointer(target), "path": _pointer(source)}])
    assert back == doc
