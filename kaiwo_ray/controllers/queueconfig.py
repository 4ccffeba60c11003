"""The KaiwoQueueConfig controller: keep Kueue's queues, flavors, priority classes and topologies
in line with KaiwoQueueConfig `kaiwo`, create that object from the nodes when it is missing, and
label the nodes the default queue selects (spec/cluster.md §4-§5).

Every trigger (the config itself, Kueue objects, nodes, namespaces, KaiwoConfig) enqueues the one
key `kaiwo`; a reconcile reads only caches, asks `kaiwo_ray.reconcile.queueconfig` what to do, and
writes only what differs, so a quiet resync makes no API writes. Sync steps run in Kueue's
dependency order and each continues past a failed object; the status turns FAILED (retried every
30 s) and each distinct failure is one Warning event, not one per retry. Transient API errors
(5xx, 429, conflicts, a stale cache) abort the pass and retry it with backoff without touching the
status, so injected faults never flap READY/FAILED.
"""

from __future__ import annotations

import logging
from typing import Any

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.queueconfig import KaiwoQueueConfigSpec
from kaiwo_ray.controllers.base import Controller, Key, Watch
from kaiwo_ray.controllers.config import load_config
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import RETRYABLE, Conflict, Forbidden, Invalid, KubeError, NotFound
from kaiwo_ray.kube.events import EventRecorder
from kaiwo_ray.kube.informer import InformerSettings
from kaiwo_ray.kube.resources import Resource
from kaiwo_ray.reconcile import queueconfig as qc
from kaiwo_ray.render.queue import KueueVersion

log = logging.getLogger(__name__)

SINGLETON: Key = ("", qc.QUEUE_CONFIG_NAME)
COMPONENT = "kaiwoqueueconfig-controller"
FAILED_REQUEUE_SECONDS = 30.0
WAIT_REQUEUE_SECONDS = 1.0  # something is still terminating (garbage collection, a recreated flavor)

_RESOURCES: dict[str, Resource] = {
    qc.TOPOLOGY: R.TOPOLOGIES,
    qc.RESOURCE_FLAVOR: R.RESOURCEFLAVORS,
    qc.CLUSTER_QUEUE: R.CLUSTERQUEUES,
    qc.LOCAL_QUEUE: R.LOCALQUEUES,
    qc.PRIORITY_CLASS: R.WORKLOADPRIORITYCLASSES,
}
_ACTION_NAMES = {"create": "Create", "update": "Update", "delete": "Delete", "fail": "Create", "wait": "Update"}


