"""The issue's acceptance run: `kaiwo-ray dev` (a subprocess: sandbox, Ray, the controller actors,
the telemetry actor and aggregator) with its simulated GPU nodes. An annotated idle GPU Job gets a
GpuWorkload that goes Idle and is preempted by a pending GPU Job; a KaiwoJob under
`terminateUnderutilized` ends TERMINATED with GpuUtilizationLow while a busy one keeps RUNNING;
the metrics endpoint serves the exporters' series. Utilization travels the Ray path: sandbox
backend -> TelemetryActor -> AggregatorActor -> NativeSource in the controller actors.

It runs on the cluster's scaled clock (`--time-factor 0.5 --scaled-clock`): the sandbox, the controller
and telemetry actors and the admin API all read cluster time (KAIWO_CLOCK_SCALE reaches the Ray
workers), so the grace period, the termination delay and the polling intervals below are cluster
seconds, each half as long on the wall clock."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kaiwo_ray.reconcile.gpupreemption import PREFIX
from kaiwo_sandbox.cluster.nodes.gpusim import ANNOTATION
from kaiwo_sandbox.testing import polling

pytestmark = [pytest.mark.ray, pytest.mark.slow]
KAIWO = ("kaiwo.silogen.ai", "v1alpha1")


wait_for = polling(interval=0.3)  # wait_for(check, timeout, message): real Ray and a subprocess


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _busy_train_gpus(admin_url: str) -> list[dict[str, Any]]:
    """The admin API's per-GPU samples of busy-train's pod (filled from the telemetry aggregator)."""
    with urllib.request.urlopen(f"{admin_url}/api/v1/nodes", timeout=10) as response:
        nodes = json.loads(response.read())["items"]
    return [g for n in nodes for g in n["gpus"] if (g.get("pod") or {}).get("name", "").startswith("busy-train")]


def _job(name: str, gpus: int, utilization: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {
                "metadata": {"annotations": {ANNOTATION: utilization}},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "busybox", "command": ["sleep", "3600"],
                    "resources": {"limits": {"amd.com/gpu": str(gpus)}}}]}}}}


def _kaiwojob(name: str, utilization: str) -> dict[str, Any]:
    return {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob",
            "metadata": {"name": name, "annotations": {ANNOTATION: utilization}},
            "spec": {"user": "dev@example.com", "image": "busybox", "entrypoint": "sleep 3600", "gpus": 1,
                     "gpuVendor": "nvidia"}}


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def test_dev_preempts_an_idle_gpu_job_and_terminates_an_underutilized_kaiwojob(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    log_path = tmp_path / "dev.log"
    command = [sys.executable, "-m", "hosts.cli.main", "dev", "--kubeconfig", str(kubeconfig),
               "--time-factor", "0.5", "--scaled-clock", "--telemetry-interval", "1",
               "--resource-monitoring-interval", "2s", "--gpu-preemption-interval", "2s",
               "--admin-port", str(_free_port())]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {"PYTHONUNBUFFERED": "1"}
    with log_path.open("wb") as log:
        dev = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, env=env,
                               start_new_session=True)
    try:
        wait_for(lambda: "kaiwo-ray dev is ready" in log_path.read_text() or dev.poll() is not None, 240,
                 "dev is ready")
        assert dev.poll() is None, log_path.read_text()
        match = re.search(r"metrics at (http://\S+/metrics)", log_path.read_text())
        assert match, log_path.read_text()
        client: Any = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
        core: Any = kubernetes.client.CoreV1Api(client)
        batch: Any = kubernetes.client.BatchV1Api(client)
        custom: Any = kubernetes.client.CustomObjectsApi(client)

        custom.patch_cluster_custom_object("config.kaiwo.silogen.ai", "v1alpha1", "kaiwoconfigs", "kaiwo", {
            "spec": {"resourceMonitoring": {"lowUtilizationThreshold": 10, "terminateUnderutilized": True,
                                            "terminateUnderutilizedAfter": "6s"}}})
        custom.create_namespaced_custom_object(*KAIWO, "default", "kaiwojobs", _kaiwojob("idle-kj", "0"))
        custom.create_namespaced_custom_object(*KAIWO, "default", "kaiwojobs", _kaiwojob("busy-kj", "95"))

        namespace = "gpu-demo"
        core.create_namespace({"metadata": {"name": namespace, "annotations": {
            PREFIX + "enabled": "true", PREFIX + "grace-period": "4s"}}})
        batch.create_namespaced_job(namespace, _job("idle-train", 8, "0"))
        batch.create_namespaced_job(namespace, _job("busy-train", 8, "95"))

        def phases() -> dict[str, str]:
            items = custom.list_namespaced_custom_object(*KAIWO, namespace, "gpuworkloads")["items"]
            return {i["spec"]["workloadRef"]["name"]: (i.get("status") or {}).get("phase", "") for i in items}

        wait_for(lambda: phases().get("idle-train") == "Idle" and phases().get("busy-train") == "Active", 120,
                 "idle-train Idle, busy-train Active")
        batch.create_namespaced_job(namespace, _job("infer", 8, "60"))
        wait_for(lambda: phases().get("idle-train") == "Preempted", 120, "idle-train preempted")
        wait_for(lambda: phases().get("infer") == "Active", 120, "infer runs on the freed GPUs")
        assert phases()["busy-train"] == "Active"

        idle = wait_for(lambda: (o := custom.get_namespaced_custom_object(*KAIWO, "default", "kaiwojobs", "idle-kj"))
                        .get("status", {}).get("status") == "TERMINATED" and o, 120, "idle-kj TERMINATED")
        assert _condition(idle, "ResourceUnderutilization")["reason"] == "GpuUtilizationLow"
        assert _condition(idle, "WorkloadTerminatedEarly")["reason"] == "GpuUtilizationLow"
        busy = custom.get_namespaced_custom_object(*KAIWO, "default", "kaiwojobs", "busy-kj")
        assert busy["status"]["status"] == "RUNNING"
        assert _condition(busy, "ResourceUnderutilization").get("reason") == "GpuUtilizationNormal"

        with urllib.request.urlopen(match.group(1), timeout=10) as response:
            families = {f.name: f.samples for f in text_string_to_metric_families(response.read().decode())}
        assert any(s.labels["pod"].startswith("busy-train") and s.value == 95.0
                   for s in families["gpu_gfx_activity"])
        assert any(s.labels["pod"].startswith("busy-kj") and s.value == 95.0
                   for s in families["DCGM_FI_DEV_GPU_UTIL"])
        assert families["kaiwo_gpu_utilization_percent"]

        # the admin API (on Ray Serve) shows the same utilization per GPU, with the pod holding it
        admin = re.search(r"Admin API and dashboard: (http://\S+)", log_path.read_text())
        assert admin, log_path.read_text()
        admin_url = admin.group(1)
        gpus = wait_for(lambda: _busy_train_gpus(admin_url), 30, "busy-train's GPUs in /api/v1/nodes")
        assert len(gpus) == 8 and {g["utilization"] for g in gpus} == {95.0}, gpus
        assert gpus[0]["pod"]["namespace"] == namespace

        # `kaiwo monitor` reaches the admin API through the Kubernetes API (`dev` registers the aggregated
        # group, as deploy/ does) with the kubeconfig `dev` wrote, and shows the telemetry
        monitor = subprocess.run([sys.executable, "-m", "kaiwo_ray.cli.kaiwo", "monitor", "job/busy-kj",
                                  "-n", "default", "--kubeconfig", str(kubeconfig), "--source", "telemetry"],
                                 capture_output=True, text=True, timeout=60, env=env)
        assert monitor.returncode == 0, monitor.stderr
        assert "from kaiwo-ray telemetry (the Kubernetes API, admin.kaiwo.silogen.ai)" in monitor.stdout, monitor.stdout
        rows = [line.split() for line in monitor.stdout.splitlines()[2:]]
        assert rows and all(r[0].startswith("busy-kj") and r[3] == "95%" for r in rows), monitor.stdout

        os.killpg(dev.pid, signal.SIGINT)
        assert dev.wait(90) == 0, log_path.read_text()[-3000:]
    finally:
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait(10)
