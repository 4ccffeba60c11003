"""Idle-GPU preemption (spec/cluster.md §8), the pure parts: opt-in and settings, GPU counting,
one GpuWorkload's reconcile decision, and the cluster-wide matching of idle victims to pending
GPU workloads. The shell (kaiwo_ray/controllers/gpupreemption.py) gathers the world and writes.

Differences from upstream (docs/compatibility.md): NVIDIA (`nvidia.com/gpu`) as well as AMD
(`amd.com/*`); `...gpu-preemption.enabled: "false"` opts out; a tracker whose running pods have
no live utilization reading keeps its phase (upstream reads "no samples" as 0 % -> Idle): unknown
is never idle, so nothing is preempted on missing data.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from kaiwo_ray.api.config import GpuPreemptionConfig
from kaiwo_ray.api.durations import canonical_go_duration, format_go_duration, parse_go_duration
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.meta import parse_time

PREFIX = "kaiwo.silogen.ai/gpu-preemption."
GPU_PREFIXES = ("amd.com/", "nvidia.com/gpu")

PENDING_GPU, PENDING_OTHER, ACTIVE, IDLE = "PendingGpu", "PendingOther", "Active", "Idle"
PREEMPTING, PREEMPTED, DELETED = "Preempting", "Preempted", "Deleted"
TERMINAL = frozenset({PREEMPTED, DELETED})
PHASE_EVENTS: dict[str, tuple[str, str, str]] = {
    IDLE: ("Normal", "WorkloadIdle", "GPU utilization fell below the threshold"),
    ACTIVE: ("Normal", "WorkloadActive", "GPU utilization is at or above the threshold"),
    PENDING_GPU: ("Warning", "WorkloadPendingGpu", "Workload is waiting for GPUs"),
    PENDING_OTHER: ("Normal", "WorkloadPending", "Workload is pending"),
}


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# -- opt-in and settings ---------------------------------------------------------------------------

def preemption_annotations(namespace_annotations: Mapping[str, str] | None,
                           root_annotations: Mapping[str, str] | None) -> dict[str, str]:
    """The namespace's `kaiwo.silogen.ai/gpu-preemption.*` keys overlaid by the root owner's."""
    merged = {k: v for k, v in (namespace_annotations or {}).items() if k.startswith(PREFIX)}
    merged.update({k: v for k, v in (root_annotations or {}).items() if k.startswith(PREFIX)})
    return merged


def opted_in(annotations: Mapping[str, str]) -> bool:
    """Any prefixed key opts in, except `enabled: "false"` (upstream never reads the value)."""
    if not annotations:
        return False
    return str(annotations.get(PREFIX + "enabled", "")).strip().lower() != "false"


def spec_overrides(annotations: Mapping[str, str]) -> JsonObj:
    """GpuWorkload spec fields from the annotations; invalid values are ignored (as upstream)."""
    out: JsonObj = {}
    threshold = annotations.get(PREFIX + "threshold")
    if threshold is not None:
        try:
            value = float(str(threshold).strip().rstrip("%"))
            if 0 <= value <= 100:  # also false for NaN
                out["utilizationThreshold"] = int(value) if value.is_integer() else value
        except ValueError:
            pass
    for key, spec_field in (("grace-period", "gracePeriod"), ("ttl", "ttlAfterFinished")):
        text = annotations.get(PREFIX + key)
        if text is not None:
            # stored as Go's metav1.Duration writes it back (`5m` -> `5m0s`); an invalid one is ignored
            with contextlib.suppress(ValueError):
                out[spec_field] = canonical_go_duration(str(text).strip())
    policy = annotations.get(PREFIX + "policy")
    if policy in ("OnPressure", "Always"):
        out["preemptionPolicy"] = policy
    aggregation = annotations.get(PREFIX + "aggregation")
    if aggregation in ("Min", "Max", "Avg"):
        out["aggregationPolicy"] = aggregation
    return out


@dataclass(frozen=True, slots=True)
class Resolved:
    threshold: float = 5.0
    grace: timedelta = timedelta(minutes=10)
    policy: str = "OnPressure"
    aggregation: str = "Max"
    ttl: timedelta = timedelta(hours=24)


def _duration(*candidates: str | None, fallback: timedelta) -> timedelta:
    for text in candidates:
        if text:
            try:
                return parse_go_duration(text)
            except ValueError:
                continue
    return fallback


# The tracker spec fields `resolve` reads (a caller may remember its answer per their values).
RESOLVED_FROM = ("utilizationThreshold", "preemptionPolicy", "aggregationPolicy", "gracePeriod", "ttlAfterFinished")


def resolve(spec: Mapping[str, Any], config: GpuPreemptionConfig, env: Mapping[str, str]) -> Resolved:
    """CR spec -> KaiwoConfig.gpuPreemption -> GPU_PREEMPTION_DEFAULT_* -> built-in (§8.3). `env`: the
    operator's GPU_PREEMPTION_DEFAULT_* settings, read once by the controller's host."""
    threshold: float = 5.0
    for candidate in (spec.get("utilizationThreshold"), config.default_threshold,
                      env.get("GPU_PREEMPTION_DEFAULT_THRESHOLD")):
        try:
            if candidate is not None and candidate != "":
                threshold = float(candidate)
                break
        except (TypeError, ValueError):
            continue
    policy = spec.get("preemptionPolicy") or config.default_policy or env.get("GPU_PREEMPTION_DEFAULT_POLICY")
    aggregation = (spec.get("aggregationPolicy") or config.default_aggregation
                   or env.get("GPU_PREEMPTION_DEFAULT_AGGREGATION"))
    return Resolved(
        threshold=threshold,
        grace=_duration(spec.get("gracePeriod"), config.default_grace_period,
                        env.get("GPU_PREEMPTION_DEFAULT_GRACE_PERIOD"), fallback=timedelta(minutes=10)),
        policy="Always" if policy == "Always" else "OnPressure",
        aggregation=aggregation if aggregation in ("Min", "Avg") else "Max",
        ttl=_duration(spec.get("ttlAfterFinished"), config.default_ttl, env.get("GPU_PREEMPTION_DEFAULT_TTL"),
                      fallback=timedelta(hours=24)),
    )


# -- GPU counting ------------------------------------------------------------------------------

def _amount(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def pod_spec_gpus(pod_spec: Mapping[str, Any]) -> dict[str, int]:
    """GPUs per resource of one pod spec (§8.2): the sum of container requests, raised to a larger
    container limit or init-container request."""
    totals: dict[str, int] = {}
    largest: dict[str, int] = {}
    for container in pod_spec.get("containers") or []:
        res = container.get("resources") or {}
        for name, value in (res.get("requests") or {}).items():
            if name.startswith(GPU_PREFIXES):
                totals[name] = totals.get(name, 0) + _amount(value)
        for name, value in (res.get("limits") or {}).items():
            if name.startswith(GPU_PREFIXES):
                largest[name] = max(largest.get(name, 0), _amount(value))
    for container in pod_spec.get("initContainers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            if name.startswith(GPU_PREFIXES):
                largest[name] = max(largest.get(name, 0), _amount(value))
    for name, value in largest.items():
        totals[name] = max(totals.get(name, 0), value)
    return {k: v for k, v in totals.items() if v > 0}


def root_gpus(root: Mapping[str, Any]) -> dict[str, int]:
    """GPUs of a root owner from its pod template (`spec.template.spec`), else `spec` (§8.2)."""
    spec = root.get("spec") or {}
    template = (spec.get("template") or {}).get("spec")
    return pod_spec_gpus(template if isinstance(template, Mapping) else spec)


def workload_gpus(workload: Mapping[str, Any]) -> dict[str, int]:
    """GPUs of a Kueue Workload: its pod sets' templates times their counts. Where the root owner has
    no pod template (a KaiwoJob, whose Job holds it), this is what its pending Workload asks for."""
    totals: dict[str, int] = {}
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        count = _amount(pod_set.get("count", 1))
        for res, n in pod_spec_gpus((pod_set.get("template") or {}).get("spec") or {}).items():
            totals[res] = totals.get(res, 0) + n * count
    return totals


def tracker_name(kind: str, name: str, uid: str) -> str:
    return f"{kind.lower()}-{name}-{uid[:8]}"[:253]


# -- one tracker -------------------------------------------------------------------------------

@dataclass(slots=True)
class TrackerWorld:
    cr: JsonObj
    root: JsonObj | None  # None: gone
    pods: Sequence[JsonObj]  # the root's pods in the CR's namespace
    kueue_workload: JsonObj | None  # the Kueue Workload owned by the root, if any
    readings: Mapping[str, Sequence[float | None]]  # pod name -> utilization per GPU (None: unknown)
    settings: Resolved
    now: datetime


@dataclass(slots=True)
class TrackerPlan:
    status: JsonObj | None = None
    gpu_resources: dict[str, int] | None = None  # spec update
    delete_cr: bool = False
    events: list[tuple[str, str, str]] = field(default_factory=list)
    requeue_after: float | None = None
    evaluate: bool = False


def _quota_blocked(workload: JsonObj | None, resources: Sequence[str]) -> bool:
    for cond in ((workload or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "QuotaReserved" and cond.get("status") == "False":
            message = str(cond.get("message") or "").lower()
            return any(r.lower() in message for r in resources)
    return False


def pod_blocked_by_gpus(pod: JsonObj, resources: Sequence[str], workload: JsonObj | None) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Pending":
        return False
    for cond in status.get("conditions") or []:
        if cond.get("type") != "PodScheduled" or cond.get("status") != "False":
            continue
        message = str(cond.get("message") or "").lower()
        if cond.get("reason") == "Unschedulable" and any(f"insufficient {r.lower()}" in message for r in resources):
            return True
        if (cond.get("reason") == "SchedulingGated"
                and ((pod.get("metadata") or {}).get("labels") or {}).get("kueue.x-k8s.io/managed") == "true"):
            return _quota_blocked(workload, resources)
    return False


def aggregate(per_pod: Sequence[Sequence[float]], how: str) -> float:
    means = [sum(gpus) / len(gpus) for gpus in per_pod if gpus]
    if how == "Min":
        value = min(means)
    elif how == "Avg":
        value = sum(means) / len(means)
    else:
        value = max(means)
    return round(value, 2)


def decide_tracker(world: TrackerWorld) -> TrackerPlan:
    """§8.4 steps 2-8 (step 1, deleting the root of a Preempting tracker, is the shell's)."""
    cr, now = world.cr, world.now
    status: JsonObj = dict(cr.get("status") or {})
    phase = str(status.get("phase") or "")
    plan = TrackerPlan()
    if phase in TERMINAL:
        ttl = world.settings.ttl
        finished = parse_time(status.get("finishedAt"))
        if ttl > timedelta(0) and finished is not None:
            left = (finished + ttl - now).total_seconds()
            if left <= 0:
                plan.delete_cr = True
            else:
                plan.requeue_after = left
        return plan
    if phase == PREEMPTING:
        return plan
    ref = (cr.get("spec") or {}).get("workloadRef") or {}
    root = world.root
    if root is None or (root.get("metadata") or {}).get("uid") != ref.get("uid"):
        status.update(phase=DELETED, finishedAt=stamp(now), idleSince=None)
        plan.status = status
        plan.events.append(("Normal", "WorkloadDeleted", f"{ref.get('kind')} {ref.get('name')} is gone"))
        plan.requeue_after = 60.0
        return plan
    pods = sorted(world.pods, key=lambda p: p["metadata"]["name"])
    tracked = [str(r) for r in (cr.get("spec") or {}).get("gpuResources") or {}]
    if pods:
        counted: dict[str, int] = {}
        for pod in pods:
            for res, n in pod_spec_gpus(pod.get("spec") or {}).items():
                counted[res] = counted.get(res, 0) + n
        if counted and counted != (cr.get("spec") or {}).get("gpuResources"):
            plan.gpu_resources = counted
            tracked = list(counted)
    # trackedPods: the pods' names, with what we measured now (kept where a pod has no new reading)
    previous = {t.get("podName"): t for t in status.get("trackedPods") or []}
    tracked_pods = []
    known: list[list[float]] = []
    unknown = False
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    for pod in pods:
        name = pod["metadata"]["name"]
        values = list(world.readings.get(name, []))
        if pod in running:
            if not values or any(v is None for v in values):
                unknown = True
            else:
                known.append([float(v) for v in values if v is not None])
        metrics = [{"gpuId": str(i), "utilization": round(float(v), 2), "lastUpdate": stamp(now)}
                   for i, v in enumerate(values) if v is not None]
        tracked_pods.append({"podName": name, "gpuMetrics": metrics or (previous.get(name) or {}).get("gpuMetrics")
                             or []})
    status["trackedPods"] = tracked_pods
    new_phase = phase
    if not pods:
        new_phase = phase or PENDING_OTHER
        if _quota_blocked(world.kueue_workload, tracked):
            new_phase = PENDING_GPU
    elif any(pod_blocked_by_gpus(p, tracked, world.kueue_workload) for p in pods):
        new_phase = PENDING_GPU
    elif not running:
        new_phase = PENDING_OTHER
    elif unknown or not known:
        # unknown is never idle: keep Active/Idle as they were, count a fresh start as Active
        new_phase = phase if phase in (ACTIVE, IDLE) else ACTIVE
    else:
        value = aggregate(known, world.settings.aggregation)
        status["aggregatedUtilization"] = value
        status["lastMetricsUpdate"] = stamp(now)
        new_phase = ACTIVE if value >= world.settings.threshold else IDLE
    if new_phase == IDLE and phase != IDLE:
        status["idleSince"] = stamp(now)
    elif new_phase != IDLE:
        status["idleSince"] = None
    status["phase"] = new_phase
    if new_phase != phase and new_phase in PHASE_EVENTS:
        plan.events.append(PHASE_EVENTS[new_phase])
    if status != (cr.get("status") or {}):
        plan.status = status
    plan.evaluate = (new_phase != phase and new_phase in (IDLE, PENDING_GPU, ACTIVE)) or new_phase == IDLE
    if new_phase == IDLE:
        plan.requeue_after = 60.0
    return plan


# -- cluster-wide evaluation ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Preemption:
    namespace: str
    name: str
    preempted_for: str  # the pending tracker's name ("" for policy Always)
    reason: str


def evaluate(trackers: Sequence[tuple[JsonObj, Resolved]], now: datetime) -> list[Preemption]:
    """§8.5: Always-policy trackers idle past grace are preempted outright; OnPressure ones are
    matched to PendingGpu trackers per resource, oldest pending first, oldest idle first,
    all-or-nothing per pending tracker, net of preemptions already in flight for it."""
    decisions: list[Preemption] = []
    pending: dict[str, list[JsonObj]] = {}
    in_flight: dict[tuple[str, str], int] = {}
    idle_pool: dict[str, list[JsonObj]] = {}
    for cr, settings in trackers:
        status = cr.get("status") or {}
        phase = status.get("phase")
        spec = cr.get("spec") or {}
        resources: dict[str, int] = spec.get("gpuResources") or {}
        meta = cr["metadata"]
        if phase == PENDING_GPU:
            for res in resources:
                pending.setdefault(res, []).append(cr)
        elif phase == PREEMPTING and status.get("preemptedFor"):
            for res, count in resources.items():
                key = (str(status["preemptedFor"]), res)
                in_flight[key] = in_flight.get(key, 0) + count
        elif phase == IDLE:
            since = parse_time(status.get("idleSince"))
            if since is None or now - since < settings.grace:
                continue
            if settings.policy == "Always":
                idle_for = format_go_duration(timedelta(seconds=int((now - since).total_seconds())))
                decisions.append(Preemption(meta.get("namespace") or "", meta["name"], "",
                                            f"Policy is Always and workload has been idle for {idle_for}"))
                continue
            for res in resources:
                idle_pool.setdefault(res, []).append(cr)
    claimed: set[tuple[str, str]] = {(d.namespace, d.name) for d in decisions}
    for res, waiting in pending.items():
        waiting.sort(key=lambda c: str(c["metadata"].get("creationTimestamp") or ""))
        pool = sorted(idle_pool.get(res, []), key=lambda c: str((c.get("status") or {}).get("idleSince") or ""))
        for want in waiting:
            need = int((want.get("spec") or {}).get("gpuResources", {}).get(res, 0))
            need -= in_flight.get((want["metadata"]["name"], res), 0)
            if need <= 0:
                continue
            chosen: list[JsonObj] = []
            got = 0
            for victim in pool:
                key = (victim["metadata"].get("namespace") or "", victim["metadata"]["name"])
                if key in claimed:
                    continue
                chosen.append(victim)
                got += int((victim.get("spec") or {}).get("gpuResources", {}).get(res, 0))
                if got >= need:
                    break
            if got < need:
                continue  # all or nothing: never preempt without freeing enough
            for victim in chosen:
                key = (victim["metadata"].get("namespace") or "", victim["metadata"]["name"])
                claimed.add(key)
                decisions.append(Preemption(key[0], key[1], want["metadata"]["name"],
                                            f"GPU pressure: pending workload {want['metadata']['name']} needs "
                                            f"{need} {res} GPUs"))
    return decisions
