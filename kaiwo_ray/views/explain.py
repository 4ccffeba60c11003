"""Why is a KaiwoJob/KaiwoService not running? One pure function over the objects that can hold it
back, answering with a sentence and structured reasons (used by the admin API and `kaiwo explain`).

    world = collect_world(kaiwojob, owned=..., pods=..., kueue_workloads=..., events=...,
                          cluster_queues=..., local_queues=...)
    explanation = explain(world)
    print(explanation.summary)
    for reason in explanation.reasons: print(reason.code, reason.message)

What is read, most fundamental first (the first reason found is the one the summary leads with):
the workload's own conditions (invalid spec, unknown queue, too few GPUs in the cluster), missing
LocalQueue/ClusterQueue, PVCs that do not bind, the download Job, Kueue's answer (quota per flavor:
free vs asked, preemption pending or suffered, namespace not selected, inactive queue), the
scheduler's FailedScheduling verdicts (resources, taints, selectors, volumes), and container
problems (image pulls, bad commands or config, crash loops, non-zero exits).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.labels import LABEL_NAME
from kaiwo_ray.views._objects import (
    ObjectRef,
    condition,
    is_true,
    meta,
    owner_uids,
    pod_requests,
    ref,
    show,
    status,
    uid,
)
from kaiwo_ray.views.queues import (
    flavor_usage,
    is_pending,
    local_queue_index,
    position_of,
)

DEFAULT_QUEUE = "kaiwo"

__all__ = ["DEFAULT_QUEUE", "Explanation", "NodeVerdict", "ObjectRef", "QuotaGap", "Reason", "ReasonCode",
           "WorkloadWorld", "collect_world", "explain", "quota_gaps", "requested", "scheduling_verdicts"]


class ReasonCode(StrEnum):
    """What holds a workload back (stable strings: the CLI and API clients match on them)."""

    NOT_OBSERVED = "NotObserved"
    DELETING = "Deleting"
    FINISHED = "Finished"
    FAILED = "Failed"
    TERMINATED = "Terminated"
    SPEC_INVALID = "SpecInvalid"
    CLUSTER_QUEUE_NOT_FOUND = "ClusterQueueNotFound"
    LOCAL_QUEUE_NOT_FOUND = "LocalQueueNotFound"
    QUEUE_NAMESPACE = "QueueNamespace"
    CLUSTER_QUEUE_INACTIVE = "ClusterQueueInactive"
    INSUFFICIENT_GPUS = "InsufficientClusterGpus"
    PVC_UNBOUND = "PvcUnbound"
    PVC_LOST = "PvcLost"
    DOWNLOAD_RUNNING = "DownloadRunning"
    DOWNLOAD_FAILED = "DownloadFailed"
    WAITING_FOR_KUEUE = "WaitingForKueue"
    QUOTA = "InsufficientQuota"
    PREEMPTION_PENDING = "PreemptionPending"
    PREEMPTED = "Preempted"
    NAMESPACE_NOT_SELECTED = "NamespaceNotSelected"
    QUEUED = "Queued"
    UNSCHEDULABLE = "Unschedulable"
    IMAGE_PULL = "ImagePull"
    CONTAINER_CONFIG = "ContainerConfig"
    CRASH_LOOP = "CrashLoop"
    CONTAINER_FAILED = "ContainerFailed"
    STARTING = "Starting"


class QuotaGap(BaseModel):
    """One flavor's answer to one resource the workload asks for."""

    cluster_queue: str
    flavor: str
    resource: str
    requested: float
    free: float
    nominal: float
    used: float
    requested_text: str
    free_text: str
    nominal_text: str


SchedulingCategory = Literal["resources", "taint", "selector", "volume", "no-nodes", "other"]


class NodeVerdict(BaseModel):
    """One part of a FailedScheduling message: how many nodes were rejected for what."""

    count: int | None
    reason: str
    category: SchedulingCategory
    resource: str | None = None
    """For `resources`: the resource the nodes lack (`amd.com/gpu`)."""


class Reason(BaseModel):
    code: ReasonCode
    message: str
    """A clause a person reads: what holds the workload, in kaiwo's words."""
    source: ObjectRef | None = None
    """The object whose status or event says so."""
    detail: str = ""
    """The original Kubernetes message, verbatim."""
    since: str | None = None
    quota: list[QuotaGap] = Field(default_factory=list)
    nodes: list[NodeVerdict] = Field(default_factory=list)


