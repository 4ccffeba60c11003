"""The resource monitor's pure decision (spec §9): every pod and GPU evaluated, the condition's
transition time as the underutilization clock, termination after the configured time, and no
decision at all on missing data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kaiwo_ray.api.config import ResourceMonitoringConfig
from kaiwo_ray.reconcile.monitoring import GpuUse, evaluate
from kaiwo_ray.telemetry.sources import parse_exposition

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
CONFIG = ResourceMonitoringConfig(low_utilization_threshold=10, terminate_underutilized=True,
                                  terminate_underutilized_after="30s")


def _job(phase: str = "RUNNING", conditions: list[dict[str, Any]] | None = None, namespace: str = "ml") -> dict[str, Any]:
    return {"kind": "KaiwoJob", "metadata": {"name": "train", "namespace": namespace, "resourceVersion": "7"},
            "status": {"status": phase, "conditions": conditions or [
                {"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": "2026-03-01T11:00:00Z"}]}}


def _low_since(seconds: int) -> list[dict[str, Any]]:
    stamp = (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [{"type": "ResourceUnderutilization", "status": "True", "reason": "GpuUtilizationLow",
             "message": "1 of 1 GPUs below 10%",
             "lastTransitionTime": stamp}]


def test_one_low_gpu_among_busy_ones_flags_the_workload_with_an_event_per_low_gpu() -> None:
    uses = [GpuUse("train-0", "0", 95.0), GpuUse("train-0", "1", 3.0), GpuUse("train-1", "0", 0.0)]
    decision = evaluate(_job(), uses, 3, CONFIG, NOW)
    assert decision.condition is not None and decision.condition.status == "True"
    assert decision.condition.reason == "GpuUtilizationLow"
    assert [m for _, r, m in decision.events if r == "GpuUtilizationLow"] == [
        "Pod 'train-0' is underutilizing GPU 1/0", "Pod 'train-1' is underutilizing GPU 0/0"]
    assert decision.status is not None and not decision.terminate
    (cond,) = [c for c in decision.status["conditions"] if c["type"] == "ResourceUnderutilization"]
    assert cond["lastTransitionTime"] == "2026-03-01T12:00:00Z"
    assert any(c["type"] == "Admitted" for c in decision.status["conditions"])  # others kept


def test_busy_workload_is_normal_and_unchanged_condition_writes_nothing() -> None:
    decision = evaluate(_job(), [GpuUse("p", "0", 50.0)], 1, CONFIG, NOW)
    assert decision.condition is not None and (decision.condition.status, decision.condition.reason) == (
        "False", "GpuUtilizationNormal")
    settled = {**_job(), "status": {"status": "RUNNING", "conditions": decision.status["conditions"]}}  # type: ignore[index]
    assert evaluate(settled, [GpuUse("p", "0", 60.0)], 1, CONFIG, NOW).status is None


def test_low_longer_than_terminate_after_flags_terminating() -> None:
    early = evaluate(_job(conditions=_low_since(20)), [GpuUse("p", "0", 0.0)], 1, CONFIG, NOW)
    assert not early.terminate and early.status is None  # condition unchanged, clock running
    late = evaluate(_job(conditions=_low_since(31)), [GpuUse("p", "0", 0.0)], 1, CONFIG, NOW)
    assert late.terminate and late.status is not None and late.status["status"] == "TERMINATING"
    (early_cond,) = [c for c in late.status["conditions"] if c["type"] == "WorkloadTerminatedEarly"]
    assert (early_cond["status"], early_cond["reason"]) == ("False", "GpuUtilizationLow")
    off = CONFIG.model_copy(update={"terminate_underutilized": False})
    assert not evaluate(_job(conditions=_low_since(3600)), [GpuUse("p", "0", 0.0)], 1, off, NOW).terminate


@pytest.mark.parametrize("uses", [
    [],  # no telemetry source knows the pod
    [GpuUse("p", "0", None)],  # its node's telemetry is gone
    [GpuUse("p", "0", 0.0)],  # one of two requested GPUs never reported
])
def test_missing_data_is_unknown_and_never_terminates(uses: list[GpuUse]) -> None:
    decision = evaluate(_job(conditions=_low_since(3600)), uses, 2 if uses and uses[0].utilization == 0.0 else 1,
                        CONFIG, NOW)
    assert decision.condition is not None and decision.condition.status == "Unknown"
    assert decision.condition.reason == "GpuTelemetryUnavailable"
    assert not decision.terminate and decision.events == []
    assert decision.status is not None  # the flip to Unknown restarts the clock when data returns
    (cond,) = [c for c in decision.status["conditions"] if c["type"] == "ResourceUnderutilization"]
    assert cond["lastTransitionTime"] == "2026-03-01T12:00:00Z"


@pytest.mark.parametrize("phase", ["TERMINATING", "TERMINATED", "FAILED", "COMPLETE", "PENDING"])
def test_only_running_workloads_are_evaluated(phase: str) -> None:
    decision = evaluate(_job(phase), [GpuUse("p", "0", 0.0)], 1, CONFIG, NOW)
    assert decision.status is None and decision.condition is None


def test_target_namespaces_and_cpu_workloads_are_skipped() -> None:
    scoped = CONFIG.model_copy(update={"target_namespaces": ["prod"]})
    assert evaluate(_job(), [GpuUse("p", "0", 0.0)], 1, scoped, NOW).condition is None
    assert evaluate(_job(), [], 0, CONFIG, NOW).condition is None


def test_scraped_exposition_keeps_every_gpu_of_every_pod() -> None:
    text = "\n".join([
        "# TYPE gpu_gfx_activity gauge",
        'gpu_gfx_activity{gpu_id="0",gpu_partition_id="0",hostname="n1",namespace="ml",pod="a",container="c"} 3',
        'gpu_gfx_activity{gpu_id="1",gpu_partition_id="0",hostname="n1",namespace="ml",pod="a",container="c"} 97',
        'gpu_gfx_activity{gpu_id="2",gpu_partition_id="0",hostname="n1",namespace="",pod="",container=""} 0',
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
        'DCGM_FI_DEV_GPU_UTIL{gpu="3",UUID="GPU-x",Hostname="n2",k8s_namespace_name="ml",pod_name="b"} 41.257',
    ])
    parsed = parse_exposition(text)
    assert sorted((u.gpu_id, u.utilization) for u in parsed[("ml", "a")]) == [("0", 3.0), ("1", 97.0)]
    assert [(u.gpu_id, u.utilization) for u in parsed[("ml", "b")]] == [("3", 41.26)]
    assert len(parsed) == 2  # the unattributed GPU is nobody's
