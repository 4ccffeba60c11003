"""The aggregator's discovery manager (kube-aggregator 1.32 `handler_discovery.go`): what each APIService's
backend says its group/version serves, cached for the merged aggregated discovery document.

A backend is asked `GET /apis` for aggregated discovery (`BACKEND_ACCEPT`, `If-None-Match` with the
cached ETag) as `system:kube-aggregator`; an answer that is not an aggregated document sends it back to
the legacy `GET /apis/<group>/<version>`, converted. An APIService is synced again when it changes (its
Available condition included) and every minute; a sync that fails (the backend unavailable, an error
status, a transport error) keeps what was cached and marks the version `Stale`, or adds the version
with no resources and `Stale` where nothing was ever fetched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import orjson

from kaiwo_sandbox.apiserver import discovery_v2
from kaiwo_sandbox.apiserver.aggregation import registrations
from kaiwo_sandbox.apiserver.aggregation.registrations import Backend
from kaiwo_sandbox.contracts import JsonObj

log = logging.getLogger(__name__)

REFRESH_SECONDS = 60.0  # the discovery manager marks every external APIService dirty each minute
# (status, Content-Type, ETag, body) of a GET to the backend; OSError-like exceptions when none came.
Fetch = Callable[[Backend, str, list[tuple[str, str]]], Awaitable[tuple[int, str, str, bytes]]]
ServiceKey = tuple[str, str, int]


class FetchFailed(Exception):
    pass


@dataclass(slots=True)
class _Result:
    """What one Service's discovery said (many APIServices may share one Service)."""

    versions: dict[tuple[str, str], JsonObj] = field(default_factory=dict)
    etag: str = ""


@dataclass(slots=True)
class _Synced:
    resource_version: str
    at: float
    entry: JsonObj  # the version entry merged into the document, freshness included


class DiscoveryManager:
    def __init__(self, fetch: Fetch, *, refresh: float = REFRESH_SECONDS) -> None:
        self._fetch = fetch
        self._refresh = refresh
        self._results: dict[ServiceKey, _Result] = {}
        self._synced: dict[str, _Synced] = {}

    async def sync(self, apiservices: list[JsonObj]) -> None:
        """Sync every APIService that changed, is due, or failed last time; forget removed ones."""
        names = set()
        now = time.monotonic()
        for obj in apiservices:
            target = registrations.backend(obj)
            if target is None or not target.group:
                continue
            names.add(target.name)
            rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            done = self._synced.get(target.name)
            if (done is not None and done.resource_version == rv and now - done.at < self._refresh
                    and done.entry.get("freshness") == discovery_v2.CURRENT):
                continue
            self._synced[target.name] = _Synced(rv, now, await self._sync_one(target))
        for gone in set(self._synced) - names:
            del self._synced[gone]

    async def _sync_one(self, target: Backend) -> JsonObj:
        key = (target.namespace, target.service, target.port)
        cached = self._results.get(key)
        try:
            if not target.available:
                raise FetchFailed(f"service {key} unavailable: {target.message}")
            result = await self._fetch_service(target, cached)
        except Exception as exc:  # a backend that fails is shown Stale, never breaks the others
            log.debug("sandbox aggregator: discovery of %s failed: %s", target.name, exc)
            entry = (cached.versions.get((target.group, target.version)) if cached is not None else None) or \
                discovery_v2.version_entry(target.version, [])
            return {**entry, "freshness": discovery_v2.STALE}
        self._results[key] = result
        entry = result.versions.get((target.group, target.version)) or discovery_v2.version_entry(target.version, [])
        return {**entry, "freshness": discovery_v2.CURRENT}

    async def _fetch_service(self, target: Backend, cached: _Result | None) -> _Result:
        headers = [("Accept", discovery_v2.BACKEND_ACCEPT)]
        if cached is not None and cached.etag:
            headers.append(("If-None-Match", cached.etag))
        status, content_type, etag, body = await self._fetch(target, "/apis", headers)
        if status == 304 and cached is not None:
            return cached
        if status == 200 and discovery_v2.is_aggregated(content_type):
            return _Result(discovery_v2.versions_of(orjson.loads(body)), etag)
        if status not in (200, 404, 406):
            raise FetchFailed(f"non-success response code: {status}")
        # Legacy: the one group/version this APIService names.
        path = f"/apis/{target.group}/{target.version}"
        status, _, _, body = await self._fetch(target, path, [("Accept", "application/json")])
        if status != 200:
            raise FetchFailed(f"failed to download discovery for {path}: {status}")
        listed = orjson.loads(body)
        resources = discovery_v2.from_resource_list(list((listed or {}).get("resources") or []))
        return _Result({(target.group, target.version): discovery_v2.version_entry(target.version, resources)})

    def groups(self, apiservices: list[JsonObj], local: set[str]) -> list[JsonObj]:
        """The aggregated groups' items, in the legacy list's order (groupPriorityMinimum, then name;
        versions by versionPriority), each version as last synced; a version never synced is left out."""
        items = []
        for entry in registrations.aggregated_groups(apiservices, local):
            versions = []
            for listed in entry["versions"]:
                synced = self._synced.get(f"{listed['version']}.{entry['name']}")
                if synced is not None:
                    versions.append(synced.entry)
            if versions:
                items.append(discovery_v2.group_entry(entry["name"], versions))
        return items
