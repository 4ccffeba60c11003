"""Discovery documents (/version, /api, /apis, per group and group/version), in the legacy
(unaggregated) form. kubectl asks for aggregated discovery first but accepts plain
`application/json`, which is what we always answer."""

from __future__ import annotations

from kaiwo_sandbox.contracts import JsonObj, ResourceInfo
from kaiwo_sandbox.registry import Registry

SERVER_VERSION: JsonObj = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.5",
    "gitCommit": "kaiwo-ray-sandbox",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.8",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def api_versions(server_address: str) -> JsonObj:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _group_versions(registry: Registry, group: str) -> JsonObj:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in registry.group_versions(group)]
    return {"name": group, "versions": versions, "preferredVersion": versions[0] if versions else {}}


def api_group_list(registry: Registry) -> JsonObj:
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_group_versions(registry, g) for g in registry.groups()]}


def api_group(registry: Registry, group: str) -> JsonObj | None:
    if group not in registry.groups():
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_versions(registry, group)}


def _resource_entries(info: ResourceInfo) -> list[JsonObj]:
    main: JsonObj = {"name": info.resource, "singularName": info.singular, "namespaced": info.namespaced,
                     "kind": info.kind, "verbs": list(info.verbs)}
    if info.short_names:
        main["shortNames"] = list(info.short_names)
    if info.categories:
        main["categories"] = list(info.categories)
    entries = [main]
    for sub in sorted(info.subresources):
        entry: JsonObj = {"name": f"{info.resource}/{sub}", "singularName": "", "namespaced": info.namespaced,
                          "kind": info.kind, "verbs": ["get", "patch", "update"]}
        if sub == "scale":
            entry.update(group="autoscaling", version="v1", kind="Scale")
        elif sub == "binding":
            entry.update(kind="Binding", verbs=["create"])
        elif sub == "eviction":
            entry.update(group="policy", version="v1", kind="Eviction", verbs=["create"])
        elif sub == "finalize":
            entry["verbs"] = ["update"]
        elif sub == "log":
            entry["verbs"] = ["get"]
        elif sub == "token":  # serviceaccounts/token: the TokenRequest API
            entry.update(group="authentication.k8s.io", version="v1", kind="TokenRequest", verbs=["create"])
        elif sub in ("exec", "portforward"):  # apiserver/streams/pods.py
            entry.update(kind="PodExecOptions" if sub == "exec" else "PodPortForwardOptions", verbs=["create", "get"])
        entries.append(entry)
    return entries


def api_resource_list(registry: Registry, group: str, version: str) -> JsonObj | None:
    infos = registry.in_group_version(group, version)
    if not infos:
        return None
    resources: list[JsonObj] = []
    for info in infos:
        resources.extend(_resource_entries(info))
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version, "resources": resources}
