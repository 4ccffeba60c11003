"""Upstream's GPU-preemption scenarios that once failed against kaiwo-ray (issue 35), each on a
sandbox of its own: the operator with GPU preemption on, utilization through our telemetry pipeline."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from e2e_harness import OperatorSandbox, operator_sandbox
from e2e_support import wait_for
from late_source import LateSource

from kaiwo_ray.controllers.gpupreemption import GpuPreemptionSettings
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.reconcile import gpupreemption as gp
from kaiwo_ray.reconcile.gpupreemption import PREFIX
from kaiwo_ray.telemetry.aggregator import Aggregator
from kaiwo_ray.telemetry.sampler import SandboxSampler
from kaiwo_ray.telemetry.sources import SamplingSource
from kaiwo_sandbox.cluster.nodes.gpusim import ANNOTATION

pytestmark = pytest.mark.slow
API = "kaiwo.silogen.ai/v1alpha1"


@pytest.fixture
def env() -> Iterator[OperatorSandbox]:
    source = LateSource()
    options = {"gpuworkload": {"settings": GpuPreemptionSettings(enabled=True, polling_interval=0.5),
                               "source": source}}
    with operator_sandbox({"controller_options": options}, time_factor=1.0) as running:
        client = running.run(KubeClient.from_kubeconfig(str(running.sb.kubeconfig_path)))
        source.inner = SamplingSource(SandboxSampler(client), Aggregator(stale_after=30))
        yield running
        running.run(client.close())


def _job(name: str, gpus: int, utilization: str | None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    template_meta = {"annotations": {ANNOTATION: utilization}} if utilization is not None else {}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"backoffLimit": 0, "template": {
                "metadata": template_meta,
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "busybox", "command": ["sleep", "3600"],
                    "resources": {"limits": {"amd.com/gpu": str(gpus)}, "requests": {"amd.com/gpu": str(gpus)}}}]}}}}


def _tracker(env: OperatorSandbox, namespace: str, job: str) -> dict[str, Any] | None:
    for item in env.target.kube.items(API, "GpuWorkload", namespace):
        if item["spec"]["workloadRef"]["name"] == job:
            return item
    return None


def _phase(env: OperatorSandbox, namespace: str, job: str) -> str:
    return ((_tracker(env, namespace, job) or {}).get("status") or {}).get("phase") or ""


def test_1_threshold_zero_is_active_whatever_the_reading(env: OperatorSandbox) -> None:
    """A Job annotated Always / threshold 0 / grace 15s with one AMD GPU becomes Active: nothing is
    below 0 %, measured or not."""
    kube = env.target.kube
    namespace = "scenario-1"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    kube.create(_job("zero", 1, None, {PREFIX + "policy": "Always", PREFIX + "threshold": "0",
                                      PREFIX + "grace-period": "15s"}), namespace)
    wait_for(lambda: _phase(env, namespace, "zero") == "Active", 60, "the GpuWorkload Active")
    found = _tracker(env, namespace, "zero")
    assert found is not None and found["spec"]["utilizationThreshold"] == 0


def _events(env: OperatorSandbox, namespace: str, job: str) -> list[str]:
    tracker = _tracker(env, namespace, job)
    return [] if tracker is None else env.target.kube.event_reasons(namespace, tracker["metadata"]["name"],
                                                                     "GpuWorkload")


def _kubectl(env: OperatorSandbox, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("kubectl")
    assert binary is not None, "kubectl (make tools)"
    result = subprocess.run([binary, "--kubeconfig", str(env.sb.kubeconfig_path), *args], capture_output=True,
                            text=True, timeout=60)
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {result.stderr}")
    return result


def _probe_largest_node(env: OperatorSandbox, namespace: str) -> int:
    """Upstream's probe: the largest node's allocatable amd.com/gpu, then `kubectl run` pods asking for
    that many and fewer until one is scheduled, each deleted with --grace-period=1."""
    allocatable = _kubectl(env, "get", "nodes", "-o",
                           "jsonpath={range .items[*]}{.status.allocatable.amd\\.com/gpu}{\"\\n\"}{end}").stdout
    largest = max((int(v) for v in allocatable.split() if v.strip()), default=0)
    assert largest > 0, "no amd.com/gpu in the node set"
    for count in range(largest, 0, -1):
        _kubectl(env, "delete", "pod", "gpu-probe", "-n", namespace, "--ignore-not-found", "--grace-period=1")
        overrides = {"spec": {"containers": [{"name": "p", "image": "busybox", "command": ["sleep", "300"],
                                              "resources": {"requests": {"amd.com/gpu": str(count)},
                                                            "limits": {"amd.com/gpu": str(count)}}}]}}
        _kubectl(env, "run", "gpu-probe", "-n", namespace, "--image=busybox", "--restart=Never",
                 f"--overrides={json.dumps(overrides)}")
        if _kubectl(env, "wait", "pod/gpu-probe", "-n", namespace, "--for=condition=PodScheduled", "--timeout=10s",
                    check=False).returncode == 0:
            _kubectl(env, "delete", "pod", "gpu-probe", "-n", namespace, "--ignore-not-found", "--grace-period=1")
            return count
    raise AssertionError("no schedulable amd.com/gpu count")


def _pinned(body: dict[str, Any], node: str) -> dict[str, Any]:
    body["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return body


def _victim_node(env: OperatorSandbox, namespace: str, job: str) -> str:
    def node() -> str | None:
        for pod in env.target.kube.items("v1", "Pod", namespace):
            if (pod["metadata"].get("labels") or {}).get("job-name") == job and pod["spec"].get("nodeName"):
                return str(pod["spec"]["nodeName"])
        return None
    return wait_for(node, 60, f"{job}'s pod on a node")


def _past_grace(env: OperatorSandbox, namespace: str, job: str, grace: float) -> bool:
    """The victim has been Idle for longer than its grace period, by the tracker's own idleSince."""
    since = ((_tracker(env, namespace, job) or {}).get("status") or {}).get("idleSince")
    if not since:
        return False
    idle_since = datetime.fromisoformat(str(since).replace("Z", "+00:00"))
    return (datetime.now(UTC) - idle_since).total_seconds() > grace


