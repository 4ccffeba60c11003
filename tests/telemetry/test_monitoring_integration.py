"""Resource monitoring end to end, in-process: the whole operator next to a sandbox whose pods'
GPU utilization follows their annotation. An idle KaiwoJob under `terminateUnderutilized` ends
TERMINATED with GpuUtilizationLow while a busy one keeps RUNNING, read once through our own
telemetry pipeline (sandbox sampler -> aggregator core) and once by scraping the sandbox's exporter
endpoint in the AMD/DCGM format (upstream's mode)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from e2e_harness import OperatorSandbox, operator_sandbox
from e2e_scenarios import kaiwo_job, wait_phase
from e2e_support import KAIWO_API, condition, wait_for
from late_source import LateSource

from kaiwo_ray.controllers.monitoring import MonitorSettings
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.telemetry.aggregator import Aggregator
from kaiwo_ray.telemetry.sampler import SandboxSampler
from kaiwo_ray.telemetry.sources import SamplingSource, ScrapeSource
from kaiwo_sandbox.cluster.nodes.gpusim import ANNOTATION

pytestmark = pytest.mark.slow
CONFIG_API = "config.kaiwo.silogen.ai/v1alpha1"


@pytest.fixture(scope="module", params=["telemetry", "scrape"])
def monitored(request: Any) -> Iterator[tuple[OperatorSandbox, str]]:
    source = LateSource()
    options = {"resourcemonitor": {"settings": MonitorSettings(enabled=True, polling_interval=0.3),
                                   "source": source}}
    with operator_sandbox({"controller_options": options}) as env:
        if request.param == "scrape":
            source.inner = ScrapeSource(env.sb.url + "/sandbox/gpu-metrics", ca_file=str(env.sb.ca_cert_path))
        else:
            client = env.run(KubeClient.from_kubeconfig(str(env.sb.kubeconfig_path)))
            source.inner = SamplingSource(SandboxSampler(client), Aggregator(stale_after=30))
        yield env, request.param
        if request.param == "telemetry":
            env.run(client.close())


def _configure(env: OperatorSandbox) -> None:
    kube = env.target.kube
    spec = {"resourceMonitoring": {"lowUtilizationThreshold": 10, "terminateUnderutilized": True,
                                   "terminateUnderutilizedAfter": "2s"}}
    if kube.get(CONFIG_API, "KaiwoConfig", "kaiwo") is None:
        kube.create({"apiVersion": CONFIG_API, "kind": "KaiwoConfig", "metadata": {"name": "kaiwo"}, "spec": spec})
    else:
        kube.patch(CONFIG_API, "KaiwoConfig", "kaiwo", {"spec": spec})


def test_idle_job_is_terminated_and_busy_job_keeps_running(monitored: tuple[OperatorSandbox, str]) -> None:
    env, mode = monitored
    _configure(env)
    target = env.target
    namespace = target.namespace(f"monitor-{mode}")
    for name, utilization in [("idle", "0"), ("busy", "95")]:
        body = kaiwo_job(name, namespace, gpus=1, gpuVendor="amd" if mode == "scrape" else "nvidia",
                         entrypoint="sleep 3600")
        body["metadata"]["annotations"] = {ANNOTATION: utilization}
        target.kube.create(body)
    wait_phase(target, "KaiwoJob", "busy", namespace, "RUNNING")
    idle = wait_phase(target, "KaiwoJob", "idle", namespace, "TERMINATED", timeout=60)
    low = condition(idle, "ResourceUnderutilization")
    early = condition(idle, "WorkloadTerminatedEarly")
    assert low is not None and (low["status"], low["reason"]) == ("True", "GpuUtilizationLow")
    assert early is not None and (early["status"], early["reason"]) == ("True", "GpuUtilizationLow")
    assert "GpuUtilizationLow" in target.kube.event_reasons(namespace, "idle")
    wait_for(lambda: target.kube.get("batch/v1", "Job", "idle", namespace) is None, 30, "the idle Job deleted")
    busy = wait_for(lambda: (o := target.kube.get(KAIWO_API, "KaiwoJob", "busy", namespace))
                    and condition(o, "ResourceUnderutilization") and o, 30, "busy evaluated")
    normal = condition(busy, "ResourceUnderutilization")
    assert normal is not None and (normal["status"], normal["reason"]) == ("False", "GpuUtilizationNormal")
    assert busy["status"]["status"] == "RUNNING"
