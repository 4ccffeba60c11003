"""An in-memory cache of one kind, with secondary indexes by owner UID and by chosen label keys.

Controllers read children from here instead of listing the API on every reconcile: that is what
makes a no-op resync cost zero API calls. Objects are stored as received (plain dicts) minus their
`metadata.managedFields`, and must be treated as read-only by readers.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator

from kaiwo_ray.api.jsonobj import JsonObj

ObjectKey = tuple[str, str]  # (namespace or "", name)
Transform = Callable[[JsonObj], JsonObj]
"""What of each object a cache keeps (client-go's SetTransform): a controller that reads a few fields
of a large kind caches those only. It must keep `metadata.name`, `namespace` and `resourceVersion`,
and whatever the cache indexes (labels, ownerReferences, `status.status`)."""
TOMBSTONES = 4096
"""How many removed keys a cache remembers (with the resourceVersion they went at), so that the answer
to a write made before the removal is not written back in. The answer is processed within moments of
the removal; thousands of later removals in between would take far longer."""


def object_key(obj: JsonObj) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


class ObjectCache:
    def __init__(self, *, label_keys: Iterable[str] = (), transform: Transform | None = None) -> None:
        # Applied by whoever stores: the informer as objects arrive (a list page by page), and
        # `upsert_if_newer` to a write's answer.
        self.transform = transform
        self._objects: dict[ObjectKey, JsonObj] = {}
        self._by_owner: dict[str, set[ObjectKey]] = {}
        self._label_keys = tuple(label_keys)
        self._by_label: dict[tuple[str, str], set[ObjectKey]] = {}
        # By `status.status` (Kaiwo's phase; objects without a string there are not indexed): the
        # duration rules ask for every PENDING workload on every pass of a RUNNING one.
        self._by_phase: dict[str, set[ObjectKey]] = {}
        self.resource_version = ""
        self._snapshot: tuple[JsonObj, ...] | None = None  # `snapshot()`, until the next change
        # Removed keys -> the resourceVersion they were removed at, oldest first (`upsert_if_newer`).
        self._tombstones: OrderedDict[ObjectKey, str] = OrderedDict()
        # Each key's place in iteration order (when it was added): `in_order`.
        self._positions: dict[ObjectKey, int] = {}
        self._added = 0

    def __len__(self) -> int:
        return len(self._objects)

    def __iter__(self) -> Iterator[JsonObj]:
        return iter(list(self._objects.values()))

    def snapshot(self) -> tuple[JsonObj, ...]:
        """Every object, as one tuple that stays the same object until the cache changes: a caller
        may key a memo on its identity (the nodes' GPU counts, read by every reconcile, are worked
        out once per change of the nodes instead of once per reconcile)."""
        if self._snapshot is None:
            self._snapshot = tuple(self._objects.values())
        return self._snapshot

    def kept(self, obj: JsonObj) -> JsonObj:
        """`obj` as this cache stores it (its transform applied)."""
        return obj if self.transform is None else self.transform(obj)

    def get(self, namespace: str | None, name: str) -> JsonObj | None:
        return self._objects.get((namespace or "", name))

    def owned_by(self, owner_uid: str) -> list[JsonObj]:
        return [self._objects[k] for k in sorted(self._by_owner.get(owner_uid, ()))]

    def with_label(self, key: str, value: str) -> list[JsonObj]:
        if key not in self._label_keys:
            raise KeyError(f"label {key!r} is not indexed (indexed: {self._label_keys})")
        return [self._objects[k] for k in sorted(self._by_label.get((key, value), ()))]

    def in_order(self, keys: Iterable[ObjectKey]) -> list[JsonObj]:
        """The cached objects among `keys`, in the order iterating the cache gives them: a caller that
        knows which few objects can matter reads them as a scan of the whole cache would meet them."""
        present = [key for key in set(keys) if key in self._objects]
        present.sort(key=self._positions.__getitem__)
        return [self._objects[key] for key in present]

    def in_phase(self, phase: str) -> list[JsonObj]:
        """Objects whose `status.status` is `phase`."""
        return [self._objects[k] for k in self._by_phase.get(phase, ())]

    def upsert(self, obj: JsonObj) -> JsonObj | None:
        """Store `obj` (without its managedFields: no controller reads them, and on a real cluster they
        are often the bulk of a small object); return the previous version (None when new)."""
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)  # objects arrive freshly decoded: ours to trim
        key = object_key(obj)
        old = self._objects.get(key)
        if old is not None:
            self._unindex(key, old)
        else:
            self._positions[key] = self._added
            self._added += 1
        self._snapshot = None
        self._objects[key] = obj
        self._index(key, obj)
        return old

    def upsert_if_newer(self, obj: JsonObj, *, update_only: bool = False) -> bool:
        """Write-through after our own write: store the server's answer unless the watch already
        delivered something as new or newer, its removal included (resourceVersions are compared as
        integers when they are). An answer older than a removal the watch delivered first would
        bring back an object that no event will ever remove. `update_only`: store it only over a
        cached version (a delete's answer, the object now deleting, never adds one)."""
        key, version = object_key(obj), _rv(obj)
        current = self._objects.get(key)
        if current is None:
            removed_at = self._tombstones.get(key)
            if update_only or (removed_at is not None and _newer_or_same(removed_at, version)):
                return False
        elif _newer_or_same(_rv(current), version):
            return False
        self.upsert(self.kept(obj))
        return True

    def remove(self, obj: JsonObj, *, removed_at: str | None = None) -> JsonObj | None:
        """Forget `obj`, remembering the resourceVersion it went at: `removed_at`, or the removed
        object's own (a watch's DELETED event carries the version of the deletion)."""
        key = object_key(obj)
        old = self._objects.pop(key, None)
        if old is not None:
            self._unindex(key, old)
            del self._positions[key]
            self._snapshot = None
        self._tombstones.pop(key, None)
        self._tombstones[key] = removed_at if removed_at is not None else _rv(obj)
        if len(self._tombstones) > TOMBSTONES:
            self._tombstones.popitem(last=False)
        return old

    def replace_all(self, objs: list[JsonObj], resource_version: str) -> list[tuple[str, JsonObj, JsonObj | None]]:
        """Swap in a fresh list (after a relist) and return the synthesized events that explain the
        difference: ADDED/MODIFIED (resourceVersion changed) and DELETED for objects that vanished
        while we were not watching."""
        events: list[tuple[str, JsonObj, JsonObj | None]] = []
        seen: set[ObjectKey] = set()
        for obj in objs:
            key = object_key(obj)
            seen.add(key)
            old = self.upsert(obj)
            if old is None:
                events.append(("ADDED", obj, None))
            elif _rv(old) != _rv(obj):
                events.append(("MODIFIED", obj, old))
        for key in [k for k in self._objects if k not in seen]:
            gone = self._objects[key]
            self.remove(gone, removed_at=resource_version)  # gone by the list's version at the latest
            events.append(("DELETED", gone, gone))
        self.resource_version = resource_version
        return events

    def _index(self, key: ObjectKey, obj: JsonObj) -> None:
        meta = obj.get("metadata") or {}
        for ref in meta.get("ownerReferences") or ():
            uid = ref.get("uid")
            if uid:
                self._by_owner.setdefault(uid, set()).add(key)
        labels = meta.get("labels") or {}
        for label in self._label_keys:
            value = labels.get(label)
            if value is not None:
                self._by_label.setdefault((label, value), set()).add(key)
        phase = _phase(obj)
        if phase is not None:
            self._by_phase.setdefault(phase, set()).add(key)

    def _unindex(self, key: ObjectKey, obj: JsonObj) -> None:
        meta = obj.get("metadata") or {}
        for ref in meta.get("ownerReferences") or ():
            keys = self._by_owner.get(ref.get("uid", ""))
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_owner[ref["uid"]]
        labels = meta.get("labels") or {}
        for label in self._label_keys:
            value = labels.get(label)
            if value is None:
                continue
            keys = self._by_label.get((label, value))
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_label[(label, value)]
        phase = _phase(obj)
        if phase is not None:
            keys = self._by_phase.get(phase)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_phase[phase]


def _phase(obj: JsonObj) -> str | None:
    status = obj.get("status")
    phase = status.get("status") if isinstance(status, dict) else None
    return phase if isinstance(phase, str) else None


def _newer_or_same(ra: str, rb: str) -> bool:
    """Is resourceVersion `ra` at least as new as `rb`? Unknown orderings count as not newer (rb wins)."""
    if ra == rb:
        return True
    if ra.isdigit() and rb.isdigit():
        return int(ra) > int(rb)
    return False


def _rv(obj: JsonObj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))
