"""DaemonSets (apps/v1) through the official client and kubectl: served, validated, and simulated,
one pod per node the template may run on (selector, taints; cordoned nodes included), following
node changes, with status as `kubectl get ds` shows it, and gone with their DaemonSet."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client import ApiException

CONTROLLERS = ("scheduler", "kubelet", "daemonset-controller")


def _daemonset(name: str = "exporter", node_selector: dict[str, str] | None = None,
               tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    labels = {"app": name}
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "exporter:1", "command": ["sleep", "infinity"]}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": spec}}}


def _nodes_of(clients: Any, app: str) -> list[str]:
    pods = clients.core.list_namespaced_pod("default", label_selector=f"app={app}").items
    return sorted(p.spec.node_name or "?" for p in pods if p.metadata.deletion_timestamp is None
                  and p.status.phase == "Running")


def test_one_pod_per_eligible_node_following_node_changes(sandbox_factory: Callable[..., Any],
                                                         clients_factory: Callable[..., Any],
                                                         make_node: Callable[..., Any],
                                                         wait_for: Callable[..., Any], kubectl_bin: str,
                                                         tmp_path: Any) -> None:
    nodes = [make_node("gpu-1", labels={"gpu": "amd"}), make_node("gpu-2", labels={"gpu": "amd"}),
             make_node("cpu-1"),
             make_node("gpu-tainted", labels={"gpu": "amd"},
                       taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}])]
    sb = sandbox_factory(nodes=nodes, cluster=CONTROLLERS)
    clients = clients_factory(sb)
    clients.apps.create_namespaced_daemon_set("default", _daemonset(node_selector={"gpu": "amd"}))
    wait_for(lambda: _nodes_of(clients, "exporter") == ["gpu-1", "gpu-2"], timeout=15, message="one pod per GPU node")
    wait_for(lambda: (clients.apps.read_namespaced_daemon_set("exporter", "default").status.number_ready == 2),
             timeout=15, message="status")
    status = clients.apps.read_namespaced_daemon_set("exporter", "default").status
    assert (status.desired_number_scheduled, status.current_number_scheduled, status.number_available) == (2, 2, 2)
    pod = clients.core.list_namespaced_pod("default", label_selector="app=exporter").items[0]
    assert pod.metadata.owner_references[0].kind == "DaemonSet"
    assert pod.metadata.generate_name == "exporter-"
    assert any(t.key == "node.kubernetes.io/unschedulable" for t in pod.spec.tolerations)

    # A node gains the label -> a pod; a cordoned node keeps its daemon pod; losing the label -> pod gone.
    clients.core.patch_node("cpu-1", {"metadata": {"labels": {"gpu": "amd"}}})
    wait_for(lambda: _nodes_of(clients, "exporter") == ["cpu-1", "gpu-1", "gpu-2"], timeout=15)
    clients.core.patch_node("gpu-1", {"spec": {"unschedulable": True}})
    clients.core.patch_node("gpu-2", {"metadata": {"labels": {"gpu": None}}})
    wait_for(lambda: _nodes_of(clients, "exporter") == ["cpu-1", "gpu-1"], timeout=15)

    # A deleted daemon pod is replaced.
    victim = next(p for p in clients.core.list_namespaced_pod("default", label_selector="app=exporter").items
                  if p.spec.node_name == "cpu-1")
    clients.core.delete_namespaced_pod(victim.metadata.name, "default")
    wait_for(lambda: _nodes_of(clients, "exporter") == ["cpu-1", "gpu-1"]
             and victim.metadata.name not in {p.metadata.name for p in clients.core.list_namespaced_pod(
                 "default", label_selector="app=exporter").items}, timeout=15)

    # kubectl lists it with the real columns.
    wait_for(lambda: (lambda st: (st.desired_number_scheduled, st.number_ready) == (2, 2))(
        clients.apps.read_namespaced_daemon_set("exporter", "default").status), timeout=15, message="status 2/2")
    result = subprocess.run([kubectl_bin, "--kubeconfig", str(sb.kubeconfig_path), "--cache-dir",
                             str(tmp_path / "cache"), "get", "ds"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    header, row = result.stdout.splitlines()[:2]
    assert header.split() == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE", "SELECTOR",
                              "AGE"]
    assert row.split()[:7] == ["exporter", "2", "2", "2", "2", "2", "gpu=amd"]

    # Tolerating the taint reaches the tainted node; deleting the DaemonSet takes its pods.
    clients.apps.create_namespaced_daemon_set("default", _daemonset(
        "tolerant", node_selector={"gpu": "amd"}, tolerations=[{"key": "dedicated", "operator": "Exists"}]))
    wait_for(lambda: _nodes_of(clients, "tolerant") == ["cpu-1", "gpu-1", "gpu-tainted"], timeout=15)
    clients.apps.delete_namespaced_daemon_set("exporter", "default")
    wait_for(lambda: not clients.core.list_namespaced_pod("default", label_selector="app=exporter").items,
             timeout=15, message="pods garbage-collected")


def test_a_daemonset_without_a_matching_selector_is_422(sandbox_factory: Callable[..., Any],
                                                        clients_factory: Callable[..., Any]) -> None:
    clients = clients_factory(sandbox_factory(nodes=[], cluster=()))
    body = _daemonset()
    body["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    with pytest.raises(ApiException) as exc:
        clients.apps.create_namespaced_daemon_set("default", body)
    assert exc.value.status == 422
    assert "spec.template.metadata.labels" in exc.value.body
