"""Simulated GPUs of the sandbox's nodes and what the pods on them do with them (pure).

Nodes advertise `amd.com/gpu` / `nvidia.com/gpu` capacity; a bound, not yet finished pod holds as
many of them as its containers request, handed out in the order the pods started (as a device
plugin would, deterministically). A pod's utilization comes from its annotation
`sandbox.kaiwo-ray.dev/gpu-utilization`:

    "90"                         90 % for as long as the pod runs
    "90 for 30s, then 0"         90 % for the first 30 s after the pod started, then 0 %
    "0 for 1m, then 50 for 10s"  segments in order; after the last timed segment: 0 %

durations are Go-style (`30s`, `1m30s`, `2h`) and scaled by the sandbox's time factor like every
simulated duration. No annotation means 0 %: a pod that holds GPUs and does nothing is idle, as on a
real cluster. A malformed annotation makes that pod's GPUs *unknown* (utilization None, `error`
says why), never idle.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from kaiwo_sandbox.cluster.pods import is_terminal, quantity
from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.semantics.times import parse_time

ANNOTATION = "sandbox.kaiwo-ray.dev/gpu-utilization"
GPU_RESOURCES = ("amd.com/gpu", "nvidia.com/gpu")

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(h|m|s|ms))+$")
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_SEGMENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%?\s*(?:for\s+(\S+))?\s*$")


class ScheduleError(ValueError):
    pass


def _seconds(text: str) -> float:
    if not _DURATION.match(text):
        raise ScheduleError(f"{text!r} is not a duration (use e.g. 30s, 1m30s, 2h)")
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in _PART.findall(text))


def parse_schedule(text: str) -> list[tuple[float, float | None]]:
    """[(percent, seconds or None = until the pod ends)]; ScheduleError naming the bad part."""
    segments: list[tuple[float, float | None]] = []
    parts = [p.strip() for p in re.split(r",?\s*then\s+", text.strip())]
    for number, part in enumerate(parts):
        match = _SEGMENT.match(part)
        if not match:
            raise ScheduleError(f"{part!r}: expected '<percent>' or '<percent> for <duration>'")
        percent = float(match.group(1))
        if percent > 100:
            raise ScheduleError(f"{part!r}: utilization must be between 0 and 100")
        duration = _seconds(match.group(2)) if match.group(2) else None
        if duration is None and number != len(parts) - 1:
            raise ScheduleError(f"{part!r}: only the last segment may omit 'for <duration>'")
        segments.append((percent, duration))
    return segments


def utilization_at(schedule: list[tuple[float, float | None]], elapsed: float) -> float:
    for percent, duration in schedule:
        if duration is None or elapsed < duration:
            return percent
        elapsed -= duration
    return 0.0


@dataclass(slots=True)
class SimulatedGpu:
    node: str
    resource: str
    index: int
    uuid: str
    bus_id: str
    model: str
    memory_total_bytes: int
    utilization: float | None = 0.0
    namespace: str = ""
    pod: str = ""
    container: str = ""
    pod_uid: str = ""
    error: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def vendor(self) -> str:
        return "nvidia" if self.resource == "nvidia.com/gpu" else "amd"

    @property
    def memory_used_bytes(self) -> int:
        if not self.pod:
            return 0
        return int(self.memory_total_bytes * (0.15 + 0.7 * (self.utilization or 0) / 100))

    @property
    def power_watts(self) -> float:
        idle, span = (70.0, 630.0) if self.vendor == "nvidia" else (140.0, 610.0)
        return round(idle + span * (self.utilization or 0) / 100, 1)

    @property
    def temperature_c(self) -> float:
        return round(32 + 0.45 * (self.utilization or 0), 1)


def _model(node: JsonObj, resource: str) -> tuple[str, int]:
    labels = (node.get("metadata") or {}).get("labels") or {}
    if resource == "nvidia.com/gpu":
        mib = int(Decimal(str(labels.get("nvidia.com/gpu.memory") or 81559)))
        return str(labels.get("nvidia.com/gpu.product") or "NVIDIA-GPU"), mib * 1024 * 1024
    vram = str(labels.get("amd.com/gpu.vram") or "192G")
    gib = int(Decimal(vram.rstrip("GgBi") or "192"))
    return str(labels.get("amd.com/gpu.product-name") or "AMD-GPU"), gib * 1024 ** 3


def _identity(node: str, resource: str, index: int) -> tuple[str, str]:
    digest = hashlib.sha1(f"{node}/{resource}/{index}".encode()).hexdigest()
    uuid = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
    bus = f"0000:{(int(digest[32:34], 16) & 0xF0) | index:02x}:00.0"
    return (f"GPU-{uuid}" if resource == "nvidia.com/gpu" else uuid), bus


def _container_gpus(pod: JsonObj, resource: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for container in (pod.get("spec") or {}).get("containers") or []:
        res = container.get("resources") or {}
        amount = quantity((res.get("limits") or {}).get(resource) or (res.get("requests") or {}).get(resource) or 0)
        if amount > 0:
            out.append((str(container.get("name") or ""), int(amount)))
    return out


def simulate(nodes: list[JsonObj], pods: list[JsonObj], now: datetime, time_factor: float = 1.0,
             only_node: str | None = None) -> list[SimulatedGpu]:
    """Every GPU of every node (or of `only_node`), with the pod holding it and its utilization now."""
    by_node: dict[str, list[JsonObj]] = {}
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name and not is_terminal(pod) and not (pod.get("metadata") or {}).get("deletionTimestamp"):
            by_node.setdefault(node_name, []).append(pod)
    gpus: list[SimulatedGpu] = []
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name") or "")
        if only_node is not None and name != only_node:
            continue
        capacity = ((node.get("status") or {}).get("capacity")) or {}
        running = sorted(by_node.get(name, []), key=_start_order)
        for resource in GPU_RESOURCES:
            count = int(quantity(capacity.get(resource) or 0))
            if count <= 0:
                continue
            model, memory = _model(node, resource)
            devices = []
            for index in range(count):
                uuid, bus = _identity(name, resource, index)
                devices.append(SimulatedGpu(node=name, resource=resource, index=index, uuid=uuid, bus_id=bus,
                                            model=model, memory_total_bytes=memory))
            free = iter(devices)
            for pod in running:
                percent, error = _pod_utilization(pod, now, time_factor)
                meta = pod.get("metadata") or {}
                for container, amount in _container_gpus(pod, resource):
                    for _ in range(amount):
                        gpu = next(free, None)
                        if gpu is None:
                            break
                        gpu.namespace, gpu.pod, gpu.container = meta.get("namespace", ""), meta.get("name", ""), container
                        gpu.pod_uid, gpu.utilization, gpu.error = str(meta.get("uid") or ""), percent, error
            gpus.extend(devices)
    return gpus


def _start_order(pod: JsonObj) -> tuple[str, str, str]:
    meta = pod.get("metadata") or {}
    started = (pod.get("status") or {}).get("startTime") or meta.get("creationTimestamp") or ""
    return str(started), str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _pod_utilization(pod: JsonObj, now: datetime, time_factor: float) -> tuple[float | None, str]:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(ANNOTATION)
    if text is None:
        return 0.0, ""
    try:
        schedule = parse_schedule(str(text))
    except ScheduleError as err:
        return None, f"annotation {ANNOTATION}: {err}"
    started = parse_time((pod.get("status") or {}).get("startTime"))
    if started is None or (pod.get("status") or {}).get("phase") != "Running":
        return 0.0, ""  # a GPU held by a pod whose containers do not run yet does no work
    elapsed = max((now - started).total_seconds(), 0.0) / max(time_factor, 1e-9)
    return utilization_at(schedule, elapsed), ""
