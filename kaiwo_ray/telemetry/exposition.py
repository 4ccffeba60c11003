"""The aggregator's metrics, in Prometheus text, under the names existing dashboards already use:

* AMD GPUs as the AMD device-metrics exporter: `gpu_gfx_activity`, `gpu_used_vram`,
  `gpu_total_vram` (MB), `gpu_power_usage` (W), `gpu_edge_temperature` with `gpu_id`,
  `gpu_partition_id`, `serial_number`, `card_model`, `hostname`, `namespace`, `pod`, `container`.
* NVIDIA GPUs as the DCGM exporter: `DCGM_FI_DEV_GPU_UTIL` (%), `DCGM_FI_DEV_FB_USED` (MiB),
  `DCGM_FI_DEV_POWER_USAGE` (W), `DCGM_FI_DEV_GPU_TEMP` with `gpu`, `UUID`, `pci_bus_id`, `device`,
  `modelName`, `Hostname`, `namespace`, `pod`, `container`.
* Both, vendor-neutral: `kaiwo_gpu_utilization_percent`, `kaiwo_gpu_memory_used_bytes`,
  `kaiwo_gpu_memory_total_bytes`, `kaiwo_gpu_power_watts`, `kaiwo_gpu_temperature_celsius` with
  `node`, `gpu_id`, `uuid`, `vendor`, `model`, `namespace`, `pod`, `container`; and per node
  `kaiwo_gpu_telemetry_up` (1 live, 0 not) and `kaiwo_gpu_telemetry_age_seconds`.

GPUs of a node whose telemetry is not live are left out of the measurement series (an absent
series reads as "unknown" in PromQL; a stale value would read as a measurement). A GPU shared by
several pods has one series per pod, as in the exporters.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from kaiwo_ray import clock
from kaiwo_ray.telemetry.aggregator import Aggregator
from kaiwo_ray.telemetry.model import GpuSample, PodRef

MIB = 1024 * 1024
AMD_LABELS = ("gpu_id", "gpu_partition_id", "serial_number", "card_model", "hostname", "namespace", "pod",
              "container")
DCGM_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "namespace", "pod", "container")
KAIWO_LABELS = ("node", "gpu_id", "uuid", "vendor", "model", "namespace", "pod", "container")
NO_POD = PodRef()


def _g(name: str, doc: str, labels: tuple[str, ...]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


class AggregatorCollector:
    def __init__(self, aggregator: Aggregator, now: float | None = None) -> None:
        self.aggregator = aggregator
        self.now = now

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = clock.timestamp() if self.now is None else self.now
        f = {
            "amd_util": _g("gpu_gfx_activity", "GPU graphics/compute engine activity (percent)", AMD_LABELS),
            "amd_used": _g("gpu_used_vram", "Used VRAM (MB)", AMD_LABELS),
            "amd_total": _g("gpu_total_vram", "Total VRAM (MB)", AMD_LABELS),
            "amd_power": _g("gpu_power_usage", "Socket power (W)", AMD_LABELS),
            "amd_temp": _g("gpu_edge_temperature", "Temperature (C)", AMD_LABELS),
            "nv_util": _g("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", DCGM_LABELS),
            "nv_used": _g("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", DCGM_LABELS),
            "nv_power": _g("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", DCGM_LABELS),
            "nv_temp": _g("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", DCGM_LABELS),
            "util": _g("kaiwo_gpu_utilization_percent", "GPU utilization measured at the source", KAIWO_LABELS),
            "used": _g("kaiwo_gpu_memory_used_bytes", "GPU memory in use", KAIWO_LABELS),
            "total": _g("kaiwo_gpu_memory_total_bytes", "GPU memory size", KAIWO_LABELS),
            "power": _g("kaiwo_gpu_power_watts", "GPU power draw", KAIWO_LABELS),
            "temp": _g("kaiwo_gpu_temperature_celsius", "GPU temperature", KAIWO_LABELS),
        }
        up = _g("kaiwo_gpu_telemetry_up", "1 when the node's telemetry is live, else 0", ("node", "backend"))
        age = _g("kaiwo_gpu_telemetry_age_seconds", "Seconds since the node's last sample", ("node",))
        for sample, live in self.aggregator.snapshot(now):
            up.add_metric([sample.node, sample.backend], 1.0 if live else 0.0)
            age.add_metric([sample.node], max(0.0, now - sample.timestamp))
            if not live:
                continue
            for gpu in sample.gpus:
                if gpu.error:
                    continue
                for ref in gpu.pods or (NO_POD,):
                    _add_gpu(f, sample.node, gpu, ref)
        yield from f.values()
        yield up
        yield age


def _add(family: GaugeMetricFamily, labels: list[str], value: float | None) -> None:
    if value is not None:
        family.add_metric(labels, value)


def _add_gpu(f: dict[str, GaugeMetricFamily], node: str, gpu: GpuSample, ref: PodRef) -> None:
    index = str(gpu.index)
    used_mib = gpu.memory_used_bytes / MIB if gpu.memory_used_bytes is not None else None
    neutral = [node, index, gpu.uuid, gpu.vendor, gpu.model, ref.namespace, ref.pod, ref.container]
    _add(f["util"], neutral, gpu.utilization)
    _add(f["used"], neutral, gpu.memory_used_bytes)
    _add(f["total"], neutral, gpu.memory_total_bytes)
    _add(f["power"], neutral, gpu.power_watts)
    _add(f["temp"], neutral, gpu.temperature_c)
    if gpu.resource == "amd.com/gpu":
        labels = [index, "0", gpu.uuid.replace("-", "")[:16].upper(), gpu.model, node, ref.namespace, ref.pod,
                  ref.container]
        _add(f["amd_util"], labels, gpu.utilization)
        _add(f["amd_used"], labels, used_mib)
        _add(f["amd_total"], labels, gpu.memory_total_bytes / MIB if gpu.memory_total_bytes is not None else None)
        _add(f["amd_power"], labels, gpu.power_watts)
        _add(f["amd_temp"], labels, gpu.temperature_c)
    else:
        labels = [index, gpu.uuid, gpu.bus_id, f"nvidia{index}", gpu.model, node, ref.namespace, ref.pod,
                  ref.container]
        _add(f["nv_util"], labels, gpu.utilization)
        _add(f["nv_used"], labels, used_mib)
        _add(f["nv_power"], labels, gpu.power_watts)
        _add(f["nv_temp"], labels, gpu.temperature_c)


def render(aggregator: Aggregator, now: float | None = None) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AggregatorCollector(aggregator, now))
    result: Any = generate_latest(registry)
    return bytes(result)
