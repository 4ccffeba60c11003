"""Cluster DNS for real pods: every real pod's /etc/hosts names each Service by its cluster names,
pointing at the real pods behind it (`runtime/podspec.hosts_file`). Rewritten whenever a pod or a
Service changes, as CoreDNS answers from the endpoints it watches. Does nothing without real pods.
"""

from __future__ import annotations

from collections.abc import Iterable

from kaiwo_sandbox.cluster.base import Controller, Key
from kaiwo_sandbox.contracts import PODS, SERVICES, JsonObj, WatchEvent
from kaiwo_sandbox.runtime.podspec import hosts_file, service_endpoints

ALL = "hosts"


class LocalDns(Controller):
    name = "local-dns"
    watches = (PODS, SERVICES)

    def keys_for(self, event: WatchEvent) -> Iterable[Key]:
        return [ALL] if self.settings.local_runtime is not None else []

    def initial_keys(self) -> Iterable[Key]:
        return [ALL] if self.settings.local_runtime is not None else []

    def reconcile(self, key: Key) -> float | None:
        runtime = self.settings.local_runtime
        if runtime is None:
            return None
        local_pods = runtime.pods()
        if not local_pods:
            return None
        reachable = runtime.reachable()
        pods, _ = self.store.list(PODS)
        services, _ = self.store.list(SERVICES)
        entries: list[tuple[str, str, list[str]]] = []
        for service in services:
            meta: JsonObj = service.get("metadata") or {}
            ips = service_endpoints(service, pods, reachable)
            if ips:
                entries.append((str(meta.get("namespace", "")), str(meta.get("name", "")), ips))
        for local in local_pods:
            runtime.write_hosts(local, hosts_file(local.ip, local.name[:63], local.namespace, entries, runtime.api_host))
        return None
