"""`kaiwo-ray trace export`: a live cluster's KaiwoJobs as trace lines (docs/simulate.md).

Pure: the objects come in as the API server returned them (plain dicts) and the GPU ledger's rows as
`kaiwo_ray.telemetry.ledger` keeps them; the command (hosts/cli/trace.py) does the reading. Only what
the trace format can replay is written: a finished KaiwoJob, batch (`job`, one pod or `spec.job`'s
several) or Ray (`rayjob`). Everything else is counted under the reason it was left out, because a
trace that silently lacks workloads answers a different question than the one asked.
"""

from __future__ import annotations

import datetime
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kaiwo_ray.api.durations import parse_go_duration
from kaiwo_ray.api.labels import LABEL_QUEUE, LABEL_RUN_ID, LABEL_USER, SUBMITTED_BY
from kaiwo_ray.api.meta import parse_time
from kaiwo_ray.api.quantity import parse_quantity
from kaiwo_ray.simulation.shape import kaiwojob_shape
from kaiwo_ray.simulation.trace import GPU_RESOURCE, TraceWorkload, UtilizationSegment
from kaiwo_ray.telemetry.ledger import ALLOCATED, UNKNOWN, USED, RowKey

RAY_NODE_TYPE = "ray.io/node-type"  # KubeRay's label on a Ray pod: head or worker
DEFAULT_QUEUE = "kaiwo"  # the ClusterQueue a KaiwoJob without spec.clusterQueue goes to
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_FINISHED = ("Succeeded", "Failed")
_DONE = ("COMPLETE", "FAILED")  # a KaiwoJob's status.status once it has ended
_NOT_FINISHED = "not finished (running, pending, or its pods are gone)"

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ExportResult:
    workloads: list[TraceWorkload]
    skipped: dict[str, int] = field(default_factory=dict)
    """reason -> how many KaiwoJobs were left out for it."""


def mean_utilization(rows: Mapping[RowKey, list[float]], owner: str) -> float | None:
    """The owner's GPU utilization over its known GPU-seconds (used / (allocated - unknown)), in
    percent; None when the ledger knows none of its time."""
    used = known = 0.0
    for (_, key, _, _), row in rows.items():
        if key == owner:
            used += row[USED]
            known += row[ALLOCATED] - row[UNKNOWN]
    if known <= 0:
        return None
    return round(min(100.0, max(0.0, 100.0 * used / known)), 1)


def _seconds(later: datetime.datetime, earlier: datetime.datetime) -> float:
    return (later - earlier).total_seconds()


def _run_span(pod: Obj) -> tuple[datetime.datetime, datetime.datetime] | None:
    """When the pod's main container ran: its terminated state's startedAt..finishedAt, else the
    pod's startTime..the last condition change (a pod that ended before its container started)."""
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        ended = (container.get("state") or {}).get("terminated") or {}
        start, finish = parse_time(ended.get("startedAt")), parse_time(ended.get("finishedAt"))
        if start is not None and finish is not None:
            return start, finish
    start = parse_time(status.get("startTime"))
    stamps = [parse_time(c.get("lastTransitionTime")) for c in status.get("conditions") or []]
    finish = max((s for s in stamps if s is not None), default=None)
    return (start, finish) if start is not None and finish is not None else None


def _container_start(pod: Obj) -> datetime.datetime | None:
    """When the pod's first container started (running or ended), if it did."""
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        state = container.get("state") or {}
        started = parse_time((state.get("running") or state.get("terminated") or {}).get("startedAt"))
        if started is not None:
            return started
    return None


def _job_run(pods: list[Obj]) -> tuple[tuple[datetime.datetime, datetime.datetime], Obj] | None:
    """A batch KaiwoJob's last run, its first container start to its last pod's end, and one of its pods.
    The last run is the last pod to finish and the pods that ran beside it: pods of an earlier,
    preempted run ended before it started."""
    spans = [(span, pod) for pod in pods if (pod.get("status") or {}).get("phase") in _FINISHED
             and (span := _run_span(pod)) is not None]
    if not spans:
        return None
    (start, finish), pod = max(spans, key=lambda item: item[0][1])
    start = min(s for (s, f), _ in spans if s <= finish and f >= start)
    return (start, finish), pod


def _ray_run(job: Obj, rayjob: Obj | None, pods: list[Obj]) -> tuple[datetime.datetime, datetime.datetime] | None:
    """A finished Ray KaiwoJob's last run: from its first container start (pods still there), else the
    RayJob's `startTime` (KubeRay sets it when the admitted RayJob starts its cluster), else the
    KaiwoJob's `startTime`; to the RayJob's `endTime`, else the KaiwoJob's `completionTime`."""
    status = job.get("status") or {}
    ray_status = (rayjob or {}).get("status") or {}
    if status.get("status") not in _DONE:
        return None
    finish = parse_time(ray_status.get("endTime")) or parse_time(status.get("completionTime"))
    starts = [s for s in (_container_start(pod) for pod in pods) if s is not None]
    start = min(starts, default=None) or parse_time(ray_status.get("startTime")) or parse_time(status.get("startTime"))
    return (start, finish) if start is not None and finish is not None and finish >= start else None


def _vendor(spec: Obj) -> str:
    return "nvidia" if str(spec.get("gpuVendor") or "amd").lower() == "nvidia" else "amd"


