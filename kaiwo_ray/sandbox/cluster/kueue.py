"""Kueue, simulated: the webhooks that suspend or gate queued objects at creation, one Workload per
job, quota reservation against ClusterQueues (flavors, cohorts, priorities, StrictFIFO and
BestEffortFIFO, in-queue preemption), starting and stopping jobs, and queue status.

Like Kueue's own cache, the controller keeps an in-memory view fed by the store's notifications
(`keys_for` updates it synchronously, so it is never behind the store when a reconcile runs):
pending workloads are indexed per ClusterQueue in queue order and usage is kept incrementally,
so one admission costs a flavor assignment, not a scan of every workload.
"""

from __future__ import annotations

import bisect
import itertools
import logging
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import orjson

from kaiwo_ray.sandbox.cluster.base import ClusterSettings, Controller
from kaiwo_ray.sandbox.cluster.conditions import find_condition, set_condition
from kaiwo_ray.sandbox.cluster.events import record_event
from kaiwo_ray.sandbox.cluster.kueue_admission import (
    FIT,
    NO_FIT,
    PREEMPT,
    Assignment,
    Candidate,
    ClusterQueueSpec,
    ClusterQueueSpecError,
    FlavorInfo,
    PodSetRequest,
    QuotaBook,
    Usage,
    assign_flavors,
    fits_now,
    flavor_from_object,
    parse_cluster_queue,
    preemption_targets,
)
from kaiwo_ray.sandbox.cluster.kueue_jobs import (
    FRAMEWORK_BY_KIND,
    FRAMEWORKS,
    JOB_UID_LABEL,
    MANAGED_LABEL,
    PRIORITY_LABEL,
    Framework,
    PodFramework,
    PodSetInfo,
    PodSetSpec,
    owned_by_managed_job,
    queue_name,
    suspend_on_create,
    validate_rayjob,
    workload_name,
)
from kaiwo_ray.sandbox.cluster.kueue_resources import QuantityError, parse_quantity, pod_requests
from kaiwo_ray.sandbox.cluster.kueue_status import QueueStatus, cluster_queue_status, local_queue_status
from kaiwo_ray.sandbox.cluster.podutil import owner_reference
from kaiwo_ray.sandbox.selectors import LabelSelector, selector_from_dict
from kaiwo_ray.sandbox.types import (
    APPWRAPPERS,
    CLUSTERQUEUES,
    GVR,
    JOBS,
    LOCALQUEUES,
    NAMESPACES,
    PODS,
    PRIORITYCLASSES,
    RAYCLUSTERS,
    RAYJOBS,
    RESOURCEFLAVORS,
    WORKLOADPRIORITYCLASSES,
    WORKLOADS,
    ApiError,
    Clock,
    JsonObj,
    Store,
    WatchEvent,
    rfc3339,
)

log = logging.getLogger(__name__)

ADMISSION_COMPONENT = "kueue-admission"
SCHEDULE: Hashable = ("schedule",)
STATUS: Hashable = ("status",)
STATUS_INTERVAL = 0.05  # real seconds between queue status writes (coalesces bursts)
WorkloadKey = tuple[str, str]


def _timestamp(text: object) -> float:
    if not isinstance(text, str) or not text:
        return 0.0
    try:
        return datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0


def _condition(obj: JsonObj, ctype: str) -> JsonObj | None:
    return find_condition((obj.get("status") or {}).get("conditions"), ctype)


def _is_true(obj: JsonObj, ctype: str) -> bool:
    cond = _condition(obj, ctype)
    return cond is not None and cond.get("status") == "True"


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
            per_pod=pod_requests(spec),
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
                value = parse_quantity(amount)
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


