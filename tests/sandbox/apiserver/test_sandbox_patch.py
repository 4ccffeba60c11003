"""The four patch content types, server-side apply with field managers, managedFields."""

from __future__ import annotations

import json
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException
from kubernetes.dynamic import DynamicClient

from kaiwo_sandbox.testing import RunningSandbox


def _deployment(name: str = "web", replicas: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                     {"name": "app", "image": "nginx:1.27", "env": [{"name": "A", "value": "1"}]},
                     {"name": "sidecar", "image": "busybox:1.36"}]}}},
    }


def test_strategic_merge_patch_merges_containers_by_name(api: Any) -> None:
    apps = kubernetes.client.AppsV1Api(api)
    apps.create_namespaced_deployment("default", _deployment())
    patched = apps.patch_namespaced_deployment("web", "default", {"spec": {"template": {"spec": {"containers": [
        {"name": "sidecar", "image": "busybox:1.37"}]}}}})
    containers = patched.spec.template.spec.containers
    assert [(c.name, c.image) for c in containers] == [("app", "nginx:1.27"), ("sidecar", "busybox:1.37")]


def test_merge_patch_replaces_lists(sandbox: RunningSandbox, api: Any) -> None:
    kubernetes.client.AppsV1Api(api).create_namespaced_deployment("default", _deployment())
    status, _, body = sandbox.http(
        "PATCH", "/apis/apps/v1/namespaces/default/deployments/web",
        json.dumps({"spec": {"template": {"spec": {"containers": [{"name": "only", "image": "x"}]}}}}),
        headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200, body
    containers = json.loads(body)["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["only"]


def test_json_patch_with_failing_test_op_is_rejected(sandbox: RunningSandbox, core: Any) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "j"}, "data": {"a": "1"}})
    ops = [{"op": "test", "path": "/data/a", "value": "2"}, {"op": "replace", "path": "/data/a", "value": "3"}]
    status, _, body = sandbox.http("PATCH", "/api/v1/namespaces/default/configmaps/j", json.dumps(ops),
                                   headers={"Content-Type": "application/json-patch+json"})
    assert status == 422, body
    assert core.read_namespaced_config_map("j", "default").data == {"a": "1"}
    ops[0]["value"] = "1"
    status, _, body = sandbox.http("PATCH", "/api/v1/namespaces/default/configmaps/j", json.dumps(ops),
                                   headers={"Content-Type": "application/json-patch+json"})
    assert status == 200, body
    assert json.loads(body)["data"] == {"a": "3"}


def test_strategic_merge_on_custom_resources_is_415(sandbox: RunningSandbox, custom: Any) -> None:
    custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayjobs", {
        "apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "rj"}, "spec": {"entrypoint": "x"}})
    status, _, body = sandbox.http("PATCH", "/apis/ray.io/v1/namespaces/default/rayjobs/rj",
                                   json.dumps({"spec": {"suspend": True}}),
                                   headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert status == 415
    assert json.loads(body)["reason"] == "UnsupportedMediaType"


def test_unknown_patch_content_type_is_415(sandbox: RunningSandbox, core: Any) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "u"}})
    status, _, _ = sandbox.http("PATCH", "/api/v1/namespaces/default/configmaps/u", "{}",
                                headers={"Content-Type": "text/plain"})
    assert status == 415


def test_updates_record_managed_fields_per_manager(sandbox: RunningSandbox, core: Any) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "m"}, "data": {"a": "1"}},
                                      field_manager="creator")
    patched = core.patch_namespaced_config_map("m", "default", {"data": {"b": "2"}}, field_manager="patcher")
    managers = {(m.manager, m.operation) for m in patched.metadata.managed_fields}
    assert managers == {("creator", "Update"), ("patcher", "Update")}
    by_manager = {m.manager: m.fields_v1 for m in patched.metadata.managed_fields}
    assert by_manager["patcher"] == {"f:data": {"f:b": {}}}


def test_default_field_manager_comes_from_the_user_agent(core: Any) -> None:
    created = core.create_namespaced_config_map("default", {"metadata": {"name": "ua"}, "data": {"a": "1"}})
    assert created.metadata.managed_fields[0].manager == "OpenAPI-Generator"


def test_server_side_apply_creates_updates_and_reports_conflicts(api: Any) -> None:
    dynamic = DynamicClient(api)
    deployments = dynamic.resources.get(api_version="apps/v1", kind="Deployment")
    created = dynamic.server_side_apply(deployments, _deployment(replicas=2), name="web", namespace="default",
                                        field_manager="alice")
    assert created.spec.replicas == 2
    assert [(m.manager, m.operation) for m in created.metadata.managedFields] == [("alice", "Apply")]
    with pytest.raises(ApiException) as exc:
        dynamic.server_side_apply(deployments, _deployment(replicas=5), name="web", namespace="default",
                                  field_manager="bob")
    assert exc.value.status == 409
    body = json.loads(exc.value.body)
    assert body["reason"] == "Conflict"
    assert 'conflict with "alice"' in body["message"]
    assert ".spec.replicas" in body["message"]
    assert {c["field"] for c in body["details"]["causes"]} >= {".spec.replicas"}
    forced = dynamic.server_side_apply(deployments, _deployment(replicas=5), name="web", namespace="default",
                                       field_manager="bob", force_conflicts=True)
    assert forced.spec.replicas == 5


def test_server_side_apply_removes_fields_the_manager_stopped_applying(api: Any) -> None:
    dynamic = DynamicClient(api)
    configmaps = dynamic.resources.get(api_version="v1", kind="ConfigMap")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s", "namespace": "default"},
            "data": {"a": "1", "b": "2"}}
    dynamic.server_side_apply(configmaps, body, name="s", namespace="default", field_manager="me")
    body["data"] = {"a": "1"}
    applied = dynamic.server_side_apply(configmaps, body, name="s", namespace="default", field_manager="me")
    assert dict(applied.data) == {"a": "1"}


def test_apply_requires_a_field_manager(sandbox: RunningSandbox) -> None:
    status, _, body = sandbox.http("PATCH", "/api/v1/namespaces/default/configmaps/x",
                                   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
                                   headers={"Content-Type": "application/apply-patch+yaml"})
    assert status == 400
    assert "fieldManager" in json.loads(body)["message"]


def test_scale_subresource(api: Any) -> None:
    apps = kubernetes.client.AppsV1Api(api)
    apps.create_namespaced_deployment("default", _deployment())
    scale = apps.read_namespaced_deployment_scale("web", "default")
    assert (scale.spec.replicas, scale.status.selector) == (1, "app=web")
    apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 4}})
    deployment = apps.read_namespaced_deployment("web", "default")
    assert (deployment.spec.replicas, deployment.metadata.generation) == (4, 2)


def test_pod_binding_sets_node_once(sandbox: RunningSandbox, core: Any) -> None:
    core.create_namespaced_pod("default", {"metadata": {"name": "p"},
                                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"}}
    status, _, _ = sandbox.http("POST", "/api/v1/namespaces/default/pods/p/binding", binding)
    assert status == 201
    assert core.read_namespaced_pod("p", "default").spec.node_name == "node-a"
    status, _, body = sandbox.http("POST", "/api/v1/namespaces/default/pods/p/binding", binding)
    assert status == 409
    assert 'is already assigned to node "node-a"' in json.loads(body)["message"]
