"""Scenario tests for the simulated volume binder and its interplay with the scheduler."""

from __future__ import annotations

from typing import Any

from kaiwo_sandbox.contracts import JsonObj

WORKLOADS = ["volume-binder", "scheduler", "kubelet"]


def claim(name: str, storage_class: str | None = None, *, omit_class: bool = False) -> JsonObj:
    spec: JsonObj = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "5Gi"}}}
    if not omit_class:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": spec}


def pod_with_claim(name: str, claim_name: str) -> JsonObj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "infinity"],
                                     "volumeMounts": [{"name": "data", "mountPath": "/workload"}]}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]}}


def phase(c: Any, name: str) -> str | None:
    value: str | None = c.core.read_namespaced_persistent_volume_claim_status(name, "default").status.phase
    return value


def test_storage_classes_exist_with_a_default(sandbox_factory: Any, clients_factory: Any, wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    classes = wait_for(lambda: {sc.metadata.name: sc for sc in c.storage.list_storage_class().items})
    assert {"standard", "rwx-nfs"} <= set(classes)
    assert classes["standard"].metadata.annotations["storageclass.kubernetes.io/is-default-class"] == "true"


def test_claim_without_class_gets_the_default_and_binds(sandbox_factory: Any, clients_factory: Any,
                                                        wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    wait_for(lambda: c.storage.list_storage_class().items)
    c.core.create_namespaced_persistent_volume_claim("default", claim("data", omit_class=True))
    wait_for(lambda: phase(c, "data") == "Bound")
    bound = c.core.read_namespaced_persistent_volume_claim("data", "default")
    assert bound.spec.storage_class_name == "standard"
    assert bound.spec.volume_name == f"pvc-{bound.metadata.uid}"
    assert bound.status.capacity == {"storage": "5Gi"}
    assert bound.status.access_modes == ["ReadWriteMany"]


def test_empty_class_stays_pending_and_missing_class_reports_failure(sandbox_factory: Any, clients_factory: Any,
                                                                    wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    c.core.create_namespaced_persistent_volume_claim("default", claim("static", ""))
    c.core.create_namespaced_persistent_volume_claim("default", claim("typo", "fast-ssd"))
    wait_for(lambda: [e for e in c.events(name="static") if e.reason == "FailedBinding"])
    event = wait_for(lambda: [e for e in c.events(name="typo") if e.reason == "ProvisioningFailed"])[0]
    assert event.message == 'storageclass.storage.k8s.io "fast-ssd" not found'
    assert phase(c, "static") == "Pending" and phase(c, "typo") == "Pending"


def test_pod_waits_for_its_claim_then_runs(sandbox_factory: Any, clients_factory: Any, make_node: Any,
                                           wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(nodes=[make_node("n1")], cluster=WORKLOADS))
    c.core.create_namespaced_pod("default", pod_with_claim("reader", "later"))
    message = wait_for(lambda: next((cond.message for cond in c.core.read_namespaced_pod_status(
        "reader", "default").status.conditions or [] if cond.type == "PodScheduled"), None))
    assert message == ('0/1 nodes are available: persistentvolumeclaim "later" not found. preemption: 0/1 nodes '
                       'are available: 1 Preemption is not helpful for scheduling.')
    c.core.create_namespaced_persistent_volume_claim("default", claim("later", "rwx-nfs"))
    wait_for(lambda: c.core.read_namespaced_pod_status("reader", "default").status.phase == "Running",
             message="pod runs once its claim is bound")


def test_kubelet_waits_for_claims_of_pods_bound_by_name(sandbox_factory: Any, clients_factory: Any,
                                                         make_node: Any, wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(nodes=[make_node("n1")], cluster=WORKLOADS))
    c.core.create_namespaced_persistent_volume_claim("default", claim("late", "late-class"))
    pinned = pod_with_claim("pinned", "late")
    pinned["spec"]["nodeName"] = "n1"  # bypasses the scheduler's volume check
    c.core.create_namespaced_pod("default", pinned)
    event = wait_for(lambda: [e for e in c.events(name="pinned") if e.reason == "FailedMount"])[0]
    assert event.message.endswith("error processing PVC default/late: PVC is not bound")
    assert c.core.read_namespaced_pod_status("pinned", "default").status.phase == "Pending"
    c.storage.create_storage_class({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                    "metadata": {"name": "late-class"}, "provisioner": "example.com/late"})
    wait_for(lambda: phase(c, "late") == "Bound", message="claim bound once its class exists")
    status = wait_for(lambda: (s := c.core.read_namespaced_pod_status("pinned", "default").status)
                      and s.phase == "Running" and s, message="pod starts once its claim is bound")
    scheduled = next(cond for cond in status.conditions if cond.type == "PodScheduled")
    assert scheduled.status == "True"  # posted by the kubelet: this pod never met the scheduler
