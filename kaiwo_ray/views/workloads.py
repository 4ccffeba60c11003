"""Workload rows: what a list of KaiwoJobs/KaiwoServices shows, and how it is filtered and counted."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, Field

from kaiwo_ray.api.labels import LABEL_USER
from kaiwo_ray.views._objects import meta, status

WORKLOAD_KINDS = ("KaiwoJob", "KaiwoService")
_KIND_ALIASES = {
    "kaiwojob": "KaiwoJob", "kaiwojobs": "KaiwoJob", "job": "KaiwoJob", "jobs": "KaiwoJob",
    "kaiwoservice": "KaiwoService", "kaiwoservices": "KaiwoService", "service": "KaiwoService",
    "services": "KaiwoService",
}


def workload_kind(text: str) -> str | None:
    """`KaiwoJob` for kaiwojob/kaiwojobs/job/jobs (any case), likewise for services; None if neither."""
    return _KIND_ALIASES.get(text.strip().lower())


class WorkloadSummary(BaseModel):
    kind: str
    namespace: str
    name: str
    uid: str = ""
    user: str = ""
    queue: str = ""
    phase: str = ""
    created: str | None = None
    started: str | None = None
    finished: str | None = None
    gpus: int = 0
    replicas: int | None = None
    image: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    message: str = ""
    """The last False condition's message, when something is wrong."""


def summarize(obj: Mapping[str, Any], default_queue: str = "kaiwo") -> WorkloadSummary:
    spec = obj.get("spec") or {}
    labels = {str(k): str(v) for k, v in (meta(obj).get("labels") or {}).items()}
    problem = ""
    for cond in status(obj).get("conditions") or ():
        if cond.get("status") == "False" and cond.get("message"):
            problem = str(cond["message"])
    gpus = spec.get("gpus") or 0
    replicas = spec.get("replicas")
    return WorkloadSummary(
        kind=str(obj.get("kind") or ""), namespace=str(meta(obj).get("namespace") or ""),
        name=str(meta(obj).get("name") or ""), uid=str(meta(obj).get("uid") or ""),
        user=str(spec.get("user") or labels.get(LABEL_USER) or ""),
        queue=str(spec.get("clusterQueue") or default_queue), phase=str(status(obj).get("status") or ""),
        created=meta(obj).get("creationTimestamp"), started=status(obj).get("startTime"),
        finished=status(obj).get("completionTime"), gpus=int(gpus) if isinstance(gpus, int) else 0,
        replicas=replicas if isinstance(replicas, int) else None, image=spec.get("image"), labels=labels,
        message=problem)


def phase_counts(workloads: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Workloads by `status.status` ("" for not yet observed by the operator)."""
    counts: dict[str, int] = {}
    for wl in workloads:
        phase = str(status(wl).get("status") or "")
        counts[phase] = counts.get(phase, 0) + 1
    return counts
