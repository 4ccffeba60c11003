"""What a user sees with `kubectl get` while the simulated cluster runs their workloads."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest

from kaiwo_sandbox.testing import RunningSandbox

WORKLOADS = ["volume-binder", "scheduler", "kubelet", "job-controller", "deployment-controller"]


@pytest.fixture
def kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.skip("kubectl not installed")
    return path


def get(kubectl: str, sb: RunningSandbox, *args: str) -> list[list[str]]:
    """`kubectl get ...` rows split into columns (header first)."""
    result = subprocess.run([kubectl, "--kubeconfig", str(sb.kubeconfig_path), "get", *args],
                            capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, result.stderr
    return [line.split() for line in result.stdout.splitlines()]


def test_kubectl_shows_jobs_pods_and_deployments_progressing(
        kubectl: str, sandbox_factory: Any, clients_factory: Any, make_node: Any, wait_for: Any) -> None:
    sb = sandbox_factory(nodes=[make_node("worker-1")], cluster=WORKLOADS)
    c = clients_factory(sb)
    c.batch.create_namespaced_job("default", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "busybox", "command": ["sleep", "1"]}]}}}})
    c.apps.create_namespaced_deployment("default", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}})

    jobs = wait_for(lambda: (rows := get(kubectl, sb, "jobs")) and any("Complete" in r for r in rows[1:]) and rows)
    assert jobs[0][:3] == ["NAME", "STATUS", "COMPLETIONS"]
    assert jobs[1][:3] == ["train", "Complete", "1/1"]

    deploys = wait_for(lambda: (rows := get(kubectl, sb, "deploy")) and rows[1][1:2] == ["2/2"] and rows)
    assert deploys[0][:4] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE"]
    assert deploys[1][:4] == ["web", "2/2", "2", "2"]

    pods = {row[0]: row for row in get(kubectl, sb, "pods")[1:]}
    train = next(row for name, row in pods.items() if name.startswith("train-"))
    assert train[1:3] == ["0/1", "Completed"]
    web = [row for name, row in pods.items() if name.startswith("web-")]
    assert len(web) == 2 and all(row[1:3] == ["1/1", "Running"] for row in web)

    wide = get(kubectl, sb, "pods", "-o", "wide")
    assert "NODE" in wide[0]
    node_column = wide[0].index("NODE")
    assert {row[node_column] for row in wide[1:]} == {"worker-1"}
    replicasets = get(kubectl, sb, "rs")
    assert replicasets[1][0].startswith("web-") and replicasets[1][1:4] == ["2", "2", "2"]
