"""Kueue, simulated: the webhooks that suspend or gate queued objects at creation, one Workload per
job, quota reservation against ClusterQueues (flavors, cohorts, priorities, StrictFIFO and
BestEffortFIFO, in-queue preemption), starting and stopping jobs, and queue status.

Like Kueue, the controller decides from an in-memory cache (`cache.KueueCache`) fed by the
store's notifications — `keys_for` updates it synchronously, so it is never behind the store
when a reconcile runs. Pending workloads are indexed per ClusterQueue in queue order and usage
is kept incrementally, so one admission costs a flavor assignment, not a scan of every workload.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

import orjson

from kaiwo_sandbox.cluster.base import ClusterSettings, Controller
from kaiwo_sandbox.cluster.conditions import condition_true, find_condition, set_condition
from kaiwo_sandbox.cluster.events import record_event
from kaiwo_sandbox.cluster.kueue.admission import (
    FIT,
    NO_FIT,
    PREEMPT,
    Assignment,
    Candidate,
    ClusterQueueSpec,
    Usage,
    assign_flavors,
    fits_now,
    preemption_targets,
)
from kaiwo_sandbox.cluster.kueue.cache import (
    SCHEDULE,
    STATUS,
    KueueCache,
    WorkloadInfo,
    WorkloadKey,
    status_condition,
)
from kaiwo_sandbox.cluster.kueue.jobs import (
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
from kaiwo_sandbox.cluster.kueue.status import QueueStatus, cluster_queue_status, local_queue_status
from kaiwo_sandbox.cluster.pods import owner_reference
from kaiwo_sandbox.contracts import (
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
    RAYSERVICES,
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
KUEUE_USER = "system:serviceaccount:kueue-system:kueue-controller-manager"
# Kueue's webhooks put it on every new ClusterQueue and ResourceFlavor; its controllers remove it
# once the object is being deleted and nothing uses it (no Workload reserving quota in the
# ClusterQueue; no ClusterQueue naming the flavor).
RESOURCE_IN_USE_FINALIZER = "kueue.x-k8s.io/resource-in-use"
FINALIZE: Hashable = ("finalize",)
STATUS_INTERVAL = 0.05  # real seconds between queue status writes (coalesces bursts)
# Counting walks every Workload: the pause after a count is this many times what it cost, so the
# counts stay under 5% of the loop (at 3,000 Workloads, a count every 50 ms costs ~9% of the sandbox's CPU).
STATUS_COST_FACTOR = 20.0


class KueueController(Controller):
    name = "kueue"
    # Configuration kinds first so the cache knows queues before it sees workloads at start.
    watches = (RESOURCEFLAVORS, CLUSTERQUEUES, LOCALQUEUES, WORKLOADPRIORITYCLASSES, NAMESPACES, WORKLOADS,
               JOBS, RAYJOBS, RAYCLUSTERS, RAYSERVICES, APPWRAPPERS, PODS)

    def __init__(self, store: Store, clock: Clock, settings: ClusterSettings) -> None:
        super().__init__(store, clock, settings)
        self.cache = KueueCache(clock)
        self._wpc: dict[str, int] = {}
        self._held: list[tuple[str, Usage]] = []  # what preemptors hold in this scheduling cycle (_schedule)
        self._jobs: dict[tuple[str, str, str], JsonObj] = {}
        self._waiting_priority: dict[str, set[tuple[str, str, str]]] = {}
        self._last_status: dict[tuple[str, str, str], QueueStatus] = {}
        self._last_status_write = -1.0
        self._status_interval = STATUS_INTERVAL
        self._terminating: set[tuple[str, str]] = set()  # (resource, name) waiting to lose the finalizer

    # ------------------------------------------------------------------ webhook
    def admit(self, operation: str, gvr: GVR, obj: JsonObj, old: JsonObj | None, user: str) -> None:
        if operation == "CREATE" and gvr.group == CLUSTERQUEUES.group and \
                gvr.resource in (CLUSTERQUEUES.resource, RESOURCEFLAVORS.resource):
            finalizers = obj.setdefault("metadata", {}).setdefault("finalizers", [])
            if RESOURCE_IN_USE_FINALIZER not in finalizers:
                finalizers.append(RESOURCE_IN_USE_FINALIZER)
            return
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
        if resource in (CLUSTERQUEUES.resource, RESOURCEFLAVORS.resource) and event.gvr.group == CLUSTERQUEUES.group:
            self._track_finalizer(resource, event)
        keys = self.cache.feed(event)
        if keys is not None:
            # Quota released or queues changed: a terminating ClusterQueue or flavor may be free now.
            return [*keys, FINALIZE] if self._terminating else keys
        if resource in FRAMEWORKS and event.gvr.group == FRAMEWORKS[resource].gvr.group:
            return self._on_job(event)
        if resource == WORKLOADPRIORITYCLASSES.resource:
            name = str(event.object["metadata"]["name"])
            if event.type == "DELETED":
                self._wpc.pop(name, None)
                return []
            value = event.object.get("value", 0)
            self._wpc[name] = value if isinstance(value, int) else 0
            return [("job", *k) for k in self._waiting_priority.pop(name, set())]
        return []

    def _on_job(self, event: WatchEvent) -> list[Hashable]:
        obj = event.object
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        resource = event.gvr.resource
        if resource == PODS.resource:
            relevant = (meta.get("labels") or {}).get(MANAGED_LABEL) == "true" or uid in self.cache.by_owner
        else:
            relevant = bool(queue_name(obj)) or uid in self.cache.by_owner
        if not relevant:
            return []
        key = (resource, str(meta.get("namespace", "")), str(meta.get("name", "")))
        if event.type == "DELETED":
            self._jobs.pop(key, None)
            return []
        self._jobs[key] = obj
        return [("job", *key)]

    # ------------------------------------------------------------------ reconcile
    def reconcile(self, key: Hashable) -> float | None:
        assert isinstance(key, tuple)
        if key == SCHEDULE:
            self._schedule()
            return None
        if key == STATUS:
            return self._write_statuses()
        if key == FINALIZE:
            return self._release_unused()
        if key[0] == "job":
            return self._reconcile_job(str(key[1]), str(key[2]), str(key[3]))
        return None

    # ------------------------------------------------------------------ resource-in-use finalizer
    def _track_finalizer(self, resource: str, event: WatchEvent) -> None:
        meta = event.object.get("metadata") or {}
        key = (resource, str(meta.get("name", "")))
        if event.type != "DELETED" and meta.get("deletionTimestamp") and \
                RESOURCE_IN_USE_FINALIZER in (meta.get("finalizers") or ()):
            self._terminating.add(key)
        else:
            self._terminating.discard(key)

    def _release_unused(self) -> float | None:
        """Drop the finalizer of each terminating ClusterQueue no Workload reserves quota in, and of
        each terminating flavor no ClusterQueue names (terminating ones included, as Kueue's cache).
        A conflicting write is retried shortly."""
        retry: float | None = None
        named = {flavor for obj in self.cache.cq_objs.values()
                 for group in (obj.get("spec") or {}).get("resourceGroups") or ()
                 for flavor in (f.get("name") for f in group.get("flavors") or ())}
        for resource, name in sorted(self._terminating):
            in_use = bool(self.cache.reserved.get(name)) if resource == CLUSTERQUEUES.resource else name in named
            if in_use:
                continue
            gvr = CLUSTERQUEUES if resource == CLUSTERQUEUES.resource else RESOURCEFLAVORS
            try:
                live = self.store.get(gvr, None, name)
                finalizers = [f for f in live["metadata"].get("finalizers") or () if f != RESOURCE_IN_USE_FINALIZER]
                self.store.patch(gvr, None, name, {"metadata": {
                    "finalizers": finalizers, "resourceVersion": live["metadata"].get("resourceVersion")}},
                    "merge", user=KUEUE_USER)
            except ApiError as err:
                if err.code == 409:
                    retry = 0.05
                    continue
                if err.code != 404:
                    raise
            self._terminating.discard((resource, name))
        return retry

    # ------------------------------------------------------------------ scheduling
    def _schedule(self) -> None:
        deactivated, self.cache.deactivated = self.cache.deactivated, set()
        for key in sorted(deactivated):
            info = self.cache.wls.get(key)
            if info is not None and info.reserved_cq is not None and not info.active and not info.evicted:
                self._evict_deactivated(info)
        unreported, self.cache.unreported = self.cache.unreported, set()
        for key in sorted(unreported):
            info = self.cache.wls.get(key)
            if info is not None and info.queued:
                self._report_unqueued(info)
        full, self.cache.full = self.cache.full, set()
        new, self.cache.new = self.cache.new, {}
        # A workload waiting on its preemptions holds what it asked for until the cycle ends, as
        # Kueue's scheduler adds it to the cycle's cohort usage: without the hold, a later workload
        # of the queue or cohort takes the room being freed, the preemptor preempts it in turn, and
        # the two change places for ever.
        self._held = []
        try:
            cursors = [cursor for cq in sorted(set(full) | set(new))
                       if (cursor := self._cursor(cq, cq in full, new.get(cq, []))) is not None]
            self._run_cycles(cursors)
        finally:
            for cq, usage in self._held:
                self.cache.book.add_usage(cq, usage, sign=-1)
            self._held = []

    def _report_unqueued(self, info: WorkloadInfo) -> None:
        lq = self.cache.lqs.get((info.key[0], info.queue))
        if lq is None:
            self._set_pending(info, "Inadmissible", f"LocalQueue {info.queue} doesn't exist")
            return
        cq = str((lq.get("spec") or {}).get("clusterQueue") or "")
        self._set_pending(info, "Inadmissible", f"ClusterQueue {cq} doesn't exist")

    def _cursor(self, cq: str, full: bool, fresh: list[WorkloadKey]) -> _QueueCursor | None:
        """The workloads of `cq` to try in this pass, in queue order (None when there are none); a
        queue that cannot admit reports why to each of them instead."""
        queue = self.cache.pending.get(cq)
        if queue is None or not len(queue):
            return None
        spec = self.cache.book.specs.get(cq)
        problem = self.cache.cq_problems.get(cq)
        if spec is None or problem is not None:
            for key in queue.ordered_keys() if full else fresh:
                info = self.cache.wls.get(key)
                if info is not None and info.queued:
                    self._set_pending(info, "Inadmissible", f"ClusterQueue {cq} is inactive")
            return None
        if full or spec.strict_fifo:
            candidates = queue.ordered_keys()
        else:
            wanted = set(fresh)
            candidates = [k for k in queue.ordered_keys() if k in wanted]
        return _QueueCursor(cq, spec, candidates)

    def _head(self, cursor: _QueueCursor) -> WorkloadInfo | None:
        """The queue's next workload to try (its head in Kueue's terms), reporting the ones that
        cannot be tried on the way; None when the queue has no more."""
        selector = self.cache.ns_selectors.get(cursor.cq)
        while cursor.position < len(cursor.candidates):
            key = cursor.candidates[cursor.position]
            info = self.cache.wls.get(key)
            if info is None or not info.queued or info.bucket != cursor.cq:
                cursor.position += 1
                continue
            if info.invalid:
                self._set_pending(info, "Inadmissible", info.invalid)
                cursor.position += 1
                continue
            if selector is None or not selector.matches(self.cache.ns_labels.get(key[0])):
                self._set_pending(info, "Pending", "Workload namespace doesn't match ClusterQueue selector")
                cursor.position += 1
                continue
            return info
        return None

    def _run_cycles(self, cursors: list[_QueueCursor]) -> None:
        """Kueue's scheduling cycles over the queues: each cycle takes every queue's head, orders
        the heads as Kueue's scheduler does (classicalIterator: a head that fits within its queue's
        nominal quota before one that must borrow, then higher priority, then earlier in queue
        order), and tries them in that order, each against the usage the earlier ones left. A
        head tried moves its queue on (BestEffortFIFO: the next workload is the head of the next
        cycle; a StrictFIFO queue stops at one that does not get in). Only heads of one cohort
        share quota, so only they are ranked (the others keep the alphabetical order)."""
        while cursors:
            heads = [(cursor, info) for cursor in cursors if (info := self._head(cursor)) is not None]
            if not heads:
                return
            cohort_heads: dict[str, int] = {}
            for cursor, _ in heads:
                if cursor.spec.cohort:
                    cohort_heads[cursor.spec.cohort] = cohort_heads.get(cursor.spec.cohort, 0) + 1
            ranked = []
            for cursor, info in heads:
                nominated: Assignment | None = None
                if cohort_heads.get(cursor.spec.cohort or "", 0) > 1:
                    nominated = assign_flavors(cursor.cq, info.podsets, self.cache.book, self.cache.flavors)
                borrows = nominated is not None and nominated.borrows
                ranked.append(((borrows, -info.priority, info.seq), cursor, info, nominated))
            ranked.sort(key=lambda entry: entry[0])
            changed = False  # whether a head of this cycle took quota (nominations are stale then)
            for _, cursor, info, nominated in ranked:
                outcome = self._try_admit(cursor.cq, cursor.spec, info, cursor.failed,
                                          None if changed else nominated)
                changed = changed or outcome != _NOT_ADMITTED
                if outcome == _ADMITTED or not cursor.spec.strict_fifo:
                    cursor.position += 1
                else:
                    cursor.position = len(cursor.candidates)
            cursors = [cursor for cursor in cursors if cursor.position < len(cursor.candidates)]

    def _try_admit(self, cq: str, spec: ClusterQueueSpec, info: WorkloadInfo, failed: dict[Hashable, str],
                   nominated: Assignment | None = None) -> str:
        """Reserve quota for `info` (or preempt for it); `nominated` is its assignment when the
        usage has not changed since it was made. Returns _ADMITTED, _PREEMPTING (the usage it asked
        for is held until the pass ends) or _NOT_ADMITTED."""
        memo = failed.get(info.signature)
        if memo is not None:
            self._set_pending(info, "Pending", memo)
            return _NOT_ADMITTED
        assignment = nominated or assign_flavors(cq, info.podsets, self.cache.book, self.cache.flavors)
        if assignment.mode == FIT:
            self._reserve(cq, info, assignment)
            return _ADMITTED
        if assignment.mode == PREEMPT and self._preempt(cq, info, assignment):
            self.cache.book.add_usage(cq, assignment.usage)
            self._held.append((cq, dict(assignment.usage)))
            return _PREEMPTING
        self._set_pending(info, "Pending", assignment.message)
        if assignment.mode == NO_FIT:
            failed[info.signature] = assignment.message  # usage only grows in a pass: it stays NO_FIT
        return _NOT_ADMITTED

    def _preempt(self, cq: str, info: WorkloadInfo, assignment: Assignment) -> bool:
        """Evict lower-priority workloads of the queue so `info` fits; True when room is being made."""
        reserved = [self.cache.wls[k] for k in sorted(self.cache.reserved.get(cq, set())) if k in self.cache.wls]
        evicting = [w for w in reserved if w.evicted]
        if evicting and fits_now(cq, assignment.usage, self.cache.book, [w.usage for w in evicting]):
            self._set_pending(info, "Pending", f"{assignment.message}. Pending the preemption of "
                                               f"{len(evicting)} workload(s)")
            return True
        candidates = [Candidate(w.key, w.priority, float(w.seq), w.admitted_at, w.usage)
                      for w in reserved if not w.evicted]
        targets = preemption_targets(cq, assignment.usage, info.priority, float(info.seq), candidates, self.cache.book)
        if not targets:
            return False
        for target in targets:
            self._evict(self.cache.wls[target.key], info, cq)
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
        current = status_condition(info.obj, "QuotaReserved")
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
        cohort = self.cache.book.specs[cq].cohort
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

    def _evict_deactivated(self, info: WorkloadInfo) -> None:
        message = "The workload is deactivated"
        conditions = self._conditions(info)
        set_condition(conditions, "Evicted", "True", "Deactivated", message, self._now())
        snapshot = info.obj
        self._patch_status(info, {"conditions": conditions})
        record_event(self.store, self.clock, snapshot, "Normal", "EvictedDueToDeactivated", message,
                     ADMISSION_COMPONENT)

    # ------------------------------------------------------------------ jobs
    def _reconcile_job(self, resource: str, namespace: str, name: str) -> float | None:
        fw = FRAMEWORKS[resource]
        obj = self._jobs.get((resource, namespace, name))
        if obj is None:
            return None
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return None
        wl_key = self.cache.by_owner.get(str(meta.get("uid", "")))
        info = self.cache.wls.get(wl_key) if wl_key else None
        if info is None:
            return self._job_without_workload(fw, obj)
        if info.finished:
            return None
        finish = fw.finished(obj)
        if finish is not None:
            self._finish(fw, obj, info, finish.success, finish.message)
            return None
        if info.evicted:
            evicted = status_condition(info.obj, "Evicted") or {}
            obj = self._stop(fw, obj, info, str(evicted.get("message", "")))
            if obj is not None and not fw.active(obj):
                self._clear_admission(info, evicted)
            return None
        admitted = info.reserved_cq is not None and condition_true(info.obj, "Admitted")
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
                flavor = self.cache.flavors.get(str(flavor_name))
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
        reason = str(evicted.get("reason", "Preempted"))
        # A deactivated Workload is not requeued; a preempted one is.
        set_condition(conditions, "Requeued", "False" if reason == "Deactivated" else "True", reason, message, now)
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
        wait = self._last_status_write + self._status_interval - now
        if self._last_status_write >= 0 and wait > 0:
            return wait
        self._last_status_write = now
        started = time.perf_counter()
        try:
            self._count_and_write()
        finally:
            cost = time.perf_counter() - started
            self._status_interval = max(STATUS_INTERVAL, STATUS_COST_FACTOR * cost)
        return None

    def _count_and_write(self) -> None:
        cq_counts: dict[str, list[int]] = {name: [0, 0] for name in self.cache.cq_objs}
        lq_counts: dict[WorkloadKey, list[int]] = {key: [0, 0] for key in self.cache.lqs}
        lq_usage: dict[WorkloadKey, Usage] = {}
        for key in self.cache.unfinished:  # a finished Workload is neither pending nor reserving
            info = self.cache.wls[key]
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
        for name, obj in list(self.cache.cq_objs.items()):
            pending, reserving = cq_counts.get(name, [0, 0])
            self._write_status(CLUSTERQUEUES, None, name, obj, cluster_queue_status(
                self.cache.book, name, self.cache.cq_problems.get(name), pending, reserving))
        for (namespace, name), obj in list(self.cache.lqs.items()):
            pending, reserving = lq_counts.get((namespace, name), [0, 0])
            cq = str((obj.get("spec") or {}).get("clusterQueue") or "")
            self._write_status(LOCALQUEUES, namespace, name, obj, local_queue_status(
                cq in self.cache.cq_objs, cq not in self.cache.cq_problems, pending, reserving,
                lq_usage.get((namespace, name), {})))

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


_ADMITTED, _PREEMPTING, _NOT_ADMITTED = "admitted", "preempting", "not admitted"


@dataclass(slots=True)
class _QueueCursor:
    """One ClusterQueue's walk through its pending workloads in a scheduling pass."""

    cq: str
    spec: ClusterQueueSpec
    candidates: list[WorkloadKey]
    position: int = 0
    failed: dict[Hashable, str] = field(default_factory=dict)  # NO_FIT verdicts by request signature


def _clone(obj: JsonObj) -> JsonObj:
    """A private, writable copy of a stored snapshot."""
    copied: JsonObj = orjson.loads(orjson.dumps(obj))
    return copied
