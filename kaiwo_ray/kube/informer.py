"""List-then-watch for one kind, feeding a cache and an event callback (kopf's and client-go's loop).

1. LIST (paginated), replace the cache, emit synthesized events for what changed meanwhile;
2. WATCH from the list's resourceVersion with bookmarks and a server-side timeout;
3. when the server ends the stream (timeout), watch again from the last resourceVersion seen;
4. on 410 Gone (HTTP or an ERROR event) relist; on transport or server errors reconnect with
   exponential backoff (0.1 s doubling to 30 s), resetting after a healthy stream.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kaiwo_ray.kube.cache import ObjectCache
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import Gone, KubeError
from kaiwo_ray.kube.resources import Resource

log = logging.getLogger(__name__)

JsonObj = dict[str, Any]
EventHandler = Callable[[str, JsonObj, JsonObj | None], None]
"""(type ADDED|MODIFIED|DELETED, object, previous version or None)."""


@dataclass(slots=True)
class InformerSettings:
    watch_timeout_seconds: int = 300
    page_size: int = 500
    backoff_initial: float = 0.1
    backoff_max: float = 30.0


def _rv(obj: JsonObj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


class Informer:
    def __init__(self, client: KubeClient, resource: Resource, on_event: EventHandler, *,
                 namespace: str | None = None, label_selector: str | None = None,
                 cache: ObjectCache | None = None, settings: InformerSettings | None = None) -> None:
        self.client = client
        self.resource = resource
        self.on_event = on_event
        self.namespace = namespace
        self.label_selector = label_selector
        self.cache = cache if cache is not None else ObjectCache()  # an empty cache is falsy
        self.settings = settings or InformerSettings()
        self.synced = asyncio.Event()
        self.relists = 0
        self.reconnects = 0

    def _emit(self, kind: str, obj: JsonObj, old: JsonObj | None) -> None:
        try:
            self.on_event(kind, obj, old)
        except Exception:  # a handler bug must not kill the watch loop
            log.exception("%s: event handler failed", self.resource.plural)

    async def _relist(self) -> str:
        items, rv = await self.client.list_all(self.resource, self.namespace, label_selector=self.label_selector,
                                               page_size=self.settings.page_size)
        for item in items:  # list items carry no kind/apiVersion; restore them for consumers
            item.setdefault("kind", self.resource.kind)
            item.setdefault("apiVersion", self.resource.api_version)
        self.relists += 1
        for kind, obj, old in self.cache.replace_all(items, rv):
            self._emit(kind, obj, old)
        self.synced.set()
        return rv

    async def run(self) -> None:
        """Run until cancelled."""
        delay = self.settings.backoff_initial
        rv: str | None = None
        while True:
            try:
                if rv is None:
                    rv = await self._relist()
                rv = await self._watch_once(rv)
                delay = self.settings.backoff_initial  # a clean end (server timeout) is healthy
            except Gone:
                log.info("%s: resourceVersion %s expired, relisting", self.resource.plural, rv)
                rv = None
            except KubeError as err:
                self.reconnects += 1
                log.warning("%s: watch failed (%s), retrying in %.2fs", self.resource.plural, err, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.settings.backoff_max)

    async def _watch_once(self, rv: str) -> str:
        """One watch stream; returns the resourceVersion to resume from."""
        async for event in self.client.watch(self.resource, self.namespace, resource_version=rv,
                                             timeout_seconds=self.settings.watch_timeout_seconds,
                                             label_selector=self.label_selector):
            kind = event.get("type")
            obj = event.get("object") or {}
            if kind == "ERROR":
                code = obj.get("code")
                if code == 410:
                    raise Gone(410, "Expired", str(obj.get("message", "")), obj)
                raise KubeError(int(code or 0), str(obj.get("reason", "")), str(obj.get("message", "")), obj)
            new_rv = str((obj.get("metadata") or {}).get("resourceVersion", rv))
            if kind == "BOOKMARK":
                rv = new_rv
                self.cache.resource_version = rv
                continue
            if kind == "DELETED":
                old = self.cache.remove(obj)
                self._emit("DELETED", obj, old)
            elif kind in ("ADDED", "MODIFIED"):
                old = self.cache.upsert(obj)
                if old is not None and _rv(old) == new_rv:
                    pass  # already cached by our own write-through: nothing new to react to
                else:
                    self._emit("ADDED" if old is None else "MODIFIED", obj, old)
            rv = new_rv
            self.cache.resource_version = rv
        return rv
