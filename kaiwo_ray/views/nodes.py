"""Node read model: GPUs (and CPU/memory) allocatable and requested per node, the pods holding
them, and per-GPU utilization when telemetry samples are given (the seam for the telemetry work:
`node_views(nodes, pods, samples=...)`; without samples the per-GPU list is empty)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal

from pydantic import BaseModel, Field

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.labels import LABEL_NAME
from kaiwo_ray.views._objects import (
    GPU_RESOURCES,
    TERMINAL_POD_PHASES,
    ObjectRef,
    meta,
    pod_requests,
    quantity,
    show,
    status,
)


class GpuReading(BaseModel):
    """One GPU of a node as the views show it: its latest telemetry reading (the collector's `telemetry.model.GpuSample`, placed on its node)."""

    node: str
    index: int
    utilization: float | None
    """0..100 percent; None: unknown (the node's telemetry is not live or the device unreadable), never idle."""
    memory_used_bytes: float | None = None
    memory_total_bytes: float | None = None
    pod: ObjectRef | None = None


class PodOnNode(BaseModel):
    namespace: str
    name: str
    gpus: int
    workload: str | None = None
    """The KaiwoJob/KaiwoService name (its `kaiwo.silogen.ai/name` label), when it is one's pod."""


class NodeView(BaseModel):
    name: str
    ready: bool
    unschedulable: bool = False
    taints: list[str] = Field(default_factory=list)
    gpu_resource: str | None = None
    gpu_model: str | None = None
    gpus_allocatable: int = 0
    gpus_used: int = 0
    gpus_idle: int = 0
    cpu_allocatable: float = 0.0
    cpu_requested: float = 0.0
    memory_allocatable: float = 0.0
    memory_requested: float = 0.0
    memory_allocatable_text: str = "0"
    memory_requested_text: str = "0"
    pods: list[PodOnNode] = Field(default_factory=list)
    """Pods holding GPUs on this node."""
    gpus: list[GpuReading] = Field(default_factory=list)


class NodeTotals(BaseModel):
    nodes: int
    gpu_nodes: int
    gpus: int
    gpus_used: int
    gpus_idle: int
    idle_gpu_nodes: int
    """GPU nodes with no GPU requested at all."""


def _gpu_model(labels: Mapping[str, str]) -> str | None:
    # The vendors' product names first: `kaiwo/gpu-model` is the sanitised label value for node
    # affinity (`nvidiah10080gbhbm3`), no name to show a person.
    for key in ("amd.com/gpu.product-name", "nvidia.com/gpu.product", "kaiwo/gpu-model"):
        if labels.get(key):
            return str(labels[key])
    return None


def node_views(nodes: Iterable[JsonObj], pods: Iterable[JsonObj],
               samples: Iterable[GpuReading] = ()) -> list[NodeView]:
    by_node: dict[str, list[JsonObj]] = {}
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name and status(pod).get("phase") not in TERMINAL_POD_PHASES:
            by_node.setdefault(str(node_name), []).append(pod)
    sampled: dict[str, list[GpuReading]] = {}
    for sample in samples:
        sampled.setdefault(sample.node, []).append(sample)
    views = []
    for node in sorted(nodes, key=lambda n: str(meta(n).get("name"))):
        name = str(meta(node).get("name") or "")
        allocatable = status(node).get("allocatable") or {}
        gpu_resource = next((r for r in GPU_RESOURCES if quantity(allocatable.get(r)) > 0), None)
        used: dict[str, Decimal] = {}
        holders = []
        for pod in by_node.get(name, []):
            requests = pod_requests(pod)
            for key, value in requests.items():
                used[key] = used.get(key, Decimal(0)) + value
            gpus = int(requests.get(gpu_resource, 0)) if gpu_resource else 0
            if gpus:
                holders.append(PodOnNode(namespace=str(meta(pod).get("namespace") or ""),
                                         name=str(meta(pod).get("name") or ""), gpus=gpus,
                                         workload=(meta(pod).get("labels") or {}).get(LABEL_NAME)))
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status(node).get("conditions") or ())
        gpus_allocatable = int(quantity(allocatable.get(gpu_resource))) if gpu_resource else 0
        gpus_used = int(used.get(gpu_resource, 0)) if gpu_resource else 0
        memory = quantity(allocatable.get("memory"))
        views.append(NodeView(
            name=name, ready=ready, unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
            taints=[f"{t.get('key')}{'=' + str(t['value']) if t.get('value') else ''}:{t.get('effect')}"
                    for t in (node.get("spec") or {}).get("taints") or ()],
            gpu_resource=gpu_resource, gpu_model=_gpu_model(meta(node).get("labels") or {}),
            gpus_allocatable=gpus_allocatable, gpus_used=gpus_used,
            gpus_idle=max(0, gpus_allocatable - gpus_used),
            cpu_allocatable=float(quantity(allocatable.get("cpu"))), cpu_requested=float(used.get("cpu", 0)),
            memory_allocatable=float(memory), memory_requested=float(used.get("memory", 0)),
            memory_allocatable_text=show("memory", memory),
            memory_requested_text=show("memory", used.get("memory", Decimal(0))),
            pods=sorted(holders, key=lambda p: (p.namespace, p.name)),
            gpus=sorted(sampled.get(name, []), key=lambda s: s.index)))
    return views


def node_totals(views: Iterable[NodeView]) -> NodeTotals:
    items = list(views)
    gpu_nodes = [v for v in items if v.gpus_allocatable]
    return NodeTotals(nodes=len(items), gpu_nodes=len(gpu_nodes), gpus=sum(v.gpus_allocatable for v in items),
                      gpus_used=sum(v.gpus_used for v in items), gpus_idle=sum(v.gpus_idle for v in items),
                      idle_gpu_nodes=sum(1 for v in gpu_nodes if v.gpus_used == 0))