class StartEstimate(BaseModel):
    """When a pending workload is expected to start (docs/simulate.md, "Estimated start times"): `start`
    with median run times; `earliest`..`latest` an 80 % interval (the 10th..90th percentile run times'
    span, widened by how far the cluster's past estimates for workloads of its size missed). `computed`
    is when the forecast was made."""

    start: datetime | None = None
    earliest: datetime | None = None
    latest: datetime | None = None
    computed: datetime


class Explanation(BaseModel):
    workload: ObjectRef
    phase: str
    running: bool
    summary: str
    """One sentence: the workload, its phase, and the first reason."""
    queue: str | None = None
    queue_position: int | None = None
    """1-based position among the ClusterQueue's pending workloads, when it waits in one."""
    reasons: list[Reason] = Field(default_factory=list)
    estimated_start: StartEstimate | None = None
    """The admin API's last forecast, for a pending KaiwoJob (None elsewhere or where none was made)."""

    def codes(self) -> list[ReasonCode]:
        return [r.code for r in self.reasons]


@dataclass(frozen=True, slots=True)
class WorkloadWorld:
    """The objects `explain` reads. `cluster_queues`/`local_queues` of None mean "not looked at" (no
    missing-queue reasons are then given); empty lists mean "looked, none exist"."""

    workload: JsonObj
    children: Sequence[JsonObj] = ()
    kueue_workloads: Sequence[JsonObj] = ()
    pods: Sequence[JsonObj] = ()
    events: Sequence[JsonObj] = ()
    cluster_queues: Sequence[JsonObj] | None = None
    local_queues: Sequence[JsonObj] | None = None
    all_kueue_workloads: Sequence[JsonObj] = ()
    """Every Kueue Workload of the ClusterQueue (for the queue position); defaults to `kueue_workloads`."""
    default_queue: str = DEFAULT_QUEUE
    """KaiwoConfig's defaultClusterQueueName, used when spec.clusterQueue is empty."""


def collect_world(workload: JsonObj, *, owned: Iterable[JsonObj] = (), pods: Iterable[JsonObj] = (),
                  kueue_workloads: Iterable[JsonObj] = (), events: Iterable[JsonObj] = (),
                  cluster_queues: Iterable[JsonObj] | None = None, local_queues: Iterable[JsonObj] | None = None,
                  default_queue: str = DEFAULT_QUEUE) -> WorkloadWorld:
    """Pick out of wider collections (a namespace's objects, say) what belongs to `workload`:
    its children (controller-owned by it), their pods and the pods labelled with its name, the Kueue
    Workloads of its children or pods, and the Events of all of these."""
    namespace = meta(workload).get("namespace") or ""
    name = meta(workload).get("name") or ""
    root = uid(workload)
    children = [o for o in owned if root and root in owner_uids(o)]
    child_uids = {uid(c) for c in children}
    grandchildren_owner = child_uids | {root}
    my_pods = [p for p in pods if meta(p).get("namespace") == namespace and (
        (meta(p).get("labels") or {}).get(LABEL_NAME) == name or owner_uids(p) & grandchildren_owner)]
    pod_uids = {uid(p) for p in my_pods}
    all_wls = list(kueue_workloads)
    mine = [w for w in all_wls if owner_uids(w) & (child_uids | pod_uids)]
    interesting = {root} | child_uids | pod_uids | {uid(w) for w in mine}
    by_name = {(str(o.get("kind")), meta(o).get("name")) for o in [workload, *children, *my_pods, *mine]}
    my_events = []
    for event in events:
        involved = event.get("involvedObject") or event.get("regarding") or {}
        if involved.get("namespace", namespace) != namespace:
            continue
        if involved.get("uid") in interesting or (involved.get("kind"), involved.get("name")) in by_name:
            my_events.append(event)
    return WorkloadWorld(workload=workload, children=children, kueue_workloads=mine, pods=my_pods,
                         events=my_events, cluster_queues=None if cluster_queues is None else list(cluster_queues),
                         local_queues=None if local_queues is None else list(local_queues),
                         all_kueue_workloads=all_wls, default_queue=default_queue)


# --- the decision ---------------------------------------------------------------------------------

_RUNNING_PHASES = frozenset({"RUNNING", "READY"})


@dataclass(slots=True)
class _Found:
    reasons: list[Reason] = field(default_factory=list)
    position: int | None = None

    def add(self, reason: Reason) -> None:
        if not any(r.code == reason.code and r.source == reason.source and r.message == reason.message
                   for r in self.reasons):
            self.reasons.append(reason)


