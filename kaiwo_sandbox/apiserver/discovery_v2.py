"""Aggregated discovery (apidiscovery.k8s.io/v2, and v2beta1 which kubectl still asks for): `/api` and
`/apis` as one APIGroupDiscoveryList each, for a client whose Accept names that profile
(k8s.io/apiserver `endpoints/discovery/aggregated`: negotiation.go, handler.go, wrapper.go). Pure:
the Accept negotiation, the documents, and the conversion of a legacy APIResourceList into discovery
resources (k8s.io/apiserver `endpoints.ConvertGroupVersionIntoToDiscovery`), which the aggregator
uses for a backend that serves no aggregated discovery of its own.
"""

from __future__ import annotations

import hashlib
from typing import Any

from kaiwo_sandbox.apiserver import discovery
from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.registry import Registry

GROUP = "apidiscovery.k8s.io"
KIND = "APIGroupDiscoveryList"
VERSIONS = ("v2", "v2beta1")
CURRENT, STALE = "Current", "Stale"


def media_type(version: str) -> str:
    return f"application/json;g={GROUP};v={version};as={KIND}"


# What the aggregator asks each backend for (kube-aggregator 1.32), most preferred first.
BACKEND_ACCEPT = ",".join(media_type(v) for v in VERSIONS)


def _params(media_range: str) -> tuple[str, dict[str, str]]:
    kind, *rest = (part.strip() for part in media_range.split(";"))
    params = {}
    for part in rest:
        key, _, value = part.partition("=")
        params[key.strip().lower()] = value.strip().strip('"')
    return kind.lower(), params


def negotiate(accept: str) -> str | None:
    """The apidiscovery version the Accept header's first matching media range asks for (JSON only),
    or None: the legacy documents then. A range of any other kind that comes first wins too, as the
    real server's negotiation takes the client's order."""
    for media_range in accept.split(","):
        if not media_range.strip():
            continue
        kind, params = _params(media_range)
        if params.get("g") == GROUP and params.get("as") == KIND:
            if kind == "application/json" and params.get("v") in VERSIONS:
                return params["v"]
            continue  # protobuf, or a version this server does not serve: try the next
        if kind in ("application/json", "*/*", "application/*", "application/yaml",
                    "application/vnd.kubernetes.protobuf"):
            return None
    return None


def is_aggregated(content_type: str) -> bool:
    """Whether a backend's answer is an aggregated discovery document (its Content-Type's profile)."""
    kind, params = _params(content_type)
    return kind == "application/json" and params.get("g") == GROUP and params.get("as") == KIND \
        and params.get("v") in VERSIONS


def etag(body: bytes) -> str:
    """A strong ETag over the document, quoted, as the discovery handler sets it."""
    return '"' + hashlib.sha512(body).hexdigest()[:32].upper() + '"'


def _response_kind(group: str, version: str, kind: str) -> JsonObj:
    return {"group": group, "version": version, "kind": kind}


def from_resource_list(api_resources: list[JsonObj]) -> list[JsonObj]:
    """Discovery resources of an APIResourceList's entries: a `name/sub` entry becomes a subresource of
    its parent (kept in the list's order); scope from `namespaced`."""
    resources: list[JsonObj] = []
    by_name: dict[str, JsonObj] = {}
    for entry in api_resources:
        name = str(entry.get("name") or "")
        if "/" in name:
            continue
        resource: JsonObj = {
            "resource": name,
            "responseKind": _response_kind(str(entry.get("group") or ""), str(entry.get("version") or ""),
                                           str(entry.get("kind") or "")),
            "scope": "Namespaced" if entry.get("namespaced") else "Cluster",
            "singularResource": str(entry.get("singularName") or ""),
            "verbs": list(entry.get("verbs") or []),
        }
        for source, target in (("shortNames", "shortNames"), ("categories", "categories")):
            if entry.get(source):
                resource[target] = list(entry[source])
        resources.append(resource)
        by_name[name] = resource
    for entry in api_resources:
        parent, _, sub = str(entry.get("name") or "").partition("/")
        if not sub or parent not in by_name:
            continue
        by_name[parent].setdefault("subresources", []).append({
            "subresource": sub,
            "responseKind": _response_kind(str(entry.get("group") or ""), str(entry.get("version") or ""),
                                           str(entry.get("kind") or "")),
            "verbs": list(entry.get("verbs") or [])})
    return resources


def version_entry(version: str, resources: list[JsonObj], freshness: str = CURRENT) -> JsonObj:
    entry: JsonObj = {"version": version}
    if resources:
        entry["resources"] = resources
    entry["freshness"] = freshness
    return entry


def group_entry(group: str, versions: list[JsonObj]) -> JsonObj:
    metadata: JsonObj = {"name": group, "creationTimestamp": None} if group else {"creationTimestamp": None}
    return {"metadata": metadata, "versions": versions}


def local_group(registry: Registry, group: str) -> JsonObj:
    """A group this server serves itself (built-in or CRD): every served version, preferred first."""
    versions = []
    for version in (registry.group_versions(group) if group else ["v1"]):
        listed = discovery.api_resource_list(registry, group, version)
        versions.append(version_entry(version, from_resource_list((listed or {}).get("resources") or [])))
    return group_entry(group, versions)


def document(items: list[JsonObj], version: str) -> JsonObj:
    return {"kind": KIND, "apiVersion": f"{GROUP}/{version}", "metadata": {}, "items": items}


def core(registry: Registry, version: str) -> JsonObj:
    """`/api`: the legacy core group, one item without a name."""
    return document([local_group(registry, "")], version)


def groups(registry: Registry, aggregated: list[JsonObj], version: str) -> JsonObj:
    """`/apis`: the local groups in their discovery order, then the aggregated ones (already ordered)."""
    return document([local_group(registry, g) for g in registry.groups()] + aggregated, version)


def versions_of(parsed: Any) -> dict[tuple[str, str], JsonObj]:
    """(group, version) -> its version entry, from a backend's APIGroupDiscoveryList."""
    found: dict[tuple[str, str], JsonObj] = {}
    if not isinstance(parsed, dict):
        return found
    for item in parsed.get("items") or []:
        if not isinstance(item, dict):
            continue
        name = str((item.get("metadata") or {}).get("name") or "")
        for entry in item.get("versions") or []:
            if isinstance(entry, dict) and entry.get("version"):
                found[(name, str(entry["version"]))] = entry
    return found
