"""Kueue's refusals of ClusterQueues and ResourceFlavors (kaiwo_sandbox/cluster/kueue/validation.py):
as pure functions, case by case with Kueue's words, and once through the API server over HTTP
(kubectl and the `kubernetes` package), as a real cluster answers them."""

from __future__ import annotations

import copy
import subprocess
from typing import Any

import kubernetes
import pytest
import yaml
from kubernetes.client import ApiException

from kaiwo_sandbox.cluster.kueue import validation as v
from kaiwo_sandbox.contracts import CLUSTERQUEUES, RESOURCEFLAVORS, ApiError, JsonObj

GPU = "amd.com/gpu"


def cq(cohort: str | None = None, **quota: Any) -> JsonObj:
    spec: JsonObj = {"resourceGroups": [{"coveredResources": ["cpu", GPU], "flavors": [
        {"name": "mi300x", "resources": [{"name": "cpu", "nominalQuota": 64},
                                         {"name": GPU, "nominalQuota": 8, **quota}]}]}]}
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "team-a"},
            "spec": spec}


def texts(causes: list[JsonObj]) -> list[str]:
    return [f"{c['field']}: {c['message']}" for c in causes]


def refusal(obj: JsonObj, old: JsonObj | None = None) -> ApiError:
    gvr = CLUSTERQUEUES if obj.get("kind") == "ClusterQueue" else RESOURCEFLAVORS
    with pytest.raises(ApiError) as refused:
        v.check("CREATE" if old is None else "UPDATE", gvr, obj, old)
    return refused.value


def test_a_valid_queue_passes_both_steps() -> None:
    for body in (cq(), cq("org", borrowingLimit=4, lendingLimit=8), cq("org", lendingLimit="0")):
        assert v.cluster_queue_schema_causes(body) == []
        assert v.cluster_queue_webhook_causes(body) == []
        v.check("CREATE", CLUSTERQUEUES, body, None)


def test_lending_limit_over_the_nominal_quota_is_the_webhooks_403() -> None:
    err = refusal(cq("org", lendingLimit=12))
    assert err.code == 403
    assert err.message == ('admission webhook "vclusterqueue.kb.io" denied the request: '
                           'spec.resourceGroups[0].flavors[0].resources[1].lendingLimit: Invalid value: "12": '
                           'must be less than or equal to the nominalQuota')


def test_limits_without_a_cohort() -> None:
    # borrowingLimit: the CRD's CEL rule answers first (422), the webhook is never asked.
    err = refusal(cq(borrowingLimit=4))
    assert err.code == 422
    assert err.message == ('ClusterQueue.kueue.x-k8s.io "team-a" is invalid: spec: Invalid value: "object": '
                           'borrowingLimit must be nil when cohort is empty')
    # lendingLimit has no CEL rule: the webhook's message.
    assert texts(v.cluster_queue_webhook_causes(cq(lendingLimit=4))) == [
        'spec.resourceGroups[0].flavors[0].resources[1].lendingLimit: Invalid value: "4": '
        "must be nil when cohort is empty"]