def explain(world: WorkloadWorld) -> Explanation:
    obj = world.workload
    phase = str(status(obj).get("status") or "")
    queue = str((obj.get("spec") or {}).get("clusterQueue") or world.default_queue)
    found = _Found()
    if meta(obj).get("deletionTimestamp"):
        found.add(Reason(code=ReasonCode.DELETING, message="it is being deleted", source=ref(obj),
                         since=meta(obj).get("deletionTimestamp")))
    _terminal(world, phase, found)
    _own_conditions(world, phase, queue, found)
    _queues_exist(world, queue, found)
    _storage(world, found)
    _kueue(world, queue, found)
    _pods(world, found)
    running = phase in _RUNNING_PHASES and not found.reasons
    if not found.reasons and not running:
        if not phase:
            found.add(Reason(code=ReasonCode.NOT_OBSERVED, source=ref(obj),
                             message="the operator has not written its status yet (is kaiwo-ray running?)"))
        elif phase == "STARTING" or phase in _RUNNING_PHASES:
            found.add(Reason(code=ReasonCode.STARTING, source=ref(obj),
                             message="it is admitted and its pods are starting"))
        elif phase in ("PENDING", "DOWNLOADING"):
            found.add(Reason(code=ReasonCode.WAITING_FOR_KUEUE, source=ref(obj),
                             message=f"it waits for admission into ClusterQueue {queue}"))
    return Explanation(workload=ref(obj), phase=phase, running=running,
                       summary=_summary(obj, phase, running, found.reasons),
                       queue=queue, queue_position=found.position, reasons=found.reasons)


def _summary(obj: JsonObj, phase: str, running: bool, reasons: Sequence[Reason]) -> str:
    who = f"{obj.get('kind') or 'Workload'} {meta(obj).get('namespace') or ''}/{meta(obj).get('name') or ''}"
    state = phase or "new"
    if running:
        return f"{who} is {state}: nothing holds it back."
    if not reasons:
        return f"{who} is {state}."
    first = reasons[0].message
    more = len(reasons) - 1
    tail = f" ({more} more reason{'s' if more > 1 else ''} below)" if more else ""
    verb = "is" if phase in ("COMPLETE", "FAILED", "TERMINATED", "ERROR") else "is not running"
    if verb == "is":
        return f"{who} is {state}: {first}{tail}."
    return f"{who} is not running ({state}): {first}{tail}."


def _terminal(world: WorkloadWorld, phase: str, found: _Found) -> None:
    obj = world.workload
    if phase == "COMPLETE":
        found.add(Reason(code=ReasonCode.FINISHED, message="it finished successfully", source=ref(obj),
                         since=status(obj).get("completionTime")))
    elif phase == "TERMINATED":
        early = condition(obj, "WorkloadTerminatedEarly") or {}
        found.add(Reason(code=ReasonCode.TERMINATED, source=ref(obj), since=early.get("lastTransitionTime"),
                         message=f"it was terminated ({early.get('reason') or 'EarlyTermination'}: "
                                 f"{early.get('message') or 'no message'})",
                         detail=str(early.get("message") or "")))
    elif phase == "FAILED":
        found.add(Reason(code=ReasonCode.FAILED, source=ref(obj), message="it failed",
                         since=status(obj).get("completionTime")))


def _own_conditions(world: WorkloadWorld, phase: str, queue: str, found: _Found) -> None:
    obj = world.workload
    spec_valid = condition(obj, "SpecValid")
    if spec_valid is not None and spec_valid.get("status") == "False":
        found.add(Reason(code=ReasonCode.SPEC_INVALID, source=ref(obj), detail=str(spec_valid.get("message") or ""),
                         since=spec_valid.get("lastTransitionTime"),
                         message=f"its spec is invalid: {spec_valid.get('message') or spec_valid.get('reason')}"))
    schedulable = condition(obj, "Schedulable")
    if schedulable is not None and schedulable.get("status") == "False":
        reason = schedulable.get("reason")
        code = {"ClusterQueueNotFound": ReasonCode.CLUSTER_QUEUE_NOT_FOUND,
                "WrongQueueNamespace": ReasonCode.QUEUE_NAMESPACE}.get(str(reason), ReasonCode.INSUFFICIENT_GPUS)
        text = str(schedulable.get("message") or reason or "")
        message = {ReasonCode.CLUSTER_QUEUE_NOT_FOUND: f"ClusterQueue {queue} does not exist ({text})",
                   ReasonCode.QUEUE_NAMESPACE: text,
                   ReasonCode.INSUFFICIENT_GPUS: f"the cluster cannot fit it: {text}"}[code]
        found.add(Reason(code=code, source=ref(obj), detail=text, since=schedulable.get("lastTransitionTime"),
                         message=message))


