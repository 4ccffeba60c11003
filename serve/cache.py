"""The admin API's watch-fed view of the cluster: one informer per kind it answers about, their
caches, and the few indexes requests need (events by the object they are about, pods by workload).

Requests read from here only: a list of 10,000 workloads costs no API call. Writes (submit, delete)
go to the API server and come back through the watch like anyone else's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.kube.cache import ObjectCache
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.informer import Informer
from kaiwo_ray.kube.resources import (
    APPWRAPPERS,
    CLUSTERQUEUES,
    CONFIGMAPS,
    DEPLOYMENTS,
    EVENTS,
    HTTPROUTES,
    JOBS,
    KAIWOCONFIGS,
    KAIWOJOBS,
    KAIWOSERVICES,
    LOCALQUEUES,
    NODES,
    PODS,
    PVCS,
    RAYJOBS,
    WORKLOAD_DESCENDANTS,
    WORKLOAD_OWNED,
    WORKLOADS,
    Resource,
)
from kaiwo_ray.render.context import LABEL_NAME
from kaiwo_ray.views._objects import meta, status

log = logging.getLogger(__name__)

WORKLOAD_KINDS: dict[str, Resource] = {"KaiwoJob": KAIWOJOBS, "KaiwoService": KAIWOSERVICES}
# The children a workload owns that the admin API shows (kinds a cluster may lack, KubeRay's and
# AppWrapper's, are optional). ConfigMaps and HTTPRoutes are left out: no view reads them, and a watch
# of every ConfigMap would cache the whole cluster's.
CHILD_KINDS: tuple[Resource, ...] = tuple(
    res for res in WORKLOAD_OWNED if res not in WORKLOAD_DESCENDANTS and res not in (CONFIGMAPS, HTTPROUTES))
REQUIRED: tuple[Resource, ...] = (KAIWOJOBS, KAIWOSERVICES, JOBS, PVCS, DEPLOYMENTS, PODS, EVENTS, WORKLOADS,
                                  CLUSTERQUEUES, LOCALQUEUES, NODES, KAIWOCONFIGS)
ALL: tuple[Resource, ...] = (*REQUIRED, RAYJOBS, APPWRAPPERS)

PhaseListener = Callable[[JsonObj, str, str], None]
"""(workload, old phase, new phase): called on every phase change seen by the watch."""


class ClusterCache:
    def __init__(self, client: KubeClient, *, resources: Iterable[Resource] = ALL) -> None:
        self.client = client
        self.caches: dict[Resource, ObjectCache] = {}
        self.informers: dict[Resource, Informer] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._events_by_uid: dict[str, set[tuple[str, str]]] = {}
        self.version = 0
        """Bumped on every change: live views (SSE) send an update when it moved."""
        self.workload_version = 0
        """Bumped only by KaiwoJob/KaiwoService/KaiwoConfig changes: what the workload rows depend on."""
        self.workload_changed: dict[tuple[str, str, str], int] = {}
        """(kind, namespace, name) of a KaiwoJob/KaiwoService -> `version` at its last change: what a
        watch resuming from an earlier `version` (a list's resourceVersion) must still send."""
        self.changed = asyncio.Event()
        self.phase_listeners: list[PhaseListener] = []
        self.workload_listeners: list[Callable[[Resource, JsonObj], None]] = []
        """(resource, object): every KaiwoJob/KaiwoService/KaiwoConfig event, for incremental read models."""
        for res in resources:
            labels = (LABEL_NAME,) if res is PODS else ()
            self.caches[res] = ObjectCache(label_keys=labels)
            self.informers[res] = Informer(client, res, self._handler(res), cache=self.caches[res])

    async def start(self, *, sync_timeout: float = 30.0) -> None:
        for res, informer in self.informers.items():
            self._tasks.append(asyncio.create_task(informer.run(), name=f"admin-{res.plural}"))
        required = [self.informers[r].synced.wait() for r in REQUIRED if r in self.informers]
        async with asyncio.timeout(sync_timeout):
            await asyncio.gather(*required)
        # Optional kinds (KubeRay, AppWrapper) may not be installed: give them a moment, not forever.
        optional = [i.synced.wait() for r, i in self.informers.items() if r not in REQUIRED]
        if optional:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2.0):
                    await asyncio.gather(*optional)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    @property
    def synced(self) -> bool:
        return all(self.informers[r].synced.is_set() for r in REQUIRED if r in self.informers)

    def _handler(self, res: Resource) -> Callable[[str, JsonObj, JsonObj | None], None]:
        def on_event(kind: str, obj: JsonObj, old: JsonObj | None) -> None:
            obj.setdefault("kind", res.kind)
            obj.setdefault("apiVersion", res.api_version)
            if res is EVENTS:
                self._index_event(kind, obj, old)
            elif res in (KAIWOJOBS, KAIWOSERVICES) and kind == "MODIFIED" and old is not None:
                before, after = str(status(old).get("status") or ""), str(status(obj).get("status") or "")
                if before != after:
                    for listener in self.phase_listeners:
                        try:
                            listener(obj, before, after)
                        except Exception:  # a metrics bug must not stop the watch
                            log.exception("phase listener failed")
            self.version += 1
            if res in (KAIWOJOBS, KAIWOSERVICES):
                meta = obj.get("metadata") or {}
                key = (res.kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
                if kind == "DELETED":  # a resumed watch does not replay deletions: nothing to remember
                    self.workload_changed.pop(key, None)
                else:
                    self.workload_changed[key] = self.version
            if res in (KAIWOJOBS, KAIWOSERVICES, KAIWOCONFIGS):
                self.workload_version += 1
                for notify in self.workload_listeners:
                    notify(res, obj)
            self.changed.set()

        return on_event

    def _index_event(self, kind: str, event: JsonObj, old: JsonObj | None) -> None:
        key = (str(meta(event).get("namespace") or ""), str(meta(event).get("name") or ""))
        for version in (old, event if kind == "DELETED" else None):
            uid = _involved_uid(version)
            keys = self._events_by_uid.get(uid) if uid else None
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._events_by_uid[uid]
        uid = _involved_uid(event)
        if kind != "DELETED" and uid:
            self._events_by_uid.setdefault(uid, set()).add(key)

    # -- reads -------------------------------------------------------------------------------------

    def items(self, res: Resource) -> list[JsonObj]:
        cache = self.caches.get(res)
        return list(cache) if cache is not None else []

    def get(self, res: Resource, namespace: str | None, name: str) -> JsonObj | None:
        cache = self.caches.get(res)
        return cache.get(namespace, name) if cache is not None else None

    def workloads(self) -> list[JsonObj]:
        return self.items(KAIWOJOBS) + self.items(KAIWOSERVICES)

    def owned_by(self, uid: str) -> list[JsonObj]:
        out: list[JsonObj] = []
        for res in (*CHILD_KINDS, WORKLOADS, PODS):
            cache = self.caches.get(res)
            if cache is not None:
                out.extend(cache.owned_by(uid))
        return out

    def events_about(self, uids: Iterable[str]) -> list[JsonObj]:
        cache = self.caches[EVENTS]
        out = []
        for uid in uids:
            for namespace, name in self._events_by_uid.get(uid, ()):
                event = cache.get(namespace, name)
                if event is not None:
                    out.append(event)
        return out

    def pods_of(self, namespace: str, workload_name: str) -> list[JsonObj]:
        return [p for p in self.caches[PODS].with_label(LABEL_NAME, workload_name)
                if meta(p).get("namespace") == namespace]

    def default_queue(self) -> str:
        config = self.get(KAIWOCONFIGS, None, "kaiwo") or {}
        return str((config.get("spec") or {}).get("defaultClusterQueueName") or "kaiwo")

    async def wait_changed(self, since: int, timeout: float) -> int:
        """Wait until `version` moves past `since` (or `timeout`); return the version now."""
        deadline = time.monotonic() + timeout
        while self.version == since:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self.changed.wait()
        return self.version


def _involved_uid(event: JsonObj | None) -> str:
    if event is None:
        return ""
    involved = event.get("involvedObject") or event.get("regarding") or {}
    return str(involved.get("uid") or "")
