"""GpuWorkload (`kaiwo.silogen.ai/v1alpha1`, namespaced): the tracker of one GPU-holding workload
for idle-GPU preemption (spec/cluster.md §8.1). Created by the GPU-preemption controller for an
opted-in root owner (a Job, Deployment, KaiwoJob, ...); it carries no ownerReference so that it
outlives the workload and records what happened to it."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from kaiwo_ray.api._base import GoDuration, Time, WireModel
from kaiwo_ray.api.meta import Condition, ObjectMeta
from kaiwo_ray.api.workloads import KAIWO_API_VERSION


class GpuWorkloadPhase(StrEnum):
    PENDING_GPU = "PendingGpu"
    PENDING_OTHER = "PendingOther"
    ACTIVE = "Active"
    IDLE = "Idle"
    PREEMPTING = "Preempting"
    PREEMPTED = "Preempted"
    DELETED = "Deleted"


class WorkloadRef(WireModel):
    """The root owner being tracked."""

    api_version: str
    kind: str
    name: str
    uid: str


class GpuWorkloadSpec(WireModel):
    workload_ref: WorkloadRef
    gpu_resources: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    """Extended resource (`amd.com/gpu`, `nvidia.com/gpu`, ...) -> GPUs held by the workload's pods."""
    utilization_threshold: Annotated[float, Field(ge=0, le=100)] | None = None
    """Percent below which the workload is idle, fractions allowed as upstream (unset: KaiwoConfig, env, 5)."""
    grace_period: GoDuration | None = None
    """How long it must stay idle before it may be preempted (unset: KaiwoConfig, env, 10m)."""
    preemption_policy: Literal["OnPressure", "Always"] | None = None
    aggregation_policy: Literal["Min", "Max", "Avg"] | None = None
    ttl_after_finished: GoDuration | None = None
    """How long a Preempted/Deleted tracker is kept; `0` keeps it (unset: KaiwoConfig, env, 24h)."""


class GpuMetric(WireModel):
    gpu_id: str
    utilization: Annotated[float, Field(ge=0, le=100)]
    last_update: Time | None = None


class TrackedPod(WireModel):
    pod_name: str
    gpu_metrics: list[GpuMetric] = Field(default_factory=list)


class GpuWorkloadStatus(WireModel):
    phase: GpuWorkloadPhase | None = Field(default=None, strict=False)
    tracked_pods: list[TrackedPod] = Field(default_factory=list)
    aggregated_utilization: float | None = None
    last_metrics_update: Time | None = None
    idle_since: Time | None = None
    finished_at: Time | None = None
    owner_chain: str | None = None
    """`Pod/x -> Job/y -> KaiwoJob/z`."""
    preempted_at: Time | None = None
    preempted_for: str | None = None
    preemption_reason: str | None = None
    conditions: list[Condition] = Field(default_factory=list)


class GpuWorkload(WireModel):
    api_version: Literal["kaiwo.silogen.ai/v1alpha1"] = KAIWO_API_VERSION
    kind: Literal["GpuWorkload"] = "GpuWorkload"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: GpuWorkloadSpec
    status: GpuWorkloadStatus | None = None