def _queues_exist(world: WorkloadWorld, queue: str, found: _Found) -> None:
    if any(r.code == ReasonCode.CLUSTER_QUEUE_NOT_FOUND for r in found.reasons):
        return
    obj = world.workload
    if world.cluster_queues is not None and not any(meta(cq).get("name") == queue for cq in world.cluster_queues):
        found.add(Reason(code=ReasonCode.CLUSTER_QUEUE_NOT_FOUND, source=ref(obj),
                         message=f"ClusterQueue {queue} does not exist (create it in the KaiwoQueueConfig)"))
        return
    namespace = meta(obj).get("namespace") or ""
    queued = any(_main_child(world)) or world.kueue_workloads
    if world.local_queues is not None and queued and not any(
            meta(lq).get("name") == queue and meta(lq).get("namespace") == namespace for lq in world.local_queues):
        found.add(Reason(code=ReasonCode.LOCAL_QUEUE_NOT_FOUND, source=ref(obj),
                         message=f"namespace {namespace} has no LocalQueue {queue} (list the namespace in the "
                                 f"ClusterQueue's `namespaces` of the KaiwoQueueConfig)"))


def _main_child(world: WorkloadWorld) -> list[JsonObj]:
    name = meta(world.workload).get("name")
    return [c for c in world.children if meta(c).get("name") == name and c.get("kind") in (
        "Job", "RayJob", "Deployment", "AppWrapper", "RayService")]


def _events_for(world: WorkloadWorld, obj: Mapping[str, Any], reasons: Iterable[str]) -> list[JsonObj]:
    wanted = set(reasons)
    name, kind, object_uid = meta(obj).get("name"), obj.get("kind"), uid(obj)
    hits = []
    for event in world.events:
        involved = event.get("involvedObject") or event.get("regarding") or {}
        if event.get("reason") not in wanted:
            continue
        if (object_uid and involved.get("uid") == object_uid) or (
                involved.get("kind") == kind and involved.get("name") == name):
            hits.append(event)
    hits.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    return hits


def _storage(world: WorkloadWorld, found: _Found) -> None:
    name = meta(world.workload).get("name") or ""
    for child in world.children:
        kind = child.get("kind")
        if kind == "PersistentVolumeClaim":
            phase = status(child).get("phase") or "Pending"
            if phase == "Bound":
                continue
            problems = _events_for(world, child, ("ProvisioningFailed", "FailedBinding"))
            detail = str(problems[-1].get("message") or "") if problems else ""
            claim = meta(child).get("name")
            if phase == "Lost":
                found.add(Reason(code=ReasonCode.PVC_LOST, source=ref(child), detail=detail,
                                 message=f"PersistentVolumeClaim {claim} lost its volume"))
            else:
                storage_class = (child.get("spec") or {}).get("storageClassName")
                why = f": {detail}" if detail else (f" (storage class {storage_class!r})" if storage_class else "")
                found.add(Reason(code=ReasonCode.PVC_UNBOUND, source=ref(child), detail=detail,
                                 message=f"PersistentVolumeClaim {claim} is not bound{why}"))
        elif kind == "Job" and meta(child).get("name") == f"{name}-download":
            if is_true(child, "Complete") or is_true(child, "SuccessCriteriaMet"):
                continue
            failed = condition(child, "Failed")
            if (failed or {}).get("status") == "True" or (status(child).get("failed") or 0) > 0:
                detail = str((failed or {}).get("message") or "")
                found.add(Reason(code=ReasonCode.DOWNLOAD_FAILED, source=ref(child), detail=detail,
                                 since=(failed or {}).get("lastTransitionTime"),
                                 message=f"its download Job {meta(child).get('name')} failed"
                                         + (f": {detail}" if detail else "")))
            else:
                active = status(child).get("active") or 0
                found.add(Reason(code=ReasonCode.DOWNLOAD_RUNNING, source=ref(child),
                                 message=f"its download Job {meta(child).get('name')} has not finished "
                                         f"({active} pod{'s' if active != 1 else ''} active); the workload "
                                         f"starts after it"))


# --- Kueue ----------------------------------------------------------------------------------------

_UNUSED = re.compile(r"insufficient unused quota for ([^\s,]+) in flavor ([^\s,]+), ([^\s,]+) more needed")
_NO_CAPACITY = re.compile(r"insufficient quota for ([^\s,]+) in flavor ([^\s,]+), previously considered podsets "
                          r"requests \(([^)]*)\) \+ current podset request \(([^)]*)\) > maximum capacity \(([^)]*)\)")
