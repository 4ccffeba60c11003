"""CustomResourceDefinitions: served on creation, gone on deletion, validated, defaulted, versioned."""

from __future__ import annotations

import json
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

from kaiwo_sandbox.testing import RunningSandbox

GIZMO_SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {"type": "object", "properties": {
            "gpus": {"type": "integer", "minimum": 0},
            "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
        }, "required": ["gpus"]},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}


def _crd(scope: str = "Namespaced") -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.example.com"},
        "spec": {"group": "example.com", "scope": scope,
                 "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "shortNames": ["gz"]},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": GIZMO_SCHEMA},
                               "subresources": {"status": {}},
                               "additionalPrinterColumns": [{"name": "GPUs", "type": "integer",
                                                             "jsonPath": ".spec.gpus"}]}]},
    }


def _gizmo(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": name}, "spec": spec}


@pytest.fixture
def gizmos(sandbox: RunningSandbox) -> Any:
    extensions = kubernetes.client.ApiextensionsV1Api(sandbox.api_client())
    created = extensions.create_custom_resource_definition(_crd())
    assert created.status.accepted_names.kind == "Gizmo"
    return extensions


def test_created_crd_is_served_and_discoverable(sandbox: RunningSandbox, gizmos: Any, custom: Any) -> None:
    status, _, body = sandbox.http("GET", "/apis/example.com/v1")
    assert status == 200
    resources = {r["name"]: r for r in json.loads(body)["resources"]}
    assert resources["gizmos"]["shortNames"] == ["gz"]
    assert resources["gizmos"]["kind"] == "Gizmo"
    assert "gizmos/status" in resources
    custom.create_namespaced_custom_object("example.com", "v1", "default", "gizmos", _gizmo("g", gpus=2))
    assert custom.get_namespaced_custom_object("example.com", "v1", "default", "gizmos", "g")["spec"]["gpus"] == 2


def test_deleting_the_crd_removes_path_and_objects(sandbox: RunningSandbox, gizmos: Any, custom: Any) -> None:
    custom.create_namespaced_custom_object("example.com", "v1", "default", "gizmos", _gizmo("g", gpus=1))
    gizmos.delete_custom_resource_definition("gizmos.example.com")
    with pytest.raises(ApiException) as exc:
        custom.list_namespaced_custom_object("example.com", "v1", "default", "gizmos")
    assert exc.value.status == 404
    status, _, _ = sandbox.http("GET", "/apis/example.com/v1")
    assert status == 404
    gizmos.create_custom_resource_definition(_crd())
    assert custom.list_namespaced_custom_object("example.com", "v1", "default", "gizmos")["items"] == []


def test_schema_validation_names_each_bad_field(gizmos: Any, custom: Any) -> None:
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object("example.com", "v1", "default", "gizmos",
                                               _gizmo("bad", gpus=-1, mode="warp"))
    assert exc.value.status == 422
    body = json.loads(exc.value.body)
    assert body["reason"] == "Invalid"
    assert {c["field"] for c in body["details"]["causes"]} == {"spec.gpus", "spec.mode"}
    assert body["message"].startswith('Gizmo.example.com "bad" is invalid: ')


def test_schema_defaulting_and_pruning(gizmos: Any, custom: Any) -> None:
    created = custom.create_namespaced_custom_object("example.com", "v1", "default", "gizmos",
                                                     {**_gizmo("d", gpus=1), "junk": {"x": 1}})
    assert created["spec"]["mode"] == "fast"
    assert "junk" not in created


def test_custom_status_subresource_and_generation(gizmos: Any, custom: Any) -> None:
    custom.create_namespaced_custom_object("example.com", "v1", "default", "gizmos", _gizmo("s", gpus=1))
    custom.patch_namespaced_custom_object_status("example.com", "v1", "default", "gizmos", "s",
                                                 {"status": {"phase": "Ready"}})
    obj = custom.patch_namespaced_custom_object("example.com", "v1", "default", "gizmos", "s",
                                                {"status": {"phase": "Hacked"}, "spec": {"gpus": 3}})
    assert obj["status"] == {"phase": "Ready"}
    assert obj["metadata"]["generation"] == 2


def test_a_tightened_schema_ratchets_stored_values(gizmos: Any, custom: Any) -> None:
    """As a 1.30+ apiserver (validation ratcheting): after the CRD's schema tightens, objects stored
    before it still take status writes and edits elsewhere; changing the old value is checked."""
    custom.create_namespaced_custom_object("example.com", "v1", "default", "gizmos", _gizmo("old", gpus=9))
    crd = gizmos.api_client.sanitize_for_serialization(gizmos.read_custom_resource_definition("gizmos.example.com"))
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["gpus"]["maximum"] = 8
    gizmos.replace_custom_resource_definition("gizmos.example.com", crd)
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object("example.com", "v1", "default", "gizmos", _gizmo("new", gpus=9))
    assert exc.value.status == 422
    custom.patch_namespaced_custom_object_status("example.com", "v1", "default", "gizmos", "old",
                                                 {"status": {"phase": "Ready"}})
    edited = custom.patch_namespaced_custom_object("example.com", "v1", "default", "gizmos", "old",
                                                   {"spec": {"mode": "slow"}})
    assert edited["spec"] == {"gpus": 9, "mode": "slow"} and edited["status"] == {"phase": "Ready"}
    with pytest.raises(ApiException) as exc:
        custom.patch_namespaced_custom_object("example.com", "v1", "default", "gizmos", "old", {"spec": {"gpus": 10}})
    assert exc.value.status == 422
    assert [c["field"] for c in json.loads(exc.value.body)["details"]["causes"]] == ["spec.gpus"]


def test_cluster_scoped_custom_resources(sandbox: RunningSandbox, custom: Any) -> None:
    kubernetes.client.ApiextensionsV1Api(sandbox.api_client()).create_custom_resource_definition(_crd("Cluster"))
    custom.create_cluster_custom_object("example.com", "v1", "gizmos", _gizmo("c", gpus=0))
    assert custom.get_cluster_custom_object("example.com", "v1", "gizmos", "c")["metadata"].get("namespace") is None


def test_printer_columns_in_table_output(sandbox: RunningSandbox, gizmos: Any, custom: Any) -> None:
    custom.create_namespaced_custom_object("example.com", "v1", "default", "gizmos", _gizmo("t", gpus=4))
    status, _, body = sandbox.http("GET", "/apis/example.com/v1/namespaces/default/gizmos",
                                   headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert status == 200
    table = json.loads(body)
    assert table["kind"] == "Table"
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names[:2] == ["Name", "GPUs"]
    assert table["rows"][0]["cells"][:2] == ["t", 4]


def test_preinstalled_kueue_is_readable_through_both_versions(custom: Any) -> None:
    custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "rf"}, "spec": {}})
    old = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "resourceflavors", "rf")
    assert old["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    listed = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors")
    assert [i["apiVersion"] for i in listed["items"]] == ["kueue.x-k8s.io/v1beta2"]


