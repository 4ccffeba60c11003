"""Queue read model: every ClusterQueue with quota and usage per flavor and resource, its
LocalQueues, and its pending Kueue Workloads in admission order with their positions (what Kueue's
visibility API answers), from plain ClusterQueue/LocalQueue/Workload objects."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, Field

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.labels import LABEL_NAME
from kaiwo_ray.views._objects import ObjectRef, condition, is_true, meta, quantity, show, status


class ResourceUsage(BaseModel):
    """One resource of one flavor: quota, what admitted workloads reserve, and what is left.
    Values are numbers in base units (cores, bytes, devices); the *_text fields are for people."""

    resource: str
    nominal: float
    used: float
    borrowed: float = 0.0
    free: float
    nominal_text: str
    used_text: str
    free_text: str


class FlavorUsage(BaseModel):
    flavor: str
    resources: list[ResourceUsage] = Field(default_factory=list)

    def resource(self, name: str) -> ResourceUsage | None:
        return next((r for r in self.resources if r.resource == name), None)


class PendingWorkload(BaseModel):
    """A Kueue Workload waiting for quota, with its place in line."""

    position: int
    """1-based position in its ClusterQueue (Kueue's positionInClusterQueue + 1)."""
    local_queue_position: int
    namespace: str
    name: str
    local_queue: str
    priority: int = 0
    created: str | None = None
    owner: ObjectRef | None = None
    """The job object Kueue made the Workload for (Job, RayJob, Pod, AppWrapper ...)."""
    kaiwo_workload: str | None = None
    """The KaiwoJob/KaiwoService name (the `kaiwo.silogen.ai/name` label of its pods)."""
    message: str = ""
    """Kueue's QuotaReserved=False message: why it waits."""


class LocalQueueView(BaseModel):
    namespace: str
    name: str
    cluster_queue: str
    pending: int = 0
    admitted: int = 0


class ClusterQueueView(BaseModel):
    name: str
    exists: bool = True
    active: bool = True
    active_message: str = ""
    cohort: str | None = None
    flavors: list[FlavorUsage] = Field(default_factory=list)
    local_queues: list[LocalQueueView] = Field(default_factory=list)
    pending: list[PendingWorkload] = Field(default_factory=list)
    admitted: int = 0

    def flavor(self, name: str) -> FlavorUsage | None:
        return next((f for f in self.flavors if f.flavor == name), None)


def flavor_usage(cluster_queue: Mapping[str, Any]) -> list[FlavorUsage]:
    """Quota (spec.resourceGroups) against reservations (status.flavorsReservation, else
    flavorsUsage) per flavor and resource, in the spec's order."""
    st = status(cluster_queue)
    reserved: dict[tuple[str, str], tuple[Decimal, Decimal]] = {}
    for flavor in st.get("flavorsReservation") or st.get("flavorsUsage") or ():
        for res in flavor.get("resources") or ():
            reserved[(str(flavor.get("name")), str(res.get("name")))] = (
                quantity(res.get("total")), quantity(res.get("borrowed")))
    result: list[FlavorUsage] = []
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            name = str(flavor.get("name") or "")
            entries = []
            for res in flavor.get("resources") or ():
                resource = str(res.get("name") or "")
                nominal = quantity(res.get("nominalQuota"))
                used, borrowed = reserved.get((name, resource), (Decimal(0), Decimal(0)))
                free = max(Decimal(0), nominal - used)
                entries.append(ResourceUsage(
                    resource=resource, nominal=float(nominal), used=float(used), borrowed=float(borrowed),
                    free=float(free), nominal_text=show(resource, nominal), used_text=show(resource, used),
                    free_text=show(resource, free)))
            result.append(FlavorUsage(flavor=name, resources=entries))
    return result


def is_pending(kueue_workload: Mapping[str, Any]) -> bool:
    """Waiting for quota: not reserved, not finished, not deactivated."""
    if is_true(kueue_workload, "QuotaReserved") or is_true(kueue_workload, "Finished"):
        return False
    return (kueue_workload.get("spec") or {}).get("active", True) is not False


def cluster_queue_of(kueue_workload: Mapping[str, Any], local_queues: Mapping[tuple[str, str], str]) -> str | None:
    """The ClusterQueue a Kueue Workload belongs to: its admission's, else its LocalQueue's."""
    admitted = (status(kueue_workload).get("admission") or {}).get("clusterQueue")
    if admitted:
        return str(admitted)
    namespace = str(meta(kueue_workload).get("namespace") or "")
    queue = str((kueue_workload.get("spec") or {}).get("queueName") or "")
    return local_queues.get((namespace, queue))


def admission_order_key(kueue_workload: Mapping[str, Any]) -> tuple[int, str, str, str]:
    """Kueue's BestEffortFIFO/StrictFIFO order: higher priority first, then older first (the time a
    preempted workload was requeued counts as its queue time)."""
    requeued = condition(kueue_workload, "Requeued")
    queued_at = str((requeued or {}).get("lastTransitionTime") or meta(kueue_workload).get("creationTimestamp") or "")
    priority = int((kueue_workload.get("spec") or {}).get("priority") or 0)
    return (-priority, queued_at, str(meta(kueue_workload).get("namespace") or ""),
            str(meta(kueue_workload).get("name") or ""))


def _owner(kueue_workload: Mapping[str, Any]) -> ObjectRef | None:
    for owner in meta(kueue_workload).get("ownerReferences") or ():
        if owner.get("controller"):
            return ObjectRef(kind=str(owner.get("kind") or ""), name=str(owner.get("name") or ""),
                             namespace=meta(kueue_workload).get("namespace") or None)
    return None


def kaiwo_name(kueue_workload: Mapping[str, Any]) -> str | None:
    """The KaiwoJob/KaiwoService behind a Kueue Workload, from its pod sets' labels."""
    for podset in (kueue_workload.get("spec") or {}).get("podSets") or ():
        labels = ((podset.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if LABEL_NAME in labels:
            return str(labels[LABEL_NAME])
    return None


def local_queue_index(local_queues: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(namespace, LocalQueue name) -> ClusterQueue name."""
    return {(str(meta(lq).get("namespace") or ""), str(meta(lq).get("name") or "")):
            str((lq.get("spec") or {}).get("clusterQueue") or "") for lq in local_queues}


def position_of(kueue_workload: Mapping[str, Any], cluster_queue: str, kueue_workloads: Iterable[Mapping[str, Any]],
                lq_index: Mapping[tuple[str, str], str]) -> int | None:
    """1-based place of a pending Workload in its ClusterQueue (what `pending_in_order` would give it),
    counted without building the whole ordered list; None when it is not pending there."""
    if not is_pending(kueue_workload) or cluster_queue_of(kueue_workload, lq_index) != cluster_queue:
        return None
    mine = admission_order_key(kueue_workload)
    ahead = sum(1 for w in kueue_workloads if is_pending(w) and cluster_queue_of(w, lq_index) == cluster_queue
                and admission_order_key(w) < mine)
    return ahead + 1


def pending_in_order(cluster_queue: str, kueue_workloads: Iterable[Mapping[str, Any]],
                     lq_index: Mapping[tuple[str, str], str]) -> list[PendingWorkload]:
    """The pending Workloads of one ClusterQueue in admission order, with both positions."""
    mine = sorted((w for w in kueue_workloads if is_pending(w) and cluster_queue_of(w, lq_index) == cluster_queue),
                  key=admission_order_key)
    per_local: dict[tuple[str, str], int] = {}
    result = []
    for position, wl in enumerate(mine, start=1):
        namespace = str(meta(wl).get("namespace") or "")
        queue = str((wl.get("spec") or {}).get("queueName") or "")
        per_local[(namespace, queue)] = per_local.get((namespace, queue), 0) + 1
        reserved = condition(wl, "QuotaReserved") or {}
        result.append(PendingWorkload(
            position=position, local_queue_position=per_local[(namespace, queue)], namespace=namespace,
            name=str(meta(wl).get("name") or ""), local_queue=queue,
            priority=int((wl.get("spec") or {}).get("priority") or 0),
            created=meta(wl).get("creationTimestamp"), owner=_owner(wl), kaiwo_workload=kaiwo_name(wl),
            message=str(reserved.get("message") or "")))
    return result


def cluster_queue_views(cluster_queues: Iterable[JsonObj], local_queues: Iterable[JsonObj],
                        kueue_workloads: Iterable[JsonObj]) -> list[ClusterQueueView]:
    """Every ClusterQueue (by name), with usage per flavor, LocalQueues and pending workloads in order.
    A ClusterQueue that LocalQueues name but that does not exist is listed with `exists=False`."""
    lqs = list(local_queues)
    wls = list(kueue_workloads)
    lq_index = local_queue_index(lqs)
    counts: dict[tuple[str, str], list[int]] = {}  # (ns, lq) -> [pending, admitted]
    admitted_per_cq: dict[str, int] = {}
    pending_per_cq: dict[str, list[JsonObj]] = {}
    for wl in wls:
        cq = cluster_queue_of(wl, lq_index)
        key = (str(meta(wl).get("namespace") or ""), str((wl.get("spec") or {}).get("queueName") or ""))
        slot = counts.setdefault(key, [0, 0])
        if is_pending(wl):
            slot[0] += 1
            if cq:
                pending_per_cq.setdefault(cq, []).append(wl)
        elif is_true(wl, "QuotaReserved") and not is_true(wl, "Finished"):
            slot[1] += 1
            if cq:
                admitted_per_cq[cq] = admitted_per_cq.get(cq, 0) + 1
    by_name = {str(meta(cq).get("name") or ""): cq for cq in cluster_queues}
    names = sorted(set(by_name) | {cq for cq in lq_index.values() if cq})
    views = []
    for name in names:
        cq_obj = by_name.get(name)
        active = condition(cq_obj, "Active") if cq_obj is not None else None
        locals_ = [LocalQueueView(namespace=ns, name=lq, cluster_queue=name, pending=counts.get((ns, lq), [0, 0])[0],
                                  admitted=counts.get((ns, lq), [0, 0])[1])
                   for (ns, lq), target in sorted(lq_index.items()) if target == name]
        views.append(ClusterQueueView(
            name=name, exists=cq_obj is not None,
            active=cq_obj is not None and (active is None or active.get("status") == "True"),
            active_message=str((active or {}).get("message") or ("" if cq_obj is not None else "does not exist")),
            cohort=((cq_obj or {}).get("spec") or {}).get("cohortName") or ((cq_obj or {}).get("spec") or {}).get(
                "cohort"),
            flavors=flavor_usage(cq_obj) if cq_obj is not None else [], local_queues=locals_,
            pending=pending_in_order(name, pending_per_cq.get(name, []), lq_index),
            admitted=admitted_per_cq.get(name, 0)))
    return views
