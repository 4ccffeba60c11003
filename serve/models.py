"""Typed response bodies of the admin API (what /openapi.json describes)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from kaiwo_ray.views.nodes import GpuReading, NodeTotals, NodeView
from kaiwo_ray.views.queues import ClusterQueueView
from kaiwo_ray.views.workloads import WorkloadSummary


class WorkloadPlural(StrEnum):
    """The workload types a path names (anything else is 422, `path.plural`)."""

    KAIWOJOBS = "kaiwojobs"
    KAIWOSERVICES = "kaiwoservices"


class StatusCause(BaseModel):
    reason: str = "FieldValueInvalid"
    message: str
    field: str = ""


class StatusDetails(BaseModel):
    name: str | None = None
    kind: str | None = None
    causes: list[StatusCause] = Field(default_factory=list)


class Status(BaseModel):
    """Every error answer, shaped like the Kubernetes API server's `Status`."""

    kind: str = "Status"
    apiVersion: str = "v1"
    status: str = "Failure"
    message: str
    reason: str
    code: int
    details: StatusDetails | None = None


class WorkloadList(BaseModel):
    items: list[WorkloadSummary]
    total: int
    """How many workloads match the filters (all pages)."""
    continue_token: str | None = Field(default=None, alias="continue")
    """Pass as `continue` to get the next page; absent on the last one."""

    model_config = {"populate_by_name": True}


class ChildRef(BaseModel):
    kind: str
    name: str
    namespace: str | None = None
    phase: str = ""


class WorkloadDetail(BaseModel):
    summary: WorkloadSummary
    object: dict[str, Any]
    """The KaiwoJob/KaiwoService as the API server holds it."""
    children: list[ChildRef] = Field(default_factory=list)
    pods: list[ChildRef] = Field(default_factory=list)


class WorkloadGpuList(BaseModel):
    """The GPUs a workload's pods hold, as telemetry last measured them (empty without telemetry)."""

    items: list[GpuReading]


class EventView(BaseModel):
    type: str = ""
    reason: str = ""
    message: str = ""
    object: ChildRef
    first_seen: str | None = None
    last_seen: str | None = None
    count: int = 1
    source: str = ""


class EventList(BaseModel):
    items: list[EventView]


class SubmitResult(BaseModel):
    kind: str
    namespace: str
    name: str
    uid: str = ""
    created: bool = True


class DeleteResult(BaseModel):
    kind: str
    namespace: str
    name: str
    deleted: bool = True


class QueueList(BaseModel):
    items: list[ClusterQueueView]


class NodeList(BaseModel):
    items: list[NodeView]
    totals: NodeTotals


class Overview(BaseModel):
    """What the dashboard's first page shows."""

    phases: dict[str, int]
    workloads: int
    """Counted over the namespaces the user may list workloads in."""
    queues: list[ClusterQueueView]
    """Empty when the user may not list ClusterQueues."""
    nodes: NodeTotals | None
    """None when the user may not list nodes."""
    version: int