def test_preinstalled_third_party_kinds(sandbox: RunningSandbox) -> None:
    _, _, body = sandbox.http("GET", "/apis")
    groups = {g["name"]: g for g in json.loads(body)["groups"]}
    assert groups["kueue.x-k8s.io"]["preferredVersion"]["version"] == "v1beta2"
    assert [v["version"] for v in groups["kueue.x-k8s.io"]["versions"]] == ["v1beta2", "v1beta1"]
    for group in ("ray.io", "workload.codeflare.dev"):
        assert group in groups
    status, _, body = sandbox.http("GET", "/apis/kueue.x-k8s.io/v1beta2")
    assert status == 200
    short = {r["name"]: r.get("shortNames", []) for r in json.loads(body)["resources"]}
    assert "cq" in short["clusterqueues"] and "lq" in short["localqueues"] and "kwl" in short["workloads"]


def test_events_are_one_storage_seen_through_two_apis(api: Any) -> None:
    core = kubernetes.client.CoreV1Api(api)
    events = kubernetes.client.EventsV1Api(api)
    events.create_namespaced_event("default", {
        "metadata": {"name": "e1"}, "eventTime": "2026-01-01T00:00:00.000000Z", "reason": "Started",
        "note": "hello", "type": "Normal", "action": "Start", "reportingController": "me",
        "reportingInstance": "me-1", "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}})
    core_event = core.read_namespaced_event("e1", "default")
    assert (core_event.message, core_event.involved_object.name, core_event.reason) == ("hello", "p", "Started")
    assert events.read_namespaced_event("e1", "default").note == "hello"


def test_strict_field_validation_rejects_unknown_fields(sandbox: RunningSandbox, gizmos: Any) -> None:
    body = {**_gizmo("strict", gpus=1), "spec": {"gpus": 1, "gpu": 2}}
    status, _, raw = sandbox.http("POST", "/apis/example.com/v1/namespaces/default/gizmos?fieldValidation=Strict",
                                  body)
    assert status == 400
    assert json.loads(raw)["message"] == ('Gizmo in version "v1" cannot be handled as a Gizmo: strict decoding '
                                          'error: unknown field "spec.gpu"')
    status, _, raw = sandbox.http("POST", "/apis/example.com/v1/namespaces/default/gizmos?fieldValidation=Ignore",
                                  body)
    assert status == 201
    assert json.loads(raw)["spec"] == {"gpus": 1, "mode": "fast"}


def test_unknown_fields_are_pruned_with_a_warning_by_default(sandbox: RunningSandbox, gizmos: Any) -> None:
    body = {**_gizmo("warned", gpus=1), "spec": {"gpus": 1, "gpu": 2}}
    status, headers, raw = sandbox.http("POST", "/apis/example.com/v1/namespaces/default/gizmos", body)
    assert status == 201
    assert headers["warning"] == '299 - "unknown field \\"spec.gpu\\""'
    assert "gpu" not in json.loads(raw)["spec"]


def test_deprecated_versions_warn(sandbox: RunningSandbox) -> None:
    _, headers, _ = sandbox.http("GET", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues")
    assert headers["warning"] == '299 - "kueue.x-k8s.io/v1beta1 ClusterQueue is deprecated"'
    _, headers, _ = sandbox.http("GET", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues")
    assert "warning" not in headers
