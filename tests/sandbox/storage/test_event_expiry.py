"""The periodic event expiry reads only the events due (a heap kept from the store's notifications)
and deletes exactly what a pass over every event would."""

from __future__ import annotations

import asyncio
from datetime import timedelta, timezone

from kaiwo_sandbox.contracts import EVENTS, NAMESPACES, JsonObj, rfc3339
from kaiwo_sandbox.storage.event_ttl import EventExpiry
from kaiwo_sandbox.storage.store import ObjectStore


def _event(name: str, stamp: str) -> JsonObj:
    return {"metadata": {"name": name}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "R",
            "message": "m", "type": "Normal", "lastTimestamp": stamp}


def _names(store: ObjectStore) -> list[str]:
    return sorted(e["metadata"]["name"] for e in store.list(EVENTS)[0])


def test_the_periodic_expiry_deletes_what_is_due_and_keeps_what_was_seen_again() -> None:
    store = ObjectStore()
    store.create(NAMESPACES, {"metadata": {"name": "default"}})
    now = store.clock.now()
    old, fresh = rfc3339(now - timedelta(hours=2)), rfc3339(now - timedelta(seconds=5))
    offset_old = (now - timedelta(hours=2)).astimezone(timezone(timedelta(hours=2))).strftime("%Y-%m-%dT%H:%M:%S+02:00")
    store.create(EVENTS, _event("before-start", old), namespace="default")  # there before the expiry started

    async def body() -> tuple[int, int]:
        expiry = EventExpiry(store, ttl_seconds=3600, interval=3600)
        expiry.start()
        try:
            for name, stamp in (("old", old), ("fresh", fresh), ("seen-again", old), ("offset-old", offset_old),
                                ("renamed-stamp", offset_old)):
                store.create(EVENTS, _event(name, stamp), namespace="default")
            store.patch(EVENTS, "default", "seen-again", {"lastTimestamp": fresh}, "merge")
            store.patch(EVENTS, "default", "renamed-stamp", {"lastTimestamp": fresh}, "merge")  # now `...Z`, fresh
            first = await expiry.expire_due()
            store.patch(EVENTS, "default", "fresh", {"lastTimestamp": old}, "merge")  # seen "earlier": due now
            second = await expiry.expire_due()
            return first, second
        finally:
            await expiry.stop()

    assert asyncio.run(body()) == (3, 1)
    assert _names(store) == ["renamed-stamp", "seen-again"]
