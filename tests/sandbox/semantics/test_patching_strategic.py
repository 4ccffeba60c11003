"""Strategic merge patch as the apiserver applies it to built-in kinds: the patches kubectl sends
(cordon, client-side apply with $setElementOrder and $retainKeys, edit) and the directives."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaiwo_sandbox.contracts import ApiError, JsonObj
from kaiwo_sandbox.semantics.patching import (
    apply_merge_patch,
    apply_strategic_merge_patch,
    strategic_merge_supported,
)


def _deployment() -> JsonObj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}, "finalizers": ["a"]},
        "spec": {
            "replicas": 2,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {"name": "app", "image": "nginx:1.24",
                         "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                         "ports": [{"containerPort": 80, "protocol": "TCP"}],
                         "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
                        {"name": "sidecar", "image": "busybox"},
                    ],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                    "tolerations": [{"key": "gpu", "operator": "Exists"}],
                },
            },
        },
    }


def _patch(doc: JsonObj, patch: JsonObj, *, group: str = "apps", kind: str = "Deployment") -> JsonObj:
    doc_before, patch_before = copy.deepcopy(doc), copy.deepcopy(patch)
    result = apply_strategic_merge_patch(doc, patch, group=group, kind=kind)
    assert doc == doc_before, "the live object must not be modified"
    assert patch == patch_before, "the patch must not be modified"
    return result


def _pod_spec(obj: JsonObj) -> JsonObj:
    spec: JsonObj = obj["spec"]["template"]["spec"]
    return spec


def _names(items: list[JsonObj]) -> list[Any]:
    return [i.get("name") for i in items]


def test_kubectl_cordon_and_uncordon() -> None:
    node: JsonObj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {"podCIDR": "10.0.0.0/24"}}
    cordoned = _patch(node, {"spec": {"unschedulable": True}}, group="", kind="Node")
    assert cordoned["spec"] == {"podCIDR": "10.0.0.0/24", "unschedulable": True}
    uncordoned = _patch(cordoned, {"spec": {"unschedulable": None}}, group="", kind="Node")
    assert uncordoned["spec"] == {"podCIDR": "10.0.0.0/24"}


def test_node_taints_are_replaced_whole() -> None:
    node: JsonObj = {"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}
    result = _patch(node, {"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}}, group="", kind="Node")
    assert result["spec"]["taints"] == [{"key": "b", "effect": "NoExecute"}]


def test_containers_merge_by_name() -> None:
    result = _patch(_deployment(), {"spec": {"template": {"spec": {"containers": [
        {"name": "sidecar", "image": "busybox:1.36"}]}}}})
    containers = _pod_spec(result)["containers"]
    assert _names(containers) == ["app", "sidecar"]
    assert containers[1] == {"name": "sidecar", "image": "busybox:1.36"}
    assert containers[0]["image"] == "nginx:1.24"


def test_env_add_and_remove_by_name() -> None:
    result = _patch(_deployment(), {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "env": [{"name": "C", "value": "3"}, {"name": "A", "$patch": "delete"}]}]}}}})
    env = _pod_spec(result)["containers"][0]["env"]
    assert {e["name"]: e["value"] for e in env} == {"B": "2", "C": "3"}


def test_patch_delete_directive_on_a_container() -> None:
    result = _patch(_deployment(), {"spec": {"template": {"spec": {"containers": [
        {"name": "sidecar", "$patch": "delete"}]}}}})
    assert _names(_pod_spec(result)["containers"]) == ["app"]


def test_patch_replace_directive_on_a_list_and_a_map() -> None:
    result = _patch(_deployment(), {"spec": {"template": {"spec": {
        "containers": [{"name": "only", "image": "x"}, {"$patch": "replace"}],
        "securityContext": {"runAsUser": 1000},
    }}}})
    assert _pod_spec(result)["containers"] == [{"name": "only", "image": "x"}]
    replaced = _patch(_deployment(), {"metadata": {"labels": {"$patch": "replace", "new": "1"}}})
    assert replaced["metadata"]["labels"] == {"new": "1"}
    deleted = _patch(_deployment(), {"spec": {"strategy": {"$patch": "delete"}}})
    assert deleted["spec"]["strategy"] == {}


def test_kubectl_client_side_apply_patch_with_set_element_order() -> None:
    """What `kubectl apply` sends after the manifest swapped container order, changed an image,
    dropped env B and added C (a three-way diff against last-applied)."""
    patch: JsonObj = {
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}],
            "containers": [{
                "$setElementOrder/env": [{"name": "A"}, {"name": "C"}],
                "env": [{"name": "C", "value": "3"}, {"$patch": "delete", "name": "B"}],
                "image": "nginx:1.25",
                "name": "app",
            }],
        }}},
    }
    result = _patch(_deployment(), patch)
    spec = _pod_spec(result)
    assert _names(spec["containers"]) == ["sidecar", "app"]
    app = spec["containers"][1]
    assert app["image"] == "nginx:1.25"
    assert app["env"] == [{"name": "A", "value": "1"}, {"name": "C", "value": "3"}]
    assert app["ports"] == [{"containerPort": 80, "protocol": "TCP"}], "untouched fields stay"
    assert "$setElementOrder/env" not in app
    assert result["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] == "{}"


def test_set_element_order_keeps_server_only_items_in_their_live_position() -> None:
    doc = _deployment()
    _pod_spec(doc)["containers"].insert(1, {"name": "injected", "image": "istio"})
    patch: JsonObj = {"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}, {"name": "new"}],
        "containers": [{"name": "new", "image": "n"}],
    }}}}
    assert _names(_pod_spec(_patch(doc, patch))["containers"]) == ["app", "injected", "sidecar", "new"]


def test_retain_keys_on_strategy_type_change() -> None:
    """kubectl apply switching RollingUpdate to Recreate sends $retainKeys for the union field."""
    result = _patch(_deployment(), {"spec": {"strategy": {
        "$retainKeys": ["type"], "rollingUpdate": None, "type": "Recreate"}}})
    assert result["spec"]["strategy"] == {"type": "Recreate"}


def test_retain_keys_on_a_volume_source_change() -> None:
    result = _patch(_deployment(), {"spec": {"template": {"spec": {"volumes": [
        {"$retainKeys": ["configMap", "name"], "configMap": {"name": "cm"}, "name": "data"}]}}}})
    assert _pod_spec(result)["volumes"] == [{"name": "data", "configMap": {"name": "cm"}}]


def test_retain_keys_rejects_a_patch_field_outside_the_list() -> None:
    with pytest.raises(ApiError) as caught:
        _patch(_deployment(), {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 1}}}})
    assert (caught.value.code, caught.value.message) == (400, "invalid patch format of retainKeys")


def test_finalizers_merge_as_a_set_and_delete_from_primitive_list() -> None:
    added = _patch(_deployment(), {"metadata": {"finalizers": ["b", "a"]}})
    assert sorted(added["metadata"]["finalizers"]) == ["a", "b"]
    removed = _patch(added, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})
    assert removed["metadata"]["finalizers"] == ["b"]
    cleared = _patch(added, {"metadata": {"finalizers": None}})
    assert "finalizers" not in cleared["metadata"]


def test_tolerations_and_args_are_replaced() -> None:
    result = _patch(_deployment(), {"spec": {"template": {"spec": {
        "tolerations": [{"key": "amd.com/gpu", "operator": "Exists"}],
        "containers": [{"name": "app", "args": ["--x"]}],
    }}}})
    assert _pod_spec(result)["tolerations"] == [{"key": "amd.com/gpu", "operator": "Exists"}]
    assert _pod_spec(result)["containers"][0]["args"] == ["--x"]


def test_ports_merge_by_container_port_and_volume_mounts_by_mount_path() -> None:
    result = _patch(_deployment(), {"spec": {"template": {"spec": {"containers": [{
        "name": "app",
        "ports": [{"containerPort": 8080, "name": "metrics"}, {"containerPort": 80, "name": "http"}],
        "volumeMounts": [{"mountPath": "/data", "readOnly": True}, {"mountPath": "/cache", "name": "cache"}],
    }]}}}})
    app = _pod_spec(result)["containers"][0]
    assert {p["containerPort"]: p.get("name") for p in app["ports"]} == {80: "http", 8080: "metrics"}
    assert app["ports"][[p["containerPort"] for p in app["ports"]].index(80)]["protocol"] == "TCP"
    mounts = {m["mountPath"]: m for m in app["volumeMounts"]}
    assert mounts["/data"] == {"name": "data", "mountPath": "/data", "readOnly": True}
    assert mounts["/cache"]["name"] == "cache"


def test_labels_map_merges_and_null_deletes() -> None:
    result = _patch(_deployment(), {"metadata": {"labels": {"app": None, "team": "ml"}}})
    assert result["metadata"]["labels"] == {"team": "ml"}


def test_conditions_merge_by_type() -> None:
    pod: JsonObj = {"metadata": {"name": "p"}, "status": {"conditions": [
        {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}]}}
    result = _patch(pod, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, group="", kind="Pod")
    assert result["status"]["conditions"] == [{"type": "PodScheduled", "status": "True"},
                                              {"type": "Ready", "status": "True"}]


def test_new_items_and_values_lose_nulls_and_directives() -> None:
    result = _patch(_deployment(), {"spec": {"template": {"spec": {"containers": [
        {"name": "new", "image": "x", "command": None, "resources": {"$patch": "replace", "limits": {"cpu": "1"}}}]}}}})
    containers = _pod_spec(result)["containers"]
    # Without $setElementOrder, items the live list lacks go before the server-only ones.
    assert _names(containers) == ["new", "app", "sidecar"]
    assert containers[0] == {"name": "new", "image": "x", "resources": {"limits": {"cpu": "1"}}}


def test_scalar_replacing_an_object_and_back() -> None:
    result = _patch(_deployment(), {"spec": {"strategy": "odd"}})
    assert result["spec"]["strategy"] == "odd"


@pytest.mark.parametrize(
    ("patch", "code", "message"),
    [
        ({"spec": {"template": {"spec": {"containers": [{"image": "no-name"}]}}}}, 500,
         "map: map[image:no-name] does not contain declared merge key: name"),
        ({"spec": {"template": {"spec": {"containers": [{"$patch": "merge"}]}}}}, 500,
         "merging lists cannot yet be specified in the patch"),
        ({"spec": {"strategy": {"$patch": "bogus"}}}, 500, "unknown patch type: bogus in map: map[$patch:bogus]"),
        ({"metadata": {"$deleteFromPrimitiveList": ["a"]}}, 400, "invalid patch format of primitive list"),
        ({"spec": {"template": {"spec": {"$setElementOrder/containers": {"name": "x"}}}}}, 500,
         "expected []interface{}, but got dict"),
        ({"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "sidecar"}],
                                         "containers": [{"name": "app", "image": "y"}]}}}}, 500,
         "The order in patch list:\n[map[image:y name:app]]\n doesn't match $setElementOrder list:\n"
         "[map[name:sidecar]]\n"),
        ({"metadata": {"finalizers": [["nested"]]}}, 500,
         "list element types are not identical: [[a] [[nested]]]"),
    ],
)
def test_strategic_merge_errors(patch: JsonObj, code: int, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        _patch(_deployment(), patch)
    assert (caught.value.code, caught.value.message) == (code, message)


@pytest.mark.parametrize("body", [[{"op": "add"}], "x", None])
def test_strategic_merge_body_must_be_an_object(body: Any) -> None:
    with pytest.raises(ApiError) as caught:
        apply_strategic_merge_patch(_deployment(), body, group="apps", kind="Deployment")
    assert caught.value.code == 400
    assert caught.value.message.startswith("json: cannot unmarshal")


@pytest.mark.parametrize(
    ("group", "kind", "supported"),
    [("", "Node", True), ("apps", "Deployment", True), ("batch", "Job", True),
     ("coordination.k8s.io", "Lease", True), ("apiextensions.k8s.io", "CustomResourceDefinition", True),
     ("ray.io", "RayJob", False), ("kueue.x-k8s.io", "Workload", False), ("kaiwo.silogen.ai", "KaiwoJob", False)],
)
def test_strategic_merge_is_only_for_built_in_kinds(group: str, kind: str, supported: bool) -> None:
    assert strategic_merge_supported(group, kind) is supported
    if not supported:
        with pytest.raises(ApiError) as caught:
            apply_strategic_merge_patch({"metadata": {"name": "x"}}, {"spec": {}}, group=group, kind=kind)
        assert caught.value.message == "strategic merge patch format is not supported"


def test_lists_of_lists_are_unprocessable() -> None:
    doc = _deployment()
    doc["metadata"]["finalizers"] = []
    with pytest.raises(ApiError) as caught:
        _patch(doc, {"metadata": {"finalizers": [["nested"]]}})
    assert (caught.value.code, caught.value.reason) == (422, "Invalid")
    assert caught.value.__cause__ is not None


_scalar = st.one_of(st.integers(-3, 3), st.text("pq", max_size=2), st.booleans(), st.none())
_value = st.recursive(_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text("xyz", min_size=1, max_size=2), inner, max_size=3)),
    max_leaves=10)
_doc = st.dictionaries(st.text("xyz", min_size=1, max_size=2), _value, max_size=4)


@given(_doc.map(lambda d: _strip_nulls(d)), _doc.map(lambda d: _strip_nulls_in_lists(d)))
def test_without_merge_lists_or_directives_strategic_merge_is_merge_patch(doc: JsonObj, patch: JsonObj) -> None:
    """Fields with no patch strategy merge maps and replace lists exactly as RFC 7386 does (nulls
    inside a replacing list are where they differ: strategic merge drops them, RFC 7386 keeps them)."""
    assert apply_strategic_merge_patch(doc, patch, group="", kind="ConfigMap") == apply_merge_patch(doc, patch)


def _strip_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_nulls(v) for v in value]
    return value


def _strip_nulls_in_lists(value: Any, in_list: bool = False) -> Any:
    if isinstance(value, dict):
        return {k: _strip_nulls_in_lists(v, in_list) for k, v in value.items() if not (in_list and v is None)}
    if isinstance(value, list):
        return [_strip_nulls_in_lists(v, True) for v in value]
    return value


def test_kubectl_apply_patch_for_a_primitive_merge_list() -> None:
    """What kubectl apply sends when finalizers go from [a, b] to [b, c]."""
    doc = _deployment()
    doc["metadata"]["finalizers"] = ["a", "b"]
    result = _patch(doc, {"metadata": {"$setElementOrder/finalizers": ["b", "c"],
                                       "$deleteFromPrimitiveList/finalizers": ["a"], "finalizers": ["c"]}})
    assert result["metadata"]["finalizers"] == ["b", "c"]
