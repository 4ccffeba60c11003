"""The garbage collector and the namespace controller, as kube-controller-manager runs them.

- A dependent whose owners (matched by uid) are all gone is deleted; dangling references next to a
  live owner are removed. Objects created with an owner that does not exist are collected too.
- Foreground deletion: the owner carries the `foregroundDeletion` finalizer until every dependent
  with `blockOwnerDeletion: true` is gone; Orphan: dependents lose their reference to the owner.
- A Terminating namespace is emptied (objects with finalizers keep it Terminating), then its
  `kubernetes` finalizer is removed and it goes away.

Work is queued and run soon after the write that caused it (on the loop, like the real
controllers run asynchronously); without a running loop it runs at once, so plain unit tests of
the store see the result immediately.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from kaiwo_sandbox.contracts import GVR, NAMESPACES, ApiError, JsonObj, ResourceInfo, StorageKey
from kaiwo_sandbox.registry import Registry
from kaiwo_sandbox.storage.owners import ObjKey
from kaiwo_sandbox.storage.tables import Tables

log = logging.getLogger(__name__)

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
GC_USER = "system:serviceaccount:kube-system:generic-garbage-collector"
NAMESPACE_USER = "system:serviceaccount:kube-system:namespace-controller"


class CollectedStore(Protocol):
    """What the collectors read and write of the object store (store.ObjectStore, which owns them):
    declared here so that this module does not import the store that imports it."""

    registry: Registry
    tables: Tables  # where objects are, by uid, by owner and by namespace

    def resolve(self, gvr: GVR) -> ResourceInfo: ...

    def system_update(self, info: ResourceInfo, key: ObjKey, mutate: Callable[[JsonObj], None]) -> None: ...

    def delete_ref(self, gvr: GVR, namespace: str | None, name: str, *, propagation_policy: str | None = None,
                   user: str = ...) -> JsonObj: ...


class GarbageCollector:
    def __init__(self, store: CollectedStore) -> None:
        self.store = store
        self._dependents: dict[tuple[StorageKey, ObjKey], None] = {}
        self._owners: dict[str, None] = {}  # uids of owners in foreground or orphan deletion
        self._namespaces: dict[str, None] = {}  # queue of namespaces to advance
        self._terminating: set[str] = set()
        self._scheduled = False
        self._running = False

    # ------------------------------------------------------------------ triggers (from the store)
    def removed(self, info: ResourceInfo, obj: JsonObj, *, orphan: bool = False) -> None:
        meta = obj["metadata"]
        uid = meta.get("uid", "")
        if orphan:
            self._orphan_dependents(uid)
        else:
            for dep_info, key, _ in self.store.tables.dependents_of(uid):
                self._dependents[(dep_info.storage, key)] = None
        for ref in meta.get("ownerReferences") or ():
            if ref.get("uid") in self._owners:
                self._owners[ref["uid"]] = None
        namespace = meta.get("namespace")
        if namespace and namespace in self._terminating:
            self._namespaces[namespace] = None
        self._schedule()

    def deletion_started(self, info: ResourceInfo, obj: JsonObj) -> None:
        meta = obj["metadata"]
        finalizers = meta.get("finalizers") or ()
        if info.resource == "namespaces" and info.group == "":
            self._namespaces[meta["name"]] = None
            self._terminating.add(meta["name"])
        if FOREGROUND in finalizers or ORPHAN in finalizers:
            self._owners[meta.get("uid", "")] = None
        self._schedule()

    def check_owners(self, info: ResourceInfo, obj: JsonObj) -> None:
        meta = obj["metadata"]
        self._dependents[(info.storage, (meta.get("namespace") or "", meta["name"]))] = None
        self._schedule()

    # ------------------------------------------------------------------ running
    def _schedule(self) -> None:
        if self._running or self._scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.run()
            return
        self._scheduled = True
        loop.call_soon(self.run)

    def run(self) -> None:
        """Process queued work until nothing is left (each step may queue more)."""
        self._scheduled = False
        if self._running:
            return
        self._running = True
        try:
            for _ in range(100_000):
                if self._dependents:
                    item = next(iter(self._dependents))
                    del self._dependents[item]
                    self._check_dependent(*item)
                elif (self._owners and self._step_owners()) or (self._namespaces and self._step_namespaces()):
                    continue
                else:
                    break
        finally:
            self._running = False

    # ------------------------------------------------------------------ dependents
    def _check_dependent(self, storage: StorageKey, key: ObjKey) -> None:
        infos = self.store.registry.storage_infos(storage)
        if not infos:
            return
        info = self.store.tables.primary(infos[0])
        obj = self.store.tables.stored(storage, key)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return
        refs = obj["metadata"].get("ownerReferences") or []
        solid, dangling, waiting = [], [], []
        for ref in refs:
            found = self.store.tables.by_uid(str(ref.get("uid", "")))
            if found is None:
                dangling.append(ref)
                continue
            owner_meta = found[2]["metadata"]
            if owner_meta.get("deletionTimestamp") and FOREGROUND in (owner_meta.get("finalizers") or ()):
                waiting.append(ref)
            else:
                solid.append(ref)
        if not dangling and not waiting:
            return
        if solid:
            gone = {r.get("uid") for r in dangling + waiting}

            def drop_refs(new: JsonObj) -> None:
                new["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") not in gone]

            self.store.system_update(info, key, drop_refs)
            return
        has_dependents = bool(self.store.tables.dependents_of(str(obj["metadata"].get("uid", ""))))
        policy = "Foreground" if waiting and has_dependents else "Background"
        self._delete(info, key, policy)

    def _delete(self, info: ResourceInfo, key: ObjKey, policy: str) -> None:
        try:
            self.store.delete_ref(info.gvr(info.stored_version), key[0] or None, key[1],
                                  propagation_policy=policy, user=GC_USER)
        except ApiError as err:
            if err.code != 404:
                log.warning("sandbox gc: deleting %s %s/%s failed: %s", info.resource, *key, err.message)

    # ------------------------------------------------------------------ owners being deleted
    def _step_owners(self) -> bool:
        """Advance foreground/orphan deletions. Returns True when something changed."""
        changed = False
        for uid in list(self._owners):
            found = self.store.tables.by_uid(uid)
            if found is None:
                del self._owners[uid]
                continue
            info, key, owner = found
            finalizers = owner["metadata"].get("finalizers") or []
            if not owner["metadata"].get("deletionTimestamp") or (FOREGROUND not in finalizers
                                                                  and ORPHAN not in finalizers):
                del self._owners[uid]
                continue
            if ORPHAN in finalizers:
                self._orphan_dependents(uid)
                self.store.system_update(info, key, _without_finalizer(ORPHAN))
                changed = True
                continue
            blocking = 0
            for dep_info, dep_key, dep in self.store.tables.dependents_of(uid):
                refs = dep["metadata"].get("ownerReferences") or ()
                if any(r.get("uid") == uid and r.get("blockOwnerDeletion") for r in refs):
                    blocking += 1
                if not dep["metadata"].get("deletionTimestamp"):
                    self._dependents[(dep_info.storage, dep_key)] = None
                    changed = True
            if blocking == 0:
                del self._owners[uid]
                self.store.system_update(info, key, _without_finalizer(FOREGROUND))
                changed = True
        return changed

    def _orphan_dependents(self, uid: str) -> None:
        for dep_info, dep_key, _ in self.store.tables.dependents_of(uid):
            def drop(new: JsonObj) -> None:
                refs = new["metadata"].get("ownerReferences") or []
                kept = [r for r in refs if r.get("uid") != uid]
                if kept:
                    new["metadata"]["ownerReferences"] = kept
                else:
                    new["metadata"].pop("ownerReferences", None)

            self.store.system_update(dep_info, dep_key, drop)

    # ------------------------------------------------------------------ namespaces
    def _step_namespaces(self) -> bool:
        changed = False
        ns_info = self.store.resolve(NAMESPACES)
        for name in list(self._namespaces):
            namespace = self.store.tables.stored(ns_info.storage, ("", name))
            if namespace is None or not namespace["metadata"].get("deletionTimestamp"):
                del self._namespaces[name]
                self._terminating.discard(name)
                continue
            contents = self.store.tables.objects_in_namespace(name)
            for info, key, obj in contents:
                if not obj["metadata"].get("deletionTimestamp"):
                    self._delete(info, key, "Background")
                    changed = True
            if self.store.tables.objects_in_namespace(name):
                del self._namespaces[name]  # re-queued by `removed` when its content goes
                continue
            del self._namespaces[name]
            self._terminating.discard(name)

            def finalize(new: JsonObj) -> None:
                spec = new.setdefault("spec", {})
                spec["finalizers"] = [f for f in spec.get("finalizers") or [] if f != "kubernetes"]

            self.store.system_update(ns_info, ("", name), finalize)
            changed = True
        return changed


def _without_finalizer(finalizer: str) -> Callable[[JsonObj], None]:
    def mutate(new: JsonObj) -> None:
        remaining = [f for f in new["metadata"].get("finalizers") or [] if f != finalizer]
        if remaining:
            new["metadata"]["finalizers"] = remaining
        else:
            new["metadata"].pop("finalizers", None)

    return mutate

