"""Kueue's cache, fed by the store's notifications: queue configuration (ClusterQueues,
LocalQueues, ResourceFlavors, namespaces), the quota book, and every Workload indexed the way the
scheduler needs it (pending per ClusterQueue in queue order, reserved per ClusterQueue, by owner).

`feed` runs synchronously inside the store's notify loop, so it only updates memory and returns the
work keys the controller must run; it never writes to the store.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Hashable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kaiwo_sandbox.cluster.conditions import condition_true, find_condition
from kaiwo_sandbox.cluster.kueue.admission import (
    ClusterQueueSpec,
    ClusterQueueSpecError,
    FlavorInfo,
    PodSetRequest,
    QuotaBook,
    Usage,
    flavor_from_object,
    parse_cluster_queue,
)
from kaiwo_sandbox.cluster.kueue.jobs import FRAMEWORK_BY_KIND, JOB_UID_LABEL
from kaiwo_sandbox.cluster.resources import spec_requests_milli
from kaiwo_sandbox.contracts import (
    CLUSTERQUEUES,
    LOCALQUEUES,
    NAMESPACES,
    RESOURCEFLAVORS,
    WORKLOADS,
    ApiError,
    Clock,
    JsonObj,
    WatchEvent,
)
from kaiwo_sandbox.semantics.quantity import QuantityError, parse_milli
from kaiwo_sandbox.semantics.selectors import LabelSelector, selector_from_dict

SCHEDULE: Hashable = ("schedule",)
STATUS: Hashable = ("status",)
WorkloadKey = tuple[str, str]


def _timestamp(text: object) -> float:
    if not isinstance(text, str) or not text:
        return 0.0
    try:
        return datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0


def status_condition(obj: JsonObj, ctype: str) -> JsonObj | None:
    return find_condition((obj.get("status") or {}).get("conditions"), ctype)


def _podset_requests(podsets: list[JsonObj]) -> list[PodSetRequest]:
    """Pod sets of a Workload spec as admission sees them (raises QuantityError on bad requests)."""
    result = []
    for ps in podsets:
        spec = (ps.get("template") or {}).get("spec") or {}
        required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
        count = ps.get("count", 1)
        result.append(PodSetRequest(
            name=str(ps.get("name", "main")),
            count=count if isinstance(count, int) else 1,
            per_pod=spec_requests_milli(spec),
            node_selector={str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()},
            affinity_terms=tuple(required.get("nodeSelectorTerms") or ()),
            tolerations=tuple(spec.get("tolerations") or ()),
        ))
    return result


def _signature(podsets: list[PodSetRequest]) -> Hashable:
    """Two workloads with equal signatures get the same flavor-assignment verdict."""
    return tuple((ps.name, ps.count, tuple(sorted(ps.per_pod.items())), tuple(sorted(ps.node_selector.items())),
                  repr(ps.affinity_terms), repr(ps.tolerations)) for ps in podsets)


def _admission_usage(admission: JsonObj) -> Usage:
    usage: Usage = {}
    for psa in admission.get("podSetAssignments") or []:
        flavors = psa.get("flavors") or {}
        for resource, amount in (psa.get("resourceUsage") or {}).items():
            flavor = flavors.get(resource)
            if flavor is None:
                continue
            try:
                value = parse_milli(amount)
            except QuantityError:
                continue
            fr = (str(flavor), str(resource))
            usage[fr] = usage.get(fr, 0) + value
    return usage


@dataclass(slots=True)
class WorkloadInfo:
    """Kueue's cache entry for one Workload."""

    key: WorkloadKey
    obj: JsonObj  # latest stored snapshot: read-only
    uid: str
    queue: str
    priority: int
    seq: int  # queue order among equal priorities (arrival, or eviction for requeued ones)
    queued_at: float
    podsets: list[PodSetRequest]
    signature: Hashable
    invalid: str = ""
    owner: tuple[str, str] | None = None  # (resource plural, name) of the job
    job_uid: str = ""
    reserved_cq: str | None = None
    usage: Usage = field(default_factory=dict)
    admitted_at: float = 0.0
    finished: bool = False
    evicted: bool = False
    active: bool = True
    bucket: str | None = None  # ClusterQueue whose pending list holds it ("" = no usable queue)

    @property
    def order(self) -> tuple[int, int, str, str]:
        return (-self.priority, self.seq, self.key[0], self.key[1])

    @property
    def queued(self) -> bool:
        return not self.finished and self.active and self.reserved_cq is None


