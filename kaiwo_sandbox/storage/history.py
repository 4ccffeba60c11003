"""The store's recent past: a bounded ring of committed watch events, what watches resume from and
what lists at an older resourceVersion are rebuilt from (as etcd's revisions serve the apiserver).

Every event with a resourceVersion above `floor` is still in the ring; asking for anything older is
410 Gone, as after an etcd compaction."""

from __future__ import annotations

from collections import deque

from kaiwo_sandbox.contracts import ApiError, JsonObj, StorageKey, WatchEvent
from kaiwo_sandbox.storage.owners import ObjKey

EventList = list[WatchEvent]


class History:
    def __init__(self, limit: int) -> None:
        self._events: deque[WatchEvent] = deque()
        self._limit = limit
        self.floor = 0  # every event with rv > floor is still here

    def record(self, event: WatchEvent) -> None:
        self._events.append(event)
        if len(self._events) > self._limit:
            dropped = self._events.popleft()
            self.floor = dropped.resource_version

    def forget(self, up_to: int) -> None:
        """Drop every event (a restart, or fault injection): resuming from before `up_to` is 410."""
        self._events.clear()
        self.floor = up_to

    def require(self, rv: int) -> None:
        """410 Gone when events after `rv` are no longer all here."""
        if rv < self.floor:
            raise ApiError.gone(f"too old resource version: {rv} ({self.floor})")

    def since(self, storage: StorageKey, rv: int) -> EventList:
        """Events of `storage` newer than `rv`, oldest first; 410 when history no longer has them."""
        self.require(rv)
        newer: EventList = []
        for event in reversed(self._events):
            if event.resource_version <= rv:
                break
            if (event.gvr.group, event.gvr.resource) == storage:
                newer.append(event)
        newer.reverse()
        return newer

    def rewind(self, bucket: dict[ObjKey, JsonObj], storage: StorageKey, at_rv: int) -> dict[ObjKey, JsonObj]:
        """`bucket` (the storage now) as it was at `at_rv`, by undoing newer events."""
        past = dict(bucket)
        for event in reversed(self._events):
            if event.resource_version <= at_rv:
                break
            if (event.gvr.group, event.gvr.resource) != storage:
                continue
            meta = event.object.get("metadata") or {}
            key = (meta.get("namespace") or "", meta.get("name", ""))
            if event.type == "ADDED":
                past.pop(key, None)
            elif event.old is not None:
                past[key] = event.old
        return past