def _requests(pod: Obj | None, job: Obj) -> tuple[int, str, str, str]:
    """(gpus, vendor, cpu, memory): the rendered pod's first container's requests, else the spec's."""
    spec = job.get("spec") or {}
    vendor = _vendor(spec)
    gpus = int(spec.get("gpus") or 0)
    wanted = (spec.get("resources") or {}).get("requests") or {}
    if pod is not None:
        containers = (pod.get("spec") or {}).get("containers") or []
        if containers:
            resources = containers[0].get("resources") or {}
            wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
            gpus = 0
            for name, resource in GPU_RESOURCE.items():
                if resource in wanted:
                    vendor, gpus = name, int(str(wanted[resource]))
    cpu, memory = str(wanted.get("cpu") or "1"), str(wanted.get("memory") or "1Gi")
    return gpus, vendor, _positive(cpu, "1"), _positive(memory, "1Gi")


def _positive(quantity: str, default: str) -> str:
    try:
        return quantity if parse_quantity(quantity) > 0 else default
    except (ValueError, ArithmeticError):
        return default


def _declared(spec: Obj) -> float | None:
    text = spec.get("duration")
    if not isinstance(text, str) or not text:
        return None
    try:
        seconds = parse_go_duration(text).total_seconds()
    except ValueError:
        return None
    return seconds if seconds > 0 else None


def export_trace(kaiwojobs: Iterable[Obj], pods: Iterable[Obj], *, since: datetime.datetime | None,
                 until: datetime.datetime, ledger_rows: Mapping[RowKey, list[float]] | None = None,
                 other: Mapping[str, int] | None = None, rayjobs: Iterable[Obj] = ()) -> ExportResult:
    """Trace lines of the finished KaiwoJobs created in [since, until), `submit` counted from `since`
    (None: from the first of them), sorted by (submit, namespace, name). `pods`: the pods of those
    namespaces (a KaiwoJob's carry its uid in `kaiwo.silogen.ai/run-id`); `rayjobs`: their RayJobs
    (a Ray KaiwoJob's, owned by it, gives the run's span once its pods are gone); `other`: workloads
    of kinds the trace cannot hold, counted by the caller (e.g. KaiwoServices)."""
    by_run: dict[str, list[Obj]] = {}
    for pod in pods:
        run_id = ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_RUN_ID)
        if run_id:
            by_run.setdefault(str(run_id), []).append(pod)
    ray_by_owner: dict[str, Obj] = {}
    for rayjob in rayjobs:
        for ref in (rayjob.get("metadata") or {}).get("ownerReferences") or []:
            if ref.get("kind") == "KaiwoJob" and ref.get("uid"):
                ray_by_owner[str(ref["uid"])] = rayjob
    skipped: Counter[str] = Counter(other or {})
    rows: list[tuple[datetime.datetime, str, str, dict[str, Any]]] = []
    for job in kaiwojobs:
        meta, spec = job.get("metadata") or {}, job.get("spec") or {}
        created = parse_time(meta.get("creationTimestamp"))
        if created is None or created >= until or (since is not None and created < since):
            continue
        shape = kaiwojob_shape(spec)
        own = by_run.get(str(meta.get("uid") or ""), [])
        if shape.kind == "rayjob":
            span = _ray_run(job, ray_by_owner.get(str(meta.get("uid") or "")), own)
            if span is None:
                skipped[_NOT_FINISHED] += 1
                continue
            start, finish = span
            workers = [p for p in own if ((p.get("metadata") or {}).get("labels") or {}).get(RAY_NODE_TYPE) == "worker"]
            _, _, cpu, memory = _requests(workers[0] if workers else None, job)
            gpus, vendor = shape.gpus, _vendor(spec)
        else:
            run = _job_run(own)
            if run is None or (shape.replicas > 1 and (job.get("status") or {}).get("status") not in _DONE):
                skipped[_NOT_FINISHED] += 1
                continue
            (start, finish), pod = run
            gpus, vendor, cpu, memory = _requests(pod, job)
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        line: dict[str, Any] = {
            "user": str(spec.get("user") or labels.get(LABEL_USER) or annotations.get(SUBMITTED_BY) or "unknown"),
            "queue": str(spec.get("clusterQueue") or labels.get(LABEL_QUEUE) or DEFAULT_QUEUE),
            "namespace": str(meta.get("namespace") or "default"),
            "kind": shape.kind, "replicas": shape.replicas,
            "gpus": gpus, "gpu_vendor": vendor, "cpu": cpu, "memory": memory,
            # Timestamps have whole seconds: a run shorter than that still ran.
            "duration": max(1.0, _seconds(finish, start)),
        }
        name = str(meta.get("name") or "")
        if _DNS_LABEL.match(name):
            line["name"] = name
        if spec.get("priorityClass"):
            line["priority"] = str(spec["priorityClass"])
        declared = _declared(spec)
        if declared is not None:
            line["declared_duration"] = declared
        percent = mean_utilization(ledger_rows, str(meta.get("uid"))) if ledger_rows and gpus else None
        if percent is not None:
            line["utilization"] = [UtilizationSegment(percent=percent)]
        rows.append((created, line["namespace"], name, line))
    rows.sort(key=lambda row: (row[0], row[1], row[2]))
    origin = since if since is not None else (rows[0][0] if rows else until)
    workloads = [TraceWorkload.model_validate({**line, "submit": _seconds(created, origin)})
                 for created, _, _, line in rows]
    return ExportResult(workloads, dict(sorted(skipped.items())))


_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_moment(text: str, now: datetime.datetime) -> datetime.datetime:
    """`--since`/`--until`: a duration before `now` (`90s`, `30m`, `24h`, `7d`, `2w`) or an RFC 3339
    timestamp (without an offset: UTC). ValueError naming the accepted forms."""
    match = _RELATIVE.match(text.strip())
    if match:
        return now - datetime.timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
    moment = parse_time(text.strip())
    if moment is None:
        raise ValueError(f"{text!r} is neither a duration (30m, 24h, 7d, 2w) nor an RFC 3339 time "
                         "(2026-12-01T00:00:00Z)")
    return moment
