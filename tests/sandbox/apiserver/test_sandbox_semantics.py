"""Semantics of issue #3 that had no end-to-end test through the official client: every listed resource
served and discoverable with its subresources, pod field selectors, set-based label selectors, status
subresources of nodes and deployments, and strategic merge of env/ports/volumes by key."""

from __future__ import annotations

import json
from typing import Any

import kubernetes
import pytest

from kaiwo_ray.nodes import default_nodes
from kaiwo_sandbox.testing import RunningSandbox, start_sandbox

# (discovery path, resource, its subresources) for every resource item 1 of the issue names.
_SERVED = [
    ("/api/v1", "namespaces", {"status", "finalize"}), ("/api/v1", "nodes", {"status"}),
    ("/api/v1", "pods", {"status", "binding"}), ("/api/v1", "services", set()), ("/api/v1", "configmaps", set()),
    ("/api/v1", "secrets", set()), ("/api/v1", "events", set()), ("/api/v1", "persistentvolumeclaims", {"status"}),
    ("/api/v1", "serviceaccounts", set()), ("/apis/apps/v1", "deployments", {"status", "scale"}),
    ("/apis/batch/v1", "jobs", {"status"}), ("/apis/coordination.k8s.io/v1", "leases", set()),
    ("/apis/events.k8s.io/v1", "events", set()), ("/apis/scheduling.k8s.io/v1", "priorityclasses", set()),
    ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", {"status"}),
]


@pytest.mark.parametrize(("path", "resource", "subresources"), _SERVED)
def test_every_listed_resource_is_discoverable_with_its_subresources(sandbox: RunningSandbox, path: str,
                                                                     resource: str, subresources: set[str]) -> None:
    status, _, raw = sandbox.http("GET", path)
    assert status == 200
    body = json.loads(raw)
    names = {r["name"] for r in body["resources"]}
    assert resource in names
    assert {f"{resource}/{sub}" for sub in subresources} <= names
    verbs = next(r["verbs"] for r in body["resources"] if r["name"] == resource)
    assert {"create", "get", "list", "watch", "delete"} <= set(verbs)


def test_core_kinds_round_trip_through_the_typed_client(api: Any) -> None:
    core = kubernetes.client.CoreV1Api(api)
    core.create_namespaced_service_account("default", {"metadata": {"name": "runner"}})
    core.create_namespaced_secret("default", {"metadata": {"name": "s"}, "stringData": {"token": "abc"}})
    core.create_namespaced_persistent_volume_claim("default", {"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    core.create_namespaced_service("default", {"metadata": {"name": "web"}, "spec": {
        "selector": {"app": "web"}, "ports": [{"port": 80}]}})
    scheduling = kubernetes.client.SchedulingV1Api(api)
    scheduling.create_priority_class({"metadata": {"name": "high"}, "value": 1000})
    assert core.read_namespaced_service_account("runner", "default").metadata.uid
    assert core.read_namespaced_secret("s", "default").data == {"token": "YWJj"}, "stringData is folded into data"
    assert core.read_namespaced_persistent_volume_claim("data", "default").spec.volume_mode == "Filesystem"
    service = core.read_namespaced_service("web", "default")
    assert (service.spec.type, service.spec.ports[0].protocol) == ("ClusterIP", "TCP")
    assert scheduling.read_priority_class("high").value == 1000
    core.delete_namespaced_service_account("runner", "default")
    assert [sa.metadata.name for sa in core.list_namespaced_service_account("default").items] == []