class PendingQueue:
    """Workloads waiting in one ClusterQueue, kept sorted by (priority desc, queue order)."""

    def __init__(self) -> None:
        self._orders: list[tuple[int, int, str, str]] = []

    def add(self, info: WorkloadInfo) -> None:
        bisect.insort(self._orders, info.order)

    def remove(self, order: tuple[int, int, str, str]) -> None:
        index = bisect.bisect_left(self._orders, order)
        if index < len(self._orders) and self._orders[index] == order:
            del self._orders[index]

    def ordered_keys(self) -> list[WorkloadKey]:
        return [(o[2], o[3]) for o in self._orders]

    def __len__(self) -> int:
        return len(self._orders)


class KueueCache:
    """What Kueue's scheduler knows. Every attribute is read by the controller; only `feed` and
    the methods below change them."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.book = QuotaBook()
        self.cq_objs: dict[str, JsonObj] = {}
        self.cq_problems: dict[str, tuple[str, str]] = {}  # name -> (reason, message) when inactive
        self.ns_selectors: dict[str, LabelSelector] = {}
        self.lqs: dict[WorkloadKey, JsonObj] = {}
        self.flavors: dict[str, FlavorInfo] = {}
        self.ns_labels: dict[str, dict[str, str]] = {}
        self.wls: dict[WorkloadKey, WorkloadInfo] = {}
        # The Workloads not finished, in the order `wls` holds them (a dict as an ordered set): queue
        # status counts only these, and a long run's finished ones would make each count grow with it.
        self.unfinished: dict[WorkloadKey, None] = {}
        self.by_owner: dict[str, WorkloadKey] = {}  # job uid -> its Workload
        self.pending: dict[str, PendingQueue] = {}
        self.reserved: dict[str, set[WorkloadKey]] = {}
        self.unqueued: set[WorkloadKey] = set()  # no usable LocalQueue/ClusterQueue
        self.unreported: set[WorkloadKey] = set()  # of those, the ones whose reason is not written yet
        self.full: set[str] = set()  # queues to re-examine entirely (quota freed, config changed)
        self.deactivated: set[WorkloadKey] = set()  # admitted, then spec.active set to false: to evict
        self.new: dict[str, list[WorkloadKey]] = {}  # queues with fresh arrivals only
        self.seq = itertools.count()

    def feed(self, event: WatchEvent) -> list[Hashable] | None:
        """Update from one store event; the work keys it causes, or None for kinds it does not track."""
        resource = event.gvr.resource
        if resource == WORKLOADS.resource:
            return self._on_workload(event)
        if resource == CLUSTERQUEUES.resource:
            return self._on_config(event, self.cq_objs, cluster_scoped=True)
        if resource == LOCALQUEUES.resource:
            return self._on_config(event, self.lqs, cluster_scoped=False)
        if resource == RESOURCEFLAVORS.resource:
            name = str(event.object["metadata"]["name"])
            if event.type == "DELETED":
                self.flavors.pop(name, None)
            else:
                self.flavors[name] = flavor_from_object(event.object)
            return self._reconfigure()
        if resource == NAMESPACES.resource:
            name = str(event.object["metadata"]["name"])
            labels = dict(event.object["metadata"].get("labels") or {})
            if event.type == "DELETED":
                self.ns_labels.pop(name, None)
                return []
            if self.ns_labels.get(name) == labels:
                return []
            self.ns_labels[name] = labels
            self.full.update(self.pending)
            return [SCHEDULE]
        return None

    def _on_config(self, event: WatchEvent, table: dict[WorkloadKey, JsonObj] | dict[str, JsonObj],
                   *, cluster_scoped: bool) -> list[Hashable]:
        meta = event.object["metadata"]
        key: object = str(meta["name"]) if cluster_scoped else (str(meta.get("namespace", "")), str(meta["name"]))
        old = table.get(key)  # type: ignore[call-overload]
        if event.type == "DELETED":
            table.pop(key, None)  # type: ignore[call-overload]
        else:
            table[key] = event.object  # type: ignore[index]
            if old is not None and old.get("spec") == event.object.get("spec") and \
                    (old.get("metadata") or {}).get("deletionTimestamp") == meta.get("deletionTimestamp"):
                return []  # a status write (often our own)
        return self._reconfigure()

    def _reconfigure(self) -> list[Hashable]:
        """Queues or flavors changed: rebuild the quota book and re-bucket every pending workload."""
        specs: list[ClusterQueueSpec] = []
        self.cq_problems = {}
        self.ns_selectors = {}
        for name, obj in self.cq_objs.items():
            try:
                spec = parse_cluster_queue(obj)
            except ClusterQueueSpecError as err:
                self.cq_problems[name] = ("Unknown", f"Can't admit new workloads: {err}.")
                continue
            specs.append(spec)
            try:
                self.ns_selectors[name] = selector_from_dict(spec.namespace_selector)
            except ApiError:
                self.ns_selectors[name] = selector_from_dict(None)
            missing = sorted({f for f in spec.flavor_names() if f not in self.flavors})
            reasons, messages = [], []
            if spec.stopped:
                reasons.append("Stopped")
                messages.append("is stopped")
            if missing:
                reasons.append("FlavorNotFound")
                messages.append(f"references missing ResourceFlavor(s): {','.join(missing)}")
            if (obj.get("metadata") or {}).get("deletionTimestamp"):
                self.cq_problems[name] = ("Terminating", "Can't admit new workloads; clusterQueue is terminating")
            elif reasons:
                self.cq_problems[name] = (reasons[0], f"Can't admit new workloads: {', '.join(messages)}.")
        self.book.set_specs(specs)
        for info in self.wls.values():
            if info.queued:
                self._rebucket(info)
        self.full.update(self.pending)
        self.unreported.update(self.unqueued)  # the reason may have changed (LocalQueue vs ClusterQueue)
        return [SCHEDULE, STATUS]

    def _target_queue(self, info: WorkloadInfo) -> str:
        lq = self.lqs.get((info.key[0], info.queue))
        if lq is None:
            return ""
        cq = str((lq.get("spec") or {}).get("clusterQueue") or "")
        return cq if cq in self.cq_objs else ""

    def _rebucket(self, info: WorkloadInfo) -> None:
        target = self._target_queue(info)
        if info.bucket == target:
            return
        self._unbucket(info)
        self._bucket(info, target)

    def _bucket(self, info: WorkloadInfo, target: str) -> None:
        info.bucket = target
        if target:
            self.pending.setdefault(target, PendingQueue()).add(info)
            self.new.setdefault(target, []).append(info.key)
        else:
            self.unqueued.add(info.key)
            self.unreported.add(info.key)

    def _unbucket(self, info: WorkloadInfo) -> None:
        if info.bucket:
            queue = self.pending.get(info.bucket)
            if queue is not None:
                queue.remove(info.order)
        elif info.bucket == "":
            self.unqueued.discard(info.key)
            self.unreported.discard(info.key)
        info.bucket = None

    def _on_workload(self, event: WatchEvent) -> list[Hashable]:
        obj = event.object
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        info = self.wls.get(key)
        keys: list[Hashable] = [STATUS]
        if event.type == "DELETED":
            if info is not None:
                self.forget(info)
                keys.append(SCHEDULE)
            return keys
        if info is None:
            info = self._new_info(key, obj)
            self.wls[key] = info
            if info.job_uid:
                self.by_owner[info.job_uid] = key
        old_cq, old_usage = info.reserved_cq, info.usage
        info.obj = obj
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        info.active = spec.get("active", True) is not False
        info.finished = condition_true(obj, "Finished")
        if info.finished:
            self.unfinished.pop(key, None)
        else:
            self.unfinished[key] = None
        reserved = bool(status.get("admission")) and condition_true(obj, "QuotaReserved") and not info.finished
        info.evicted = reserved and condition_true(obj, "Evicted")
        if reserved and not info.active and not info.evicted:
            self.deactivated.add(key)
            keys.append(SCHEDULE)
        new_cq = str(status["admission"].get("clusterQueue", "")) if reserved else None
        new_usage = _admission_usage(status["admission"]) if reserved else {}
        if (old_cq, old_usage) != (new_cq, new_usage):
            if old_cq is not None:
                self.book.add_usage(old_cq, old_usage, -1)
                self.reserved.get(old_cq, set()).discard(key)
                for member in self.book.cohort_members(old_cq):
                    self.full.add(member)
            if new_cq is not None:
                self.book.add_usage(new_cq, new_usage, +1)
                self.reserved.setdefault(new_cq, set()).add(key)
                info.admitted_at = self.clock.monotonic()
            info.reserved_cq, info.usage = new_cq, new_usage
            keys.append(SCHEDULE)
        queue = str(spec.get("queueName") or "")
        if queue != info.queue:
            info.queue = queue
            if info.bucket is not None:
                self._unbucket(info)
        if info.queued and info.bucket is None:
            if old_cq is not None:  # requeued after eviction: goes behind its peers
                info.seq = next(self.seq)
                evicted = status_condition(obj, "Evicted")
                info.queued_at = _timestamp(evicted.get("lastTransitionTime")) if evicted else info.queued_at
            self._bucket(info, self._target_queue(info))
            keys.append(SCHEDULE)
        elif not info.queued and info.bucket is not None:
            self._unbucket(info)
        if info.owner is not None:
            keys.append(("job", info.owner[0], key[0], info.owner[1]))
        return keys

    def _new_info(self, key: WorkloadKey, obj: JsonObj) -> WorkloadInfo:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        invalid = ""
        try:
            podsets = _podset_requests(spec.get("podSets") or [])
        except QuantityError as err:
            podsets, invalid = [], f"invalid resource requests: {err}"
        owner = None
        job_uid = str((meta.get("labels") or {}).get(JOB_UID_LABEL) or "")
        for ref in meta.get("ownerReferences") or []:
            fw = FRAMEWORK_BY_KIND.get(str(ref.get("kind", "")))
            if ref.get("controller") and fw is not None:
                owner = (fw.gvr.resource, str(ref.get("name", "")))
                job_uid = job_uid or str(ref.get("uid", ""))
        priority = spec.get("priority", 0)
        return WorkloadInfo(
            key=key, obj=obj, uid=str(meta.get("uid", "")), queue=str(spec.get("queueName") or ""),
            priority=priority if isinstance(priority, int) else 0, seq=next(self.seq),
            queued_at=_timestamp(meta.get("creationTimestamp")), podsets=podsets,
            signature=_signature(podsets), invalid=invalid, owner=owner, job_uid=job_uid)

    def forget(self, info: WorkloadInfo) -> None:
        self._unbucket(info)
        if info.reserved_cq is not None:
            self.book.add_usage(info.reserved_cq, info.usage, -1)
            self.reserved.get(info.reserved_cq, set()).discard(info.key)
            self.full.update(self.book.cohort_members(info.reserved_cq))
        self.wls.pop(info.key, None)
        self.unfinished.pop(info.key, None)
        if self.by_owner.get(info.job_uid) == info.key:
            del self.by_owner[info.job_uid]
