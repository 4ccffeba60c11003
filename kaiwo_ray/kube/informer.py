"""List-then-watch for one kind, feeding a cache and an event callback (kopf's and client-go's loop).

1. LIST (paginated), replace the cache, emit synthesized events for what changed meanwhile;
2. WATCH from the list's resourceVersion with bookmarks and a server-side timeout;
3. when the server ends the stream (timeout), or it stays silent longer than `watch_idle_seconds`
   (a half-open connection: the server sends bookmarks, so a live stream is never that quiet),
   watch again from the last resourceVersion seen;
4. on 410 Gone (HTTP or an ERROR event) relist; on transport or server errors reconnect with
   exponential backoff with jitter (0.1 s doubling to 30 s), resetting after a healthy stream;
5. on anything else (a garbled line, a bug) the loop does not die: back off, then relist, since the
   cache may have missed an event. While it is broken `healthy` is False (`health()` says unsynced).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.kube.cache import ObjectCache
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import Gone, KubeError, WatchIdle
from kaiwo_ray.kube.projection import PageDecoder
from kaiwo_ray.kube.resources import Resource

log = logging.getLogger(__name__)

EventHandler = Callable[[str, JsonObj, JsonObj | None], None]
"""(type ADDED|MODIFIED|DELETED, object, previous version or None)."""


@dataclass(slots=True)
class InformerSettings:
    # Watches are asked to end after this long: the API server sends a bookmark 2 s before a watch's
    # deadline (and once a minute besides), so a live stream is never silent for more than 53 s and
    # resumes from a fresh resourceVersion. Left at client-go's 5-10 min, a quiet kind's stream
    # would be silent for a whole bookmark minute, and an idle timeout under a minute cut it before
    # its first bookmark: it resumed from its list's resourceVersion, got 410 and relisted, once a
    # minute per quiet kind (at 16,000 KaiwoJobs in the sandbox those relists held its API for
    # 1-4 s, the whole p99 of create -> child Job at 100 CR/s).
    watch_timeout_seconds: int = 55
    # A stream silent for this long is taken for dead (a half-open connection) and reopened.
    watch_idle_seconds: float = 60.0
    page_size: int = 500
    backoff_initial: float = 0.1
    backoff_max: float = 30.0


def _rv(obj: JsonObj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


class Informer:
    def __init__(self, client: KubeClient, resource: Resource, on_event: EventHandler, *,
                 namespace: str | None = None, label_selector: str | None = None,
                 cache: ObjectCache | None = None, settings: InformerSettings | None = None,
                 page_decoder: PageDecoder | None = None) -> None:
        self.client = client
        self.page_decoder = page_decoder  # decodes list pages to the fields the cache keeps (`projection`)
        self.resource = resource
        self.on_event = on_event
        self.namespace = namespace
        self.label_selector = label_selector
        self.cache = cache if cache is not None else ObjectCache()  # an empty cache is falsy
        self.settings = settings or InformerSettings()
        self.synced = asyncio.Event()
        self.relists = 0
        self.reconnects = 0
        self.crashes = 0  # errors that were not API errors (the loop went on with a relist)
        self.healthy = True  # False from an error until the next successful list or watch
        self.last_error: KubeError | None = None  # the last API error, for start-up diagnostics

    def _emit(self, kind: str, obj: JsonObj, old: JsonObj | None) -> None:
        try:
            self.on_event(kind, obj, old)
        except Exception:  # a handler bug must not kill the watch loop
            log.exception("%s: event handler failed", self.resource.plural)

    async def _relist(self) -> str:
        items, rv = await self.client.list_all(self.resource, self.namespace, label_selector=self.label_selector,
                                               page_size=self.settings.page_size, each=self._listed,
                                               decode=self.page_decoder)
        self.relists += 1
        for kind, obj, old in self.cache.replace_all(items, rv):
            self._emit(kind, obj, old)
        self.healthy = True
        self.synced.set()
        return rv

    def _listed(self, item: JsonObj) -> JsonObj:
        item.setdefault("kind", self.resource.kind)  # list items carry no kind/apiVersion; restore them
        item.setdefault("apiVersion", self.resource.api_version)
        return self.cache.kept(item)  # as each page arrives: see KubeClient.list_all

    def _backoff(self, delay: float) -> float:
        """`delay` with full jitter over its upper half, so informers cut together do not return together."""
        return delay * (0.5 + random.random() / 2)

    async def run(self) -> None:
        """Run until cancelled; no error ends it."""
        delay = self.settings.backoff_initial
        rv: str | None = None
        while True:
            try:
                if rv is None:
                    rv = await self._relist()
                    self.last_error = None
                rv = await self._watch_once(rv)
                self.healthy = True
                delay = self.settings.backoff_initial  # a clean end (server timeout) is healthy
            except WatchIdle as err:  # likely a half-open connection: a fresh one at once
                log.info("%s: %s; reconnecting", self.resource.plural, err)
                self.reconnects += 1
            except Gone:
                log.info("%s: resourceVersion %s expired, relisting", self.resource.plural, rv)
                rv = None
            except KubeError as err:
                self.reconnects += 1
                self.last_error = err
                self.healthy = False
                wait = self._backoff(delay)
                log.warning("%s: watch failed (%s), retrying in %.2fs", self.resource.plural, err, wait)
                await asyncio.sleep(wait)
                delay = min(delay * 2, self.settings.backoff_max)
            except asyncio.CancelledError:
                raise
            except Exception:  # a garbled line, a bug: never let the cache die with the loop
                self.crashes += 1
                self.healthy = False
                wait = self._backoff(delay)
                log.exception("%s: informer error, relisting in %.2fs", self.resource.plural, wait)
                rv = None  # events may have been lost: start over from a list
                await asyncio.sleep(wait)
                delay = min(delay * 2, self.settings.backoff_max)

    def _mark_healthy(self) -> None:
        self.healthy = True

    async def _watch_once(self, rv: str) -> str:
        """One watch stream; returns the resourceVersion to resume from."""
        async for event in self.client.watch(self.resource, self.namespace, resource_version=rv,
                                             timeout_seconds=self.settings.watch_timeout_seconds,
                                             label_selector=self.label_selector,
                                             idle_timeout=self.settings.watch_idle_seconds,
                                             on_open=self._mark_healthy):
            self.healthy = True
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
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                obj = self.cache.kept(obj)
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
