"""DELETE answers what the real apiserver answers per resource, so the `kubernetes` package's typed
delete calls deserialize it: the deleted object for ReturnDeletedObject registries (pods, services,
service accounts, PVCs, ...), a Success Status for the others once gone, the object while held."""

from __future__ import annotations

import subprocess
from typing import Any

import kubernetes
from kubernetes.client import V1PersistentVolumeClaim, V1Pod, V1Service, V1ServiceAccount

from kaiwo_sandbox.testing import RunningSandbox


def test_typed_deletes_return_the_deleted_object(core: Any) -> None:
    core.create_namespaced_service("default", {"metadata": {"name": "web"},
                                               "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
    service = core.delete_namespaced_service("web", "default")
    assert isinstance(service, V1Service)
    assert service.metadata.name == "web" and service.spec.ports[0].port == 80

    core.create_namespaced_service_account("default", {"metadata": {"name": "robot"}})
    account = core.delete_namespaced_service_account("robot", "default")
    assert isinstance(account, V1ServiceAccount) and account.metadata.name == "robot"

    core.create_namespaced_persistent_volume_claim("default", {"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    claim = core.delete_namespaced_persistent_volume_claim("data", "default")
    assert isinstance(claim, V1PersistentVolumeClaim) and claim.metadata.name == "data"

    core.create_namespaced_pod("default", {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "busybox:1.36"}]}})
    assert isinstance(core.delete_namespaced_pod("p", "default"), V1Pod)


def test_other_resources_answer_a_success_status(core: Any) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "cm"}})
    answer = core.delete_namespaced_config_map("cm", "default")
    assert answer["kind"] == "Status" and answer["status"] == "Success"
    assert answer["details"]["name"] == "cm" and answer["details"]["kind"] == "configmaps"


def test_a_held_service_answers_the_object_with_its_deletion_timestamp(core: Any) -> None:
    core.create_namespaced_service("default", {"metadata": {"name": "held", "finalizers": ["example.com/x"]},
                                               "spec": {"ports": [{"port": 80}]}})
    service = core.delete_namespaced_service("held", "default")
    assert isinstance(service, V1Service) and service.metadata.deletion_timestamp is not None
    core.patch_namespaced_service("held", "default", {"metadata": {"finalizers": None}})


def test_kubectl_deletes_a_service(sandbox: RunningSandbox, kubectl_bin: str, tmp_path: Any) -> None:
    kubernetes.client.CoreV1Api(sandbox.api_client()).create_namespaced_service(
        "default", {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}})
    result = subprocess.run([kubectl_bin, "--kubeconfig", str(sandbox.kubeconfig_path), "--cache-dir",
                             str(tmp_path / "cache"), "delete", "svc", "web"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'service "web" deleted'
