"""The sandbox's GPU exporter: its simulated GPUs (cluster/gpusim.py) on two public routes of the
API server, registered by `add_routes` (added by `Sandbox.start` through `ApiServer.application(extra_routes)`).

* `GET /sandbox/gpu-metrics`: Prometheus text as the AMD device-metrics exporter writes it
  (`gpu_gfx_activity` with `gpu_id`, `gpu_partition_id`, `hostname`, `namespace`, `pod`,
  `container`, ...) and, for NVIDIA nodes, as the DCGM exporter does (`DCGM_FI_DEV_GPU_UTIL` with
  `gpu`, `UUID`, `pci_bus_id`, `modelName`, `Hostname`, `namespace`, `pod`, `container`): what
  upstream Kaiwo's scrape mode reads, so that mode can be tested against the sandbox.
* `GET /sandbox/gpus[?node=NAME]`: the same GPUs as JSON, for kaiwo-ray's sandbox telemetry backend.

Both are unauthenticated, like an exporter's port. Labels of a GPU no pod holds are empty, as the
exporters leave them.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from kaiwo_sandbox.cluster.nodes.gpusim import SimulatedGpu, simulate
from kaiwo_sandbox.cluster.pods import is_terminal
from kaiwo_sandbox.contracts import NODES, PODS, JsonObj, WatchEvent

METRICS_PATH = "/sandbox/gpu-metrics"
DEVICES_PATH = "/sandbox/gpus"

AMD_LABELS = ("gpu_id", "gpu_partition_id", "serial_number", "card_model", "hostname", "namespace", "pod",
              "container")
DCGM_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "namespace", "pod", "container")


def holds_gpus(pod: JsonObj) -> bool:
    """Whether `simulate` counts the pod on its node: bound, not finished, not being deleted."""
    return (bool((pod.get("spec") or {}).get("nodeName")) and not is_terminal(pod)
            and not (pod.get("metadata") or {}).get("deletionTimestamp"))


class BoundPods:
    """The pods `simulate` looks at (`holds_gpus`), kept from the store's notifications: a reading is
    asked for on every GPU preemption tracker pass, and walking every pod the store ever held (ten
    thousand finished ones in a simulated week) for each was most of a long simulation's time."""

    def __init__(self, store: Any) -> None:
        self._pods: dict[tuple[str, str], JsonObj] = {}
        self.unsubscribe = store.subscribe(self._on_event)
        for pod in store.refs(PODS):
            self._note(pod, deleted=False)

    def pods(self) -> list[JsonObj]:
        return list(self._pods.values())

    def _on_event(self, event: WatchEvent) -> None:
        if event.gvr.resource == PODS.resource and event.gvr.group == PODS.group:
            self._note(event.object, deleted=event.type == "DELETED")

    def _note(self, pod: JsonObj, *, deleted: bool) -> None:
        meta = pod.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if not deleted and holds_gpus(pod):
            self._pods[key] = pod
        else:
            self._pods.pop(key, None)


def current_gpus(store: Any, node: str | None = None, bound: BoundPods | None = None) -> list[SimulatedGpu]:
    """`store`: the sandbox's ObjectStore. Its objects are read in place (`refs`, read-only): a copy of
    every pod per request was most of a simulation's time with idle-GPU preemption on, which asks for
    readings on every tracker pass. Nodes in name order, as a list gives them; the pods' order does not
    matter (`simulate` orders each node's pods itself). `bound`: the pods that can hold GPUs, when kept."""
    nodes = sorted(store.refs(NODES), key=lambda n: str((n.get("metadata") or {}).get("name") or ""))
    pods = bound.pods() if bound is not None else store.refs(PODS)
    clock = store.clock
    return simulate(nodes, pods, clock.now(), getattr(clock, "time_factor", 1.0), only_node=node)


class _Collector:
    def __init__(self, gpus: list[SimulatedGpu]) -> None:
        self.gpus = gpus

    def collect(self) -> Any:
        amd = GaugeMetricFamily("gpu_gfx_activity", "GPU graphics/compute engine activity (percent)",
                                labels=AMD_LABELS)
        amd_mem = GaugeMetricFamily("gpu_used_vram", "Used VRAM (MB)", labels=AMD_LABELS)
        amd_power = GaugeMetricFamily("gpu_power_usage", "Socket power (W)", labels=AMD_LABELS)
        dcgm = GaugeMetricFamily("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", labels=DCGM_LABELS)
        dcgm_mem = GaugeMetricFamily("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", labels=DCGM_LABELS)
        dcgm_power = GaugeMetricFamily("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", labels=DCGM_LABELS)
        for gpu in self.gpus:
            if gpu.utilization is None:
                continue  # unknown: the exporter publishes nothing rather than a made-up 0
            used_mb = gpu.memory_used_bytes / (1024 * 1024)
            if gpu.vendor == "amd":
                labels = [str(gpu.index), "0", gpu.uuid.replace("-", "")[:16].upper(), gpu.model, gpu.node,
                          gpu.namespace, gpu.pod, gpu.container]
                amd.add_metric(labels, gpu.utilization)
                amd_mem.add_metric(labels, used_mb)
                amd_power.add_metric(labels, gpu.power_watts)
            else:
                labels = [str(gpu.index), gpu.uuid, gpu.bus_id, f"nvidia{gpu.index}", gpu.model, gpu.node,
                          gpu.namespace, gpu.pod, gpu.container]
                dcgm.add_metric(labels, gpu.utilization)
                dcgm_mem.add_metric(labels, used_mb)
                dcgm_power.add_metric(labels, gpu.power_watts)
        yield from (amd, amd_mem, amd_power, dcgm, dcgm_mem, dcgm_power)


def render_metrics(gpus: list[SimulatedGpu]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(gpus))
    return bytes(generate_latest(registry))


def gpu_json(gpu: SimulatedGpu) -> dict[str, Any]:
    return {"node": gpu.node, "resource": gpu.resource, "vendor": gpu.vendor, "index": gpu.index, "uuid": gpu.uuid,
            "busId": gpu.bus_id, "model": gpu.model, "utilization": gpu.utilization,
            "memoryUsedBytes": gpu.memory_used_bytes, "memoryTotalBytes": gpu.memory_total_bytes,
            "powerWatts": gpu.power_watts, "temperatureC": gpu.temperature_c, "namespace": gpu.namespace,
            "pod": gpu.pod, "container": gpu.container, "podUid": gpu.pod_uid, "error": gpu.error}


def add_routes(app: web.Application, store: Any) -> None:
    bound = BoundPods(store)

    async def stop_keeping(_: web.Application) -> None:
        bound.unsubscribe()

    app.on_cleanup.append(stop_keeping)

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=render_metrics(current_gpus(store, bound=bound)),
                            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    async def devices(request: web.Request) -> web.Response:
        gpus = current_gpus(store, request.query.get("node") or None, bound)
        return web.json_response({"items": [gpu_json(g) for g in gpus]})

    app.router.add_get(METRICS_PATH, metrics)
    app.router.add_get(DEVICES_PATH, devices)