_PREEMPTING = re.compile(r"Pending the preemption of (\d+) workload")


def _kueue(world: WorkloadWorld, queue: str, found: _Found) -> None:
    for wl in world.kueue_workloads:
        if is_true(wl, "Finished"):
            continue
        evicted = condition(wl, "Evicted")
        if evicted is not None and evicted.get("status") == "True" and evicted.get("reason") == "Preempted":
            found.add(Reason(code=ReasonCode.PREEMPTED, source=ref(wl), detail=str(evicted.get("message") or ""),
                             since=evicted.get("lastTransitionTime"),
                             message="Kueue preempted it to make room for a higher-priority workload; "
                                     "it is queued again"))
        if not is_pending(wl):
            continue
        reserved = condition(wl, "QuotaReserved") or {}
        message = str(reserved.get("message") or "")
        reason = str(reserved.get("reason") or "")
        cq_name = _cluster_queue_name(world, wl, queue)
        found.position = _position(world, wl, cq_name)
        where = f"ClusterQueue {cq_name}" + (f" (position {found.position})" if found.position else "")
        common: dict[str, Any] = {"source": ref(wl), "detail": message, "since": reserved.get("lastTransitionTime")}
        if reason == "Inadmissible":
            if "LocalQueue" in message and "doesn't exist" in message:
                if not any(r.code == ReasonCode.LOCAL_QUEUE_NOT_FOUND for r in found.reasons):
                    found.add(Reason(code=ReasonCode.LOCAL_QUEUE_NOT_FOUND, message=f"Kueue says: {message}",
                                     **common))
            elif "ClusterQueue" in message and "doesn't exist" in message:
                if not any(r.code == ReasonCode.CLUSTER_QUEUE_NOT_FOUND for r in found.reasons):
                    found.add(Reason(code=ReasonCode.CLUSTER_QUEUE_NOT_FOUND, message=f"Kueue says: {message}",
                                     **common))
            elif "inactive" in message:
                found.add(Reason(code=ReasonCode.CLUSTER_QUEUE_INACTIVE,
                                 message=f"ClusterQueue {cq_name} is inactive (check its flavors exist)", **common))
            else:
                found.add(Reason(code=ReasonCode.QUEUED, message=f"Kueue cannot admit it: {message}", **common))
            continue
        if "namespace doesn't match" in message:
            found.add(Reason(code=ReasonCode.NAMESPACE_NOT_SELECTED,
                             message=f"{cq_name}'s namespaceSelector does not select namespace "
                                     f"{meta(wl).get('namespace')}", **common))
            continue
        gaps = quota_gaps(world, wl, cq_name, message)
        preempting = _PREEMPTING.search(message)
        if "insufficient" in message or gaps:
            found.add(Reason(code=ReasonCode.QUOTA, quota=gaps, message=f"it waits in {where}: "
                             + _quota_words(gaps, cq_name), **common))
        if preempting:
            count = int(preempting.group(1))
            found.add(Reason(code=ReasonCode.PREEMPTION_PENDING,
                             message=f"Kueue is preempting {count} lower-priority workload"
                                     f"{'s' if count != 1 else ''} to make room for it", **common))
        elif not ("insufficient" in message or gaps):
            found.add(Reason(code=ReasonCode.QUEUED, message=f"it waits in {where}"
                             + (f": {message}" if message else ""), **common))


def _cluster_queue_name(world: WorkloadWorld, wl: Mapping[str, Any], fallback: str) -> str:
    admitted = (status(wl).get("admission") or {}).get("clusterQueue")
    if admitted:
        return str(admitted)
    index = local_queue_index(world.local_queues or ())
    namespace = str(meta(wl).get("namespace") or "")
    return index.get((namespace, str((wl.get("spec") or {}).get("queueName") or "")), fallback)


def _position(world: WorkloadWorld, wl: Mapping[str, Any], cq_name: str) -> int | None:
    pool = list(world.all_kueue_workloads) or list(world.kueue_workloads)
    index = local_queue_index(world.local_queues or ())
    if not index:  # without LocalQueues, take the workloads' own queue names at face value
        index = {(str(meta(w).get("namespace") or ""), str((w.get("spec") or {}).get("queueName") or "")): cq_name
                 for w in pool}
    return position_of(wl, cq_name, pool, index)