def test_3_on_pressure_a_pinned_demand_preempts_the_idle_victim_on_its_node(env: OperatorSandbox) -> None:
    """Upstream's `on-pressure`: probe the largest node, saturate it with an idle victim (OnPressure,
    grace 2s), then a demand pinned to the victim's node goes PendingGpu, the victim is preempted and
    the demand runs."""
    kube = env.target.kube
    namespace = "scenario-3"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    gpus = _probe_largest_node(env, namespace)
    kube.create(_job("victim", gpus, None, {PREFIX + "policy": "OnPressure", PREFIX + "grace-period": "2s"}),
                namespace)
    wait_for(lambda: _phase(env, namespace, "victim") == "Idle", 60, "the victim Idle")
    node = _victim_node(env, namespace, "victim")
    wait_for(lambda: _past_grace(env, namespace, "victim", 2.5), 30, "the victim idle past its grace period")
    kube.create(_pinned(_job("demand", gpus, None, {PREFIX + "enabled": "true", PREFIX + "policy": "OnPressure"}),
                        node), namespace)
    # the demand may pass through PendingGpu faster than a poll sees it: its event says it did
    wait_for(lambda: "WorkloadPendingGpu" in _events(env, namespace, "demand"), 60, "the demand PendingGpu")
    wait_for(lambda: _phase(env, namespace, "victim") == "Preempted", 60, "the victim Preempted")
    assert kube.get("batch/v1", "Job", "victim", namespace) is None
    # busybox uses no GPU: once running, the demand reads Idle as upstream's does
    wait_for(lambda: _phase(env, namespace, "demand") in ("Active", "Idle"), 60, "the demand runs on the freed node")


