"""ReplicationControllers through the official client: created with a selector defaulted from the
template, scaled through the scale subresource, their pods kept and cleaned up as a ReplicaSet's."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

WORKLOADS = ["scheduler", "kubelet", "replication-controller"]


def rc(name: str, replicas: int, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": name},
            "spec": {"replicas": replicas, "template": {"metadata": {"labels": {"app": name}}, "spec": {
                "containers": [{"name": "web", "image": "nginx:1.27"}]}}, **spec}}


def running_pods(c: Any, name: str) -> list[Any]:
    pods = c.core.list_namespaced_pod("default", label_selector=f"app={name}").items
    return [p for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp]


def test_the_client_creates_scales_and_deletes_a_replication_controller(sandbox_factory: Any, clients_factory: Any,
                                                                        wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    created = c.core.create_namespaced_replication_controller("default", rc("web", 2))
    assert created.spec.selector == {"app": "web"} and created.metadata.labels == {"app": "web"}

    def ready(count: int) -> Any:
        status = c.core.read_namespaced_replication_controller_status("web", "default").status
        return status if (status.replicas, status.ready_replicas, status.available_replicas) == (count,) * 3 \
            and len(running_pods(c, "web")) == count else None

    status = wait_for(lambda: ready(2), timeout=20, message="2 replicas ready")
    assert status.observed_generation == 1 and status.fully_labeled_replicas == 2
    pod = running_pods(c, "web")[0]
    (owner,) = pod.metadata.owner_references
    assert (owner.api_version, owner.kind, owner.name, owner.controller) == ("v1", "ReplicationController", "web", True)

    scale = c.core.read_namespaced_replication_controller_scale("web", "default")
    assert (scale.spec.replicas, scale.status.selector) == (2, "app=web")
    c.core.patch_namespaced_replication_controller_scale("web", "default", {"spec": {"replicas": 3}})
    wait_for(lambda: ready(3), timeout=20, message="scaled up to 3")
    c.core.patch_namespaced_replication_controller("web", "default", {"spec": {"replicas": 1}})
    wait_for(lambda: ready(1), timeout=20, message="scaled down to 1")
    reasons = [e.reason for e in c.events(name="web")]
    assert reasons.count("SuccessfulCreate") == 3 and reasons.count("SuccessfulDelete") == 2
    assert {e.source.component for e in c.events(name="web")} == {"replication-controller"}

    c.core.delete_namespaced_replication_controller("web", "default")
    wait_for(lambda: not c.core.list_namespaced_pod("default", label_selector="app=web").items, timeout=20,
             message="its pods collected with it")
    with pytest.raises(ApiException) as gone:
        c.core.read_namespaced_replication_controller("web", "default")
    assert gone.value.status == 404


def test_a_selector_that_does_not_match_the_template_is_refused(sandbox_factory: Any, clients_factory: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    with pytest.raises(ApiException) as refused:
        c.core.create_namespaced_replication_controller("default", rc("odd", 1, selector={"app": "other"}))
    body = str(refused.value.body)
    assert refused.value.status == 422 and "spec.template.metadata.labels" in body
    assert "`selector` does not match template `labels`" in body


def test_kubectl_lists_and_scales_replication_controllers(sandbox_factory: Any, clients_factory: Any,
                                                          wait_for: Any, kubectl_bin: str) -> None:
    import subprocess

    sb = sandbox_factory(cluster=WORKLOADS)
    c = clients_factory(sb)
    c.core.create_namespaced_replication_controller("default", rc("api", 1))

    def kubectl(*args: str) -> str:
        done = subprocess.run([kubectl_bin, "--kubeconfig", str(sb.kubeconfig_path), *args], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert kubectl("scale", "rc", "api", "--replicas=2") == "replicationcontroller/api scaled\n"
    wait_for(lambda: len(running_pods(c, "api")) == 2, timeout=20, message="scaled by kubectl")
    header, row = wait_for(lambda: (lambda lines: lines if lines[1].split()[1:4] == ["2", "2", "2"] else None)(
        kubectl("get", "rc", "-o", "wide").splitlines()), timeout=20, message="the Table shows 2 ready")
    assert header.split() == ["NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    assert row.split()[0] == "api" and row.split()[-3:] == ["web", "nginx:1.27", "app=api"]