def _singleton(event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
    return [SINGLETON]


def _own_name(event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
    return [("", str((obj.get("metadata") or {}).get("name") or ""))]


def _content_changed(event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
    """Kueue objects: anything but status and bookkeeping metadata (Kueue rewrites queue status
    constantly; those writes must not wake us)."""
    if event_type != "MODIFIED" or old is None or _content(obj) != _content(old):
        return [SINGLETON]
    return []


def _content(obj: JsonObj) -> JsonObj:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items()
            if k not in ("resourceVersion", "managedFields", "generation")}
    return {**{k: v for k, v in obj.items() if k not in ("status", "metadata")}, "metadata": meta}


def _node_changed(event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
    """Nodes: only what node discovery reads (cordon, CPU/memory capacity, labels), not heartbeats."""
    if event_type != "MODIFIED" or old is None:
        return [SINGLETON]
    if bool((obj.get("spec") or {}).get("unschedulable")) != bool((old.get("spec") or {}).get("unschedulable")):
        return [SINGLETON]
    capacity = ((obj.get("status") or {}).get("capacity") or {}, (old.get("status") or {}).get("capacity") or {})
    if any(capacity[0].get(r) != capacity[1].get(r) for r in ("cpu", "memory")):
        return [SINGLETON]
    if ((obj.get("metadata") or {}).get("labels") or {}) != ((old.get("metadata") or {}).get("labels") or {}):
        return [SINGLETON]
    return []


def _namespace_changed(event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
    if event_type != "MODIFIED" or old is None:
        return [SINGLETON]
    terminating = [bool((v.get("metadata") or {}).get("deletionTimestamp")) for v in (obj, old)]
    return [SINGLETON] if terminating[0] != terminating[1] else []


class QueueConfigController(Controller):
    name = "kaiwoqueueconfig-controller"

    def __init__(self, client: KubeClient, *, workers: int = 1,
                 informer_settings: InformerSettings | None = None) -> None:
        # One key does all the work, so more workers would only sit idle.
        super().__init__(client, workers=max(1, min(workers, 2)), informer_settings=informer_settings)
        self.recorder = EventRecorder(client, COMPONENT)
        self.failures = qc.FailureMemory()
        self.topology_api_available = True
        self.kueue_version: KueueVersion = "v1beta2" if R.CLUSTERQUEUES.version == "v1beta2" else "v1beta1"
        self.writes = 0
        self._startup_labels_pending = True
        self._failing: set[tuple[str, str, str, str]] = set()  # failures seen in the current pass

    def watches(self) -> list[Watch]:
        watches = [
            Watch(R.KAIWOQUEUECONFIGS, _own_name),
            Watch(R.KAIWOCONFIGS, _singleton),  # read live: a changed setting acts at once
            Watch(R.NODES, _node_changed),
            Watch(R.NAMESPACES, _namespace_changed),
            Watch(R.RESOURCEFLAVORS, _content_changed),
            Watch(R.CLUSTERQUEUES, _content_changed),
            Watch(R.LOCALQUEUES, _content_changed),
            Watch(R.WORKLOADPRIORITYCLASSES, _content_changed),
        ]
        if self.topology_api_available:
            watches.append(Watch(R.TOPOLOGIES, _content_changed))
        return watches

    async def start(self) -> None:
        apis = await self.detect_apis()
        self.topology_api_available = apis.topology_version is not None
        self.kueue_version = "v1beta1" if apis.kueue_version == "v1beta1" else "v1beta2"
        if not self.topology_api_available:
            log.warning("%s: Kueue serves no Topology API; syncing without topologies", self.name)
        await super().start()
        self.queue.add(SINGLETON)  # also with no KaiwoQueueConfig at all: that is the case to fix

    # -- reconcile ---------------------------------------------------------------------------------

    async def reconcile(self, key: Key) -> float | None:
        if key[1] != qc.QUEUE_CONFIG_NAME:
            await self._reject_other_name(key[1])
            return None
        config = load_config(self.cache(R.KAIWOCONFIGS))
        nodes = list(self.cache(R.NODES))
        live = self.cache(R.KAIWOQUEUECONFIGS).get(None, qc.QUEUE_CONFIG_NAME)
        if live is not None and (live.get("metadata") or {}).get("deletionTimestamp"):
            return None  # its deletion event brings us back to create the default

        await self._label_nodes(nodes, config)
        decision = qc.decide_queue_config(live, config, nodes)
        if decision.error:
            if live is not None:
                await self._report_failure(live, ("KaiwoQueueConfig", "Sync", "", ""), decision.reason,
                                           decision.error)
                await self._write_status(live, ok=False)
            else:
                log.warning("%s: cannot create the default KaiwoQueueConfig: %s", self.name, decision.error)
            return None  # retrying changes nothing; an edit of the object or the nodes triggers us
        self.failures.clear("KaiwoQueueConfig", "")
        kqc = await self._ensure_object(live, decision)
        assert decision.spec is not None
        ok, wait = await self._sync(kqc, decision.spec)
        await self._write_status(kqc, ok=ok)
        if wait:
            return WAIT_REQUEUE_SECONDS
        return None if ok else FAILED_REQUEUE_SECONDS

    async def _ensure_object(self, live: JsonObj | None, decision: qc.QueueConfigDecision) -> JsonObj:
        cache = self.cache(R.KAIWOQUEUECONFIGS)
        if decision.create is not None:
            created = await self.client.create(R.KAIWOQUEUECONFIGS, decision.create)
            self._wrote(cache, created, "KaiwoQueueConfig")
            await self.recorder.record(self._with_kind(created), "Normal", decision.reason, decision.message)
            return created
        assert live is not None
        if decision.update_spec is not None:
            body = self._with_kind({k: v for k, v in live.items() if k != "status"})
            body["metadata"] = {k: v for k, v in live["metadata"].items() if k != "managedFields"}
            body["spec"] = decision.update_spec
            updated = await self.client.replace(R.KAIWOQUEUECONFIGS, body)
            self._wrote(cache, updated, "KaiwoQueueConfig")
            await self.recorder.record(self._with_kind(updated), "Normal", decision.reason, decision.message)
            return updated
        return live

    async def _sync(self, kqc: JsonObj, spec: KaiwoQueueConfigSpec) -> tuple[bool, bool]:
        """Topologies -> ResourceFlavors -> ClusterQueues -> LocalQueues -> WorkloadPriorityClasses.
        Returns (every step succeeded, something is still terminating)."""
        queue_config = qc.with_identity(spec, kqc)
        uid = str(kqc["metadata"].get("uid") or "")
        desired = qc.desired_cluster_objects(queue_config, kueue_version=self.kueue_version,
                                             topology_api_available=self.topology_api_available)
        ok = True
        wait = False
        self._failing = set()
        for target in qc.SYNC_ORDER:
            if target == qc.TOPOLOGY and not self.topology_api_available:
                continue
            res = _RESOURCES[target]
            if target == qc.LOCAL_QUEUE:
                cluster_queues = {str(o["metadata"]["name"]): o for o in self.cache(R.CLUSTERQUEUES)}
                namespaces = {str(o["metadata"]["name"]): o for o in self.cache(R.NAMESPACES)}
                actions = qc.plan_local_queues(spec, cluster_queues, self.cache(res), namespaces,
                                               kqc_uid=uid, kueue_version=self.kueue_version)
            else:
                actions = qc.plan_cluster_objects(target, desired[target], self.cache(res), uid)
            for action in actions:
                step_ok, step_wait = await self._carry_out(kqc, res, action)
                ok = ok and step_ok
                wait = wait or step_wait
        self.failures.retain(self._failing)
        return ok, wait

    async def _carry_out(self, kqc: JsonObj, res: Resource, action: qc.Action) -> tuple[bool, bool]:
        """One action; returns (succeeded, wait). Transient errors propagate (the pass is retried)."""
        target, name, namespace = action.target, action.name, action.namespace
        if action.verb == "wait":
            return True, True
        if action.verb == "fail":
            await self._report_failure(kqc, (target, "Create", name, namespace), "", action.message)
            return False, False
        cache = self.cache(res)
        api = self.served(res)  # the version this cluster's Kueue serves (a Topology may be v1alpha1)
        verb = _ACTION_NAMES[action.verb]
        try:
            if action.verb == "create":
                assert action.body is not None
                self._wrote(cache, await self.client.create(api, {**action.body, "apiVersion": api.api_version}),
                            target)
            elif action.verb == "update":
                assert action.body is not None and action.live is not None
                try:
                    self._wrote(cache, await self.client.replace(api, {**action.body, "apiVersion": api.api_version}),
                                target)
                except (Invalid, Forbidden) as err:
                    if target != qc.RESOURCE_FLAVOR:
                        raise
                    log.info("%s: ResourceFlavor %s rejected the update (%s); recreating", self.name, name, err)
                    verb = "Recreate"
                    if await self._recreate_flavor(kqc, action):
                        return True, True
            else:
                assert action.live is not None
                await self._delete(res, action.live)
        except RETRYABLE:
            raise
        except KubeError as err:
            await self._report_failure(kqc, (target, verb, name, namespace), "", str(err))
            return False, False
        self.failures.clear(target, name, namespace)
        event = qc.success_event(target, verb, name, namespace)
        await self.recorder.record(self._with_kind(kqc), event.type, event.reason, event.message)
        return True, False

    async def _recreate_flavor(self, kqc: JsonObj, action: qc.Action) -> bool:
        """§4.4: Kueue forbids editing a flavor with a topology. Strip its in-use finalizer, delete
        it and create the new one; when the old one is still terminating, report success now and
        create on the next pass (True = wait)."""
        assert action.live is not None and action.body is not None
        res, cache = self.served(R.RESOURCEFLAVORS), self.cache(R.RESOURCEFLAVORS)
        meta = action.live["metadata"]
        fresh = await self.client.get(res, meta["name"])
        patch = qc.without_finalizer(fresh)
        if patch is not None:
            self._wrote(cache, await self.client.patch(res, meta["name"], patch), qc.RESOURCE_FLAVOR)
        await self._delete(res, fresh)
        desired = qc.recreation(action.body)
        desired["metadata"] = {k: v for k, v in desired["metadata"].items()
                               if k in ("name", "labels", "annotations", "ownerReferences")}
        try:
            self._wrote(cache, await self.client.create(res, {**desired, "apiVersion": res.api_version}),
                        qc.RESOURCE_FLAVOR)
        except Conflict:
            return True
        return False

    async def _delete(self, res: Resource, live: JsonObj) -> None:
        meta = live["metadata"]
        try:
            await self.client.delete(self.served(res), meta["name"], meta.get("namespace"), uid=meta.get("uid"))
            self.writes += 1
        except NotFound:
            pass

    # -- nodes, status, events ---------------------------------------------------------------------

    async def _label_nodes(self, nodes: list[JsonObj], config: KaiwoConfigSpec) -> None:
        """§5.2 (and §3.3 once per start). A failure aborts the pass, as upstream's does."""
        cache = self.cache(R.NODES)
        for patch in qc.node_patches(nodes, config, startup_labels=self._startup_labels_pending):
            try:
                self._wrote(cache, await self.client.patch(R.NODES, patch.name, patch.patch), "Node")
            except NotFound:
                continue
        self._startup_labels_pending = False

    async def _write_status(self, kqc: JsonObj, *, ok: bool) -> None:
        patch = qc.status_patch(kqc, ok)
        if patch is None:
            return
        try:
            result = await self.client.patch(R.KAIWOQUEUECONFIGS, kqc["metadata"]["name"], patch,
                                             subresource="status")
        except NotFound:
            return
        self._wrote(self.cache(R.KAIWOQUEUECONFIGS), result, "KaiwoQueueConfig")

    async def _reject_other_name(self, name: str) -> None:
        """Only `kaiwo` is honoured; any other is marked FAILED once, with one event, and left alone
        (upstream retries it with backoff forever)."""
        obj = self.cache(R.KAIWOQUEUECONFIGS).get(None, name)
        if obj is None or (obj.get("status") or {}).get("status") == qc.FAILED:
            return
        await self._write_status(obj, ok=False)
        await self.recorder.record(self._with_kind(obj), "Warning", "KaiwoQueueConfigInvalidName",
                                   qc.WRONG_NAME_MESSAGE)

    async def _report_failure(self, kqc: JsonObj, key: tuple[str, str, str, str], reason: str,
                              message: str) -> None:
        target, action, name, namespace = key
        self._failing.add(key)
        if not self.failures.is_new(key, message):
            return
        log.warning("%s: %s %s %s/%s: %s", self.name, action, target, namespace, name, message)
        event = qc.failure_event(target, action, name, namespace, message)
        await self.recorder.record(self._with_kind(kqc), event.type, reason or event.reason,
                                   message if reason else event.message)

    def _with_kind(self, obj: JsonObj) -> JsonObj:
        return {**obj, "apiVersion": R.KAIWOQUEUECONFIGS.api_version, "kind": "KaiwoQueueConfig"}

    def _wrote(self, cache: Any, result: JsonObj, kind: str) -> None:
        """Count the write and put the server's answer in the cache, so the next pass (often
        triggered by this very write) sees it and does nothing."""
        self.writes += 1
        if isinstance(result, dict) and result.get("metadata"):
            result.setdefault("kind", kind)
            cache.upsert_if_newer(result)


__all__ = ["QueueConfigController"]
