"""The committed objects and the indexes kept beside them: etcd's keyspace, as the store sees it.

One bucket of objects per storage (group, resource), keyed by (namespace, name); each live bucket's
keys in etcd's order, so that a page of a list is a bisect; where each object lives by uid and which
objects name it as an owner (`owners.OwnerIndex`); and the resourceVersion counter. Nothing here
runs the write pipeline or tells anyone: the store commits through `put` and `remove` and announces.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator

from kaiwo_sandbox.contracts import JsonObj, ResourceInfo, StorageKey
from kaiwo_sandbox.registry import Registry
from kaiwo_sandbox.storage.owners import ObjKey, OwnerIndex

Bucket = dict[ObjKey, JsonObj]
KeyOrder = list[str]  # a bucket's keys as "namespace/name", sorted
Located = tuple[ResourceInfo, ObjKey, JsonObj]


def key_string(key: ObjKey) -> str:
    return f"{key[0]}/{key[1]}"


def key_of(key_string: str) -> ObjKey:
    """The inverse of `key_string` (neither a namespace nor a name holds a "/")."""
    namespace, _, name = key_string.partition("/")
    return namespace, name


class Tables:
    """Not thread-safe: the store's event loop is its only user."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.owners = OwnerIndex()
        self.rv = 0  # the last resourceVersion handed out
        self._data: dict[StorageKey, Bucket] = {}
        self._order: dict[StorageKey, KeyOrder] = {}  # each live bucket's keys in list order (`key_order`)

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def primary(self, info: ResourceInfo) -> ResourceInfo:
        """The resource that owns a storage (core events for events.k8s.io events)."""
        if info.storage_group is None:
            return info
        found = self.registry.find(*info.storage)
        return found if found is not None else info

    # ------------------------------------------------------------------ buckets
    def bucket(self, info: ResourceInfo) -> Bucket:
        return self._data.setdefault(info.storage, {})

    def is_live(self, info: ResourceInfo, bucket: Bucket) -> bool:
        return self._data.get(info.storage) is bucket

    def stored(self, storage: StorageKey, key: ObjKey) -> JsonObj | None:
        """The object stored at `key` in `storage` as it is (not a copy: read, never mutate)."""
        return self._data.get(storage, {}).get(key)

    def buckets(self) -> Iterator[tuple[StorageKey, Bucket]]:
        return iter(self._data.items())

    def key_order(self, info: ResourceInfo, bucket: Bucket) -> KeyOrder:
        """`bucket`'s keys as "namespace/name", sorted: etcd's key order, in which the apiserver lists
        and pages. Kept for each live bucket as objects come and go (`put`, `remove`), so that a page is
        a bisect and a walk of its own length, where sorting every key for every page would make paging
        through a bucket quadratic in its size."""
        if not self.is_live(info, bucket):  # a snapshot rewound from history: its own order
            return sorted(map(key_string, bucket))
        order = self._order.get(info.storage)
        if order is None:
            order = self._order[info.storage] = sorted(map(key_string, bucket))
        return order

    # ------------------------------------------------------------------ changes
    def put(self, info: ResourceInfo, key: ObjKey, obj: JsonObj, old: JsonObj | None) -> None:
        """Store `obj` at `key` (replacing `old`, the object indexed there, if any)."""
        bucket = self.bucket(info)
        if key not in bucket and (order := self._order.get(info.storage)) is not None:
            insort(order, key_string(key))
        bucket[key] = obj
        self.owners.committed((info.storage, key), old, obj)

    def remove(self, info: ResourceInfo, key: ObjKey, final: JsonObj, old: JsonObj) -> None:
        """Drop the object at `key` (`final` its last state, `old` the one indexed)."""
        bucket = self.bucket(info)
        if bucket.pop(key, None) is not None and (order := self._order.get(info.storage)) is not None:
            at = bisect_left(order, key_string(key))
            if at < len(order) and order[at] == key_string(key):
                del order[at]
        self.owners.removed((info.storage, key), final, old)

    def drop(self, storage: StorageKey) -> None:
        """Forget an emptied storage (its resource is no longer served)."""
        self._data.pop(storage, None)
        self._order.pop(storage, None)

    # ------------------------------------------------------------------ lookups for GC
    def by_uid(self, uid: str) -> Located | None:
        where = self.owners.locate(uid)
        if where is None:
            return None
        storage, key = where
        infos = self.registry.storage_infos(storage)
        obj = self.stored(storage, key)
        if not infos or obj is None:
            return None
        return self.primary(infos[0]), key, obj

    def dependents_of(self, uid: str) -> list[Located]:
        found: list[Located] = []
        for storage, key in self.owners.dependents(uid):
            infos = self.registry.storage_infos(storage)
            obj = self.stored(storage, key)
            if infos and obj is not None:
                found.append((self.primary(infos[0]), key, obj))
        return found

    def objects_in_namespace(self, namespace: str) -> list[Located]:
        found: list[Located] = []
        for storage, bucket in self._data.items():
            infos = self.registry.storage_infos(storage)
            if not infos or not infos[0].namespaced:
                continue
            info = self.primary(infos[0])
            found.extend((info, key, obj) for key, obj in bucket.items() if key[0] == namespace)
        return found
