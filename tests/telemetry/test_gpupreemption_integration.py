"""GPU preemption end to end, in-process: the operator (GpuWorkload controller included) next to a
sandbox whose pods' utilization follows their annotation, utilization read through our telemetry
pipeline (sandbox sampler -> aggregator core). Idle annotated Jobs get GpuWorkloads that go Idle; a
pending GPU Job turns its tracker PendingGpu, the oldest idle victim is preempted (its Job deleted,
tracker Preempted) and the pending Job runs; a busy Job is never touched."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from e2e_harness import OperatorSandbox, operator_sandbox
from e2e_support import wait_for
from late_source import LateSource

from kaiwo_ray.controllers.gpupreemption import GpuPreemptionSettings
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.reconcile.gpupreemption import PREFIX
from kaiwo_ray.telemetry.aggregator import Aggregator
from kaiwo_ray.telemetry.sampler import SandboxSampler
from kaiwo_ray.telemetry.sources import SamplingSource
from kaiwo_sandbox.cluster.nodes.gpusim import ANNOTATION

pytestmark = pytest.mark.slow
API = "kaiwo.silogen.ai/v1alpha1"


@pytest.fixture(scope="module")
def env() -> Iterator[OperatorSandbox]:
    source = LateSource()
    options = {"gpuworkload": {"settings": GpuPreemptionSettings(enabled=True, polling_interval=0.3),
                               "source": source}}
    with operator_sandbox({"controller_options": options}, time_factor=1.0) as running:
        client = running.run(KubeClient.from_kubeconfig(str(running.sb.kubeconfig_path)))
        source.inner = SamplingSource(SandboxSampler(client), Aggregator(stale_after=30))
        yield running
        running.run(client.close())


def _job(name: str, gpus: int, utilization: str, resource: str = "amd.com/gpu") -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {
                "metadata": {"annotations": {ANNOTATION: utilization}},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "busybox", "command": ["sleep", "3600"],
                    "resources": {"limits": {resource: str(gpus)}, "requests": {resource: str(gpus)}}}]}}}}


def test_idle_job_is_preempted_for_a_pending_one(env: OperatorSandbox) -> None:
    kube = env.target.kube
    namespace = "preempt"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": namespace, "annotations": {PREFIX + "enabled": "true", PREFIX + "grace-period": "1s"}}})

    def tracker(job: str) -> dict[str, Any] | None:
        for item in kube.items(API, "GpuWorkload", namespace):
            if item["spec"]["workloadRef"]["name"] == job:
                return item
        return None

    def phase(job: str) -> str:
        return ((tracker(job) or {}).get("status") or {}).get("phase") or ""

    kube.create(_job("train", 8, "0"), namespace)
    wait_for(lambda: phase("train") == "Idle", 60, "train Idle")
    kube.create(_job("busy", 8, "90"), namespace)
    wait_for(lambda: phase("busy") == "Active", 60, "busy Active")
    found = tracker("train")
    assert found is not None and found["metadata"]["name"].startswith("job-train-")
    assert found["spec"]["gpuResources"] == {"amd.com/gpu": 8}
    assert found["status"]["ownerChain"].endswith("Job/train") and found["status"]["idleSince"]

    kube.create(_job("infer", 8, "70"), namespace)  # both AMD nodes are full: Insufficient amd.com/gpu
    wait_for(lambda: phase("train") == "Preempted", 60, "train Preempted")
    preempted = tracker("train")
    assert preempted is not None
    assert preempted["status"]["preemptedFor"] == (tracker("infer") or {})["metadata"]["name"]
    assert preempted["status"]["preemptionReason"].startswith("GPU pressure: pending workload job-infer-")
    wait_for(lambda: kube.get("batch/v1", "Job", "train", namespace) is None, 30, "the train Job deleted")
    wait_for(lambda: phase("infer") == "Active", 60, "infer runs on the freed GPUs")
    assert phase("busy") == "Active" and kube.get("batch/v1", "Job", "busy", namespace) is not None
    reasons = kube.event_reasons(namespace, preempted["metadata"]["name"], "GpuWorkload")
    assert {"WorkloadIdle", "PreemptionStarted", "WorkloadPreempted"} <= set(reasons)
    # evaluations ran under the Lease and released it with an empty holder, which later ones took as free
    lease = kube.get("coordination.k8s.io/v1", "Lease", "gpu-preemption-eval", "kube-system")
    assert lease is not None and lease["spec"]["holderIdentity"] == ""
    assert env.controller("gpuworkload").evaluations >= 2


def test_a_job_kueue_holds_back_is_tracked_as_pending_gpu_before_it_has_pods(env: OperatorSandbox) -> None:
    kube = env.target.kube
    namespace = "preempt-kueue"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": namespace, "annotations": {PREFIX + "policy": "OnPressure"}}})
    kube.create({"apiVersion": kube.kueue_api, "kind": "LocalQueue", "metadata": {"name": "kaiwo"},
                 "spec": {"clusterQueue": "kaiwo"}}, namespace)
    body = _job("huge", 24, "0")  # more amd.com/gpu than the ClusterQueue's quota: Kueue keeps it suspended
    body["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "kaiwo"}
    body["spec"]["suspend"] = True
    kube.create(body, namespace)

    def tracker() -> dict[str, Any] | None:
        items = kube.items(API, "GpuWorkload", namespace)
        return items[0] if items and (items[0].get("status") or {}).get("phase") == "PendingGpu" else None

    found = wait_for(tracker, 60, "the suspended Job tracked as PendingGpu")
    assert found["spec"]["gpuResources"] == {"amd.com/gpu": 24}  # from the Job's pod template
    assert found["spec"]["preemptionPolicy"] == "OnPressure"
    assert [p["metadata"]["name"] for p in kube.items("v1", "Pod", namespace)] == []


def test_always_policy_forbidden_delete_then_success_then_ttl(env: OperatorSandbox) -> None:
    """Policy Always needs no pressure. A Forbidden delete is PreemptionFailed and back to Idle; once
    the delete goes through the tracker is Preempted and, after its TTL, removed."""
    kube = env.target.kube
    namespace = "preempt-always"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "annotations": {
        PREFIX + "policy": "Always", PREFIX + "grace-period": "1s", PREFIX + "ttl": "3s"}}})
    rule = env.sb.faults.fail(code=403, verbs="delete", resources="jobs.batch", namespaces=namespace, names="locked")
    # NVIDIA: the module's other tests keep both AMD nodes busy; preemption is vendor-neutral
    kube.create(_job("locked", 1, "0", "nvidia.com/gpu"), namespace)

    def tracker() -> dict[str, Any] | None:
        items = kube.items(API, "GpuWorkload", namespace)
        return items[0] if items else None

    wait_for(lambda: "PreemptionFailed" in kube.event_reasons(namespace, (tracker() or {"metadata": {"name": "-"}})[
        "metadata"]["name"], "GpuWorkload"), 60, "a Forbidden delete reported as PreemptionFailed")
    assert kube.get("batch/v1", "Job", "locked", namespace) is not None
    env.sb.faults.remove(rule)
    done = wait_for(lambda: (t := tracker()) and (t.get("status") or {}).get("phase") == "Preempted" and t, 60,
                    "Preempted once the delete is allowed")
    assert done["status"]["preemptionReason"].startswith("Policy is Always")
    wait_for(lambda: kube.get("batch/v1", "Job", "locked", namespace) is None, 30, "the Job deleted")
    wait_for(lambda: tracker() is None, 90, "the tracker removed after its 3s TTL")


def test_durations_from_annotations_are_written_as_go_writes_them(env: OperatorSandbox) -> None:
    """metav1.Duration writes `5m` back as `5m0s`: a namespace's `grace-period: 5m` is stored so, a
    Job's own `15s` stays `15s`, and `1h30m` becomes `1h30m0s`."""
    kube = env.target.kube
    namespace = "preempt-durations"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "annotations": {
        PREFIX + "grace-period": "5m", PREFIX + "ttl": "1h30m"}}})
    kube.create(_job("by-namespace", 1, "50", "nvidia.com/gpu"), namespace)
    own = _job("by-job", 1, "50", "nvidia.com/gpu")
    own["metadata"]["annotations"] = {PREFIX + "grace-period": "15s"}
    kube.create(own, namespace)

    def specs() -> dict[str, dict[str, Any]] | None:
        found = {item["spec"]["workloadRef"]["name"]: item["spec"] for item in kube.items(API, "GpuWorkload", namespace)}
        return found if len(found) == 2 else None

    found = wait_for(specs, 60, "both Jobs tracked")
    assert (found["by-namespace"]["gracePeriod"], found["by-namespace"]["ttlAfterFinished"]) == ("5m0s", "1h30m0s")
    assert (found["by-job"]["gracePeriod"], found["by-job"]["ttlAfterFinished"]) == ("15s", "1h30m0s")
