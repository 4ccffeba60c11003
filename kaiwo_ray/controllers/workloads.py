"""The KaiwoJob and KaiwoService controllers: read the caches, call `reconcile.workload.decide`, carry
out its plan. All decisions live in the pure function; this module only gathers and writes.

Writes are as few as the decision allows: children by server-side apply (field manager
`kaiwo-ray`) only when they drifted, status only when it changed (merge patch guarded by the
resourceVersion), no finalizer (the garbage collector deletes the children). Every successful write
is written through to the cache so the next reconcile (often triggered by our own write) sees it
and does nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from kaiwo_ray import clock
from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.durations import parse_go_duration
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.labels import LABEL_NAME, LABEL_RUN_ID, LABEL_TYPE
from kaiwo_ray.api.meta import parse_time
from kaiwo_ray.controllers.aimnamespace import namespace_facts
from kaiwo_ray.controllers.base import Controller, Key, Requeue, Watch, controller_owner_key, own_key
from kaiwo_ray.controllers.config import load_config, load_queue_config, singleton
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.discovery import KUEUE, missing_line
from kaiwo_ray.kube.errors import RETRYABLE, AlreadyExists, KubeError, NotFound
from kaiwo_ray.kube.events import EventRecorder
from kaiwo_ray.kube.projection import PageDecoder, page_decoder
from kaiwo_ray.kube.resources import Resource
from kaiwo_ray.reconcile import phases as ph
from kaiwo_ray.reconcile.managed import tracked_kind
from kaiwo_ray.reconcile.workload import (
    FINALIZER,
    RESTORE,
    TAKEN,
    Plan,
    Refusal,
    World,
    controlled_by,
    decide,
    effective_queue_name,
    existing_child,
    gpu_demand,
    shared_child,
)
from kaiwo_ray.render.context import PriorityClasses

log = logging.getLogger(__name__)


# Every child we render carries the CR's uid in this label: the child watches select on it, so the
# caches hold our children, not every Job, PVC, ConfigMap and Deployment of the cluster.
CHILD_SELECTOR = LABEL_RUN_ID

# A KaiwoService's only Jobs are its download Jobs (`type=downloader`); selecting on the run-id alone,
# its controller cached every KaiwoJob's main Job too (10,000 of them at 10,000 KaiwoJobs).
_CHILD_SELECTORS: dict[tuple[str, str], str] = {
    ("KaiwoService", "jobs"): f"{CHILD_SELECTOR},{LABEL_TYPE}=downloader",
}

# What this controller reads of a Kueue Workload: its identity, the job-uid label it is indexed by,
# the ownerReferences that map its events to a CR (`_workload_keys`) and the Admitted condition
# (`phases.kueue_admitted`). Kueue Workloads are watched cluster-wide (nothing selects ours), and
# each carries its Job's whole pod template: 10,000 of them were about a third of the actor's RSS.
_WORKLOAD_META = ("name", "namespace", "uid", "resourceVersion", "generation", "labels", "ownerReferences",
                  "deletionTimestamp")


def kueue_workload_fields(obj: JsonObj) -> JsonObj:
    """A Kueue Workload cut down to what `WorkloadController` reads (the informer's transform)."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    kept: JsonObj = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                     "metadata": {k: meta[k] for k in _WORKLOAD_META if k in meta}}
    conditions = status.get("conditions") if isinstance(status, dict) else None
    if conditions:
        kept["status"] = {"conditions": conditions}
    return kept


def without_pod_template(obj: JsonObj) -> JsonObj:
    """A Job less its pod template (the informer's transform for Jobs). The template cannot change after
    creation (`drift.FROZEN_PATHS`), so deciding whether a Job drifted never reads it, and nothing else
    here does; a pass that will update a Job reads it whole first (`_whole_children`). The templates
    of 10,000 Jobs would take about 80 MB of the KaiwoJob actor."""
    spec = obj.get("spec")
    if not isinstance(spec, dict) or "template" not in spec:
        return obj
    kept = dict(obj)
    kept["spec"] = {k: v for k, v in spec.items() if k != "template"}
    return kept


# Child kinds cached trimmed, and how: an update to one is planned from the object read whole.
_TRIMMED_CHILDREN: dict[Resource, Callable[[JsonObj], JsonObj]] = {R.JOBS: without_pod_template}
_TRIMMED_KINDS = frozenset(res.kind for res in _TRIMMED_CHILDREN)

# How list pages are decoded (`kube.projection`): without managedFields (half of a Job's or a CR's
# bytes), and for Kueue Workloads only what `kueue_workload_fields` keeps (their spec is a pod
# template). At 10,000 KaiwoJobs the initial lists were most of a cold start, their decoding half of it.
OBJECT_PAGES = page_decoder()
KUEUE_WORKLOAD_PAGES = page_decoder(meta=_WORKLOAD_META, spec=False, status=("conditions",))
_PAGE_DECODERS: dict[Resource, PageDecoder] = {R.KAIWOJOBS: OBJECT_PAGES, R.KAIWOSERVICES: OBJECT_PAGES, R.JOBS: OBJECT_PAGES}


def _resource_of(obj: JsonObj) -> Resource:
    return R.for_object(obj)


class ChildRefused(Exception):
    """A child write the API server refused: a create answered AlreadyExists by an object this workload
    does not control, or a 4xx that retrying unchanged cannot fix. Carries what the next pass decides on."""

    def __init__(self, refusal: Refusal, error: KubeError) -> None:
        super().__init__(f"{refusal.kind} {refusal.name}: {error}")
        self.refusal, self.error = refusal, error


def _permanent(err: KubeError) -> bool:
    return 400 <= err.code < 500 and not isinstance(err, RETRYABLE)


class WorkloadController(Controller):
    """One class for both kinds: `kind` is "KaiwoJob" or "KaiwoService"."""

    def __init__(self, client: Any, kind: str, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self.kind = kind
        self.name = "kaiwojob-controller" if kind == "KaiwoJob" else "kaiwoservice-controller"
        self.primary = R.KAIWOJOBS if kind == "KaiwoJob" else R.KAIWOSERVICES
        self.other = R.KAIWOSERVICES if kind == "KaiwoJob" else R.KAIWOJOBS
        self._type_meta: JsonObj = {"kind": kind, "apiVersion": self.primary.api_version}
        self.recorder = EventRecorder(client, self.name)
        self.writes = 0
        # Keys of our CRs that are RUNNING with a duration, kept up to date from every primary event
        # and our own status writes, so that mapping an event to them does not scan every CR (which
        # made each event O(number of CRs), and a burst of creates quadratic).
        self._timed_running: set[Key] = set()
        # The duration rules of a RUNNING workload read the PENDING workloads of both kinds (the
        # caches index them by phase: a scan of every CR per pass made the sweep O(RUNNING x CRs)), and
        # only an event that changes that set wakes the RUNNING ones (or a threshold timer, below).
        self._threshold_timers: dict[tuple[str, str, str], asyncio.TimerHandle] = {}
        # When we created each CR's main child (loop time: monotonic, virtual in a simulation), for the settle window (World.settle_remaining);
        # an entry goes with the first pass after its window.
        self._main_created_at: dict[Key, float] = {}
        # key -> (uid, spec generation) a decision last rendered whole without an error: World.rendered_generation
        self._rendered: dict[Key, tuple[str, int]] = {}
        # Foreign objects (kind, namespace, name) holding a name one of our CRs needs, and that CR:
        # an event of such an object (deleted, renamed away, handed to us) retries the CR at once.
        self._blocked: dict[tuple[str, str, str], Key] = {}
        self._blocked_of: dict[Key, list[tuple[str, str, str]]] = {}
        self._missing: dict[str, str] = {}
        self._missing_for: Any = None
        # What a pass gathered for the next one of its key, which runs at once (`Requeue`): the write
        # the server refused, with its error (raised again once the workload says so, for the backoff),
        # and the trimmed children read whole (None: gone).
        self._refused: dict[Key, ChildRefused] = {}
        self._read_whole: dict[Key, dict[tuple[str, str], JsonObj | None]] = {}

    @property
    def _missing_apis(self) -> dict[str, str]:
        """Optional APIs the cluster lacks (discovery at start), with the line saying what to install
        (worked out once per discovery: every reconcile reads it)."""
        if self.apis is None:
            return {}
        if self._missing_for is not self.apis:
            self._missing = {dep.api: missing_line(dep) for dep in self.apis.missing() if dep.api != KUEUE.api}
            self._missing_for = self.apis
        return self._missing

    def watches(self) -> list[Watch]:
        owner = controller_owner_key(self.kind)
        watches = [Watch(self.primary, self._primary_keys, page_decoder=_PAGE_DECODERS[self.primary])]
        watches += [Watch(res, self._child_keys(owner, res.kind), coalesce=True,
                          label_selector=_CHILD_SELECTORS.get((self.kind, res.plural), CHILD_SELECTOR),
                          transform=_TRIMMED_CHILDREN.get(res), page_decoder=_PAGE_DECODERS.get(res))
                    for res in R.WORKLOAD_CHILDREN[self.kind]]
        watches += [
            Watch(R.WORKLOADS, self._workload_keys, index_labels=(R.KUEUE_JOB_UID_LABEL,), coalesce=True,
                  transform=kueue_workload_fields, page_decoder=KUEUE_WORKLOAD_PAGES),
            Watch(self.other, self._other_keys, page_decoder=_PAGE_DECODERS[self.other]),
            Watch(R.KAIWOCONFIGS, self._everything),
            Watch(R.KAIWOQUEUECONFIGS, self._everything),
            Watch(R.NODES),
            Watch(R.LOCALQUEUES, self._queue_keys),
            Watch(R.CLUSTERQUEUES),
            Watch(R.PRIORITYCLASSES, self._priority_class_keys),
            Watch(R.WORKLOADPRIORITYCLASSES, self._priority_class_keys),
            Watch(R.AIMNAMESPACECONFIGS, self._namespace_keys),
        ]
        if self.kind == "KaiwoService":
            watches += [
                Watch(R.RAYSERVICES, self._same_name, label_selector=CHILD_SELECTOR, coalesce=True),
                Watch(R.PODS, self._pod_keys, label_selector="kaiwo.silogen.ai/type=service",
                      index_labels=(LABEL_RUN_ID,), coalesce=True),
            ]
        return watches

    # -- event -> key mapping --------------------------------------------------------------------

    def _child_keys(self, owner: Any, kind: str) -> Any:
        """A child's controller owner, and the CR waiting for this name if the object is foreign."""
        def mapper(event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
            keys: list[Key] = owner(event_type, obj, old)
            if self._blocked:
                meta = obj.get("metadata") or {}
                waiting = self._blocked.get((kind, meta.get("namespace") or "", meta.get("name") or ""))
                if waiting is not None and waiting not in keys:
                    keys.append(waiting)
            return keys

        return mapper

    def _note_conflicts(self, key: Key, conflicts: list[tuple[str, str]]) -> None:
        for blocked in self._blocked_of.pop(key, ()):
            self._blocked.pop(blocked, None)
        if conflicts:
            entries = [(kind, key[0], name) for kind, name in conflicts]
            self._blocked_of[key] = entries
            for entry in entries:
                self._blocked[entry] = key

    def _primary_keys(self, event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
        # Our own kind changed: that object, plus RUNNING workloads whose duration rules read the rest.
        self._track_timed(obj, deleted=event_type == "DELETED")
        return own_key(event_type, obj, old) + self._duration_keys(event_type, obj, old)

    def _other_keys(self, event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
        obj.setdefault("kind", self.other.kind)
        return self._duration_keys(event_type, obj, old)

    def _track_pending(self, obj: JsonObj, *, deleted: bool = False) -> None:
        """A pending GPU workload's age crossing the threshold is what makes it "active GPU demand", and
        no event says so: a timer wakes the RUNNING ones then, as an event would."""
        meta = obj.get("metadata") or {}
        key = (str(obj.get("kind") or ""), meta.get("namespace") or "", meta.get("name") or "")
        if deleted or (obj.get("status") or {}).get("status") != ph.PENDING:
            timer = self._threshold_timers.pop(key, None)
            if timer is not None:
                timer.cancel()
            return
        created = parse_time(meta.get("creationTimestamp"))
        if int((obj.get("spec") or {}).get("gpus") or 0) <= 0 or created is None or key in self._threshold_timers:
            return
        threshold = parse_go_duration(load_config(self.caches.get(R.KAIWOCONFIGS, ())).scheduling
                                      .pending_threshold_for_preemption)
        delay = (created + threshold - clock.now()).total_seconds()
        if delay > 0:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            self._threshold_timers[key] = loop.call_later(clock.wall_seconds(delay) + 0.01, self._wake_timed, key)

    def _wake_timed(self, key: tuple[str, str, str]) -> None:
        self._threshold_timers.pop(key, None)
        for timed in self._timed_running:
            self.queue.add(timed)

    def _track_timed(self, obj: JsonObj, *, deleted: bool = False) -> None:
        key = own_key("SYNC", obj, None)[0]
        if (not deleted and (obj.get("status") or {}).get("status") == ph.RUNNING
                and (obj.get("spec") or {}).get("duration")):
            self._timed_running.add(key)
        else:
            self._timed_running.discard(key)

    def _duration_keys(self, event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
        """RUNNING workloads with a duration, when this event changes what their rules read: the set
        of PENDING workloads (one turned PENDING, stopped being PENDING, or changed while PENDING)."""
        was = (old or {}).get("status") or {}
        now = obj.get("status") or {}
        self._track_pending(obj, deleted=event_type == "DELETED")
        if was.get("status") != ph.PENDING and now.get("status") != ph.PENDING:
            return []
        return list(self._timed_running)

    def _everything(self, event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
        if self.primary not in self.caches:
            return []
        return [own_key("SYNC", cr, None)[0] for cr in self.caches[self.primary]]

    def _priority_class_keys(self, event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
        """A class appeared or went: the workloads that name it."""
        if event_type == "MODIFIED" or self.primary not in self.caches:
            return []
        name = (obj.get("metadata") or {}).get("name")
        return [own_key("SYNC", cr, None)[0] for cr in self.caches[self.primary]
                if (cr.get("spec") or {}).get("priorityClass") == name]

    def _namespace_keys(self, event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
        """An AIMNamespaceConfig changed (its spec, or its status's missing Secrets): its namespace's workloads."""
        if self.primary not in self.caches:
            return []
        namespace = (obj.get("metadata") or {}).get("namespace")
        return [own_key("SYNC", cr, None)[0] for cr in self.caches[self.primary]
                if (cr.get("metadata") or {}).get("namespace") == namespace]

    def _priority_classes(self, obj: JsonObj) -> PriorityClasses | None:
        name = (obj.get("spec") or {}).get("priorityClass")
        if not name:
            return None
        return PriorityClasses(pod=self.caches[R.PRIORITYCLASSES].get(None, name) is not None,
                               workload=self.caches[R.WORKLOADPRIORITYCLASSES].get(None, name) is not None)

    def _same_name(self, event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
        return own_key(event_type, obj, old)

    def _pod_keys(self, event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
        """A Deployment's pod appeared or went. Its Kueue Workload is found through the pod, so a
        Workload event that arrived before the pod was cached mapped to nothing; this is its retry."""
        if event_type == "MODIFIED":
            return []
        meta = obj.get("metadata") or {}
        cr_name = (meta.get("labels") or {}).get(LABEL_NAME)
        return [(meta.get("namespace") or "", cr_name)] if cr_name else []

    def _workload_keys(self, event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
        """A Kueue Workload belongs to our main child (named like the CR) or, for Deployments, to a
        pod carrying the CR's name label."""
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or ""
        keys: list[Key] = []
        for ref in meta.get("ownerReferences") or ():
            kind, name = ref.get("kind"), ref.get("name") or ""
            if kind in ("Job", "RayJob", "AppWrapper", "Deployment", "RayService"):
                keys.append((namespace, name))
            elif kind == "Pod" and R.PODS in self.caches:
                pod = self.caches[R.PODS].get(namespace, name)
                if pod is not None:
                    cr_name = ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_NAME)
                    if cr_name:
                        keys.append((namespace, cr_name))
        return keys

    def _queue_keys(self, event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
        """A LocalQueue appeared: workloads of that namespace waiting for it may proceed."""
        if event_type != "ADDED" or self.primary not in self.caches:
            return []
        namespace = (obj.get("metadata") or {}).get("namespace")
        return [own_key("SYNC", cr, None)[0] for cr in self.caches[self.primary]
                if (cr.get("metadata") or {}).get("namespace") == namespace
                and (cr.get("status") or {}).get("status", "") in ("", ph.PENDING)]

    # -- reconcile -------------------------------------------------------------------------------

    def world(self, obj: JsonObj, now: datetime, *, refusal: Refusal | None = None,
              whole: dict[tuple[str, str], JsonObj | None] | None = None) -> World:
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or ""
        name = meta.get("name") or ""
        uid = meta.get("uid") or ""
        config = load_config(singleton(self.caches[R.KAIWOCONFIGS]))
        queue_config = load_queue_config(singleton(self.caches[R.KAIWOQUEUECONFIGS]))
        children: dict[tuple[str, str], JsonObj] = {}
        for res in R.WORKLOAD_CHILDREN[self.kind]:
            for child in self.caches[res].owned_by(uid):
                if controlled_by(child, uid):
                    children[(child.get("kind") or res.kind, child["metadata"]["name"])] = child
        if self.kind == "KaiwoService":
            # The RayService is the AppWrapper's child, not ours: only the one our own AppWrapper
            # controls belongs to this workload (a same-named stranger is never read or deleted).
            appwrapper = children.get(("AppWrapper", name))
            rayservice = self.caches[R.RAYSERVICES].get(namespace, name)
            if rayservice is not None and (
                    (appwrapper is not None
                     and controlled_by(rayservice, (appwrapper.get("metadata") or {}).get("uid") or ""))
                    # A plain RayService this CR tracks (reconcile/managed.py) is its own child.
                    or (tracked_kind(obj) == "RayService" and controlled_by(rayservice, uid))):
                children[("RayService", name)] = rayservice
        for child_key, live in (whole or {}).items():
            if live is None:
                children.pop(child_key, None)  # gone meanwhile: the decision creates it again
            else:
                children[child_key] = live
        trimmed = frozenset(k for k in children if k[0] in _TRIMMED_KINDS and not (whole and k in whole))
        caches_by_kind = {res.kind: self.caches[res] for res in R.WORKLOAD_CHILDREN[self.kind]}

        def live_object(kind: str, child_name: str) -> JsonObj | None:
            cache = caches_by_kind.get(kind)
            return cache.get(namespace, child_name) if cache is not None else None

        workloads = self._kueue_workloads(children, name, uid)
        queue = effective_queue_name(obj, config)
        cluster_queue = self.caches[R.CLUSTERQUEUES].get(None, queue)
        demand, pending = self._demand(obj, config, queue, now)
        ns_name, ns_spec, ns_missing = namespace_facts(self.caches[R.AIMNAMESPACECONFIGS], namespace)
        return World(
            obj=obj, config=config, nodes=self.caches[R.NODES].snapshot(), queue_config=queue_config,
            children=children, kueue_workloads=workloads,
            local_queue_exists=self.caches[R.LOCALQUEUES].get(namespace, queue) is not None,
            cluster_queue=cluster_queue, now=now, active_gpu_demand=demand, any_pending_workload=pending,
            settle_seconds=self.coalesce_seconds, settle_remaining=self._settle_remaining((namespace, name)),
            rendered_generation=self._rendered_generation((namespace, name), uid),
            live_object=live_object,
            missing_apis=self._missing_apis,
            priority_classes=self._priority_classes(obj),
            namespace_config_name=ns_name, namespace_config=ns_spec, namespace_missing_secrets=ns_missing,
            serves_http_routes=R.HTTPROUTES in self.informers,
            trimmed=trimmed, refusal=refusal,
        )

    def _rendered_generation(self, key: Key, uid: str) -> int | None:
        rendered = self._rendered.get(key)
        return rendered[1] if rendered is not None and rendered[0] == uid else None

    def _settle_remaining(self, key: Key) -> float:
        created = self._main_created_at.get(key)
        if created is None:
            return 0.0
        remaining = created + self.coalesce_seconds - clock.monotonic()
        if remaining <= 0:
            del self._main_created_at[key]
            return 0.0
        return remaining

    def _kueue_workloads(self, children: dict[tuple[str, str], JsonObj], name: str, uid: str) -> list[JsonObj]:
        index = self.caches[R.WORKLOADS]
        found: list[JsonObj] = []
        for kind in ("Job", "RayJob", "AppWrapper", "RayService"):
            main = children.get((kind, name))
            if main is not None:
                found.extend(index.with_label(R.KUEUE_JOB_UID_LABEL, main["metadata"].get("uid", "")))
        if ("Deployment", name) in children and R.PODS in self.caches:
            for pod in self.caches[R.PODS].with_label(LABEL_RUN_ID, uid):
                found.extend(index.with_label(R.KUEUE_JOB_UID_LABEL, pod["metadata"].get("uid", "")))
        return found

    def _demand(self, obj: JsonObj, config: KaiwoConfigSpec, queue: str, now: datetime) -> tuple[bool, bool]:
        """`reconcile.workload.gpu_demand` over the PENDING workloads of both kinds (indexed: not a
        scan of every CR; read lazily, as the decision stops at the first that counts)."""
        pending = (other for res in (self.primary, self.other) for other in self.caches[res].in_phase(ph.PENDING))
        return gpu_demand(obj, config, queue, pending, now)

    async def reconcile(self, key: Key) -> float | None:
        """Gather, decide once, write. What the writing learns (a refusal) and what the decision asks
        to read (children whole) are gathered for the next pass, which runs at once."""
        namespace, name = key
        refused = self._refused.pop(key, None)
        whole = self._read_whole.pop(key, None)
        obj = self.caches[self.primary].get(namespace, name)
        if obj is None:
            self._main_created_at.pop(key, None)
            self._rendered.pop(key, None)
            self._note_conflicts(key, [])
            return None  # deleted; ownerReferences let the garbage collector take the children
        obj = dict(obj)
        obj.setdefault("kind", self.kind)
        obj.setdefault("apiVersion", self.primary.api_version)
        plan = decide(self.world(obj, clock.now(), refusal=refused.refusal if refused else None,
                                   whole=whole))
        self._note_conflicts(key, plan.conflicts)
        if plan.read_whole:
            self._read_whole[key] = await self._whole_children(namespace, plan.read_whole)
            raise Requeue
        try:
            await self.execute(obj, plan)
        except ChildRefused as refusal:
            self._refused[key] = refusal
            raise Requeue from None
        if refused is not None:
            # The workload says why; the refused write is retried with backoff, as any failed one:
            # no event of ours tells when a name is free or a quota raised.
            raise refused.error
        if plan.rendered_generation is not None:
            self._rendered[key] = (str(obj["metadata"].get("uid") or ""), plan.rendered_generation)
        return plan.requeue_after

    async def _whole_children(self, namespace: str,
                              keys: list[tuple[str, str]]) -> dict[tuple[str, str], JsonObj | None]:
        """The children `keys` read whole from the API server (their caches keep them trimmed); None
        for one gone meanwhile."""
        whole: dict[tuple[str, str], JsonObj | None] = {}
        for kind, child_name in keys:
            res = next(r for r in R.WORKLOAD_CHILDREN[self.kind] if r.kind == kind)
            try:
                live = await self.client.get(res, child_name, namespace or None)
            except NotFound:
                whole[(kind, child_name)] = None
                continue
            live.setdefault("kind", kind)
            live.setdefault("apiVersion", res.api_version)
            whole[(kind, child_name)] = live
        return whole

    async def execute(self, obj: JsonObj, plan: Plan) -> None:
        meta = obj["metadata"]
        namespace, name = meta.get("namespace"), meta["name"]
        # Children first: they are what the user waits for.
        await self._apply_children(plan.apply, plan.creates)
        if plan.created_main:
            self._main_created_at[(namespace or "", name)] = clock.monotonic()
        for child in plan.delete:
            cmeta = child.get("metadata") or {}
            res = _resource_of(child)
            try:
                result = await self.client.delete(res, cmeta["name"], cmeta.get("namespace"),
                                                  propagation_policy="Foreground", uid=cmeta.get("uid"))
                self.writes += 1
            except NotFound:
                continue
            # A foreground deletion answers the object, now deleting: written over the cached one, so
            # that a pass before its watch event arrives waits for it instead of deleting it again.
            if isinstance(result, dict) and (result.get("metadata") or {}).get("deletionTimestamp"):
                self._write_through(res, result, child, update_only=True)
        if plan.status is not None:
            patch = {"metadata": {"resourceVersion": obj["metadata"].get("resourceVersion")},
                     "status": plan.status}
            result = await self.client.patch(self.primary, name, patch, namespace, subresource="status")
            self.writes += 1
            self._write_through(self.primary, result, self._type_meta)
            self._track_timed(self.caches[self.primary].get(namespace, name) or result)
            self._track_pending(result)
            obj = result
            if plan.wakes_duration_rules:
                # The informer skips write-through versions: no event of this write wakes them.
                for key in list(self._timed_running):
                    self.queue.add(key)
        if plan.remove_finalizer:
            finalizers = [f for f in (obj["metadata"].get("finalizers") or []) if f != FINALIZER]
            await self._patch_meta(obj, {"finalizers": finalizers})
        if plan.events:  # in the background, as client-go's broadcaster does
            for event in plan.events:
                self.recorder.emit(obj, event.type, event.reason, event.message)

    async def drain(self) -> None:
        await self.recorder.flush()

    async def _apply_children(self, bodies: list[JsonObj], creates: set[tuple[str, str]]) -> None:
        """In order (storage before the main object), written through to the cache. A new child is
        created (POST), never applied: should a same-named object have appeared since the cache was
        read, the server refuses (AlreadyExists, retried: the next pass sees the stranger and reports
        the conflict) instead of our apply taking it over. Children we control are server-side applied."""
        for body in bodies:
            res = _resource_of(body)
            try:
                if (body["kind"], body["metadata"]["name"]) in creates:
                    try:
                        result = await self.client.create(res, body)
                    except AlreadyExists as exists:
                        answer = await self._existing_child(res, body, exists)
                        if answer is None:
                            continue
                        result = answer
                else:
                    result = await self.client.apply(res, body)
            except KubeError as err:
                if _permanent(err):
                    raise ChildRefused(Refusal(body["kind"], body["metadata"]["name"], code=err.code,
                                               message=err.message), err) from err
                raise
            self.writes += 1
            self._write_through(res, result, body)

    def _write_through(self, res: Resource, result: JsonObj, body: JsonObj, *, update_only: bool = False) -> None:
        """The server's answer to our write of `body`, into `res`'s cache (if one is kept): a pass
        before the write's watch event arrives reads what was written. The answer may lack kind and
        apiVersion (a status or delete answer from some servers); `body`'s fill them in."""
        if res in self.caches:
            result.setdefault("kind", body.get("kind"))
            result.setdefault("apiVersion", body.get("apiVersion"))
            self.caches[res].upsert_if_newer(result, update_only=update_only)

    async def _existing_child(self, res: Resource, body: JsonObj, exists: AlreadyExists) -> JsonObj | None:
        """Carries out `reconcile.workload.existing_child`'s verdict on a create answered AlreadyExists:
        the answer of the apply that restores our child, None to leave a shared child be, or raises (the
        create retried with backoff, or ChildRefused)."""
        meta = body["metadata"]
        if shared_child(body):
            return None
        try:
            live: JsonObj | None = await self.client.get(res, meta["name"], meta.get("namespace"))
        except NotFound:
            live = None
        verdict = existing_child(body, live)
        if verdict == RESTORE:
            return await self.client.apply(res, body)
        if verdict == TAKEN:
            raise ChildRefused(Refusal(body["kind"], meta["name"], taken=True), exists)
        raise exists from None

    async def _patch_meta(self, obj: JsonObj, changes: JsonObj) -> JsonObj:
        meta = obj["metadata"]
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion"), **changes}}
        try:
            result = await self.client.patch(self.primary, meta["name"], patch, meta.get("namespace"))
        except NotFound:
            return obj
        self.writes += 1
        self._write_through(self.primary, result, self._type_meta)
        return result


__all__ = ["WorkloadController", "effective_queue_name", "load_config", "load_queue_config"]


def kaiwojob_controller(client: Any, **kwargs: Any) -> WorkloadController:
    return WorkloadController(client, "KaiwoJob", **kwargs)


def kaiwoservice_controller(client: Any, **kwargs: Any) -> WorkloadController:
    return WorkloadController(client, "KaiwoService", **kwargs)
