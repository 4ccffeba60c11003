"""Where each object lives by uid, and which objects name a uid as their owner: the indexes the
garbage collector walks (a real apiserver's GC builds the same graph from its informers).

Pure bookkeeping over (storage, key) locations; the store updates it on every commit and removal
and resolves locations to objects."""

from __future__ import annotations

from kaiwo_sandbox.contracts import JsonObj, StorageKey

ObjKey = tuple[str, str]  # (namespace or "", name)
Location = tuple[StorageKey, ObjKey]


class OwnerIndex:
    def __init__(self) -> None:
        self._by_uid: dict[str, Location] = {}
        self._dependents: dict[str, set[Location]] = {}

    def committed(self, where: Location, old: JsonObj | None, new: JsonObj) -> None:
        """`new` is now stored at `where` (replacing `old`, if any)."""
        uid = new["metadata"].get("uid")
        if uid:
            self._by_uid[uid] = where
        self._reindex(where, old, new)

    def removed(self, where: Location, final: JsonObj, old: JsonObj) -> None:
        """The object at `where` is gone (`final` its last state, `old` the one last indexed)."""
        uid = final["metadata"].get("uid")
        if uid:
            self._by_uid.pop(uid, None)
        self._reindex(where, old, None)

    def locate(self, uid: str) -> Location | None:
        return self._by_uid.get(uid)

    def dependents(self, uid: str) -> list[Location]:
        """Where the objects naming `uid` in their ownerReferences are (a copy: safe to mutate during)."""
        return list(self._dependents.get(uid, ()))

    def _reindex(self, where: Location, old: JsonObj | None, new: JsonObj | None) -> None:
        before = owner_uids(old)
        after = owner_uids(new)
        if before == after:
            return
        for uid in before - after:
            dependents = self._dependents.get(uid)
            if dependents is not None:
                dependents.discard(where)
                if not dependents:
                    del self._dependents[uid]
        for uid in after - before:
            if uid:
                self._dependents.setdefault(uid, set()).add(where)


def owner_uids(obj: JsonObj | None) -> set[str]:
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or ()
    return {str(r["uid"]) for r in refs if isinstance(r, dict) and r.get("uid")}
