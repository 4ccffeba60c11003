"""When will a pending workload start (pure): the cluster's KaiwoJobs now, as traces a forward
simulation replays (docs/simulate.md, "Estimated start times").

A running KaiwoJob ends at its start + `spec.duration` when it declares one; else after a percentile
of the run times of its user's finished KaiwoJobs, else of its queue's, else `DEFAULT_RUN_SECONDS`.
Pending ones run for the same estimate once started. Three scenarios (the 10th, 50th and 90th
percentile run times) give the earliest, likely and latest start; a scenario that is the same trace
as another is simulated once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel

from kaiwo_ray.api.durations import parse_go_duration
from kaiwo_ray.simulation.shape import kaiwojob_shape
from kaiwo_ray.simulation.trace import TraceEntry, TraceWorkload

DEFAULT_RUN_SECONDS = 3600.0
"""The run time assumed for a workload without `spec.duration` whose user and queue have no history."""
QUANTILES: tuple[float, float, float] = (0.1, 0.5, 0.9)
RUNNING = frozenset({"STARTING", "RUNNING", "READY"})
PENDING = frozenset({"", "DOWNLOADING", "PENDING"})
Basis = Literal["declared", "user", "queue", "default"]


@dataclass(frozen=True, slots=True)
class Job:
    """What the forecast knows of one KaiwoJob."""

    namespace: str
    name: str
    user: str
    queue: str
    priority: str | None
    gpus: int
    gpu_vendor: Literal["amd", "nvidia"]
    cpu: str
    memory: str
    created: datetime
    started: datetime | None
    declared: float | None  # spec.duration in seconds
    kind: Literal["job", "rayjob"] = "job"
    replicas: int = 1  # pods of a job, GPU workers of a rayjob; `gpus`, `cpu`, `memory` are each pod's


@dataclass(frozen=True, slots=True)
class ClusterState:
    running: list[Job]
    pending: list[Job]  # in the order they were submitted
    history: list[tuple[str, str, float]]  # (user, queue, run seconds) of finished KaiwoJobs


class Estimate(BaseModel):
    """A pending workload's estimated start. `start` is the likely one (median run times), `earliest`
    and `latest` those with the 10th and 90th percentile run times; None where the simulation did not
    start it before its horizon."""

    namespace: str
    name: str
    start: datetime | None
    earliest: datetime | None
    latest: datetime | None


def _time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _job(obj: Mapping[str, Any]) -> Job | None:
    """The forecast's view of a KaiwoJob, batch (one pod, or `spec.job`'s pods) or Ray (a head and GPU
    workers), shaped as `kaiwo_ray.simulation.shape` reads it; None without a creation time."""
    spec = obj.get("spec") or {}
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    created = _time(meta.get("creationTimestamp"))
    if created is None:
        return None
    declared: float | None = None
    if isinstance(spec.get("duration"), str):
        try:
            declared = parse_go_duration(spec["duration"]).total_seconds() or None
        except ValueError:
            declared = None
    requests = (spec.get("resources") or {}).get("requests") or {}
    shape = kaiwojob_shape(spec)
    vendor: Literal["amd", "nvidia"] = "nvidia" if spec.get("gpuVendor") == "nvidia" else "amd"
    return Job(namespace=str(meta.get("namespace") or "default"), name=str(meta.get("name") or ""),
               user=str(spec.get("user") or "unknown"), queue=str(spec.get("clusterQueue") or "kaiwo"),
               priority=spec.get("priorityClass") or None, gpus=shape.gpus,
               gpu_vendor=vendor, cpu=str(requests.get("cpu") or "1"), memory=str(requests.get("memory") or "1Gi"),
               created=created, started=_time(status.get("startTime")), declared=declared,
               kind=shape.kind, replicas=shape.replicas)


def cluster_state(kaiwojobs: Iterable[Mapping[str, Any]]) -> ClusterState:
    """Running, pending and finished KaiwoJobs from their objects (phase is `status.status`)."""
    running: list[Job] = []
    pending: list[Job] = []
    history: list[tuple[str, str, float]] = []
    for obj in kaiwojobs:
        job = _job(obj)
        if job is None:
            continue
        status = obj.get("status") or {}
        phase = str(status.get("status") or "")
        if phase in RUNNING and job.started is not None:
            running.append(job)
        elif phase in PENDING:  # a preempted and requeued one keeps its first startTime
            pending.append(replace(job, started=None))
        elif phase == "COMPLETE" and job.started is not None:
            done = _time(status.get("completionTime"))
            if done is not None and done > job.started:
                history.append((job.user, job.queue, (done - job.started).total_seconds()))
    running.sort(key=lambda j: (j.started or j.created, j.namespace, j.name))
    pending.sort(key=lambda j: (j.created, j.namespace, j.name))
    return ClusterState(running, pending, history)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 1))))
    return ordered[rank - 1]


def run_seconds(job: Job, history: Sequence[tuple[str, str, float]], q: float) -> tuple[float, Basis]:
    """How long `job` runs in all: its declared duration, else the q-th percentile of its user's past
    run times, else its queue's, else the default."""
    if job.declared is not None:
        return job.declared, "declared"
    mine = [s for user, _queue, s in history if user == job.user]
    if mine:
        return percentile(mine, q), "user"
    queue = [s for _user, queue_name, s in history if queue_name == job.queue]
    if queue:
        return percentile(queue, q), "queue"
    return DEFAULT_RUN_SECONDS, "default"


def forecast_trace(state: ClusterState, now: datetime, q: float) -> list[TraceEntry]:
    """The trace that replays `state` from `now` (trace time 0): running jobs submitted at 0 for what
    is left of their run (at least 1 s), then the pending ones one second apart in their submission
    order (the simulated Kueue orders by whole-second creation stamps), for their whole estimated run."""
    entries: list[TraceEntry] = []
    for job in state.running:
        total, _basis = run_seconds(job, state.history, q)
        elapsed = (now - (job.started or now)).total_seconds()
        entries.append(TraceEntry(len(entries) + 1, _workload(job, 0.0, max(1.0, total - elapsed))))
    for index, job in enumerate(state.pending, start=1):
        total, _basis = run_seconds(job, state.history, q)
        entries.append(TraceEntry(len(entries) + 1, _workload(job, float(index), total)))
    return entries


def _workload(job: Job, submit: float, duration: float) -> TraceWorkload:
    return TraceWorkload(name=job.name, namespace=job.namespace, submit=submit, user=job.user, queue=job.queue,
                         priority=job.priority, kind=job.kind, replicas=job.replicas, gpus=job.gpus,
                         gpu_vendor=job.gpu_vendor, cpu=job.cpu, memory=job.memory, duration=duration,
                         declared_duration=job.declared)


def estimates(state: ClusterState, now: datetime,
              starts: Mapping[float, Mapping[tuple[str, str], float | None]]) -> list[Estimate]:
    """Each pending job's estimate from the simulated starts (trace seconds after `now`) per quantile."""

    def at(q: float, key: tuple[str, str]) -> datetime | None:
        seconds = starts.get(q, {}).get(key)
        return None if seconds is None else now + timedelta(seconds=round(seconds))

    low, mid, high = QUANTILES
    out = []
    for job in state.pending:
        key = (job.namespace, job.name)
        known = [t for t in (at(low, key), at(mid, key), at(high, key)) if t is not None]
        # Shorter run times usually mean an earlier start, not always (a freed gap another job takes):
        # the interval is the span of the three scenarios.
        out.append(Estimate(namespace=job.namespace, name=job.name, start=at(mid, key),
                            earliest=min(known) if known else None, latest=max(known) if known else None))
    return out