def requested(kueue_workload: Mapping[str, Any]) -> dict[str, Decimal]:
    """Total requests of a Kueue Workload: every pod set's pod requests times its count."""
    total: dict[str, Decimal] = {}
    for podset in (kueue_workload.get("spec") or {}).get("podSets") or ():
        count = int(podset.get("count") or 1)
        for name, value in pod_requests(podset.get("template") or {}).items():
            total[name] = total.get(name, Decimal(0)) + value * count
    return total


def quota_gaps(world: WorkloadWorld, wl: Mapping[str, Any], cq_name: str, message: str) -> list[QuotaGap]:
    """Per flavor, for each resource the workload asks for that some flavor cannot give: asked vs
    free. The (flavor, resource) pairs Kueue named come first; without its message (another Kueue
    version's wording), every flavor with a shortfall is listed."""
    cq = next((c for c in world.cluster_queues or () if meta(c).get("name") == cq_name), None)
    usage = {u.flavor: u for u in flavor_usage(cq)} if cq is not None else {}
    asked = requested(wl)
    named = [(m.group(2), m.group(1)) for m in _UNUSED.finditer(message)]
    named += [(m.group(2), m.group(1)) for m in _NO_CAPACITY.finditer(message)]
    if not named:
        named = [(flavor, resource) for flavor, fu in usage.items() for resource, amount in asked.items()
                 if amount > 0 and (res := fu.resource(resource)) is not None and Decimal(str(res.free)) < amount]
    gaps = []
    for flavor, resource in dict.fromkeys(named):
        fu = usage.get(flavor)
        res = fu.resource(resource) if fu is not None else None
        want = asked.get(resource, Decimal(0))
        nominal = Decimal(str(res.nominal)) if res else Decimal(0)
        free = Decimal(str(res.free)) if res else Decimal(0)
        used = Decimal(str(res.used)) if res else Decimal(0)
        gaps.append(QuotaGap(cluster_queue=cq_name, flavor=flavor, resource=resource, requested=float(want),
                             free=float(free), nominal=float(nominal), used=float(used),
                             requested_text=show(resource, want), free_text=show(resource, free),
                             nominal_text=show(resource, nominal)))
    return gaps


def _quota_words(gaps: Sequence[QuotaGap], cq_name: str) -> str:
    offered = [g for g in gaps if g.nominal > 0]
    if offered:
        parts = [f"flavor {g.flavor} has {g.free_text} of {g.nominal_text} {g.resource} free"
                 for g in offered]
        return f"it asks for {offered[0].requested_text} {offered[0].resource}; " + "; ".join(parts)
    if gaps:
        resources = sorted({g.resource for g in gaps})
        return f"no flavor of {cq_name} has quota for {', '.join(resources)} (it asks for " + ", ".join(
            f"{g.requested_text} {g.resource}" for g in {g.resource: g for g in gaps}.values()) + ")"
    return "not enough quota"


# --- pods -----------------------------------------------------------------------------------------

_IMAGE_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
                            "RegistryUnavailable"})
_CONFIG_REASONS = frozenset({"CreateContainerConfigError", "CreateContainerError", "RunContainerError",
                             "PreCreateHookError", "PostStartHookError"})
_VERDICT = re.compile(r"^(\d+) (.+)$")


def scheduling_verdicts(message: str) -> list[NodeVerdict]:
    """Parse the scheduler's FitError ("0/4 nodes are available: 1 Insufficient amd.com/gpu, 3 node(s)
    had untolerated taint {...}. preemption: ...") into counted, categorised verdicts."""
    head = message.split(". preemption:", 1)[0]
    if "no nodes available" in head:
        return [NodeVerdict(count=0, reason=head.strip(), category="no-nodes")]
    _, _, body = head.partition("nodes are available:")
    verdicts = []
    for part in _split_verdicts(body.strip().rstrip(".")):
        match = _VERDICT.match(part)
        count, text = (int(match.group(1)), match.group(2)) if match else (None, part)
        verdicts.append(_categorise(count, text))
    return verdicts


