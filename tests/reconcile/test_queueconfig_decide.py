"""Pure KaiwoQueueConfig decisions: the config object, node side effects, and the Kueue sync plan."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kaiwo_ray.api.config import KaiwoConfigSpec, NodesConfig
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.queueconfig import KaiwoQueueConfigSpec
from kaiwo_ray.nodes import default_nodes
from kaiwo_ray.reconcile import queueconfig as qc

KQC_UID = "kqc-uid"
CQ_UID = "cq-uid"
OWNER = {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoQueueConfig", "name": "kaiwo", "uid": KQC_UID,
         "controller": True, "blockOwnerDeletion": True}


def _kqc(spec: JsonObj, status: str = "") -> JsonObj:
    obj: JsonObj = {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoQueueConfig",
                    "metadata": {"name": "kaiwo", "uid": KQC_UID, "resourceVersion": "5"}, "spec": spec}
    if status:
        obj["status"] = {"status": status}
    return obj


def _default_spec(config: KaiwoConfigSpec | None = None) -> JsonObj:
    decision = qc.decide_queue_config(None, config or KaiwoConfigSpec(), default_nodes())
    assert decision.create is not None
    spec: JsonObj = decision.create["spec"]
    return spec


def _cq_entry(name: str = "fizz", cpu: Any = "4", memory: Any = "8Gi", namespaces: list[str] | None = None) -> JsonObj:
    return {"name": name, "namespaces": namespaces or [], "spec": {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [
            {"name": "foo", "resources": [{"name": "cpu", "nominalQuota": cpu},
                                          {"name": "memory", "nominalQuota": memory}]}]}]}}


def _desired(spec: JsonObj) -> dict[str, list[JsonObj]]:
    model = qc.with_identity(qc.parse_spec(_kqc(spec)), _kqc(spec))
    return qc.desired_cluster_objects(model, kueue_version="v1beta2")


def _live(body: JsonObj, uid: str = "obj-uid", rv: str = "7") -> JsonObj:
    """`body` as the API server would return it after a create."""
    live = copy.deepcopy(body)
    live["metadata"] |= {"uid": uid, "resourceVersion": rv, "managedFields": [{"manager": "kaiwo-ray"}]}
    return live


# --- the KaiwoQueueConfig object ---------------------------------------------------------------------


def test_absent_config_is_created_from_the_nodes() -> None:
    decision = qc.decide_queue_config(None, KaiwoConfigSpec(), default_nodes())
    assert decision.create is not None and decision.update_spec is None and not decision.error
    assert decision.create["metadata"] == {"name": "kaiwo"}
    spec = decision.create["spec"]
    assert [q["name"] for q in spec["clusterQueues"]] == ["kaiwo"]
    assert {f["name"] for f in spec["resourceFlavors"]} == {
        "cpu-only-0gpu-57core-225gi", "amd-mi300x-8gpu-345core-2038gi",
        "nvidia-nvidiah10080gbhbm3-8gpu-201core-1813gi"}
    assert decision.spec is not None and decision.spec.cluster_queues[0].name == "kaiwo"  # synced as created


def test_existing_config_is_kept_without_dynamic_mode() -> None:
    spec = {"resourceFlavors": [{"name": "foo"}], "clusterQueues": [_cq_entry()]}
    decision = qc.decide_queue_config(_kqc(spec), KaiwoConfigSpec(), default_nodes())
    assert decision.create is None and decision.update_spec is None and not decision.error
    assert decision.spec is not None and [f.name for f in decision.spec.resource_flavors] == ["foo"]


def test_unnamed_topologies_are_dropped_by_an_update() -> None:
    levels = {"levels": [{"nodeLabel": "a"}]}
    spec = {"topologies": [{"metadata": {"name": "t"}, "spec": levels}, {"metadata": {}, "spec": levels}]}
    decision = qc.decide_queue_config(_kqc(spec), KaiwoConfigSpec(), [])
    assert decision.update_spec is not None
    assert [t["metadata"]["name"] for t in decision.update_spec["topologies"]] == ["t"]


def test_dynamic_mode_writes_only_when_the_nodes_changed_the_spec() -> None:
    config = KaiwoConfigSpec(dynamically_update_default_cluster_queue=True)
    steady = qc.decide_queue_config(_kqc(_default_spec(config)), config, default_nodes())
    assert steady.update_spec is None and steady.create is None

    # The same spec as the API server may return it: integer quantities instead of strings.
    as_stored = _default_spec(config)
    for flavor in as_stored["clusterQueues"][0]["spec"]["resourceGroups"][0]["flavors"]:
        for resource in flavor["resources"]:
            resource["nominalQuota"] = int(resource["nominalQuota"])
    assert qc.decide_queue_config(_kqc(as_stored), config, default_nodes()).update_spec is None

    nodes = default_nodes()
    nodes[2]["spec"]["unschedulable"] = True  # one of the two MI300X nodes cordoned
    changed = qc.decide_queue_config(_kqc(_default_spec(config)), config, nodes)
    assert changed.update_spec is not None
    flavors = changed.update_spec["clusterQueues"][0]["spec"]["resourceGroups"][0]["flavors"]
    amd = next(f for f in flavors if f["name"].startswith("amd-"))
    assert {r["name"]: r["nominalQuota"] for r in amd["resources"]}["amd.com/gpu"] == "8"


def test_dynamic_mode_keeps_other_entries() -> None:
    config = KaiwoConfigSpec(dynamically_update_default_cluster_queue=True)
    spec = _default_spec(config)
    spec["clusterQueues"].append(_cq_entry("team"))
    spec["resourceFlavors"].append({"name": "foo"})
    decision = qc.decide_queue_config(_kqc(spec), config, default_nodes())
    assert decision.update_spec is None
    assert decision.spec is not None and [q.name for q in decision.spec.cluster_queues] == ["kaiwo", "team"]


def test_invalid_spec_is_an_error_not_an_exception() -> None:
    bad = _cq_entry()
    bad["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()
    decision = qc.decide_queue_config(_kqc({"clusterQueues": [bad]}), KaiwoConfigSpec(), [])
    assert decision.reason == "KaiwoQueueConfigInvalidSpec"
    assert "coveredResources" in decision.error and decision.spec is None


def test_nodes_that_cannot_form_a_queue_are_an_error() -> None:
    nodes = []
    for index in range(17):  # 17 pools: more flavors than one Kueue resource group holds
        node = default_nodes()[0]
        node["metadata"]["name"] = f"n{index}"
        node["status"]["capacity"]["cpu"] = str(10 + 2 * index)
        nodes.append(node)
    decision = qc.decide_queue_config(None, KaiwoConfigSpec(), nodes)
    assert decision.reason == "KaiwoQueueConfigNodeDiscoveryFailed" and "17 node pools" in decision.error
    assert decision.create is None


def test_status_is_written_only_on_change() -> None:
    assert qc.status_patch(_kqc({}), ok=True) == {"status": {"status": "READY"}}
    assert qc.status_patch(_kqc({}, status="READY"), ok=True) is None
    assert qc.status_patch(_kqc({}, status="READY"), ok=False) == {"status": {"status": "FAILED"}}


# --- nodes -----------------------------------------------------------------------------------------


def test_node_patches_add_missing_pool_labels_only() -> None:
    nodes = default_nodes()
    patches = {p.name: p.patch for p in qc.node_patches(nodes, KaiwoConfigSpec())}
    assert patches["gpu-amd-mi300x-01"] == {"metadata": {"labels": {
        "kaiwo/worker": "true", "kaiwo/nodepool": "amd-mi300x-8gpu-345core-2038gi", "kaiwo/gpu-model": "mi300x"}}}
    assert "kaiwo/gpu-model" not in patches["cpu-epyc-01"]["metadata"]["labels"]
    for node in nodes:
        node["metadata"]["labels"] |= patches[node["metadata"]["name"]]["metadata"]["labels"]
    assert qc.node_patches(nodes, KaiwoConfigSpec()) == []  # labelled: nothing to write


def test_startup_topology_labels_are_added_only_where_absent() -> None:
    nodes = default_nodes()
    del nodes[0]["metadata"]["labels"]["kaiwo/topology-block"]
    nodes[1]["spec"]["unschedulable"] = True  # cordoned: no pool labels, but the topology labels apply
    for node in nodes[1:]:
        del node["metadata"]["labels"]["kaiwo/topology-rack"]
    patches = {p.name: p.patch["metadata"]["labels"] for p in qc.node_patches(nodes, KaiwoConfigSpec(),
                                                                               startup_labels=True)}
    assert patches["cpu-epyc-01"]["kaiwo/topology-block"] == "block-a"
    assert "kaiwo/topology-rack" not in patches["cpu-epyc-01"]
    assert patches["gpu-amd-mi300x-01"] == {"kaiwo/topology-rack": "rack-a"}
    without = {p.name: p.patch["metadata"]["labels"] for p in qc.node_patches(nodes, KaiwoConfigSpec())}
    assert "gpu-amd-mi300x-01" not in without


def test_gpu_taint_is_appended_with_the_resource_version() -> None:
    config = KaiwoConfigSpec(nodes=NodesConfig(add_taints_to_gpu_nodes=True))
    nodes = default_nodes()
    nodes[1]["spec"]["taints"] = [{"key": "other", "effect": "NoExecute"}]
    nodes[1]["metadata"]["resourceVersion"] = "41"
    patches = {p.name: p.patch for p in qc.node_patches(nodes, config)}
    assert patches["gpu-amd-mi300x-01"]["spec"]["taints"] == [
        {"key": "other", "effect": "NoExecute"},
        {"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoSchedule"}]
    assert patches["gpu-amd-mi300x-01"]["metadata"]["resourceVersion"] == "41"
    assert "spec" not in patches["cpu-epyc-01"]


# --- ownership and the plan for cluster-scoped kinds -----------------------------------------------


def test_ownership() -> None:
    assert qc.ownership({"metadata": {"ownerReferences": [OWNER]}}, KQC_UID) == "ours"
    previous = dict(OWNER, uid="old")
    assert qc.ownership({"metadata": {"ownerReferences": [previous]}}, KQC_UID) == "previous"
    other = dict(OWNER, name="not-kaiwo", uid="x")
    assert qc.ownership({"metadata": {"ownerReferences": [other]}}, KQC_UID) == "foreign"
    assert qc.ownership({"metadata": {}}, KQC_UID) == "foreign"


def test_desired_objects_are_labelled_and_owned() -> None:
    desired = _desired({"resourceFlavors": [{"name": "foo"}], "clusterQueues": [_cq_entry()],
                        "workloadPriorityClasses": [{"metadata": {"name": "high"}, "value": 10}]})
    for kind in (qc.RESOURCE_FLAVOR, qc.CLUSTER_QUEUE, qc.PRIORITY_CLASS):
        (body,) = desired[kind]
        assert body["metadata"]["labels"] == {qc.MANAGED_BY_LABEL: qc.MANAGED_BY}
        assert body["metadata"]["ownerReferences"] == [OWNER]
        assert body["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert desired[qc.TOPOLOGY] == []


def test_plan_creates_updates_and_deletes_only_ours() -> None:
    desired = _desired({"resourceFlavors": [{"name": "new"}, {"name": "same"}, {"name": "drifted"}]})[
        qc.RESOURCE_FLAVOR]
    by_name = {b["metadata"]["name"]: b for b in desired}
    drifted = _live(by_name["drifted"])
    drifted["spec"]["nodeLabels"]["extra"] = "x"  # a label removed from the KaiwoQueueConfig must go
    drifted["metadata"]["labels"]["team"] = "a"
    ours_dropped = _live(by_name["same"], uid="u2")
    ours_dropped["metadata"]["name"] = "dropped"
    foreign = {"metadata": {"name": "foreign", "uid": "u3"}, "spec": {}}
    live = [_live(by_name["same"]), drifted, ours_dropped, foreign]
    actions = qc.plan_cluster_objects(qc.RESOURCE_FLAVOR, desired, live, KQC_UID)
    assert [(a.verb, a.name) for a in actions] == [("create", "new"), ("update", "drifted"), ("delete", "dropped")]
    update = actions[1].body
    assert update is not None
    assert update["spec"] == {"nodeLabels": {"kaiwo/worker": "true"}}
    assert update["metadata"]["resourceVersion"] == "7"  # optimistic lock on the replace
    assert update["metadata"]["labels"] == {"team": "a", qc.MANAGED_BY_LABEL: qc.MANAGED_BY}
    assert "managedFields" not in update["metadata"]


def test_a_foreign_object_with_a_desired_name_is_reported_not_touched() -> None:
    desired = _desired({"resourceFlavors": [{"name": "taken"}]})[qc.RESOURCE_FLAVOR]
    actions = qc.plan_cluster_objects(qc.RESOURCE_FLAVOR, desired, [{"metadata": {"name": "taken"}}], KQC_UID)
    assert [(a.verb, a.name) for a in actions] == [("fail", "taken")]
    assert "not managed by KaiwoQueueConfig" in actions[0].message


def test_previous_incarnations_objects_are_adopted() -> None:
    desired = _desired({"resourceFlavors": [{"name": "foo"}]})[qc.RESOURCE_FLAVOR]
    old = _live(desired[0])
    old["metadata"]["ownerReferences"] = [dict(OWNER, uid="old-uid"), {"kind": "Other", "name": "x", "uid": "o"}]
    (action,) = qc.plan_cluster_objects(qc.RESOURCE_FLAVOR, desired, [old], KQC_UID)
    assert action.verb == "update" and action.body is not None
    assert action.body["metadata"]["ownerReferences"] == [{"kind": "Other", "name": "x", "uid": "o"}, OWNER]


def test_terminating_objects_are_waited_for() -> None:
    desired = _desired({"resourceFlavors": [{"name": "foo"}]})[qc.RESOURCE_FLAVOR]
    going = _live(desired[0])
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert [a.verb for a in qc.plan_cluster_objects(qc.RESOURCE_FLAVOR, desired, [going], KQC_UID)] == ["wait"]
    going["metadata"]["name"] = "not-desired"
    assert qc.plan_cluster_objects(qc.RESOURCE_FLAVOR, [], [going], KQC_UID) == []


def test_missing_label_or_owner_is_drift() -> None:
    (body,) = _desired({"resourceFlavors": [{"name": "foo"}]})[qc.RESOURCE_FLAVOR]
    live = _live(body)
    assert qc.same_object(qc.RESOURCE_FLAVOR, body, live)
    unlabelled = copy.deepcopy(live)
    unlabelled["metadata"]["labels"] = {}
    assert not qc.same_object(qc.RESOURCE_FLAVOR, body, unlabelled)


# --- semantic comparison ---------------------------------------------------------------------------


def _cq_body(**kwargs: Any) -> JsonObj:
    (body,) = _desired({"clusterQueues": [_cq_entry(**kwargs)]})[qc.CLUSTER_QUEUE]
    return body


def test_cluster_queue_specs_compare_by_meaning() -> None:
    body = _cq_body(cpu="4", memory="8Gi")
    live = _live(body)
    spec = live["spec"]
    spec["resourceGroups"][0]["flavors"][0]["resources"].reverse()  # order follows coveredResources
    spec["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "8589934592"  # 8Gi in bytes
    spec["resourceGroups"][0]["flavors"][0]["resources"][1]["nominalQuota"] = 4
    for key in ("queueingStrategy", "stopPolicy", "flavorFungibility", "preemption"):
        spec.pop(key)  # Kueue's defaults
    spec["someFutureKueueField"] = {"x": 1}
    assert qc.same_object(qc.CLUSTER_QUEUE, body, live)


def test_cluster_queue_changes_are_seen() -> None:
    body = _cq_body(cpu="4")
    assert not qc.same_object(qc.CLUSTER_QUEUE, body, _live(_cq_body(cpu="5")))
    with_limit = _live(body)
    with_limit["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = "2"
    assert not qc.same_object(qc.CLUSTER_QUEUE, body, with_limit)  # a removed field is drift too
    other_cohort = _live(body)
    other_cohort["spec"]["cohortName"] = "elsewhere"
    assert not qc.same_object(qc.CLUSTER_QUEUE, body, other_cohort)


def test_v1beta1_spelling_normalises_like_v1beta2() -> None:
    v1beta1 = {"cohort": "c", "flavorFungibility": {"whenCanBorrow": "Borrow"}, "admissionChecks": ["ac"]}
    v1beta2 = {"cohortName": "c", "flavorFungibility": {"whenCanBorrow": "MayStopSearch"},
               "admissionChecksStrategy": {"admissionChecks": [{"name": "ac", "onFlavors": []}]}}
    assert qc.normalise_cluster_queue_spec(v1beta1) == qc.normalise_cluster_queue_spec(v1beta2)


def test_priority_classes_compare_value_only() -> None:
    spec = {"workloadPriorityClasses": [{"metadata": {"name": "p"}, "value": 10, "description": "a"}]}
    (body,) = _desired(spec)[qc.PRIORITY_CLASS]
    live = _live(body)
    live["description"] = "b"
    assert qc.same_object(qc.PRIORITY_CLASS, body, live)
    live["value"] = 11
    assert not qc.same_object(qc.PRIORITY_CLASS, body, live)


# --- LocalQueues -----------------------------------------------------------------------------------


def _cq_live(uid: str = CQ_UID, owner_uid: str = KQC_UID) -> dict[str, JsonObj]:
    return {"fizz": {"metadata": {"name": "fizz", "uid": uid, "ownerReferences": [dict(OWNER, uid=owner_uid)]}}}


def _lq(namespace: str, *, controller: bool = True, uid: str = CQ_UID) -> JsonObj:
    ref = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "name": "fizz", "uid": uid}
    if controller:
        ref["controller"] = True
    return {"metadata": {"name": "fizz", "namespace": namespace, "ownerReferences": [ref]},
            "spec": {"clusterQueue": "fizz"}}


def _namespaces(*names: str, terminating: tuple[str, ...] = ()) -> dict[str, JsonObj]:
    return {n: {"metadata": {"name": n, **({"deletionTimestamp": "t"} if n in terminating else {})}}
            for n in (*names, *terminating)}


def _lq_plan(namespaces_listed: list[str], live: list[JsonObj], existing: dict[str, JsonObj],
             cluster_queues: dict[str, JsonObj] | None = None) -> list[qc.Action]:
    spec = KaiwoQueueConfigSpec.model_validate({"clusterQueues": [_cq_entry(namespaces=namespaces_listed)]})
    return qc.plan_local_queues(spec, _cq_live() if cluster_queues is None else cluster_queues, live, existing,
                                kqc_uid=KQC_UID, kueue_version="v1beta2")


def test_local_queues_are_created_in_existing_namespaces() -> None:
    actions = _lq_plan(["a", "b", "c"], [], _namespaces("a", terminating=("c",)))
    assert [(a.verb, a.namespace) for a in actions] == [("create", "a"), ("fail", "b"), ("fail", "c")]
    body = actions[0].body
    assert body is not None
    assert body["metadata"]["ownerReferences"][0]["uid"] == CQ_UID
    assert body["metadata"]["ownerReferences"][0]["controller"] is True
    assert body["metadata"]["labels"] == {qc.MANAGED_BY_LABEL: qc.MANAGED_BY}
    assert body["spec"] == {"clusterQueue": "fizz"}
    assert "does not exist" in actions[1].message and "is being deleted" in actions[2].message


def test_existing_local_queues_are_never_rewritten() -> None:
    foreign = {"metadata": {"name": "fizz", "namespace": "a"}, "spec": {"clusterQueue": "fizz"}}
    assert _lq_plan(["a"], [foreign], _namespaces("a")) == []


def test_local_queues_of_dropped_namespaces_are_deleted_when_ours() -> None:
    live = [_lq("a"), _lq("b"), _lq("c", controller=False), _lq("d", uid="someone-elses-cq")]
    actions = _lq_plan(["a"], live, _namespaces("a", "b", "c", "d"))
    assert sorted((a.verb, a.namespace) for a in actions) == [("delete", "b"), ("delete", "c")]
    # The list emptied: ours go, lazily created ones (non-controller reference) stay for workloads.
    actions = _lq_plan([], live, _namespaces("a", "b", "c", "d"))
    assert sorted((a.verb, a.namespace) for a in actions) == [("delete", "a"), ("delete", "b")]


def test_no_local_queues_for_a_cluster_queue_that_is_not_ours() -> None:
    assert _lq_plan(["a"], [], _namespaces("a"), cluster_queues={}) == []
    assert _lq_plan(["a"], [], _namespaces("a"), cluster_queues=_cq_live(owner_uid="someone")) == []


# --- events, bodies ----------------------------------------------------------------------------------


def test_event_reasons_and_messages() -> None:
    event = qc.success_event("ClusterQueue", "Create", "kaiwo")
    assert (event.type, event.reason, event.message) == (
        "Normal", "KaiwoQueueConfigClusterQueueCreated", "Created ClusterQueue /kaiwo")
    failure = qc.failure_event("LocalQueue", "Create", "fizz", "ns1", "boom")
    assert (failure.type, failure.reason, failure.message) == (
        "Warning", "KaiwoQueueConfigLocalQueueCreateFailed", "Failed to create LocalQueue ns1/fizz: boom")


def test_failure_memory_reports_each_distinct_failure_once() -> None:
    memory = qc.FailureMemory()
    key = ("LocalQueue", "Create", "fizz", "ns1")
    assert memory.is_new(key, "boom")
    assert not memory.is_new(key, "boom")
    assert memory.is_new(key, "other")
    memory.clear("LocalQueue", "fizz", "ns1")
    assert memory.is_new(key, "other")


def test_without_finalizer() -> None:
    live = {"metadata": {"resourceVersion": "3", "finalizers": ["a", qc.RESOURCE_IN_USE_FINALIZER]}}
    assert qc.without_finalizer(live) == {"metadata": {"resourceVersion": "3", "finalizers": ["a"]}}
    assert qc.without_finalizer({"metadata": {"finalizers": ["a"]}}) is None


@pytest.mark.parametrize("target", [qc.TOPOLOGY, qc.RESOURCE_FLAVOR, qc.CLUSTER_QUEUE, qc.PRIORITY_CLASS])
def test_default_config_objects_equal_themselves_after_a_round_trip(target: str) -> None:
    model = qc.with_identity(qc.parse_spec(_kqc(_default_spec())), _kqc({}))
    desired = qc.desired_cluster_objects(model, kueue_version="v1beta2")[target]
    live = [_live(body, uid=f"u{i}") for i, body in enumerate(desired)]
    assert qc.plan_cluster_objects(target, desired, live, KQC_UID) == []


def test_failure_memory_forgets_what_did_not_recur() -> None:
    memory = qc.FailureMemory()
    gone, kept = ("LocalQueue", "Create", "fizz", "ns1"), ("LocalQueue", "Create", "fizz", "ns2")
    memory.is_new(gone, "boom")
    memory.is_new(kept, "boom")
    memory.retain({kept})
    assert memory.is_new(gone, "boom")
    assert not memory.is_new(kept, "boom")
