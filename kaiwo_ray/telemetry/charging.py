"""Who a GPU's time is charged to (pure, over the objects the accounting controller caches).

A pod resolves to its root workload:
1. a Kaiwo pod's `kaiwo.silogen.ai/run-id` label names its KaiwoJob/KaiwoService by UID;
2. else a GpuWorkload tracker whose `status.trackedPods` lists it names the root owner;
3. else the pod's controller owner (a Job: its own controller owner when it has one);
4. else the pod itself.

The user charged is the authenticated submitter, `kaiwo.silogen.ai/submitted-by`, which only the
admission webhook (from the request's userInfo) and the admin API (from the caller's token)
write; the webhook overwrites whatever a client put there. The manifest's claim (`spec.user`, the
`kaiwo.silogen.ai/user` label) is kept as `declared_user`, shown beside it, never charged. A
workload created before the annotation existed is charged to no one ("" -> "(unattributed)").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.labels import LABEL_QUEUE, LABEL_RUN_ID, LABEL_USER, SUBMITTED_BY
from kaiwo_ray.telemetry.ledger import Owner, Reclaim, reclaimed_seconds

PREEMPTION, MONITORING = "gpu-preemption", "resource-monitoring"


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def _controller(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((r for r in _meta(obj).get("ownerReferences") or () if r.get("controller")), None)


def owner_of_object(obj: Mapping[str, Any], kind: str, local_queues: Mapping[tuple[str, str], str],
                    preemption: bool = False) -> Owner:
    meta = _meta(obj)
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    namespace = str(meta.get("namespace") or "")
    spec = obj.get("spec") or {}
    declared = str(spec.get("user") or "") if kind in ("KaiwoJob", "KaiwoService") else ""
    declared = declared or str(labels.get(LABEL_USER) or "")
    queue = str(labels.get(LABEL_QUEUE) or (spec.get("clusterQueue") if kind.startswith("Kaiwo") else "") or "")
    return Owner(key=str(meta.get("uid") or f"pod:{namespace}/{meta.get('name')}"), namespace=namespace, kind=kind,
                 name=str(meta.get("name") or ""), user=str(annotations.get(SUBMITTED_BY) or ""),
                 declared_user=declared, queue=queue,
                 cluster_queue=local_queues.get((namespace, queue), queue if kind.startswith("Kaiwo") else ""),
                 preemption=preemption)


def resolve(pod: Mapping[str, Any], *, kaiwo_by_uid: Callable[[str], tuple[str, JsonObj] | None],
            tracker_for_pod: Callable[[str, str], JsonObj | None], get: Callable[[str, str, str], JsonObj | None],
            local_queues: Mapping[tuple[str, str], str]) -> Owner:
    """The root workload `pod` is charged to. `get(kind, namespace, name)` reads a cached owner (Job,
    Deployment, ...), None when not cached."""
    meta = _meta(pod)
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    run_id = str((meta.get("labels") or {}).get(LABEL_RUN_ID) or "")
    tracker = tracker_for_pod(namespace, name)
    if run_id:
        found = kaiwo_by_uid(run_id)
        if found is not None:
            return owner_of_object(found[1], found[0], local_queues, tracker is not None)
    if tracker is not None:
        ref = (tracker.get("spec") or {}).get("workloadRef") or {}
        root = get(str(ref.get("kind") or ""), namespace, str(ref.get("name") or ""))
        if root is not None:
            return owner_of_object(root, str(ref.get("kind")), local_queues, True)
        return Owner(key=str(ref.get("uid") or ""), namespace=namespace, kind=str(ref.get("kind") or ""),
                     name=str(ref.get("name") or ""), preemption=True)
    current: Mapping[str, Any] = pod
    kind = "Pod"
    for _ in range(3):  # Pod -> Job -> (its controller owner); Pod -> ReplicaSet -> Deployment
        ref = _controller(current)
        if ref is None:
            break
        parent = get(str(ref.get("kind") or ""), namespace, str(ref.get("name") or ""))
        if parent is None:
            return Owner(key=str(ref.get("uid") or ""), namespace=namespace, kind=str(ref.get("kind") or ""),
                         name=str(ref.get("name") or ""), user=str((meta.get("annotations") or {}).get(SUBMITTED_BY)
                                                                    or ""))
        current, kind = parent, str(ref.get("kind") or "")
    return owner_of_object(current, kind, local_queues)


def gpu_count(resources: Mapping[str, Any]) -> tuple[int, str]:
    """(GPUs, vendor) of a `gpuResources` map."""
    total, vendor = 0, ""
    for key, value in resources.items():
        if key.startswith(("amd.com/", "nvidia.com/gpu")):
            total += int(value or 0)
            vendor = "nvidia" if key.startswith("nvidia") else "amd"
    return total, vendor


def tracker_reclaim(tracker: Mapping[str, Any], started: float | None, duration: float | None,
                    horizon: float) -> Reclaim | None:
    """A Preempted GpuWorkload's reclaim (idle-GPU preemption ended its root owner early)."""
    from kaiwo_ray.api.meta import parse_time

    status = tracker.get("status") or {}
    at = parse_time(status.get("preemptedAt"))
    if status.get("phase") != "Preempted" or at is None:
        return None
    spec = tracker.get("spec") or {}
    gpus, vendor = gpu_count(spec.get("gpuResources") or {})
    owner = str((spec.get("workloadRef") or {}).get("uid") or "")
    moment = at.timestamp()
    return Reclaim(owner, PREEMPTION, moment, gpus, reclaimed_seconds(gpus, moment, started, duration, horizon),
                   vendor, str(status.get("preemptionReason") or ""))


def monitor_reclaim(workload: Mapping[str, Any], gpus: int, vendor: str, horizon: float) -> Reclaim | None:
    """A KaiwoJob/KaiwoService the resource monitor flagged for termination (WorkloadTerminatedEarly)."""
    from kaiwo_ray.api.durations import parse_go_duration
    from kaiwo_ray.api.meta import parse_time

    status = workload.get("status") or {}
    cond = next((c for c in status.get("conditions") or () if c.get("type") == "WorkloadTerminatedEarly"), None)
    at = parse_time((cond or {}).get("lastTransitionTime"))
    if cond is None or at is None:
        return None
    started = parse_time(status.get("startTime"))
    text = (workload.get("spec") or {}).get("duration")
    duration = None
    if text:
        try:
            duration = parse_go_duration(str(text)).total_seconds()
        except ValueError:
            duration = None
    moment = at.timestamp()
    seconds = reclaimed_seconds(gpus, moment, started.timestamp() if started else None, duration, horizon)
    return Reclaim(str(_meta(workload).get("uid") or ""), MONITORING, moment, gpus, seconds, vendor,
                   str(cond.get("message") or ""))