class KueueController(Controller):
    name = "kueue"
    # Configuration kinds first so the cache knows queues before it sees workloads at start.
    watches = (RESOURCEFLAVORS, CLUSTERQUEUES, LOCALQUEUES, WORKLOADPRIORITYCLASSES, NAMESPACES, WORKLOADS,
               JOBS, RAYJOBS, RAYCLUSTERS, APPWRAPPERS, PODS)

    def __init__(self, store: Store, clock: Clock, settings: ClusterSettings) -> None:
        super().__init__(store, clock, settings)
        self.book = QuotaBook()
        self._cq_objs: dict[str, JsonObj] = {}
        self._cq_problems: dict[str, tuple[str, str]] = {}  # name -> (reason, message) when inactive
        self._ns_selectors: dict[str, LabelSelector] = {}
        self._lqs: dict[WorkloadKey, JsonObj] = {}
        self._flavors: dict[str, FlavorInfo] = {}
        self._wpc: dict[str, int] = {}
        self._ns_labels: dict[str, dict[str, str]] = {}
        self._jobs: dict[tuple[str, str, str], JsonObj] = {}
        self._wls: dict[WorkloadKey, WorkloadInfo] = {}
        self._by_owner: dict[str, WorkloadKey] = {}
        self._pending: dict[str, PendingQueue] = {}
        self._reserved: dict[str, set[WorkloadKey]] = {}
        self._unqueued: set[WorkloadKey] = set()  # no usable LocalQueue/ClusterQueue: report why
        self._full: set[str] = set()  # queues to re-examine entirely (quota freed, config changed)
        self._new: dict[str, list[WorkloadKey]] = {}  # queues with fresh arrivals only
        self._waiting_priority: dict[str, set[tuple[str, str, str]]] = {}
        self._seq = itertools.count()
        self._last_status: dict[tuple[str, str, str], QueueStatus] = {}
        self._last_status_write = -1.0

    # ------------------------------------------------------------------ webhook
    def admit(self, operation: str, gvr: GVR, obj: JsonObj, old: JsonObj | None, user: str) -> None:
        if operation != "CREATE" or gvr.resource not in FRAMEWORKS:
            return
        if gvr.resource == RAYJOBS.resource and gvr.group == RAYJOBS.group:
            problems = validate_rayjob(obj)
            if problems:
                name = str((obj.get("metadata") or {}).get("name", ""))
                raise ApiError.invalid("RayJob", "ray.io", name, [
                    {"reason": "FieldValueInvalid", "field": f, "message": f"Invalid value: {v!r}: {m}"}
                    for f, v, m in problems])
        suspend_on_create(gvr, obj)

    # ------------------------------------------------------------------ cache feed
    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        resource = event.gvr.resource
        if resource == WORKLOADS.resource:
            return self._on_workload(event)
        if resource in FRAMEWORKS and event.gvr.group == FRAMEWORKS[resource].gvr.group:
            return self._on_job(event)
        if resource == CLUSTERQUEUES.resource:
            return self._on_config(event, self._cq_objs, cluster_scoped=True)
        if resource == LOCALQUEUES.resource:
            return self._on_config(event, self._lqs, cluster_scoped=False)
        if resource == RESOURCEFLAVORS.resource:
            name = str(event.object["metadata"]["name"])
            if event.type == "DELETED":
                self._flavors.pop(name, None)
            else:
                self._flavors[name] = flavor_from_object(event.object)
            return self._reconfigure()
        if resource == WORKLOADPRIORITYCLASSES.resource:
            name = str(event.object["metadata"]["name"])
            if event.type == "DELETED":
                self._wpc.pop(name, None)
                return []
            value = event.object.get("value", 0)
            self._wpc[name] = value if isinstance(value, int) else 0
            return [("job", *k) for k in self._waiting_priority.pop(name, set())]
        if resource == NAMESPACES.resource:
            name = str(event.object["metadata"]["name"])
            labels = dict(event.object["metadata"].get("labels") or {})
            if event.type == "DELETED":
                self._ns_labels.pop(name, None)
                return []
            if self._ns_labels.get(name) == labels:
                return []
            self._ns_labels[name] = labels
            self._full.update(self._pending)
            return [SCHEDULE]
        return []

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
        self._cq_problems = {}
        self._ns_selectors = {}
        for name, obj in self._cq_objs.items():
            try:
                spec = parse_cluster_queue(obj)
            except ClusterQueueSpecError as err:
                self._cq_problems[name] = ("Unknown", f"Can't admit new workloads: {err}.")
                continue
            specs.append(spec)
            try:
                self._ns_selectors[name] = selector_from_dict(spec.namespace_selector)
            except ApiError:
                self._ns_selectors[name] = selector_from_dict(None)
            missing = sorted({f for f in spec.flavor_names() if f not in self._flavors})
            reasons, messages = [], []
            if spec.stopped:
                reasons.append("Stopped")
                messages.append("is stopped")
            if missing:
                reasons.append("FlavorNotFound")
                messages.append(f"references missing ResourceFlavor(s): {','.join(missing)}")
            if (obj.get("metadata") or {}).get("deletionTimestamp"):
                self._cq_problems[name] = ("Terminating", "Can't admit new workloads; clusterQueue is terminating")
            elif reasons:
                self._cq_problems[name] = (reasons[0], f"Can't admit new workloads: {', '.join(messages)}.")
        self.book.set_specs(specs)
        for info in self._wls.values():
            if info.queued:
                self._rebucket(info)
        self._full.update(self._pending)
        return [SCHEDULE, STATUS]

    def _target_queue(self, info: WorkloadInfo) -> str:
        lq = self._lqs.get((info.key[0], info.queue))
        if lq is None:
            return ""
        cq = str((lq.get("spec") or {}).get("clusterQueue") or "")
        return cq if cq in self._cq_objs else ""

    def _rebucket(self, info: WorkloadInfo) -> None:
        target = self._target_queue(info)
        if info.bucket == target:
            return
        self._unbucket(info)
        self._bucket(info, target)

    def _bucket(self, info: WorkloadInfo, target: str) -> None:
        info.bucket = target
        if target:
            self._pending.setdefault(target, PendingQueue()).add(info)
            self._new.setdefault(target, []).append(info.key)
        else:
            self._unqueued.add(info.key)

    def _unbucket(self, info: WorkloadInfo) -> None:
        if info.bucket:
            queue = self._pending.get(info.bucket)
            if queue is not None:
                queue.remove(info.order)
        elif info.bucket == "":
            self._unqueued.discard(info.key)
        info.bucket = None

    def _on_job(self, event: WatchEvent) -> list[Hashable]:
        obj = event.object
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        resource = event.gvr.resource
        if resource == PODS.resource:
            relevant = (meta.get("labels") or {}).get(MANAGED_LABEL) == "true" or uid in self._by_owner
        else:
            relevant = bool(queue_name(obj)) or uid in self._by_owner
        if not relevant:
            return []
        key = (resource, str(meta.get("namespace", "")), str(meta.get("name", "")))
        if event.type == "DELETED":
            self._jobs.pop(key, None)
            return []
        self._jobs[key] = obj
        return [("job", *key)]

    def _on_workload(self, event: WatchEvent) -> list[Hashable]:
        obj = event.object
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        info = self._wls.get(key)
        keys: list[Hashable] = [STATUS]
        if event.type == "DELETED":
            if info is not None:
                self._forget(info)
                keys.append(SCHEDULE)
            return keys
        if info is None:
            info = self._new_info(key, obj)
            self._wls[key] = info
            if info.job_uid:
                self._by_owner[info.job_uid] = key
        old_cq, old_usage = info.reserved_cq, info.usage
        info.obj = obj
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        info.active = spec.get("active", True) is not False
        info.finished = _is_true(obj, "Finished")
        reserved = bool(status.get("admission")) and _is_true(obj, "QuotaReserved") and not info.finished
        info.evicted = reserved and _is_true(obj, "Evicted")
        new_cq = str(status["admission"].get("clusterQueue", "")) if reserved else None
        new_usage = _admission_usage(status["admission"]) if reserved else {}
        if (old_cq, old_usage) != (new_cq, new_usage):
            if old_cq is not None:
                self.book.add_usage(old_cq, old_usage, -1)
                self._reserved.get(old_cq, set()).discard(key)
                for member in self.book.cohort_members(old_cq):
                    self._full.add(member)
            if new_cq is not None:
                self.book.add_usage(new_cq, new_usage, +1)
                self._reserved.setdefault(new_cq, set()).add(key)
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
                info.seq = next(self._seq)
                evicted = _condition(obj, "Evicted")
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
            priority=priority if isinstance(priority, int) else 0, seq=next(self._seq),
            queued_at=_timestamp(meta.get("creationTimestamp")), podsets=podsets,
            signature=_signature(podsets), invalid=invalid, owner=owner, job_uid=job_uid)

    def _forget(self, info: WorkloadInfo) -> None:
        self._unbucket(info)
        if info.reserved_cq is not None:
            self.book.add_usage(info.reserved_cq, info.usage, -1)
            self._reserved.get(info.reserved_cq, set()).discard(info.key)
            self._full.update(self.book.cohort_members(info.reserved_cq))
        self._wls.pop(info.key, None)
        if self._by_owner.get(info.job_uid) == info.key:
            del self._by_owner[info.job_uid]

    # ------------------------------------------------------------------ reconcile
    def reconcile(self, key: Hashable) -> float | None:
        assert isinstance(key, tuple)
        if key == SCHEDULE:
            self._schedule()
            return None
        if key == STATUS:
            return self._write_statuses()
        if key[0] == "job":
            return self._reconcile_job(str(key[1]), str(key[2]), str(key[3]))
        return None

    # ------------------------------------------------------------------ scheduling
    def _schedule(self) -> None:
        for key in sorted(self._unqueued):
            info = self._wls.get(key)
            if info is not None and info.queued:
                self._report_unqueued(info)
        full, self._full = self._full, set()
        new, self._new = self._new, {}
        for cq in sorted(set(full) | set(new)):
            queue = self._pending.get(cq)
            if queue is None or not len(queue):
                continue
            self._schedule_queue(cq, queue, cq in full, new.get(cq, []))

    def _report_unqueued(self, info: WorkloadInfo) -> None:
        lq = self._lqs.get((info.key[0], info.queue))
        if lq is None:
            self._set_pending(info, "Inadmissible", f"LocalQueue {info.queue} doesn't exist")
            return
        cq = str((lq.get("spec") or {}).get("clusterQueue") or "")
        self._set_pending(info, "Inadmissible", f"ClusterQueue {cq} doesn't exist")

    def _schedule_queue(self, cq: str, queue: PendingQueue, full: bool, fresh: list[WorkloadKey]) -> None:
        spec = self.book.specs.get(cq)
        problem = self._cq_problems.get(cq)
        if spec is None or problem is not None:
            for key in queue.ordered_keys() if full else fresh:
                info = self._wls.get(key)
                if info is not None and info.queued:
                    self._set_pending(info, "Inadmissible", f"ClusterQueue {cq} is inactive")
            return
        if full or spec.strict_fifo:
            candidates = queue.ordered_keys()
        else:
            wanted = set(fresh)
            candidates = [k for k in queue.ordered_keys() if k in wanted]
        failed: dict[Hashable, str] = {}
        selector = self._ns_selectors.get(cq)
        for key in candidates:
            info = self._wls.get(key)
            if info is None or not info.queued or info.bucket != cq:
                continue
            if info.invalid:
                self._set_pending(info, "Inadmissible", info.invalid)
                continue
            if selector is None or not selector.matches(self._ns_labels.get(key[0])):
                self._set_pending(info, "Pending", "Workload namespace doesn't match ClusterQueue selector")
                continue
            admitted = self._try_admit(cq, spec, info, failed)
            if not admitted and spec.strict_fifo:
                break

    def _try_admit(self, cq: str, spec: ClusterQueueSpec, info: WorkloadInfo, failed: dict[Hashable, str]) -> bool:
        memo = failed.get(info.signature)
        if memo is not None:
            self._set_pending(info, "Pending", memo)
            return False
        assignment = assign_flavors(cq, info.podsets, self.book, self._flavors)
        if assignment.mode == FIT:
            self._reserve(cq, info, assignment)
            return True
        if assignment.mode == PREEMPT and self._preempt(cq, info, assignment):
            return False
        self._set_pending(info, "Pending", assignment.message)
        if assignment.mode == NO_FIT:
            failed[info.signature] = assignment.message
        return False

    def _preempt(self, cq: str, info: WorkloadInfo, assignment: Assignment) -> bool:
        """Evict lower-priority workloads of the queue so `info` fits; True when room is being made."""
        reserved = [self._wls[k] for k in sorted(self._reserved.get(cq, set())) if k in self._wls]
        evicting = [w for w in reserved if w.evicted]
        if evicting and fits_now(cq, assignment.usage, self.book, [w.usage for w in evicting]):
            self._set_pending(info, "Pending", f"{assignment.message}. Pending the preemption of "
                                               f"{len(evicting)} workload(s)")
            return True
        candidates = [Candidate(w.key, w.priority, float(w.seq), w.admitted_at, w.usage)
                      for w in reserved if not w.evicted]
        targets = preemption_targets(cq, assignment.usage, info.priority, float(info.seq), candidates, self.book)
        if not targets:
            return False
        for target in targets:
            self._evict(self._wls[target.key], info, cq)
        self._set_pending(info, "Pending", f"{assignment.message}. Pending the preemption of "
                                           f"{len(targets)} workload(s)")
        return True

    def _now(self) -> str:
        return rfc3339(self.clock.now())

    def _conditions(self, info: WorkloadInfo) -> list[JsonObj]:
        return [dict(c) for c in (info.obj.get("status") or {}).get("conditions") or []]

    def _patch_status(self, info: WorkloadInfo, status: JsonObj) -> None:
        self.store.patch(WORKLOADS, info.key[0], info.key[1], {"status": status}, "merge",
                         subresource="status", user="system:serviceaccount:kueue-system:kueue-controller-manager")

    def _reserve(self, cq: str, info: WorkloadInfo, assignment: Assignment) -> None:
        now = self._now()
        conditions = self._conditions(info)
        set_condition(conditions, "QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}", now)
        set_condition(conditions, "Admitted", "True", "Admitted", "The workload is admitted", now)
        for ctype in ("Evicted", "Preempted"):
            previous = find_condition(conditions, ctype)
            if previous is not None and previous.get("status") == "True":
                set_condition(conditions, ctype, "False", "QuotaReserved",
                              f"Previously: {previous.get('message', '')}", now)
        waited = max(0.0, self.clock.now().timestamp() - info.queued_at) if info.queued_at else 0.0
        snapshot = info.obj
        self._patch_status(info, {"admission": {"clusterQueue": cq, "podSetAssignments": assignment.to_api()},
                                  "conditions": conditions})
        record_event(self.store, self.clock, snapshot, "Normal", "QuotaReserved",
                     f"Quota reserved in ClusterQueue {cq}, wait time since queued was {waited:.0f}s",
                     ADMISSION_COMPONENT)
        record_event(self.store, self.clock, snapshot, "Normal", "Admitted",
                     f"Admitted by ClusterQueue {cq}, wait time since reservation was 0s", ADMISSION_COMPONENT)

    def _set_pending(self, info: WorkloadInfo, reason: str, message: str) -> None:
        current = _condition(info.obj, "QuotaReserved")
        if current is not None and current.get("status") == "False" and current.get("reason") == reason \
                and current.get("message") == message:
            return
        conditions = self._conditions(info)
        set_condition(conditions, "QuotaReserved", "False", reason, message, self._now())
        snapshot = info.obj
        self._patch_status(info, {"conditions": conditions})
        if reason == "Pending":
            record_event(self.store, self.clock, snapshot, "Warning", "Pending", message, ADMISSION_COMPONENT)

    def _evict(self, victim: WorkloadInfo, preemptor: WorkloadInfo, cq: str) -> None:
        cohort = self.book.specs[cq].cohort
        path = f"/{cohort}/{cq}" if cohort else f"/{cq}"
        message = (f"Preempted to accommodate a workload (UID: {preemptor.uid}, JobUID: {preemptor.job_uid}) "
                   f"due to prioritization in the ClusterQueue; preemptor path: {path}; preemptee path: {path}")
        now = self._now()
        conditions = self._conditions(victim)
        set_condition(conditions, "Evicted", "True", "Preempted", message, now)
        set_condition(conditions, "Preempted", "True", "InClusterQueue", message, now)
        snapshot = victim.obj
        self._patch_status(victim, {"conditions": conditions})
        record_event(self.store, self.clock, snapshot, "Normal", "EvictedDueToPreempted", message,
                     ADMISSION_COMPONENT)
        record_event(self.store, self.clock, snapshot, "Normal", "Preempted", message, ADMISSION_COMPONENT)

    # ------------------------------------------------------------------ jobs
    def _reconcile_job(self, resource: str, namespace: str, name: str) -> float | None:
        fw = FRAMEWORKS[resource]
        obj = self._jobs.get((resource, namespace, name))
        if obj is None:
            return None
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return None
        wl_key = self._by_owner.get(str(meta.get("uid", "")))
        info = self._wls.get(wl_key) if wl_key else None
        if info is None:
            return self._job_without_workload(fw, obj)
        if info.finished:
            return None
        finish = fw.finished(obj)
        if finish is not None:
            self._finish(fw, obj, info, finish.success, finish.message)
            return None
        if info.evicted:
            evicted = _condition(info.obj, "Evicted") or {}
            obj = self._stop(fw, obj, info, str(evicted.get("message", "")))
            if obj is not None and not fw.active(obj):
                self._clear_admission(info, evicted)
            return None
        admitted = info.reserved_cq is not None and _is_true(info.obj, "Admitted")
        if fw.suspended(obj):
            if admitted:
                self._start(fw, obj, info)
            elif queue_name(obj) and queue_name(obj) != info.queue and info.reserved_cq is None:
                self.store.patch(WORKLOADS, namespace, info.key[1], {"spec": {"queueName": queue_name(obj)}},
                                 "merge")
            return None
        if not admitted:
            self._stop(fw, obj, info, "Not admitted by cluster queue")
        return None

    def _job_without_workload(self, fw: Framework, obj: JsonObj) -> float | None:
        if not queue_name(obj) or owned_by_managed_job(obj) or fw.finished(obj) is not None:
            return None
        if not fw.suspended(obj):
            if not isinstance(fw, PodFramework):
                self._stop(fw, obj, None, "Missing Workload; unable to restore pod templates")
            return None
        if fw.active(obj) and not isinstance(fw, PodFramework):
            return None  # wait for the pods of an earlier run to go away
        return self._create_workload(fw, obj)

    def _priority(self, obj: JsonObj, podsets: list[PodSetSpec]) -> tuple[int, JsonObj | None] | None:
        wpc = ((obj.get("metadata") or {}).get("labels") or {}).get(PRIORITY_LABEL)
        if wpc:
            if wpc not in self._wpc:
                return None
            return self._wpc[wpc], {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": wpc}
        for ps in podsets:
            pc = (ps.template.get("spec") or {}).get("priorityClassName")
            if pc:
                try:
                    value = self.store.get(PRIORITYCLASSES, None, str(pc)).get("value", 0)
                except ApiError:
                    return None
                return (value if isinstance(value, int) else 0,
                        {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": str(pc)})
        return 0, None

    def _create_workload(self, fw: Framework, obj: JsonObj) -> float | None:
        meta = obj.get("metadata") or {}
        namespace, name, uid = str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("uid", ""))
        podsets = fw.podsets(obj)
        priority = self._priority(obj, podsets)
        if priority is None:
            wpc = str((meta.get("labels") or {}).get(PRIORITY_LABEL) or "")
            self._waiting_priority.setdefault(wpc, set()).add((fw.gvr.resource, namespace, name))
            return 5.0  # also retried when the WorkloadPriorityClass appears
        value, ref = priority
        template_of = [{"metadata": {k: v for k, v in (ps.template.get("metadata") or {}).items()
                                     if k in ("labels", "annotations")},
                        "spec": ps.template.get("spec") or {}} for ps in podsets]
        spec: JsonObj = {
            "queueName": queue_name(obj),
            "podSets": [{"name": ps.name, "count": ps.count, "template": t} for ps, t in zip(podsets, template_of,
                                                                                          strict=True)],
            "priority": value,
            "active": True,
        }
        if ref is not None:
            spec["priorityClassRef"] = ref
        wl_name = workload_name(fw.kind, name, uid, fw.gvr.group)
        workload = {
            "apiVersion": WORKLOADS.api_version,
            "kind": "Workload",
            "metadata": {"name": wl_name, "namespace": namespace, "labels": {JOB_UID_LABEL: uid},
                         "ownerReferences": [owner_reference(obj)]},
            "spec": spec,
        }
        try:
            self.store.create(WORKLOADS, workload, namespace=namespace)
        except ApiError as err:
            if err.code == 409:
                return None
            raise
        record_event(self.store, self.clock, obj, "Normal", "CreatedWorkload",
                     f"Created Workload: {namespace}/{wl_name}", fw.component)
        return None

    def _admission_infos(self, info: WorkloadInfo) -> list[PodSetInfo]:
        admission = (info.obj.get("status") or {}).get("admission") or {}
        infos = []
        for psa in admission.get("podSetAssignments") or []:
            selector: dict[str, str] = {}
            tolerations: list[JsonObj] = []
            for flavor_name in dict.fromkeys((psa.get("flavors") or {}).values()):
                flavor = self._flavors.get(str(flavor_name))
                if flavor is None:
                    continue
                selector.update(flavor.node_labels)
                tolerations.extend(t for t in flavor.tolerations if t not in tolerations)
            infos.append(PodSetInfo(str(psa.get("name", "")), selector, tolerations))
        return infos

    def _start(self, fw: Framework, obj: JsonObj, info: WorkloadInfo) -> None:
        updated = _clone(obj)
        fw.start(updated, self._admission_infos(info))
        self.store.update(fw.gvr, updated)
        cq = ((info.obj.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
        record_event(self.store, self.clock, obj, "Normal", "Started", f"Admitted by clusterQueue {cq}",
                     fw.component)

    def _stop(self, fw: Framework, obj: JsonObj, info: WorkloadInfo | None, message: str) -> JsonObj | None:
        """Suspend (or, for a pod, delete) the job and restore its pod templates. Returns the job as
        it now stands, None when it is gone."""
        meta = obj.get("metadata") or {}
        if isinstance(fw, PodFramework):
            if fw.finished(obj) is None:
                record_event(self.store, self.clock, obj, "Normal", "Stopped", message, fw.component)
                try:
                    self.store.delete(PODS, str(meta.get("namespace", "")), str(meta.get("name", "")))
                except ApiError as err:
                    if err.code != 404:
                        raise
            return None
        originals = [PodSetSpec(str(ps.get("name", "")), 0, ps.get("template") or {}, ())
                     for ps in ((info.obj.get("spec") or {}).get("podSets") or [])] if info else []
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        stopped_now = not fw.suspended(obj)
        if fw.gvr == JOBS:
            # The apiserver lets a Job's template change only while it is suspended and has no
            # startTime: suspend, clear startTime, then restore (Kueue's Job.Stop does the same).
            stored = obj
            if stopped_now:
                stored = self.store.patch(JOBS, namespace, name, {"spec": {"suspend": True}}, "merge")
            if (stored.get("status") or {}).get("startTime"):
                stored = self.store.patch(JOBS, namespace, name, {"status": {"startTime": None}}, "merge",
                                          subresource="status")
            updated = _clone(stored)
            if fw.restore(updated, originals):
                stored = self.store.update(JOBS, updated)
        else:
            updated = _clone(obj)
            changed = fw.restore(updated, originals)
            fw.set_suspend(updated, True)
            stored = self.store.update(fw.gvr, updated) if changed or stopped_now else obj
        if stopped_now:
            record_event(self.store, self.clock, obj, "Normal", "Stopped", message, fw.component)
        return stored

    def _clear_admission(self, info: WorkloadInfo, evicted: JsonObj) -> None:
        now = self._now()
        message = str(evicted.get("message", ""))
        conditions = self._conditions(info)
        set_condition(conditions, "QuotaReserved", "False", "Pending", message, now)
        set_condition(conditions, "Admitted", "False", "NoReservation", "The workload has no reservation", now)
        set_condition(conditions, "Requeued", "True", str(evicted.get("reason", "Preempted")), message, now)
        self._patch_status(info, {"admission": None, "conditions": conditions})

    def _finish(self, fw: Framework, obj: JsonObj, info: WorkloadInfo, success: bool, message: str) -> None:
        conditions = self._conditions(info)
        set_condition(conditions, "Finished", "True", "Succeeded" if success else "Failed", message, self._now())
        self._patch_status(info, {"conditions": conditions})
        record_event(self.store, self.clock, obj, "Normal", "FinishedWorkload",
                     f"Workload '{info.key[0]}/{info.key[1]}' is declared finished", fw.component)

    # ------------------------------------------------------------------ queue status
    def _write_statuses(self) -> float | None:
        now = self.clock.monotonic()
        wait = self._last_status_write + STATUS_INTERVAL - now
        if self._last_status_write >= 0 and wait > 0:
            return wait
        self._last_status_write = now
        cq_counts: dict[str, list[int]] = {name: [0, 0] for name in self._cq_objs}
        lq_counts: dict[WorkloadKey, list[int]] = {key: [0, 0] for key in self._lqs}
        lq_usage: dict[WorkloadKey, Usage] = {}
        for info in self._wls.values():
            lq_key = (info.key[0], info.queue)
            if info.queued and info.bucket:
                cq_counts.setdefault(info.bucket, [0, 0])[0] += 1
            if info.queued and lq_key in lq_counts:
                lq_counts[lq_key][0] += 1
            if info.reserved_cq is not None:
                cq_counts.setdefault(info.reserved_cq, [0, 0])[1] += 1
                if lq_key in lq_counts:
                    lq_counts[lq_key][1] += 1
                    usage = lq_usage.setdefault(lq_key, {})
                    for fr, amount in info.usage.items():
                        usage[fr] = usage.get(fr, 0) + amount
        for name, obj in list(self._cq_objs.items()):
            pending, reserving = cq_counts.get(name, [0, 0])
            self._write_status(CLUSTERQUEUES, None, name, obj, cluster_queue_status(
                self.book, name, self._cq_problems.get(name), pending, reserving))
        for (namespace, name), obj in list(self._lqs.items()):
            pending, reserving = lq_counts.get((namespace, name), [0, 0])
            cq = str((obj.get("spec") or {}).get("clusterQueue") or "")
            self._write_status(LOCALQUEUES, namespace, name, obj, local_queue_status(
                cq in self._cq_objs, cq not in self._cq_problems, pending, reserving,
                lq_usage.get((namespace, name), {})))
        return None

    def _write_status(self, gvr: GVR, namespace: str | None, name: str, obj: JsonObj, status: QueueStatus) -> None:
        key = (gvr.resource, namespace or "", name)
        if self._last_status.get(key) == status:
            return
        body = dict(status.body)
        conditions = [dict(c) for c in (obj.get("status") or {}).get("conditions") or []]
        set_condition(conditions, "Active", *status.active, self._now())
        body["conditions"] = conditions
        try:
            self.store.patch(gvr, namespace, name, {"status": body}, "merge", subresource="status")
        except ApiError as err:
            if err.code != 404:
                raise
            return
        self._last_status[key] = status


def _clone(obj: JsonObj) -> JsonObj:
    """A private, writable copy of a stored snapshot."""
    copied: JsonObj = orjson.loads(orjson.dumps(obj))
    return copied
