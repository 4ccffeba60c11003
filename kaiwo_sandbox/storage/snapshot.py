"""The store as one JSON document and back: what `--state DIR` saves (persistence.py) and what a
restart restores. The document holds every object, CRDs first, and the resourceVersion counter."""

from __future__ import annotations

import logging

from kaiwo_sandbox.contracts import CRDS, JsonObj, ResourceInfo
from kaiwo_sandbox.registry import Registry
from kaiwo_sandbox.storage import crd_registration
from kaiwo_sandbox.storage.store import ObjectStore

log = logging.getLogger(__name__)

# How far the resourceVersion counter jumps when state is restored: more writes than a run can make
# in the persister's interval, whose versions a crash may have lost after clients saw them.
RESTORE_GAP = 100_000


def dump(store: ObjectStore) -> JsonObj:
    """Everything needed to restart where we stopped: objects and the resourceVersion counter."""
    crds = (CRDS.group, CRDS.resource)
    objects = list(store.tables.bucket(store.resolve(CRDS)).values())
    for storage, bucket in store.tables.buckets():
        if storage != crds:
            objects.extend(bucket.values())
    return {"resourceVersion": store.tables.rv, "objects": objects}


def restore(store: ObjectStore, state: JsonObj) -> None:
    """Restore a `dump` (before anything else is written). History starts empty: watches that
    resume from a resourceVersion older than the restart get 410, as after an etcd compaction."""
    tables = store.tables
    restored: list[tuple[ResourceInfo, JsonObj]] = []
    for obj in state.get("objects") or []:
        api_version = str(obj.get("apiVersion", ""))
        group = api_version.rpartition("/")[0]
        info = _info_for_kind(store.registry, group, str(obj.get("kind", "")))
        if info is None:
            log.warning("sandbox: dropping stored %s %s: kind not served", api_version, obj.get("kind"))
            continue
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name", ""))
        tables.put(info, key, obj, tables.bucket(info).get(key))
        if info.group == CRDS.group and info.resource == CRDS.resource:
            crd_registration.register(store.registry, obj)
        restored.append((info, obj))
    # What a restarted kube-controller-manager does when its informers sync: the garbage collector
    # and the namespace controller pick up, from the objects themselves, the deletions under way
    # (foreground, orphan, Terminating namespaces) and the dependents whose owners are gone.
    for info, obj in restored:
        if obj["metadata"].get("ownerReferences"):
            store.gc.check_owners(info, obj)
        if obj["metadata"].get("deletionTimestamp"):
            store.gc.deletion_started(info, obj)
    # The saved counter may lag what clients saw (a crash loses up to a second of writes): jump
    # past every version the previous run could have handed out, so none is ever reused for
    # other objects. A watch or list at any of them is then older than the history: 410, relist.
    tables.rv = max(tables.rv, int(state.get("resourceVersion") or 0)) + RESTORE_GAP
    store.fanout.expire(tables.rv)


def _info_for_kind(registry: Registry, group: str, kind: str) -> ResourceInfo | None:
    for info in registry:
        if info.group == group and info.kind == kind and info.storage_group is None:
            return info
    return None
