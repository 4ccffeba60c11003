"""What a telemetry backend reports: typed samples of GPUs and the processes on them.

A field a device could not report (not supported, no permission) is None, never 0: the consumers
tell "measured idle" (0 %) from "unknown" (None), and only the former may cost a workload its GPUs.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PodRef(_Frozen):
    """The pod (and container) a GPU is allocated to, as the kubelet knows it."""

    namespace: str = ""
    pod: str = ""
    container: str = ""
    uid: str = ""  # known from cgroups when the PodResources API is unavailable


class GpuProcess(_Frozen):
    pid: int
    memory_bytes: int | None = None
    name: str = ""


class GpuSample(_Frozen):
    """One GPU at one moment. `index` is the backend's enumeration order on its node."""

    uuid: str
    index: int
    vendor: str  # "nvidia" | "amd" | "sandbox-amd" | ...
    model: str = ""
    bus_id: str = ""  # PCI bus id: what the AMD device plugin hands to the kubelet as device id
    utilization: float | None = None  # percent, 0..100
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    power_watts: float | None = None
    temperature_c: float | None = None
    processes: tuple[GpuProcess, ...] = ()
    pods: tuple[PodRef, ...] = ()  # filled by attribution (or directly by the sandbox backend)
    error: str = ""  # the device as a whole could not be read (GPU lost): utilization etc. are None

    @property
    def resource(self) -> str:
        """The Kubernetes extended resource this GPU is allocated as."""
        return "nvidia.com/gpu" if "nvidia" in self.vendor else "amd.com/gpu"


class NodeSample(_Frozen):
    """Everything one telemetry actor saw on one Kubernetes node in one tick."""

    node: str  # Kubernetes node name
    ray_node_id: str = ""
    timestamp: float  # seconds since the epoch
    backend: str
    gpus: tuple[GpuSample, ...] = Field(default_factory=tuple)
    error: str = ""  # the backend could not be read at all this tick
