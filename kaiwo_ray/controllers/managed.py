"""The managed-workload controller: every Job, Deployment, RayJob and RayService labelled
`kaiwo.silogen.ai/managed: "true"` (by its user, or refused at admission under
`ENFORCE_KAIWO_ON_GPU_WORKLOADS` until it is) gets the KaiwoJob/KaiwoService that tracks it, and is made
that CR's controlled child (`reconcile/managed.py` decides both). Upstream did this inside its Job
webhook; here admission only labels, so a dry run or a retried request creates nothing.

Only labelled workloads are cached (the watches select on the label), and the CRs are read from this
controller's own caches. A same-named CR that does not track the workload (a user's own KaiwoJob) is
never touched: the workload gets a Warning event saying so, and runs queued but untracked.
"""

from __future__ import annotations

from typing import Any

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.labels import LABEL_MANAGED
from kaiwo_ray.controllers.base import Controller, Key, Watch
from kaiwo_ray.controllers.config import load_config
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import AlreadyExists, NotFound
from kaiwo_ray.kube.events import EventRecorder
from kaiwo_ray.kube.resources import Resource
from kaiwo_ray.reconcile.managed import TRACKED, adoption_patch, opted_in, tracker_for, tracks

SOURCES: dict[str, Resource] = {"Job": R.JOBS, "Deployment": R.DEPLOYMENTS, "RayJob": R.RAYJOBS,
                                "RayService": R.RAYSERVICES}
TRACKERS: dict[str, Resource] = {"KaiwoJob": R.KAIWOJOBS, "KaiwoService": R.KAIWOSERVICES}


def _source_key(kind: str) -> Any:
    """Keys are (namespace, "Kind/name"): one queue serves the four kinds (names hold no '/')."""
    def mapper(event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
        meta = obj.get("metadata") or {}
        return [(meta.get("namespace") or "", f"{kind}/{meta.get('name') or ''}")]

    return mapper


def _tracker_keys(event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
    """A tracker's change (its deletion, say) wakes its workload, which may need a new one."""
    meta = obj.get("metadata") or {}
    return [(meta.get("namespace") or "", f"{ref.get('kind')}/{ref.get('name')}")
            for ref in meta.get("ownerReferences") or () if ref.get("kind") in SOURCES]


class ManagedWorkloadController(Controller):
    name = "managed-workload-controller"

    def __init__(self, client: KubeClient, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self.recorder = EventRecorder(client, self.name)
        self._warned: set[tuple[str, str]] = set()  # (uid, reason) already told, once each

    def watches(self) -> list[Watch]:
        selector = f"{LABEL_MANAGED}=true"
        return [*(Watch(res, _source_key(kind), label_selector=selector) for kind, res in SOURCES.items()),
                *(Watch(res, _tracker_keys, label_selector=selector) for res in TRACKERS.values()),
                Watch(R.KAIWOCONFIGS)]

    async def reconcile(self, key: Key) -> float | None:
        namespace, ref = key
        kind, _, name = ref.partition("/")
        if kind not in SOURCES:
            return None
        obj = self.cache(SOURCES[kind]).get(namespace, name)
        if obj is None or not opted_in(obj) or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return None  # gone, or going: the garbage collector takes its tracker
        obj = {"apiVersion": SOURCES[kind].api_version, "kind": kind, **obj}
        tracker_res = TRACKERS[TRACKED[kind].cr_kind]
        cr = self.cache(tracker_res).get(namespace, name)
        if cr is None:
            default_queue = load_config(self.cache(R.KAIWOCONFIGS)).default_cluster_queue_name
            try:
                cr = await self.client.create(tracker_res, tracker_for(kind, obj, default_queue))
            except AlreadyExists:
                # One the caches do not hold (unlabelled, or just created): its event brings us back.
                return 1.0
            self.cache(tracker_res).upsert_if_newer(cr)
        if not tracks(cr, kind, obj):
            self._warn(obj, "TrackerNameTaken",
                       f"a {cr.get('kind') or tracker_res.kind} named {name} exists and does not track this "
                       f"{kind}: it runs queued but untracked; rename one of them")
            return None
        patch = adoption_patch(kind, obj, {"kind": tracker_res.kind, **cr})
        if patch is not None:
            try:
                updated = await self.client.patch(SOURCES[kind], name, patch, namespace)
            except NotFound:
                return None
            self.cache(SOURCES[kind]).upsert_if_newer(updated)
        return None

    def _warn(self, obj: JsonObj, reason: str, message: str) -> None:
        seen = (str((obj.get("metadata") or {}).get("uid") or ""), reason)
        if seen not in self._warned:
            self._warned.add(seen)
            self.recorder.emit(obj, "Warning", reason, message)

    async def drain(self) -> None:
        await self.recorder.flush()


def managed_workload_controller(client: KubeClient, **kwargs: Any) -> ManagedWorkloadController:
    return ManagedWorkloadController(client, **kwargs)
