"""The aggregator's snapshot as the admin API's per-GPU samples (serve/telemetry_samples.py, pure part)."""

from __future__ import annotations

from kaiwo_ray.telemetry.model import GpuSample, NodeSample, PodRef
from serve.telemetry_samples import gpu_samples_from_snapshot


def gpu(index: int, utilization: float | None, *, pod: str = "", error: str = "") -> GpuSample:
    return GpuSample(uuid=f"GPU-{index}", index=index, vendor="sandbox-amd", utilization=utilization,
                     memory_used_bytes=1 << 30, memory_total_bytes=192 << 30, error=error,
                     pods=(PodRef(namespace="ns", pod=pod),) if pod else ())


def test_live_samples_carry_utilization_memory_and_the_holding_pod() -> None:
    node = NodeSample(node="n1", timestamp=1.0, backend="sandbox", gpus=(gpu(0, 95.0, pod="p-0"), gpu(1, 0.0)))
    samples = gpu_samples_from_snapshot([(node, True)])
    assert [(s.node, s.index, s.utilization, s.memory_used_bytes) for s in samples] == [
        ("n1", 0, 95.0, float(1 << 30)), ("n1", 1, 0.0, float(1 << 30))]
    assert samples[0].pod is not None and (samples[0].pod.name, samples[0].pod.namespace) == ("p-0", "ns")
    assert samples[1].pod is None


def test_a_stale_node_or_an_unreadable_gpu_is_unknown_never_idle() -> None:
    stale = NodeSample(node="n1", timestamp=1.0, backend="sandbox", gpus=(gpu(0, 0.0, pod="p-0"),))
    broken = NodeSample(node="n2", timestamp=1.0, backend="sandbox", gpus=(gpu(0, 0.0, error="GPU lost"),))
    failed = NodeSample(node="n3", timestamp=1.0, backend="sandbox", gpus=(gpu(0, 0.0),), error="backend down")
    samples = gpu_samples_from_snapshot([(stale, False), (broken, True), (failed, True)])
    assert [(s.node, s.utilization, s.memory_used_bytes) for s in samples] == [
        ("n1", None, None), ("n2", None, None), ("n3", None, None)]
    assert samples[0].memory_total_bytes == float(192 << 30)  # capacity stays known