def test_4_on_pressure_through_kueue(env: OperatorSandbox) -> None:
    """Upstream's `on-pressure-with-kueue`: a KaiwoQueueConfig whose flavor selects `kaiwo/worker: "true"`
    and whose ClusterQueue covers only amd.com/gpu with the probed quota; the victim is admitted and
    scheduled, goes Idle, and a pinned demand through the same queue preempts it."""
    kube = env.target.kube
    namespace = "scenario-4"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    gpus = _probe_largest_node(env, namespace)
    config = {"apiVersion": API, "kind": "KaiwoQueueConfig", "metadata": {"name": "kaiwo"}, "spec": {
        "resourceFlavors": [{"name": "default", "nodeLabels": {"kaiwo/worker": "true"}}],
        "clusterQueues": [{"name": "kaiwo", "namespaces": [namespace], "spec": {
            "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO", "stopPolicy": "None",
            "resourceGroups": [{"coveredResources": ["amd.com/gpu"], "flavors": [{"name": "default", "resources": [
                {"name": "amd.com/gpu", "nominalQuota": gpus}]}]}]}}]}}
    subprocess.run([shutil.which("kubectl") or "kubectl", "--kubeconfig", str(env.sb.kubeconfig_path), "apply",
                    "-f", "-"], input=json.dumps(config), text=True, check=True, capture_output=True, timeout=60)
    queued = {"kueue.x-k8s.io/queue-name": "kaiwo"}
    victim = _job("victim", gpus, None, {PREFIX + "policy": "OnPressure", PREFIX + "enabled": "true",
                                         PREFIX + "grace-period": "2s"})
    victim["metadata"]["labels"] = queued
    kube.create(victim, namespace)

    def scheduled() -> bool:
        for pod in kube.items("v1", "Pod", namespace):
            if (pod["metadata"].get("labels") or {}).get("job-name") == "victim":
                return any(c.get("type") == "PodScheduled" and c.get("status") == "True"
                           for c in (pod.get("status") or {}).get("conditions") or [])
        return False

    wait_for(scheduled, 60, "the victim's pod scheduled")
    wait_for(lambda: _phase(env, namespace, "victim") == "Idle", 60, "the victim Idle")
    node = _victim_node(env, namespace, "victim")
    wait_for(lambda: _past_grace(env, namespace, "victim", 2.5), 30, "the victim idle past its grace period")
    demand = _pinned(_job("demand", gpus, None, {PREFIX + "enabled": "true", PREFIX + "policy": "OnPressure"}), node)
    demand["metadata"]["labels"] = queued
    kube.create(demand, namespace)
    wait_for(lambda: _phase(env, namespace, "demand") in ("PendingGpu", "Active", "Idle"), 60,
             "the demand's GpuWorkload past submission")
    wait_for(lambda: _phase(env, namespace, "victim") == "Preempted", 60, "the victim Preempted")
    wait_for(lambda: _phase(env, namespace, "demand") in ("Active", "Idle"), 90, "the demand admitted and running")


def test_a_pass_decided_from_an_older_tracker_does_not_overwrite_a_newer_phase(env: OperatorSandbox) -> None:
    """An evaluation marks a victim Preempting while the victim's own pass, decided from the copy before
    that, is about to write Idle: the write names the older resourceVersion and is refused, so the
    victim is preempted once (one PreemptionStarted) instead of put back to Idle and preempted again."""
    kube = env.target.kube
    namespace = "stale-pass"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    kube.create(_job("victim", 1, "0", {PREFIX + "grace-period": "1h"}), namespace)
    wait_for(lambda: _phase(env, namespace, "victim") == "Idle", 60, "the victim Idle")
    older = _tracker(env, namespace, "victim")
    assert older is not None
    controller = env.controller("gpuworkload")
    env.run(controller.client.patch(R.GPUWORKLOADS, older["metadata"]["name"], {"status": {
        "phase": "Preempting", "preemptionReason": "an evaluation elsewhere"}}, namespace, subresource="status"))
    plan = gp.TrackerPlan(status={**older["status"], "phase": "Idle"})
    env.run(controller._execute(older, plan))
    assert _phase(env, namespace, "victim") in ("Preempting", "Preempted")
