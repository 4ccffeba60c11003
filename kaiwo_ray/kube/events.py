"""Record core/v1 Events about objects, as controller-runtime's recorder does: best-effort and in the
background, so a reconcile never waits on, or fails because of, an Event. As client-go's broadcaster,
one sender writes them in the order they were emitted while it keeps up: Events are the bookkeeping
of writes that matter more (a workload's children), and at 100 workloads a second two Events each,
each sent at once on its own, came in bursts that queued the API server's answers to those writes
behind them. A backlog (a thousand new workloads at once) gets more senders, up to MAX_SENDERS, so
it drains at the API server's pace instead of trailing for a minute. `flush()` waits for what is
pending (graceful shutdown, tests).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import deque

from kaiwo_ray import clock
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import KubeError
from kaiwo_ray.kube.resources import EVENTS

log = logging.getLogger(__name__)


MAX_SENDERS = 8
SENDER_PER_QUEUED = 32  # one more sender (up to MAX_SENDERS) for every this many Events waiting

MAX_QUEUED_EVENTS = 10_000
"""Events waiting to be sent at most; more are dropped (counted, and logged once), as client-go's
broadcaster drops what its queue cannot take: an API server that cannot keep up must not grow us."""


class EventRecorder:
    def __init__(self, client: KubeClient, component: str, instance: str = "") -> None:
        self.client = client
        self.component = component
        self.instance = instance
        self.recorded = 0
        self.dropped = 0
        self._queue: deque[tuple[str, JsonObj]] = deque()
        self._senders: set[asyncio.Task[None]] = set()

    def emit(self, involved: JsonObj, event_type: str, reason: str, message: str) -> None:
        """Queue the Event for the background sender (needs a running loop). Its body is made now,
        so its timestamp and the involved object's resourceVersion are those of the moment."""
        if len(self._queue) >= MAX_QUEUED_EVENTS:
            if not self.dropped:
                log.warning("%s: %d Events queued; dropping more until the API server catches up",
                            self.component, MAX_QUEUED_EVENTS)
            self.dropped += 1
            return
        self._queue.append(self._event(involved, event_type, reason, message))
        wanted = min(MAX_SENDERS, 1 + len(self._queue) // SENDER_PER_QUEUED)
        if len(self._senders) < wanted:
            self._senders.add(asyncio.get_running_loop().create_task(self._send_queued()))

    async def _send_queued(self) -> None:
        try:
            while self._queue:
                namespace, event = self._queue.popleft()
                await self._create(namespace, event)
        finally:
            # Gone from the set in the same step that found the queue empty: were it left to a done
            # callback (the next loop iteration), an Event emitted meanwhile would find a sender
            # that no longer sends, and wait for the next emit.
            current = asyncio.current_task()
            if current is not None:
                self._senders.discard(current)

    async def flush(self) -> None:
        while self._senders:
            await asyncio.wait(set(self._senders))

    async def record(self, involved: JsonObj, event_type: str, reason: str, message: str) -> None:
        """Send one Event now (a caller that wants it written before it goes on)."""
        await self._create(*self._event(involved, event_type, reason, message))

    def _event(self, involved: JsonObj, event_type: str, reason: str, message: str) -> tuple[str, JsonObj]:
        meta = involved.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        now = clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        return namespace, {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta.get('name', 'object')}.{secrets.token_hex(8)}", "namespace": namespace},
            "involvedObject": {
                "apiVersion": involved.get("apiVersion", ""), "kind": involved.get("kind", ""),
                "name": meta.get("name", ""), "namespace": meta.get("namespace", ""), "uid": meta.get("uid", ""),
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "reason": reason,
            "message": message[:1024],
            "type": event_type,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }

    async def _create(self, namespace: str, event: JsonObj) -> None:
        try:
            await self.client.create(EVENTS, event, namespace, answer=False)
            self.recorded += 1
        except KubeError as err:  # losing an event must never fail a reconcile
            log.debug("event %s on %s/%s not recorded: %s", event["reason"], namespace,
                      event["involvedObject"]["name"], err)