def _pod(name: str, namespace: str = "default", node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": namespace, "labels": {"app": name[0]}}, "spec": spec}


def test_pod_field_selectors_over_http(core: Any) -> None:
    core.create_namespace({"metadata": {"name": "other"}})
    core.create_namespaced_pod("default", _pod("a1", node="node-a"))
    core.create_namespaced_pod("default", _pod("b1", node="node-b"))
    core.create_namespaced_pod("other", _pod("a2", "other", node="node-a"))
    core.create_namespaced_pod("default", _pod("u1"))
    core.patch_namespaced_pod_status("a1", "default", {"status": {"phase": "Running"}})

    def names(**kwargs: Any) -> list[str]:
        return sorted(p.metadata.name for p in core.list_pod_for_all_namespaces(**kwargs).items)

    assert names(field_selector="spec.nodeName=node-a") == ["a1", "a2"]
    assert names(field_selector="spec.nodeName=") == ["u1"], "the scheduler's 'unassigned' query"
    assert names(field_selector="metadata.namespace=other") == ["a2"]
    assert names(field_selector="status.phase=Running") == ["a1"]
    assert names(field_selector="status.phase!=Running,spec.nodeName!=") == ["a2", "b1"]


def test_set_based_label_selectors_over_http(core: Any) -> None:
    for name, labels in (("a", {"tier": "web", "gpu": "yes"}), ("b", {"tier": "db"}), ("c", {})):
        core.create_namespaced_config_map("default", {"metadata": {"name": name, "labels": labels}})

    def names(selector: str) -> list[str]:
        return [c.metadata.name for c in core.list_namespaced_config_map("default", label_selector=selector).items]

    assert names("tier notin (web)") == ["b", "c"], "notin matches objects without the key"
    assert names("gpu") == ["a"]
    assert names("!gpu") == ["b", "c"]
    assert names("tier,tier!=db") == ["a"]
    assert names("tier in (web,db),!gpu") == ["b"]


def test_node_and_deployment_status_subresources(api: Any) -> None:
    core = kubernetes.client.CoreV1Api(api)
    core.create_node({"metadata": {"name": "n"}})
    core.patch_node("n", {"spec": {"unschedulable": True}, "status": {"capacity": {"cpu": "4"}}})
    node = core.read_node("n")
    assert node.spec.unschedulable is True
    assert node.status is None or not node.status.capacity, "the main path drops status"
    core.patch_node_status("n", {"spec": {"unschedulable": False}, "status": {"capacity": {"cpu": "4"}}})
    node = core.read_node("n")
    assert node.spec.unschedulable is True and node.status.capacity == {"cpu": "4"}, "/status drops spec"

    apps = kubernetes.client.AppsV1Api(api)
    apps.create_namespaced_deployment("default", {"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    apps.patch_namespaced_deployment_status("d", "default", {"spec": {"replicas": 7}, "status": {"readyReplicas": 1}})
    deployment = apps.read_namespaced_deployment("d", "default")
    assert (deployment.spec.replicas, deployment.status.ready_replicas) == (1, 1)
    assert deployment.metadata.generation == 1, "a status write is no spec change"


def test_strategic_merge_merges_env_ports_and_volumes_by_key(api: Any) -> None:
    apps = kubernetes.client.AppsV1Api(api)
    apps.create_namespaced_deployment("default", {"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {
            "volumes": [{"name": "a", "emptyDir": {}}],
            "containers": [{"name": "c", "image": "i", "env": [{"name": "A", "value": "1"}],
                            "ports": [{"containerPort": 80, "name": "http"}]}]}}}})
    # The typed client sends strategic merge patches for built-in kinds.
    apps.patch_namespaced_deployment("d", "default", {"spec": {"template": {"spec": {
        "volumes": [{"name": "b", "emptyDir": {}}],
        "containers": [{"name": "c", "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "3"}],
                        "ports": [{"containerPort": 443, "name": "https"}]}]}}}})
    spec = apps.read_namespaced_deployment("d", "default").spec.template.spec
    container = spec.containers[0]
    assert container.image == "i", "the container was merged by name, not replaced"
    assert sorted((e.name, e.value) for e in container.env) == [("A", "3"), ("B", "2")]
    assert sorted(p.container_port for p in container.ports) == [80, 443]
    assert sorted(v.name for v in spec.volumes) == ["a", "b"]


def test_without_a_nodes_file_the_default_nodes_are_seeded() -> None:
    with start_sandbox() as sandbox:
        api = sandbox.api_client()
        try:
            core = kubernetes.client.CoreV1Api(api)
            nodes = {n.metadata.name: n.metadata.labels for n in core.list_node().items}
            leases = {lease.metadata.name for lease in
                      kubernetes.client.CoordinationV1Api(api).list_namespaced_lease("kube-node-lease").items}
        finally:
            api.close()
    assert sorted(nodes) == sorted(n["metadata"]["name"] for n in default_nodes())
    gpus = sorted(labels.get("amd.com/gpu.product-name") or labels.get("nvidia.com/gpu.product") or "cpu"
                  for labels in nodes.values())
    assert len(gpus) == 4 and gpus.count("cpu") == 1
    assert sum("MI300X" in g for g in gpus) == 2 and sum("H100" in g for g in gpus) == 1
    assert leases == set(nodes)


def test_default_has_the_apiservers_own_service(core: Any) -> None:
    service = core.read_namespaced_service("kubernetes", "default")
    assert (service.spec.cluster_ip, service.spec.ports[0].port) == ("10.96.0.1", 443)
    assert service.metadata.labels == {"component": "apiserver", "provider": "kubernetes"}
