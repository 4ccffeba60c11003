"""How a namespace scopes a write: which namespace an object lands in, and whether that namespace
takes new content (not while it is Terminating). Pure functions of the resource and the objects."""

from __future__ import annotations

from kaiwo_sandbox.contracts import NAMESPACES, ApiError, JsonObj, ResourceInfo


def namespace_of(info: ResourceInfo, namespace: str | None) -> str:
    """The key's namespace part: "" for cluster-scoped resources."""
    return (namespace or "") if info.namespaced else ""


def namespace_for(info: ResourceInfo, meta: JsonObj, namespace: str | None) -> str:
    """The namespace a written object lands in, from the URL's `namespace` and the body's `meta`
    (set in `meta`; 400 when they disagree or a namespaced object has none)."""
    if not info.namespaced:
        meta.pop("namespace", None)
        return ""
    in_body = meta.get("namespace")
    if namespace and in_body and in_body != namespace:
        raise ApiError.bad_request("the namespace of the provided object does not match the namespace "
                                   "sent on the request")
    ns = namespace or in_body
    if not ns:
        raise ApiError.bad_request("the server could not find the requested resource: namespace is required")
    meta["namespace"] = ns
    return str(ns)


def require_open(namespace: JsonObj | None, ns: str, info: ResourceInfo, name: str) -> None:
    """404 when the namespace `ns` (stored as `namespace`) does not exist, 403 while it is terminating."""
    if namespace is None:
        raise ApiError.not_found(NAMESPACES, ns)
    if namespace["metadata"].get("deletionTimestamp"):
        qualified = f"{info.resource}.{info.group}" if info.group else info.resource
        raise ApiError(403, "Forbidden", f'{qualified} "{name}" is forbidden: unable to create new content '
                       f"in namespace {ns} because it is being terminated",
                       {"name": name, "group": info.group, "kind": info.resource,
                        "causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                                    "message": f"namespace {ns} is being terminated"}]})

