"""Events expire, as etcd's lease on them does (kube-apiserver `--event-ttl`, 1 h by default): a
long `make dev` session with chatty simulated controllers would otherwise grow without bound.
Expired events are deleted through the store, so watchers see DELETED like on a real cluster."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
from collections.abc import Callable
from datetime import datetime, timedelta

from kaiwo_sandbox.contracts import EVENTS, ApiError, JsonObj, WatchEvent, rfc3339
from kaiwo_sandbox.semantics.times import parse_time
from kaiwo_sandbox.storage.store import ObjectStore

EXPIRY_USER = "system:apiserver"


def _last_seen(event: JsonObj) -> str:
    meta = event.get("metadata") or {}
    return str(event.get("lastTimestamp") or event.get("eventTime") or meta.get("creationTimestamp") or "")


SLICE = 2_000  # events looked at between two turns of the event loop


def _expired(event: JsonObj, cutoff: datetime, cutoff_text: str) -> bool:
    seen_text = _last_seen(event)
    if len(seen_text) >= 20 and seen_text[10] == "T" and seen_text.endswith("Z"):
        return seen_text[:19] < cutoff_text  # the common case, without parsing (to the second)
    seen = parse_time(seen_text)
    return seen is not None and seen <= cutoff


def _second_of(event: JsonObj) -> str | None:
    """The last-seen second `_expired` compares as text, or None for a stamp it parses."""
    seen_text = _last_seen(event)
    if len(seen_text) >= 20 and seen_text[10] == "T" and seen_text.endswith("Z"):
        return seen_text[:19]
    return None


def _cutoff(store: ObjectStore, ttl_seconds: float) -> tuple[datetime, str]:
    cutoff = store.clock.now() - timedelta(seconds=ttl_seconds)
    return cutoff, rfc3339(cutoff)[:19]  # YYYY-MM-DDTHH:MM:SS, comparable as text in UTC


def _expire(store: ObjectStore, events: list[JsonObj], cutoff: datetime, cutoff_text: str) -> int:
    expired = 0
    for event in events:
        if not _expired(event, cutoff, cutoff_text):
            continue
        meta = event["metadata"]
        current = store.find_ref(EVENTS, meta.get("namespace"), meta["name"])
        if current is None or (current is not event and not _expired(current, cutoff, cutoff_text)):
            continue  # gone, or seen again since the scan began
        with contextlib.suppress(ApiError):
            store.delete_ref(EVENTS, meta.get("namespace"), meta["name"], user=EXPIRY_USER)
            expired += 1
    return expired


def expire_events(store: ObjectStore, ttl_seconds: float) -> int:
    """Delete core/v1 events last seen more than `ttl_seconds` ago; returns how many. Reads the stored
    events in place: listing them (a copy of each, sorted) every minute held the API server for 1-2 s
    at 30,000 events (the p99 of create -> child Job in benchmarks/operator.py --scale 10000)."""
    cutoff, cutoff_text = _cutoff(store, ttl_seconds)
    return _expire(store, store.refs(EVENTS), cutoff, cutoff_text)


async def expire_events_in_slices(store: ObjectStore, ttl_seconds: float, slice_size: int = SLICE) -> int:
    """`expire_events` a slice at a time, the API server served between slices: etcd expires each
    event's lease on its own, never the whole store at once, and one pass over 35,000 events held the
    loop for ~40 ms (a spell in the 100 CR/s tail of benchmarks/operator.py at 10,000 KaiwoJobs)."""
    cutoff, cutoff_text = _cutoff(store, ttl_seconds)
    events = store.refs(EVENTS)
    expired = 0
    for start in range(0, len(events), slice_size):
        expired += _expire(store, events[start:start + slice_size], cutoff, cutoff_text)
        await asyncio.sleep(0)
    return expired


class EventExpiry:
    """Expires events periodically on the sandbox's loop, as `expire_events_in_slices` would, without
    looking at every event on every pass: the store's notifications keep the events in order of their
    last-seen second (a heap; an event seen again gets a newer entry and its older one is passed
    over), so a pass reads only the events due. Stamps in another format than `...Z` are kept aside
    and read on every pass. In a long simulation the minute's pass over an hour of events was 4 % of
    the time; the API server is still served once per slice of events, as before."""

    def __init__(self, store: ObjectStore, ttl_seconds: float, interval: float = 60.0) -> None:
        self.store = store
        self.ttl = ttl_seconds
        self.interval = interval
        self._task: asyncio.Task[None] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._due: list[tuple[str, str, str]] = []  # (last-seen second, namespace, name), a heap
        self._other: set[tuple[str, str]] = set()  # events with another stamp format

    def start(self) -> None:
        self._unsubscribe = self.store.subscribe(self._on_event)
        for event in self.store.refs(EVENTS):
            self._note(event)
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="sandbox-event-ttl")

    def _on_event(self, event: WatchEvent) -> None:
        if event.type != "DELETED" and event.gvr.resource == EVENTS.resource and event.gvr.group == EVENTS.group:
            self._note(event.object)

    def _note(self, event: JsonObj) -> None:
        meta = event.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        second = _second_of(event)
        if second is None:
            self._other.add(key)
        else:
            heapq.heappush(self._due, (second, *key))

    async def expire_due(self, slice_size: int = SLICE) -> int:
        """One pass: delete the events last seen before the TTL; returns how many."""
        cutoff, cutoff_text = _cutoff(self.store, self.ttl)
        due: list[JsonObj] = []
        while self._due and self._due[0][0] < cutoff_text:
            second, namespace, name = heapq.heappop(self._due)
            current = self.store.find_ref(EVENTS, namespace or None, name)
            if current is not None and _second_of(current) == second:  # else gone, or seen again since
                due.append(current)
        for namespace, name in sorted(self._other):
            current = self.store.find_ref(EVENTS, namespace or None, name)
            if current is None or _second_of(current) is not None:
                self._other.discard((namespace, name))  # gone, or now in the heap
            else:
                due.append(current)
        slices = -(-len(self.store.refs(EVENTS)) // slice_size)
        expired = _expire(self.store, due, cutoff, cutoff_text)
        for _ in range(slices):
            await asyncio.sleep(0)
        return expired

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.expire_due()

    async def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
