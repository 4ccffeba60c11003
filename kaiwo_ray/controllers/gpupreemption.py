"""Idle-GPU preemption (spec/cluster.md §8), the shell: discovery of GPU workloads from pods and
Kueue Workloads through the controller owner chain, one GpuWorkload tracker per opted-in root
owner, its reconcile (decisions in kaiwo_ray/reconcile/gpupreemption.py), utilization from our
telemetry (or a scrape endpoint), and the cluster-wide evaluation under the `gpu-preemption-eval`
Lease (an empty holder counts as free).

Settings as upstream's environment, overridable through `HostSettings.controller_options`:
`GPU_PREEMPTION_ENABLED`, `GPU_PREEMPTION_METRICS_ENDPOINT` (empty: our telemetry),
`GPU_PREEMPTION_POLLING_INTERVAL` (15s), `GPU_PREEMPTION_OPERATOR_NAMESPACE` (the evaluation
Lease's namespace; default: the operator's Lease namespace, where its Role allows Leases: kaiwo-system
in-cluster, kube-system from a workstation), and the `GPU_PREEMPTION_DEFAULT_*` fallbacks.

What it reads and deletes beyond the operator's ClusterRole is `kaiwo_ray.permissions.PREEMPTION_RULES`
(deploy/base/rbac-gpu-preemption.yaml): a root owner of a kind outside it is not tracked (its owner
chain cannot be read) or, if it is, fails to delete with a `PreemptionFailed` event.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kaiwo_ray import clock
from kaiwo_ray.api.durations import parse_go_duration
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.controllers.base import Controller, Key, Watch, own_key
from kaiwo_ray.controllers.config import load_config
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.cache import ObjectKey, object_key
from kaiwo_ray.kube.errors import Conflict, Forbidden, KubeError, NotFound
from kaiwo_ray.kube.events import EventRecorder
from kaiwo_ray.kube.lease import LeaseElector, LeaseSettings
from kaiwo_ray.kube.resources import Resource
from kaiwo_ray.reconcile import gpupreemption as gp
from kaiwo_ray.reconcile.workload import controller_ref

log = logging.getLogger(__name__)
MAX_HOPS = 10
EVAL_LEASE = "gpu-preemption-eval"


@dataclass(frozen=True, slots=True)
class GpuPreemptionSettings:
    enabled: bool = False
    endpoint: str = ""
    polling_interval: float = 15.0
    lease_namespace: str = "kube-system"
    # GPU_PREEMPTION_DEFAULT_*: the operator's defaults under KaiwoConfig's (`gpupreemption.resolve`)
    defaults: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def from_env(env: Mapping[str, str] | None = None, *, lease_namespace: str = "kube-system") -> GpuPreemptionSettings:
        """`lease_namespace`: the operator's own Lease namespace, used unless GPU_PREEMPTION_OPERATOR_NAMESPACE
        names another."""
        env = os.environ if env is None else env
        enabled = env.get("GPU_PREEMPTION_ENABLED", "").strip().lower() in ("true", "1", "yes")
        endpoint = env.get("GPU_PREEMPTION_METRICS_ENDPOINT", "").strip()
        if endpoint and not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"GPU_PREEMPTION_METRICS_ENDPOINT={endpoint!r}: must be an http(s) URL")
        text = env.get("GPU_PREEMPTION_POLLING_INTERVAL", "").strip() or "15s"
        try:
            interval = parse_go_duration(text).total_seconds()
        except ValueError as err:
            raise ValueError(f"GPU_PREEMPTION_POLLING_INTERVAL={text!r}: {err}") from err
        if interval <= 0:
            raise ValueError(f"GPU_PREEMPTION_POLLING_INTERVAL={text!r}: must be greater than 0")
        namespace = env.get("GPU_PREEMPTION_OPERATOR_NAMESPACE", "").strip() or lease_namespace
        defaults = {k: v for k, v in env.items() if k.startswith("GPU_PREEMPTION_DEFAULT_")}
        return GpuPreemptionSettings(enabled, endpoint, interval, namespace, defaults)


def resource_for(api_version: str, kind: str) -> Resource:
    """The REST resource of an owner reference (plural by the usual rule: Job -> jobs)."""
    group, _, version = api_version.rpartition("/")
    return Resource(group, version, kind.lower() + "s", kind, True)


def _is_workload(obj: JsonObj) -> bool:
    """A Kueue Workload (informer objects may lack `kind`: tell by the spec)."""
    return obj.get("kind") == "Workload" or "podSets" in (obj.get("spec") or {})


@dataclass(slots=True)
class _Members:
    """Which cached objects of one kind (pods, Kueue Workloads) may belong to which root, kept from the
    watch events, so that a tracker's pass reads the few objects that can be its own instead of testing
    every object in the cache (`_belongs` for each of ten thousand finished pods, on every 15 s poll of
    every tracker, was most of a long simulation's time). An object belongs to a root by its own uid,
    an owner reference, or (a GPU pod or a Workload) its owner chain: the roots it may belong to are
    known once its chain is; until then (`unknown`) every pass in its namespace still tests it."""

    # key -> (its uid, its own and its owner references' uids, whether its owner chain counts)
    base: dict[ObjectKey, tuple[str, frozenset[str], bool]] = field(default_factory=dict)
    roots: dict[ObjectKey, frozenset[str]] = field(default_factory=dict)  # key -> uids it may belong to
    by_root: dict[str, set[ObjectKey]] = field(default_factory=dict)
    unknown: dict[str, set[ObjectKey]] = field(default_factory=dict)  # namespace -> keys whose chain is not known
    by_uid: dict[str, ObjectKey] = field(default_factory=dict)

    def update(self, obj: JsonObj, chains: Mapping[str, list[JsonObj]]) -> None:
        key = object_key(obj)
        self.remove(key)
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        own = frozenset(str(u) for u in [uid, *(r.get("uid") for r in meta.get("ownerReferences") or [])] if u)
        chained = _is_workload(obj) or bool(gp.pod_spec_gpus(obj.get("spec") or {}))
        self.base[key] = (uid, own, chained)
        if uid:
            self.by_uid[uid] = key
        chain = chains.get(uid) if uid else None
        if chained and chain is None:
            self.unknown.setdefault(key[0], set()).add(key)
            self._file(key, own)
        else:
            self._file(key, own | _chain_uids(chain or []))

    def chained(self, uid: str, chain: list[JsonObj]) -> None:
        """`uid`'s owner chain is now known (`owner_chain` keeps it for good)."""
        key = self.by_uid.get(uid)
        unknown = self.unknown.get(key[0]) if key is not None else None
        if key is None or unknown is None or key not in unknown:
            return
        unknown.discard(key)
        self._unfile(key)
        self._file(key, self.base[key][1] | _chain_uids(chain))

    def remove(self, key: ObjectKey) -> None:
        entry = self.base.pop(key, None)
        if entry is None:
            return
        self._unfile(key)
        unknown = self.unknown.get(key[0])
        if unknown is not None:
            unknown.discard(key)
        if entry[0] and self.by_uid.get(entry[0]) == key:
            del self.by_uid[entry[0]]

    def candidates(self, namespace: str, root_uid: str) -> list[ObjectKey]:
        """Keys in `namespace` that may belong to `root_uid`: no other object there does."""
        keys = [k for k in self.by_root.get(root_uid, ()) if k[0] == namespace]
        keys.extend(self.unknown.get(namespace, ()))
        return keys

    def _file(self, key: ObjectKey, roots: frozenset[str]) -> None:
        self.roots[key] = roots
        for uid in roots:
            self.by_root.setdefault(uid, set()).add(key)

    def _unfile(self, key: ObjectKey) -> None:
        for uid in self.roots.pop(key, frozenset()):
            keys = self.by_root.get(uid)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self.by_root[uid]


def _chain_uids(chain: list[JsonObj]) -> frozenset[str]:
    return frozenset(u for u in ((o.get("metadata") or {}).get("uid") for o in chain) if u)


class GpuPreemptionController(Controller):
    name = "gpuworkload-controller"

    def __init__(self, client: Any, *, settings: GpuPreemptionSettings | None = None, source: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self.settings = settings or GpuPreemptionSettings.from_env()
        if source is None:
            from kaiwo_ray.telemetry.sources import NativeSource, ScrapeSource

            source = ScrapeSource(self.settings.endpoint) if self.settings.endpoint else NativeSource()
        self.source = source
        self.recorder = EventRecorder(client, "gpuworkload-controller")
        self.elector = LeaseElector(client, f"gpuworkload-{socket.gethostname()}-{os.getpid()}",
                                    LeaseSettings(name=EVAL_LEASE, namespace=self.settings.lease_namespace,
                                                  lease_seconds=30),
                                    clock=clock.now, monotonic=clock.monotonic)
        self._chains: dict[str, list[JsonObj]] = {}  # object uid -> [owner, ..., root]
        self._members = {R.PODS: _Members(), R.WORKLOADS: _Members()}
        self._resolved_for: Any = None  # the KaiwoConfig section `_resolutions` were worked out under
        self._resolutions: dict[tuple[str, ...], gp.Resolved] = {}
        self._discovering: set[str] = set()
        self._tasks_bg: set[asyncio.Task[Any]] = set()
        self._evaluating = asyncio.Lock()
        self._poll: asyncio.Task[None] | None = None
        self.writes = 0
        self.evaluations = 0

    def watches(self) -> list[Watch]:
        if not self.settings.enabled:
            return [Watch(R.GPUWORKLOADS)]
        return [
            Watch(R.GPUWORKLOADS, own_key),
            Watch(R.PODS, self._on_object),
            Watch(R.WORKLOADS, self._on_object),
            Watch(R.NAMESPACES),
            Watch(R.KAIWOCONFIGS),
        ]

    async def start(self) -> None:
        await super().start()
        if self.settings.enabled:
            self._poll = asyncio.create_task(self._poll_loop(), name="gpuworkload-poll")
            for resource in (R.PODS, R.WORKLOADS):
                for obj in self.caches[resource]:
                    self._on_object("SYNC", obj, None)

    async def stop(self, *, grace_seconds: float = 10.0) -> None:
        if self._poll is not None:
            self._poll.cancel()
            await asyncio.gather(self._poll, return_exceptions=True)
        for task in list(self._tasks_bg):
            task.cancel()
        await asyncio.gather(*self._tasks_bg, return_exceptions=True)
        await super().stop(grace_seconds=grace_seconds)

    async def _poll_loop(self) -> None:
        while True:
            await clock.sleep_to_multiple(self.settings.polling_interval)
            if self.writes_enabled.is_set():
                for cr in self.caches[R.GPUWORKLOADS]:
                    if (cr.get("status") or {}).get("phase") not in gp.TERMINAL:
                        self.queue.add(own_key("SYNC", cr, None)[0])

    # -- discovery (§8.2) -----------------------------------------------------------------------

    def _on_object(self, event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
        members = self._members[R.WORKLOADS if _is_workload(obj) else R.PODS]
        if event_type == "DELETED":
            members.remove(object_key(obj))
        else:
            members.update(obj, self._chains)
        if event_type == "DELETED" or not self.writes_enabled.is_set():
            return []
        uid = (obj.get("metadata") or {}).get("uid") or ""
        if not uid or uid in self._discovering:
            return []
        if not _is_workload(obj) and not gp.pod_spec_gpus(obj.get("spec") or {}):
            return []
        self._discovering.add(uid)
        task = asyncio.get_running_loop().create_task(self._discover(obj))
        self._tasks_bg.add(task)

        def done(finished: asyncio.Task[Any]) -> None:
            self._tasks_bg.discard(finished)
            self._discovering.discard(uid)

        task.add_done_callback(done)
        return []

    async def owner_chain(self, obj: JsonObj) -> list[JsonObj]:
        """[controller owner, its owner, ..., root] by GETs (≤10 hops); [] for a bare object."""
        uid = (obj.get("metadata") or {}).get("uid") or ""
        if uid in self._chains:
            return self._chains[uid]
        chain: list[JsonObj] = []
        current = obj
        namespace = (obj.get("metadata") or {}).get("namespace")
        for _ in range(MAX_HOPS):
            ref = controller_ref(current)
            if ref is None and current is obj and _is_workload(obj):
                refs = (obj.get("metadata") or {}).get("ownerReferences") or []
                ref = refs[0] if refs else None
            if ref is None:
                break
            try:
                owner = await self.client.get(resource_for(ref["apiVersion"], ref["kind"]), ref["name"], namespace)
            except (NotFound, Forbidden, KubeError):
                return []  # a broken chain: not ours to judge
            owner.setdefault("kind", ref["kind"])
            owner.setdefault("apiVersion", ref["apiVersion"])
            if (owner.get("metadata") or {}).get("uid") != ref.get("uid"):
                return []
            chain.append(owner)
            current = owner
        if uid:
            self._chains[uid] = chain
            for members in self._members.values():
                members.chained(uid, chain)
        return chain

    async def _discover(self, obj: JsonObj) -> None:
        try:
            chain = await self.owner_chain(obj)
            root = chain[-1] if chain else obj
            if root is obj and _is_workload(obj):
                return
            meta = root.get("metadata") or {}
            namespace = meta.get("namespace") or ""
            ns_obj = self.caches[R.NAMESPACES].get(None, namespace) or {}
            annotations = gp.preemption_annotations((ns_obj.get("metadata") or {}).get("annotations"),
                                                    meta.get("annotations"))
            if not gp.opted_in(annotations):
                return
            if _is_workload(obj):  # a root without a pod template (a KaiwoJob): what its Workload asks for
                gpus = gp.root_gpus(root) or gp.workload_gpus(obj)
            else:
                gpus = gp.pod_spec_gpus(obj.get("spec") or {})
            if not gpus:
                return
            kind = root.get("kind") or "Pod"
            name = gp.tracker_name(kind, meta.get("name", ""), meta.get("uid", ""))
            existing = self.caches[R.GPUWORKLOADS].get(namespace, name)
            if existing is None:
                existing = await self._create(root, name, namespace, gpus, annotations, obj, chain)
            else:
                grown = {res: max(n, int(((existing.get("spec") or {}).get("gpuResources") or {}).get(res, 0)))
                         for res, n in gpus.items()}
                if any(grown[r] > int(((existing.get("spec") or {}).get("gpuResources") or {}).get(r, 0))
                       for r in grown):
                    await self.client.patch(R.GPUWORKLOADS, name, {"spec": {"gpuResources": grown}}, namespace)
            if existing is not None:
                self.queue.add((namespace, name))
        except KubeError as err:
            log.warning("gpu preemption discovery: %s", err)

    async def _create(self, root: JsonObj, name: str, namespace: str, gpus: dict[str, int],
                      annotations: dict[str, str], trigger: JsonObj, chain: list[JsonObj]) -> JsonObj | None:
        meta = root.get("metadata") or {}
        body = {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "GpuWorkload",
                "metadata": {"name": name, "namespace": namespace,
                             "labels": {"kaiwo.silogen.ai/managed-by": "kaiwo-ray"}},
                "spec": {"workloadRef": {"apiVersion": root.get("apiVersion") or "v1", "kind": root.get("kind") or "Pod",
                                         "name": meta.get("name"), "uid": meta.get("uid")},
                         "gpuResources": gpus, **gp.spec_overrides(annotations)}}
        try:
            created = await self.client.create(R.GPUWORKLOADS, body, namespace)
        except Conflict:
            return None
        hops = [trigger, *chain] if trigger is not root and not _is_workload(trigger) else chain or [root]
        owner_chain = " -> ".join(f"{o.get('kind') or 'Pod'}/{(o.get('metadata') or {}).get('name')}" for o in hops)
        created = await self.client.patch(R.GPUWORKLOADS, name, {"status": {"phase": gp.PENDING_OTHER,
                                                                            "ownerChain": owner_chain}},
                                          namespace, subresource="status")
        self.writes += 2
        created.setdefault("kind", "GpuWorkload")
        self.caches[R.GPUWORKLOADS].upsert_if_newer(created)
        return created

    # -- one tracker (§8.4) ---------------------------------------------------------------------

    def _resolved(self, cr: JsonObj) -> gp.Resolved:
        """`gp.resolve` (pure), remembered per tracker spec while the KaiwoConfig's parsed section is the
        same object: every poll resolves every tracker, and trackers rarely carry settings of their own."""
        config = load_config(self.caches[R.KAIWOCONFIGS]).gpu_preemption
        spec = cr.get("spec") or {}
        if config is not self._resolved_for:
            self._resolved_for, self._resolutions = config, {}
        key = tuple(repr(spec.get(name)) for name in gp.RESOLVED_FROM)
        resolved = self._resolutions.get(key)
        if resolved is None:
            resolved = self._resolutions[key] = gp.resolve(spec, config, self.settings.defaults)
        return resolved

    async def reconcile(self, key: Key) -> float | None:
        if not self.settings.enabled:
            return None
        namespace, name = key
        cr = self.caches[R.GPUWORKLOADS].get(namespace, name)
        if cr is None:
            return None
        cr = dict(cr)
        cr.setdefault("kind", "GpuWorkload")
        settings = self._resolved(cr)
        now = clock.now()
        if (cr.get("status") or {}).get("phase") == gp.PREEMPTING:
            return await self._preempt(cr, now)
        ref = (cr.get("spec") or {}).get("workloadRef") or {}
        root: JsonObj | None
        try:
            root = await self.client.get(resource_for(ref.get("apiVersion", "v1"), ref.get("kind", "Pod")),
                                         ref.get("name", ""), namespace)
        except NotFound:
            root = None
        # Only the objects that may be the root's (`_Members`), in cache order: what a scan of every
        # cached object of the namespace would find, with the same owner-chain reads on the way.
        root_uid = ref.get("uid", "")
        pods = [p for p in self.caches[R.PODS].in_order(self._members[R.PODS].candidates(namespace, root_uid))
                if await self._belongs(p, root_uid)]
        workload = None
        for candidate in self.caches[R.WORKLOADS].in_order(self._members[R.WORKLOADS].candidates(namespace, root_uid)):
            if await self._belongs(candidate, root_uid):
                workload = candidate
                break
        running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        readings: dict[str, list[float | None]] = {}
        if running:
            answer = await self.source.readings(
                [(namespace, p["metadata"]["name"], p["metadata"].get("uid") or "") for p in running])
            for pod in running:
                uses = answer.get((namespace, pod["metadata"]["name"]), [])
                readings[pod["metadata"]["name"]] = [u.utilization for u in sorted(uses, key=lambda u: u.gpu_id)]
        plan = gp.decide_tracker(gp.TrackerWorld(cr, root, pods, workload, readings, settings, now))
        await self._execute(cr, plan)
        if plan.evaluate:
            await self.evaluate()
        return plan.requeue_after

    async def _belongs(self, obj: JsonObj, root_uid: str) -> bool:
        meta = obj.get("metadata") or {}
        if meta.get("uid") == root_uid:
            return True
        if any(r.get("uid") == root_uid for r in meta.get("ownerReferences") or []):
            return True
        if not _is_workload(obj) and not gp.pod_spec_gpus(obj.get("spec") or {}):
            return False
        return any((o.get("metadata") or {}).get("uid") == root_uid for o in await self.owner_chain(obj))

    async def _execute(self, cr: JsonObj, plan: gp.TrackerPlan) -> None:
        meta = cr["metadata"]
        namespace, name = meta.get("namespace"), meta["name"]
        # Every write names the resourceVersion the plan was decided from: a tracker that changed meanwhile
        # (an evaluation marked it Preempting) is not overwritten with a phase decided from the older copy;
        # the Conflict ends this pass and the watch brings the newer one to the next.
        version = {"resourceVersion": meta.get("resourceVersion")}
        try:
            if plan.delete_cr:
                await self.client.delete(R.GPUWORKLOADS, name, namespace, uid=meta.get("uid"))
                self.writes += 1
                return
            if plan.gpu_resources is not None:
                cr = await self.client.patch(R.GPUWORKLOADS, name, {"metadata": version,
                                                                    "spec": {"gpuResources": plan.gpu_resources}},
                                             namespace)
                version = {"resourceVersion": cr["metadata"].get("resourceVersion")}
                self.writes += 1
            if plan.status is not None:
                result = await self.client.patch(R.GPUWORKLOADS, name, {"metadata": version, "status": plan.status},
                                                 namespace, subresource="status")
                result.setdefault("kind", "GpuWorkload")
                self.caches[R.GPUWORKLOADS].upsert_if_newer(result)
                self.writes += 1
        except (NotFound, Conflict):
            return
        for event_type, reason, message in plan.events:
            self.recorder.emit(cr, event_type, reason, message)

    async def _preempt(self, cr: JsonObj, now: datetime) -> float:
        """§8.4 step 1: delete the root (background propagation); NotFound is success."""
        meta = cr["metadata"]
        ref = (cr.get("spec") or {}).get("workloadRef") or {}
        status = dict(cr.get("status") or {})
        try:
            await self.client.delete(resource_for(ref.get("apiVersion", "v1"), ref.get("kind", "Pod")),
                                     ref.get("name", ""), meta.get("namespace"), propagation_policy="Background",
                                     uid=ref.get("uid"))
        except NotFound:
            pass
        except (Forbidden, Conflict) as err:
            status.update(phase=gp.IDLE, preemptedFor=None, preemptionReason=None)
            await self._execute(cr, gp.TrackerPlan(status=status, events=[
                ("Warning", "PreemptionFailed", f"cannot delete {ref.get('kind')} {ref.get('name')}: {err}")]))
            return 60.0
        status.update(phase=gp.PREEMPTED, preemptedAt=gp.stamp(now), finishedAt=gp.stamp(now), idleSince=None,
                      aggregatedUtilization=None, lastMetricsUpdate=None,
                      trackedPods=[{"podName": t.get("podName"), "gpuMetrics": []}
                                   for t in status.get("trackedPods") or []])
        reason = status.get("preemptionReason") or "preempted"
        await self._execute(cr, gp.TrackerPlan(status=status, events=[
            ("Warning", "WorkloadPreempted", f"{ref.get('kind')} {ref.get('name')} deleted: {reason}")]))
        return 60.0

    # -- cluster-wide evaluation (§8.5) -----------------------------------------------------------

    async def evaluate(self) -> int:
        """Match idle victims to pending trackers under the evaluation Lease; returns preemptions started."""
        async with self._evaluating:
            try:
                if not await self.elector.try_acquire_or_renew():
                    return 0
            except KubeError as err:
                log.warning("gpu preemption lease: %s", err)
                return 0
            self.elector.is_leader = True
            try:
                self.evaluations += 1
                now = clock.now()
                trackers = [(cr, self._resolved(cr)) for cr in self.caches[R.GPUWORKLOADS]]
                started = 0
                for decision in gp.evaluate(trackers, now):
                    if await self._start_preemption(decision):
                        started += 1
                return started
            finally:
                await self.elector.release()

    async def _start_preemption(self, decision: gp.Preemption) -> bool:
        try:
            fresh = await self.client.get(R.GPUWORKLOADS, decision.name, decision.namespace)
        except NotFound:
            return False
        if (fresh.get("status") or {}).get("phase") != gp.IDLE:
            return False  # re-read: no longer a victim
        patch = {"metadata": {"resourceVersion": fresh["metadata"].get("resourceVersion")},
                 "status": {"phase": gp.PREEMPTING, "preemptedFor": decision.preempted_for or None,
                            "preemptionReason": decision.reason}}
        try:
            result = await self.client.patch(R.GPUWORKLOADS, decision.name, patch, decision.namespace,
                                             subresource="status")
        except (Conflict, NotFound):
            return False
        result.setdefault("kind", "GpuWorkload")
        self.caches[R.GPUWORKLOADS].upsert_if_newer(result)
        self.writes += 1
        self.recorder.emit(result, "Warning", "PreemptionStarted", decision.reason)
        self.queue.add((decision.namespace, decision.name))
        return True

    async def drain(self) -> None:
        await self.recorder.flush()

    def health(self) -> JsonObj:
        report = super().health()
        report.update(enabled=self.settings.enabled, evaluations=self.evaluations,
                      source=getattr(self.source, "name", ""), source_error=getattr(self.source, "last_error", ""))
        return report


def gpu_preemption_controller(client: Any, **kwargs: Any) -> GpuPreemptionController:
    return GpuPreemptionController(client, **kwargs)
