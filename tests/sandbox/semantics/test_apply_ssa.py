"""Server-side apply and managedFields, checked against what a real apiserver records and answers."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaiwo_sandbox.contracts import ApiError, JsonObj
from kaiwo_sandbox.semantics.apply import manager_from_user_agent, record_update, server_side_apply


def _config(replicas: int | None = 3, image: str = "nginx:1.25", **extra: Any) -> JsonObj:
    spec: JsonObj = {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "app", "image": image}]}},
    }
    if replicas is not None:
        spec["replicas"] = replicas
    spec.update(extra)
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}}, "spec": spec}


def _apply(live: JsonObj | None, config: JsonObj, manager: str = "kubectl", *, force: bool = False,
           now: str = "2026-01-01T00:00:00Z", subresource: str | None = None, group: str = "apps",
           kind: str = "Deployment", api_version: str = "apps/v1", **kwargs: Any) -> JsonObj:
    live_before, config_before = copy.deepcopy(live), copy.deepcopy(config)
    result = server_side_apply(live, config, manager=manager, force=force, api_version=api_version, group=group,
                               kind=kind, subresource=subresource, now=now, **kwargs)
    assert live == live_before, "the live object must not be modified"
    assert config == config_before, "the applied configuration must not be modified"
    return result


def _update(old: JsonObj | None, new: JsonObj, manager: str, *, now: str = "2026-01-01T00:01:00Z",
            subresource: str | None = None, group: str = "apps", kind: str = "Deployment",
            api_version: str = "apps/v1", **kwargs: Any) -> JsonObj:
    old_before, new_before = copy.deepcopy(old), copy.deepcopy(new)
    result = record_update(old, new, manager=manager, api_version=api_version, group=group, kind=kind,
                           subresource=subresource, now=now, **kwargs)
    assert old == old_before and new == new_before, "inputs must not be modified"
    return result


def _entries(obj: JsonObj) -> dict[str, JsonObj]:
    return {f"{e['manager']}/{e['operation']}": e for e in obj["metadata"].get("managedFields", [])}


def _fields(obj: JsonObj, manager: str, operation: str = "Apply") -> JsonObj:
    fields: JsonObj = _entries(obj)[f"{manager}/{operation}"]["fieldsV1"]
    return fields


def _scale(obj: JsonObj, replicas: int) -> JsonObj:
    new = copy.deepcopy(obj)
    new["spec"]["replicas"] = replicas
    return new


def test_apply_creates_with_the_exact_managed_fields_kubernetes_records() -> None:
    created = _apply(None, _config())
    assert created["spec"]["replicas"] == 3
    assert created["metadata"]["managedFields"] == [{
        "manager": "kubectl",
        "operation": "Apply",
        "apiVersion": "apps/v1",
        "time": "2026-01-01T00:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {'k:{"name":"app"}': {".": {}, "f:image": {}, "f:name": {}}}},
                },
            },
        },
    }]


def test_apply_update_then_conflict_with_an_update_manager_then_force() -> None:
    live = _apply(None, _config())
    scaled = _update(live, _scale(live, 5), "kubectl-scale")
    assert _fields(scaled, "kubectl-scale", "Update") == {"f:spec": {"f:replicas": {}}}
    assert "f:replicas" not in _fields(scaled, "kubectl")["f:spec"], "ownership moved to the scaler"

    with pytest.raises(ApiError) as caught:
        _apply(scaled, _config(replicas=3))
    error = caught.value
    assert (error.code, error.reason) == (409, "Conflict")
    assert error.message == 'Apply failed with 1 conflict: conflict with "kubectl-scale" using apps/v1: .spec.replicas'
    assert error.details == {"causes": [{"reason": "FieldManagerConflict",
                                         "message": 'conflict with "kubectl-scale" using apps/v1',
                                         "field": ".spec.replicas"}]}

    forced = _apply(scaled, _config(replicas=3), force=True)
    assert forced["spec"]["replicas"] == 3
    assert "kubectl-scale/Update" not in _entries(forced), "a manager left with no fields is dropped"
    assert "f:replicas" in _fields(forced, "kubectl")["f:spec"]


def test_applying_the_same_value_another_manager_owns_is_shared_ownership() -> None:
    live = _apply(None, _config(replicas=3), "alice")
    both = _apply(live, _config(replicas=3), "bob")
    assert "f:replicas" in _fields(both, "alice")["f:spec"]
    assert "f:replicas" in _fields(both, "bob")["f:spec"]
    # alice stops applying replicas: bob still owns it, so it stays
    alice_config = _config(replicas=None)
    kept = _apply(both, alice_config, "alice")
    assert kept["spec"]["replicas"] == 3
    assert "f:replicas" not in _fields(kept, "alice")["f:spec"]
    # bob stops too: nobody owns it any more, so it is removed
    gone = _apply(kept, _config(replicas=None), "bob")
    assert "replicas" not in gone["spec"]


def test_a_different_value_from_another_applier_conflicts() -> None:
    live = _apply(None, _config(replicas=3), "alice")
    with pytest.raises(ApiError) as caught:
        _apply(live, _config(replicas=4, image="nginx:1.26"), "bob")
    assert caught.value.message == (
        'Apply failed with 2 conflicts: conflicts with "alice":\n'
        '- .spec.replicas\n'
        '- .spec.template.spec.containers[name="app"].image')
    assert [c["field"] for c in caught.value.details["causes"]] == [
        ".spec.replicas", '.spec.template.spec.containers[name="app"].image']


def test_conflicts_across_managers_are_listed_per_manager() -> None:
    live = _apply(None, _config(replicas=3), "alice")
    live = _update(live, _scale(live, 4), "hpa")
    other = copy.deepcopy(live)
    other["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:edited"
    live = _update(live, other, "kubectl-edit")
    with pytest.raises(ApiError) as caught:
        _apply(live, _config(replicas=9, image="nginx:mine"), "bob")
    assert caught.value.message == (
        'Apply failed with 2 conflicts: conflicts with "hpa" using apps/v1:\n- .spec.replicas\n'
        'conflicts with "kubectl-edit" using apps/v1:\n- .spec.template.spec.containers[name="app"].image')


def test_dropping_a_field_from_the_configuration_removes_it() -> None:
    live = _apply(None, _config(paused=True))
    assert live["spec"]["paused"] is True
    assert "paused" not in _apply(live, _config())["spec"]


def test_dropping_an_item_of_an_associative_list_removes_only_that_item() -> None:
    two = _config()
    two["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "busybox"})
    live = _apply(None, two)
    # Another writer adds env to the app container and a third container.
    edited = copy.deepcopy(live)
    edited["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    edited["spec"]["template"]["spec"]["containers"].append({"name": "injected", "image": "istio"})
    live = _update(live, edited, "injector")
    result = _apply(live, _config())
    containers = result["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["app", "injected"]
    assert containers[0]["env"] == [{"name": "A", "value": "1"}]


def test_container_ports_are_keyed_by_port_and_defaulted_protocol() -> None:
    config = _config()
    config["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 80}]
    created = _apply(None, config)
    container = _fields(created, "kubectl")["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"app"}']
    assert container["f:ports"] == {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}}


def test_finalizers_are_a_set_owned_per_value() -> None:
    config = _config()
    config["metadata"]["finalizers"] = ["kaiwo.silogen.ai/finalizer"]
    live = _apply(None, config)
    assert _fields(live, "kubectl")["f:metadata"]["f:finalizers"] == {'v:"kaiwo.silogen.ai/finalizer"': {}}
    other = copy.deepcopy(live)
    other["metadata"]["finalizers"].append("other/finalizer")
    live = _update(live, other, "controller")
    assert _fields(live, "controller", "Update")["f:metadata"]["f:finalizers"] == {'v:"other/finalizer"': {}}
    result = _apply(live, _config())
    assert result["metadata"]["finalizers"] == ["other/finalizer"]


def test_apply_twice_is_a_no_op() -> None:
    live = _apply(None, _config(), now="T1")
    again = _apply(live, _config(), now="T2")
    assert again == live, "an apply that changes nothing keeps the object and the entry's time"


def test_apply_on_main_resource_ignores_status_and_status_apply_owns_only_status() -> None:
    config = _config()
    config["status"] = {"replicas": 7}
    live = _apply(None, config)
    assert "status" not in live
    assert "f:status" not in _fields(live, "kubectl")
    status_config: JsonObj = {"apiVersion": "apps/v1", "kind": "Deployment",
                              "metadata": {"name": "web", "namespace": "default"},
                              "status": {"replicas": 3, "conditions": [{"type": "Available", "status": "True"}]},
                              "spec": {"replicas": 100}}
    with_status = _apply(live, status_config, "controller", subresource="status")
    assert with_status["status"]["replicas"] == 3
    assert with_status["spec"]["replicas"] == 3, "the /status subresource cannot change spec"
    entry = _entries(with_status)["controller/Apply"]
    assert entry["subresource"] == "status"
    assert entry["fieldsV1"] == {"f:status": {"f:conditions": {'k:{"type":"Available"}': {
        ".": {}, "f:status": {}, "f:type": {}}}, "f:replicas": {}}}


def test_kinds_without_a_status_subresource_own_status_on_the_main_resource() -> None:
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}}
    live = _apply(None, config, group="", kind="ConfigMap", api_version="v1", status_subresource=False)
    assert _fields(live, "kubectl") == {"f:data": {"f:a": {}}}


def test_applied_configuration_must_not_carry_managed_fields() -> None:
    config = _config()
    config["metadata"]["managedFields"] = [{"manager": "x"}]
    with pytest.raises(ApiError) as caught:
        _apply(None, config)
    assert (caught.value.code, caught.value.message) == (400, "metadata.managedFields must be nil")


def test_duplicate_keys_in_an_applied_list_are_rejected() -> None:
    config = _config()
    config["spec"]["template"]["spec"]["containers"].append({"name": "app", "image": "dup"})
    with pytest.raises(ApiError) as caught:
        _apply(None, config)
    assert (caught.value.code, caught.value.reason) == (500, "")
    assert caught.value.message == (
        "failed to create typed patch object (default/web; apps/v1, Kind=Deployment): "
        '.spec.template.spec.containers: duplicate entries for key [name="app"]')


def test_apply_to_an_untracked_object_conflicts_with_before_first_apply() -> None:
    live = _apply(None, _config(replicas=2))
    del live["metadata"]["managedFields"]
    with pytest.raises(ApiError) as caught:
        _apply(live, _config(replicas=5), "newcomer")
    assert 'conflict with "before-first-apply" using apps/v1: .spec.replicas' in caught.value.message


def test_custom_resource_lists_follow_the_crd_schema() -> None:
    schema: JsonObj = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "workers": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["groupName"],
                    "items": {"type": "object", "properties": {"groupName": {"type": "string"},
                                                                "replicas": {"type": "integer"}}}},
        "args": {"type": "array", "items": {"type": "string"}},
    }}}}
    config: JsonObj = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"},
                       "spec": {"workers": [{"groupName": "gpu", "replicas": 2}], "args": ["a"]}}
    live = _apply(None, config, group="ray.io", kind="RayCluster", api_version="ray.io/v1", schema=schema)
    assert _fields(live, "kubectl") == {"f:spec": {
        "f:args": {}, "f:workers": {'k:{"groupName":"gpu"}': {".": {}, "f:groupName": {}, "f:replicas": {}}}}}
    # an autoscaler adds a worker group; the applier's next apply keeps it
    scaled = copy.deepcopy(live)
    scaled["spec"]["workers"].append({"groupName": "cpu", "replicas": 1})
    live = _update(live, scaled, "autoscaler", group="ray.io", kind="RayCluster", api_version="ray.io/v1",
                   schema=schema)
    assert _fields(live, "autoscaler", "Update") == {"f:spec": {"f:workers": {
        'k:{"groupName":"cpu"}': {".": {}, "f:groupName": {}, "f:replicas": {}}}}}
    again = _apply(live, config, group="ray.io", kind="RayCluster", api_version="ray.io/v1", schema=schema)
    assert [w["groupName"] for w in again["spec"]["workers"]] == ["gpu", "cpu"]


# ----------------------------------------------------------------------------------------------
# record_update (create / update / classic patches)


def test_create_records_an_update_entry_with_container_markers() -> None:
    obj = _config()
    obj["metadata"]["uid"] = "u-1"
    obj["metadata"]["resourceVersion"] = "1"
    created = _update(None, obj, "kubectl-create", now="T0")
    assert created["metadata"]["managedFields"] == [{
        "manager": "kubectl-create", "operation": "Update", "apiVersion": "apps/v1", "time": "T0",
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                    "f:spec": {"f:containers": {'k:{"name":"app"}': {".": {}, "f:image": {}, "f:name": {}}}},
                },
            },
        },
    }]


def test_custom_resource_update_entries_mark_every_new_object() -> None:
    obj: JsonObj = {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob", "metadata": {"name": "j"},
                    "spec": {"gpus": 8, "ray": {"enabled": True}}}
    created = _update(None, obj, "python", group="kaiwo.silogen.ai", kind="KaiwoJob",
                      api_version="kaiwo.silogen.ai/v1alpha1", status_subresource=True)
    assert _fields(created, "python", "Update") == {
        "f:spec": {".": {}, "f:gpus": {}, "f:ray": {".": {}, "f:enabled": {}}}}


def test_record_update_moves_ownership_and_drops_removed_fields() -> None:
    live = _apply(None, _config(paused=True))
    edited = copy.deepcopy(live)
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:edited"
    del edited["spec"]["paused"]
    result = _update(live, edited, "kubectl-edit", now="T9")
    applier = _fields(result, "kubectl")
    assert "f:image" not in applier["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"app"}']
    assert "f:paused" not in applier["f:spec"]
    entry = _entries(result)["kubectl-edit/Update"]
    assert entry["time"] == "T9"
    assert entry["fieldsV1"] == {"f:spec": {"f:template": {"f:spec": {"f:containers": {
        'k:{"name":"app"}': {"f:image": {}}}}}}}


def test_an_update_that_changes_nothing_adds_no_entry() -> None:
    live = _apply(None, _config())
    assert _update(live, live, "noop") == live


def test_repeated_updates_by_one_manager_accumulate() -> None:
    live = _apply(None, _config())
    first = _update(live, _scale(live, 4), "ctl", now="T1")
    labelled = copy.deepcopy(first)
    labelled["metadata"]["labels"]["team"] = "ml"
    second = _update(first, labelled, "ctl", now="T2")
    entry = _entries(second)["ctl/Update"]
    assert entry["time"] == "T2"
    assert entry["fieldsV1"] == {"f:metadata": {"f:labels": {"f:team": {}}}, "f:spec": {"f:replicas": {}}}


def test_status_updates_are_recorded_with_their_subresource() -> None:
    live = _apply(None, _config())
    new = copy.deepcopy(live)
    new["status"] = {"replicas": 3}
    new["spec"]["replicas"] = 99  # ignored: /status cannot own spec
    result = _update(live, new, "deployment-controller", subresource="status")
    entry = _entries(result)["deployment-controller/Update"]
    assert entry["subresource"] == "status"
    assert entry["fieldsV1"] == {"f:status": {"f:replicas": {}}}
    assert "f:replicas" in _fields(result, "kubectl")["f:spec"]


def test_client_supplied_managed_fields_replace_the_live_ones() -> None:
    live = _apply(None, _config())
    reset = copy.deepcopy(live)
    reset["metadata"]["managedFields"] = [{}]
    result = _update(live, reset, "kubectl-edit")
    assert "managedFields" not in result["metadata"]
    kept = copy.deepcopy(live)
    kept["metadata"]["managedFields"] = []  # empty means "not sent": the live ones stay
    assert _update(live, kept, "kubectl-edit")["metadata"]["managedFields"] == live["metadata"]["managedFields"]


def test_managed_fields_are_sorted_like_the_apiserver() -> None:
    live = _apply(None, _config(), "zed", now="T5")
    live = _update(live, _scale(live, 9), "alpha", now="T6")
    live = _apply(live, _config(replicas=None, paused=True), "mid", now="T7")
    assert [(e["operation"], e["manager"]) for e in live["metadata"]["managedFields"]] == [
        ("Apply", "zed"), ("Apply", "mid"), ("Update", "alpha")]


@pytest.mark.parametrize(
    ("user_agent", "manager"),
    [("kubectl-client-side-apply/v1.31.0 (linux/amd64) kubernetes/abc", "kubectl-client-side-apply"),
     ("OpenAPI-Generator/37.0.2/python", "OpenAPI-Generator"),
     ("kubectl-edit", "kubectl-edit"), ("Python/3.11 aiohttp/3.14", "Python"), (None, "")],
)
def test_manager_from_user_agent(user_agent: str | None, manager: str) -> None:
    assert manager_from_user_agent(user_agent) == manager


# ----------------------------------------------------------------------------------------------
# properties

_names = st.sampled_from(["a", "b", "c", "d"])
_containers = st.lists(
    st.fixed_dictionaries({"name": _names, "image": st.sampled_from(["x", "y"])},
                          optional={"env": st.lists(st.fixed_dictionaries({"name": _names, "value": st.text("01", max_size=2)}),
                                                    min_size=1, max_size=3, unique_by=lambda e: e["name"]),
                                    "args": st.lists(st.text("ab", max_size=2), max_size=2)}),
    min_size=1, max_size=3, unique_by=lambda c: c["name"])


def _deployment_config(containers: list[JsonObj], replicas: int, labels: JsonObj, finalizers: list[str]) -> JsonObj:
    # Empty lists and maps are left out, as Go's omitempty leaves them out of a built-in object.
    metadata: JsonObj = {"name": "web"}
    if labels:
        metadata["labels"] = labels
    if finalizers:
        metadata["finalizers"] = finalizers
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata,
            "spec": {"replicas": replicas, "template": {"spec": {"containers": containers}}}}


_configs = st.builds(
    _deployment_config,
    _containers, st.integers(0, 3), st.dictionaries(_names, st.text("xy", max_size=2), max_size=3),
    st.lists(_names, max_size=3, unique=True))


@given(_configs, _configs)
def test_applying_a_configuration_twice_is_a_no_op(first: JsonObj, second: JsonObj) -> None:
    live = server_side_apply(None, first, manager="m", force=False, api_version="apps/v1", group="apps",
                             kind="Deployment", subresource=None, now="T1")
    once = server_side_apply(live, second, manager="m", force=False, api_version="apps/v1", group="apps",
                             kind="Deployment", subresource=None, now="T2")
    twice = server_side_apply(once, second, manager="m", force=False, api_version="apps/v1", group="apps",
                              kind="Deployment", subresource=None, now="T3")
    assert twice == once


@given(_configs, _configs)
def test_a_sole_applier_converges_on_its_configuration(first: JsonObj, second: JsonObj) -> None:
    """With one manager, the object after any apply holds exactly the applied configuration."""
    live = server_side_apply(None, first, manager="m", force=False, api_version="apps/v1", group="apps",
                             kind="Deployment", subresource=None, now="T1")
    result = server_side_apply(live, second, manager="m", force=False, api_version="apps/v1", group="apps",
                               kind="Deployment", subresource=None, now="T2")
    del result["metadata"]["managedFields"]
    assert _canonical(result) == _canonical(second)


def _canonical(value: Any) -> Any:
    """Order-insensitive for name-keyed lists and set lists (apply keeps live order for items
    both sides have); drops the empty maps apply leaves when it removes a map's last entry."""
    if isinstance(value, dict):
        out = {k: _canonical(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v != {}}
    if isinstance(value, list):
        items = [_canonical(v) for v in value]
        if all(isinstance(i, dict) and "name" in i for i in items):
            return sorted(items, key=lambda i: i["name"])
        return items
    return value


# ----------------------------------------------------------------------------------------------
# upgrading from client-side apply (`kubectl apply` then `kubectl apply --server-side`)

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _client_side_applied(config: JsonObj) -> JsonObj:
    obj = copy.deepcopy(config)
    obj["metadata"].setdefault("annotations", {})[LAST_APPLIED] = json.dumps(config) + "\n"
    return _update(None, obj, "kubectl-client-side-apply")


def test_kubectl_server_side_apply_takes_over_fields_from_last_applied() -> None:
    live = _client_side_applied(_config(replicas=2))
    edited = copy.deepcopy(live)
    edited["spec"]["paused"] = True  # not in last-applied: owned by kubectl-edit only
    live = _update(live, edited, "kubectl-edit")
    upgraded = _apply(live, _config(replicas=4, image="nginx:2"), "kubectl")
    assert upgraded["spec"]["replicas"] == 4
    assert "f:replicas" in _fields(upgraded, "kubectl")["f:spec"]
    csa = _fields(upgraded, "kubectl-client-side-apply", "Update")
    assert "f:replicas" not in csa["f:spec"], "ownership moved as with force"
    synced = json.loads(upgraded["metadata"]["annotations"][LAST_APPLIED])
    assert synced == _config(replicas=4, image="nginx:2"), "the annotation follows the server-side apply"

    with pytest.raises(ApiError) as caught:
        _apply(upgraded, _config(replicas=4, image="nginx:2", paused=False), "kubectl")
    assert caught.value.message == 'Apply failed with 1 conflict: conflict with "kubectl-edit" using apps/v1: .spec.paused'


def test_other_managers_get_no_last_applied_allowance() -> None:
    live = _client_side_applied(_config(replicas=2))
    with pytest.raises(ApiError) as caught:
        _apply(live, _config(replicas=4), "kaiwo")
    assert "kubectl-client-side-apply" in caught.value.message
    assert LAST_APPLIED in _apply(live, _config(replicas=4), "kaiwo", force=True)["metadata"]["annotations"]


def test_more_than_ten_update_managers_fold_the_oldest_into_ancient_changes() -> None:
    live = _apply(None, _config())
    for i in range(12):
        labelled = copy.deepcopy(live)
        labelled["metadata"]["labels"][f"l{i}"] = "x"
        live = _update(live, labelled, f"writer-{i:02d}", now=f"2026-01-01T00:00:{i:02d}Z")
    updates = [e for e in live["metadata"]["managedFields"] if e["operation"] == "Update"]
    assert len(updates) == 10
    ancient = next(e for e in updates if e["manager"] == "ancient-changes")
    # writer-00 is the first of its apiVersion (kept as the bucket's seed), writer-01 and -02 fold in
    assert set(ancient["fieldsV1"]["f:metadata"]["f:labels"]) == {"f:l0", "f:l1", "f:l2"}
    assert ancient["time"] == "2026-01-01T00:00:02Z"
    assert {e["manager"] for e in updates} >= {f"writer-{i:02d}" for i in range(3, 12)}


def test_record_update_never_fails_a_write_over_bookkeeping() -> None:
    live = _apply(None, _config())
    broken = copy.deepcopy(live)
    broken["spec"]["template"]["spec"]["containers"].append({"image": "nameless"})
    result = _update(live, broken, "someone")
    assert "managedFields" not in result["metadata"]
    assert result["spec"] == broken["spec"]


def test_applied_list_item_without_its_key_is_reported_with_its_path() -> None:
    config = _config()
    config["spec"]["template"]["spec"]["containers"].append({"image": "nameless"})
    with pytest.raises(ApiError) as caught:
        _apply(None, config)
    assert caught.value.message.endswith(
        '.spec.template.spec.containers: element 1: associative list with keys has an element that omits key '
        'field "name" (and doesn\'t have default value)')


def test_applying_a_configuration_identical_to_the_live_object_leaves_both_untouched() -> None:
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"},
              "status": {"x": 1}}
    live = copy.deepcopy(config)
    result = _apply(live, config, group="", kind="ConfigMap", api_version="v1")
    assert result["data"] == {"a": "1"}
    result["data"]["a"] = "changed"
    assert config["data"]["a"] == "1" and live["data"]["a"] == "1"
