"""A minimal OpenAPI v3 surface: enough for kubectl to see that the server validates fields itself.

kubectl (`--validate=strict`, its default) reads /openapi/v3 and, per group/version, looks for the
PATCH operation of a kind (tagged `x-kubernetes-group-version-kind`) carrying a `fieldValidation`
parameter; when it finds one it leaves validation to the server instead of downloading schemas.
Operations have no request-body schemas, so client-side `kubectl apply` computes strategic merge
patches from its compiled-in types (its documented fallback) — which is exactly the real patch.
Custom kinds do carry their CRD's schema as a component, which is what `kubectl explain` reads
(client-side apply of a custom kind is a JSON merge patch whatever the schema). Built-in kinds have no
schema here, so `kubectl explain pod` says "not found in OpenAPI schema".
"""

from __future__ import annotations

import hashlib

import orjson

from kaiwo_sandbox.contracts import JsonObj, ResourceInfo
from kaiwo_sandbox.registry import Registry

_WRITE_PARAMETERS = [
    {"name": name, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
    for name in ("dryRun", "fieldManager", "fieldValidation")
]


def _gv_key(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _gv_hash(registry: Registry, group: str, version: str) -> str:
    # kubectl caches a document under its hash: a CRD whose schema changes must change it.
    digest = hashlib.sha256()
    for info in registry.in_group_version(group, version):
        digest.update(f"{info.resource}:{info.kind}:{info.namespaced};".encode())
        digest.update(orjson.dumps(info.schemas.get(version), option=orjson.OPT_SORT_KEYS))
    return digest.hexdigest()[:32].upper()


def root(registry: Registry) -> JsonObj:
    paths: JsonObj = {}
    for group, versions in [("", ["v1"]), *[(g, registry.group_versions(g)) for g in registry.groups()]]:
        for version in versions:
            key = _gv_key(group, version)
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={_gv_hash(registry, group, version)}"}
    return {"paths": paths}


def _operations(info: ResourceInfo, version: str) -> tuple[str, str, JsonObj, JsonObj]:
    prefix = f"/apis/{info.group}/{version}" if info.group else f"/api/{version}"
    if info.namespaced:
        prefix += "/namespaces/{namespace}"
    gvk = {"group": info.group, "version": version, "kind": info.kind}
    collection = f"{prefix}/{info.resource}"
    item = f"{collection}/{{name}}"
    post = {"operationId": f"create{info.kind}", "parameters": _WRITE_PARAMETERS,
            "x-kubernetes-action": "post", "x-kubernetes-group-version-kind": gvk}
    patch = {"operationId": f"patch{info.kind}", "parameters": [*_WRITE_PARAMETERS, {"name": "force", "in": "query", "schema": {"type": "boolean"}, "uniqueItems": True}],
        "x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": gvk}
    put = {"operationId": f"replace{info.kind}", "parameters": _WRITE_PARAMETERS,
           "x-kubernetes-action": "put", "x-kubernetes-group-version-kind": gvk}
    return collection, item, {"post": post}, {"patch": patch, "put": put}


def group_version(registry: Registry, group: str, version: str) -> JsonObj | None:
    infos = registry.in_group_version(group, version)
    if not infos:
        return None
    paths: JsonObj = {}
    schemas: JsonObj = {}
    for info in infos:
        collection, item, collection_ops, item_ops = _operations(info, version)
        paths[collection] = collection_ops
        paths[item] = item_ops
        schema = info.schemas.get(version) if info.custom else None
        if schema is not None:
            # Named like the apiserver names CR schemas: reversed group, version, kind.
            name = ".".join([*reversed(info.group.split(".")), version, info.kind])
            gvk = {"group": info.group, "version": version, "kind": info.kind}
            schemas[name] = {**schema, "x-kubernetes-group-version-kind": [gvk]}
    title = group if group else "Kubernetes"
    return {"openapi": "3.0.0", "info": {"title": title, "version": "unversioned"}, "paths": paths,
            "components": {"schemas": schemas}}


def for_path(registry: Registry, path: str) -> JsonObj | None:
    """The document for `/openapi/v3[/api/v1|/apis/<group>/<version>]`, or None."""
    rest = path[len("/openapi/v3"):].strip("/")
    if not rest:
        return root(registry)
    parts = rest.split("/")
    if parts[0] == "api" and len(parts) == 2:
        return group_version(registry, "", parts[1])
    if parts[0] == "apis" and len(parts) == 3:
        return group_version(registry, parts[1], parts[2])
    return None