def _split_verdicts(body: str) -> list[str]:
    """Split on ", " outside braces (taints print as {key: value})."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for i, char in enumerate(body):
        depth += char == "{"
        depth -= char == "}"
        if char == "," and depth == 0 and body[i + 1:i + 2] == " ":
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def _categorise(count: int | None, text: str) -> NodeVerdict:
    if text.startswith("Insufficient "):
        return NodeVerdict(count=count, reason=text, category="resources", resource=text.split(" ", 1)[1])
    if "taint" in text:
        return NodeVerdict(count=count, reason=text, category="taint")
    if "affinity" in text or "selector" in text:
        return NodeVerdict(count=count, reason=text, category="selector")
    if "PersistentVolumeClaim" in text or "volume" in text:
        return NodeVerdict(count=count, reason=text, category="volume")
    return NodeVerdict(count=count, reason=text, category="other")


def _pods(world: WorkloadWorld, found: _Found) -> None:
    for pod in sorted(world.pods, key=lambda p: str(meta(p).get("name"))):
        if (status(pod).get("phase") or "") == "Succeeded":
            continue
        scheduled = condition(pod, "PodScheduled")
        name = meta(pod).get("name")
        if scheduled is not None and scheduled.get("status") == "False":
            message = str(scheduled.get("message") or "")
            if not message:
                events = _events_for(world, pod, ("FailedScheduling",))
                message = str(events[-1].get("message") or "") if events else ""
            verdicts = scheduling_verdicts(message) if message else []
            words = "; ".join(_verdict_words(v) for v in verdicts) or message or "no node fits"
            found.add(Reason(code=ReasonCode.UNSCHEDULABLE, source=ref(pod), detail=message, nodes=verdicts,
                             since=scheduled.get("lastTransitionTime"),
                             message=f"the scheduler cannot place pod {name}: {words}"))
            continue
        statuses = list(status(pod).get("initContainerStatuses") or ()) + list(
            status(pod).get("containerStatuses") or ())
        for cs in statuses:
            _container(pod, cs, found)
        _failed_mounts(world, pod, statuses, found)


_MISSING_OBJECT = re.compile(r'^(secret|configmap) "([^"]*)" not found$')
_MISSING_KEY = re.compile(r"^couldn't find key (.+) in (Secret|ConfigMap) [^/]*/(.+)$")
_MOUNT_FAILED = re.compile(r'^MountVolume\.SetUp failed for volume "([^"]*)" : (.*)$')
_MISSING_VOLUME_KEY = re.compile(r"^(secret|configmap) references non-existent (?:secret|config) key: (.+)$")


def _kind_word(word: str) -> str:
    return "Secret" if word.lower() == "secret" else "ConfigMap"


def _env_users(pod: Mapping[str, Any], container: str, kind: str, name: str) -> list[str]:
    """How `container` uses the Secret/ConfigMap `name`: "env VAR needs its key KEY" per reference,
    "envFrom takes all its keys" for a whole-object reference."""
    spec = pod.get("spec") or {}
    ref_key, from_key = ("secretKeyRef", "secretRef") if kind == "Secret" else ("configMapKeyRef", "configMapRef")
    uses: list[str] = []
    for c in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]:
        if c.get("name") != container:
            continue
        for item in c.get("env") or ():
            key_ref = (item.get("valueFrom") or {}).get(ref_key) or {}
            if key_ref.get("name") == name and not key_ref.get("optional"):
                uses.append(f"env {item.get('name')} needs its key {key_ref.get('key')}")
        for source in c.get("envFrom") or ():
            if ((source.get(from_key) or {}).get("name")) == name:
                uses.append("envFrom takes all its keys")
    return uses


def missing_config_words(pod: Mapping[str, Any], container: str, detail: str) -> str:
    """The kubelet's config error, said with the object and the keys the container needs from it
    ("" when the error is not about a missing Secret or ConfigMap)."""
    found = _MISSING_OBJECT.match(detail)
    if found:
        kind, name = _kind_word(found.group(1)), found.group(2)
        uses = _env_users(pod, container, kind, name)
        return f"{kind} {name} does not exist" + (f" ({'; '.join(uses)})" if uses else "")
    key = _MISSING_KEY.match(detail)
    if key:
        return f"{key.group(2)} {key.group(3)} has no key {key.group(1)}"
    return ""


def _volume_keys(pod: Mapping[str, Any], volume: str) -> tuple[str, str, list[str]]:
    """(kind, name, listed keys) of the first Secret/ConfigMap a volume projects."""
    for v in (pod.get("spec") or {}).get("volumes") or ():
        if v.get("name") != volume:
            continue
        sources = [v, *((v.get("projected") or {}).get("sources") or ())]
        for source in sources:
            if isinstance(source.get("secret"), dict):
                ref = source["secret"]
                return "Secret", str(ref.get("secretName") or ref.get("name") or ""), [
                    str(i.get("key")) for i in ref.get("items") or ()]
            if isinstance(source.get("configMap"), dict):
                ref = source["configMap"]
                return "ConfigMap", str(ref.get("name") or ""), [str(i.get("key")) for i in ref.get("items") or ()]
    return "", "", []


def _failed_mounts(world: WorkloadWorld, pod: Mapping[str, Any], statuses: Sequence[Mapping[str, Any]],
                   found: _Found) -> None:
    """A pod held in ContainerCreating by a volume that cannot be mounted: the kubelet says why only in
    FailedMount events."""
    creating = statuses and all(((cs.get("state") or {}).get("waiting") or {}).get("reason") in (
        "ContainerCreating", "PodInitializing") for cs in statuses)
    if not creating or status(pod).get("phase") not in ("Pending", None):
        return
    events = _events_for(world, pod, ("FailedMount",))
    if not events:
        return
    detail = str(events[-1].get("message") or "")
    mount = _MOUNT_FAILED.match(detail)
    words = detail
    if mount:
        volume, cause = mount.group(1), mount.group(2)
        kind, name, keys = _volume_keys(pod, volume)
        missing_object, missing_key = _MISSING_OBJECT.match(cause), _MISSING_VOLUME_KEY.match(cause)
        if missing_object:
            kind, name = _kind_word(missing_object.group(1)), missing_object.group(2)
            words = f"volume {volume} needs {kind} {name}, which does not exist" + (
                f" (keys {', '.join(keys)})" if keys else "")
        elif missing_key and name:
            words = f"volume {volume} needs key {missing_key.group(2)} of {kind} {name}, which it does not have"
        else:
            words = f"volume {volume} cannot be mounted: {cause}"
    found.add(Reason(code=ReasonCode.CONTAINER_CONFIG, source=ref(pod), detail=detail,
                     since=events[-1].get("lastTimestamp"),
                     message=f"pod {meta(pod).get('name')} cannot start: {words}"))


def _verdict_words(verdict: NodeVerdict) -> str:
    nodes = "" if verdict.count is None else f"{verdict.count} node{'s' if verdict.count != 1 else ''}: "
    if verdict.category == "resources":
        return f"{nodes}not enough {verdict.resource}"
    if verdict.category == "taint":
        return f"{nodes}a taint the pod does not tolerate ({verdict.reason})"
    if verdict.category == "selector":
        return f"{nodes}do not match its node selector/affinity"
    if verdict.category == "volume":
        return f"its PersistentVolumeClaims are not bound ({verdict.reason})"
    return f"{nodes}{verdict.reason}"


def _container(pod: Mapping[str, Any], cs: Mapping[str, Any], found: _Found) -> None:
    state = cs.get("state") or {}
    waiting = state.get("waiting") or {}
    reason = str(waiting.get("reason") or "")
    where = f"container {cs.get('name')} of pod {meta(pod).get('name')}"
    detail = str(waiting.get("message") or "")
    if reason in _IMAGE_REASONS:
        found.add(Reason(code=ReasonCode.IMAGE_PULL, source=ref(pod), detail=detail,
                         message=f"{where} cannot pull image {cs.get('image')!r} ({reason}"
                                 + (f": {detail}" if detail else "") + ")"))
        return
    if reason in _CONFIG_REASONS:
        missing = missing_config_words(pod, str(cs.get("name") or ""), detail)
        found.add(Reason(code=ReasonCode.CONTAINER_CONFIG, source=ref(pod), detail=detail,
                         message=f"{where} cannot start ({reason}" + (f": {detail}" if detail else "")
                                 + (f"): {missing}" if missing else
                                    "): check its command, env and mounted secrets/config maps")))
        return
    last = (cs.get("lastState") or {}).get("terminated") or {}
    if reason == "CrashLoopBackOff":
        code = last.get("exitCode")
        found.add(Reason(code=ReasonCode.CRASH_LOOP, source=ref(pod), detail=detail,
                         message=f"{where} keeps crashing (restarted {cs.get('restartCount') or 0} times"
                                 + (f", last exit code {code}" if code is not None else "")
                                 + (f", {last.get('reason')}" if last.get("reason") else "") + ")"))
        return
    terminated = state.get("terminated") or {}
    if terminated and int(terminated.get("exitCode") or 0) != 0:
        found.add(Reason(code=ReasonCode.CONTAINER_FAILED, source=ref(pod),
                         detail=str(terminated.get("message") or ""), since=terminated.get("finishedAt"),
                         message=f"{where} exited with code {terminated.get('exitCode')}"
                                 + (f" ({terminated.get('reason')})" if terminated.get("reason") else "")))
