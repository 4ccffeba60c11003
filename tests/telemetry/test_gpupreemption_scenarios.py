"""Upstream's GPU-preemption scenarios that once failed against kaiwo-ray (issue 35), each on a
sandbox of its own: the operator with GPU preemption on, utilization through our telemetry pipeline."""

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
