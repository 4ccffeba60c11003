"""Record core/v1 Events about objects, as controller-runtime's recorder does: best-effort and in the
background (client-go's broadcaster), so a reconcile never waits on, or fails because of, an Event.
`flush()` waits for what is pending (graceful shutdown, tests)."""

from __future__ import annotations

import asyncio
import logging
import secrets
from datetime import UTC, datetime
from typing import Any

from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import KubeError
from kaiwo_ray.kube.resources import EVENTS

log = logging.getLogger(__name__)


class EventRecorder:
    def __init__(self, client: KubeClient, component: str, instance: str = "") -> None:
        self.client = client
        self.component = component
        self.instance = instance
        self.recorded = 0
        self._pending: set[asyncio.Task[None]] = set()

    def emit(self, involved: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        """Send the Event in the background (needs a running loop)."""
        task = asyncio.get_running_loop().create_task(self.record(involved, event_type, reason, message))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def flush(self) -> None:
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def record(self, involved: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        meta = involved.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
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
        try:
            await self.client.create(EVENTS, event, namespace)
            self.recorded += 1
        except KubeError as err:  # losing an event must never fail a reconcile
            log.debug("event %s on %s/%s not recorded: %s", reason, namespace, meta.get("name"), err)