def test_flavors_repeated_across_resource_groups_and_covered_resources_mismatch() -> None:
    body = cq()
    group = copy.deepcopy(body["spec"]["resourceGroups"][0])
    group["coveredResources"] = ["memory"]
    group["flavors"][0]["resources"] = [{"name": "cpu", "nominalQuota": "1Gi"}]
    body["spec"]["resourceGroups"].append(group)
    assert texts(v.cluster_queue_webhook_causes(body)) == [
        'spec.resourceGroups[1].flavors[0].resources[0].name: Invalid value: "cpu": '
        "must match the name in coveredResources",
        'spec.resourceGroups[1].flavors[0].name: Duplicate value: "mi300x"']
    short = cq()
    short["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()
    assert texts(v.cluster_queue_schema_causes(short)) == [
        'spec.resourceGroups[0]: Invalid value: "object": '
        "flavors must have the same number of resources as the coveredResources"]


def test_schema_limits_names_and_enums() -> None:
    body = cq("Org_1")
    body["spec"]["resourceGroups"] *= 17
    body["spec"]["queueingStrategy"] = "LIFO"
    assert texts(v.cluster_queue_schema_causes(body)) == [
        "spec.resourceGroups: Too many: 17: must have at most 16 items",
        f"spec.cohortName: Invalid value: \"Org_1\": spec.cohortName in body should match '{v.DNS1123_SUBDOMAIN}'",
        'spec.queueingStrategy: Unsupported value: "LIFO": supported values: "StrictFIFO", "BestEffortFIFO"']
    bad_flavor = cq()
    bad_flavor["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "MI300X"
    assert [c["field"] for c in v.cluster_queue_schema_causes(bad_flavor)] == ["spec.resourceGroups[0].flavors[0].name"]


def test_preemption_and_fungibility_combinations() -> None:
    body = cq("org")
    body["spec"]["preemption"] = {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}
    body["spec"]["flavorFungibility"] = {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor",
                                         "preference": "BorrowingOverPreemption"}
    assert texts(v.cluster_queue_schema_causes(body)) == [
        'spec.preemption: Invalid value: "object": reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never',
        'spec.flavorFungibility: Invalid value: "object": preference can only be set when both whenCanBorrow and '
        "whenCanPreempt are TryNextFlavor"]
    body["spec"]["preemption"]["reclaimWithinCohort"] = "Any"
    body["spec"]["flavorFungibility"]["whenCanBorrow"] = "TryNextFlavor"
    assert v.cluster_queue_schema_causes(body) == []


def test_negative_quota_bad_resource_name_and_selector() -> None:
    body = cq(nominalQuota=-1)
    body["spec"]["resourceGroups"][0]["coveredResources"][0] = "cpu!"
    body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["name"] = "cpu!"
    body["spec"]["namespaceSelector"] = {"matchExpressions": [{"key": "team", "operator": "In"}]}
    assert [c["field"] for c in v.cluster_queue_webhook_causes(body)] == [
        "spec.resourceGroups[0].coveredResources[0]",
        "spec.resourceGroups[0].flavors[0].resources[1].nominalQuota",
        "spec.namespaceSelector.matchExpressions[0].values"]


def test_resource_flavor_taints_and_topology() -> None:
    taint = {"key": "gpu", "value": "yes", "effect": "NoSchedule"}
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"},
              "spec": {"nodeTaints": [taint, dict(taint)]}}
    err = refusal(flavor)
    assert err.code == 403 and err.message.startswith('admission webhook "vresourceflavor.kb.io" denied the request: '
                                                      "spec.nodeTaints[1]: Duplicate value: ")
    assert err.message.endswith("taints must be unique by key and effect pair")
    topology = {**flavor, "spec": {"topologyName": "rack"}}
    assert refusal(topology).message.endswith('spec: Invalid value: "object": at least one nodeLabel is required '
                                              "when topology is set")
    tolerating = {**flavor, "spec": {"tolerations": [{"key": "gpu", "operator": "Exists", "tolerationSeconds": 5}]}}
    err = refusal(tolerating)
    assert err.code == 422 and err.message == (
        'ResourceFlavor.kueue.x-k8s.io "f" is invalid: spec.tolerations: Invalid value: "array": '
        "effect must be 'NoExecute' when 'tolerationSeconds' is set")
    old = {**flavor, "spec": {"nodeLabels": {"a": "b"}, "topologyName": "rack"}}
    moved = {**flavor, "spec": {"nodeLabels": {"a": "b"}, "topologyName": "zone"}}
    assert "topologyName is immutable when topologyName is set" in refusal(moved, old).message


def test_the_api_server_refuses_it_over_http(sandbox_factory: Any, clients_factory: Any, kubectl_bin: str,
                                             tmp_path: Any) -> None:
    """kubectl and the `kubernetes` package get what a real cluster with Kueue answers; nothing is stored."""
    sb = sandbox_factory(cluster=("kueue",))
    custom: Any = kubernetes.client.CustomObjectsApi(clients_factory(sb).api)
    manifest = tmp_path / "cq.yaml"
    manifest.write_text(yaml.safe_dump(cq("org", lendingLimit=12)))
    done = subprocess.run([kubectl_bin, "--kubeconfig", str(sb.kubeconfig_path), "apply", "-f", str(manifest)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert ('admission webhook "vclusterqueue.kb.io" denied the request: '
            "spec.resourceGroups[0].flavors[0].resources[1].lendingLimit: "
            'Invalid value: "12": must be less than or equal to the nominalQuota') in done.stderr
    with pytest.raises(ApiException) as refused:
        custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", cq(borrowingLimit=2))
    assert refused.value.status == 422
    assert "borrowingLimit must be nil when cohort is empty" in str(refused.value.body)
    items = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")["items"]
    assert items == []
    custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", cq("org", lendingLimit=8))
