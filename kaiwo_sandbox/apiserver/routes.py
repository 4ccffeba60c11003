"""Parsing Kubernetes API paths into what a request addresses (pure; the server dispatches on it).

    /api/v1[/namespaces/{ns}]/{resource}[/{name}[/{subresource}]]
    /apis/{group}/{version}[/namespaces/{ns}]/{resource}[/{name}[/{subresource}]]
    legacy: the same with `watch/` right after the version
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ApiPath:
    group: str
    version: str
    resource: str = ""  # empty: a discovery path
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    legacy_watch: bool = False
    named_group: bool = False  # under /apis (so group "" here means the /apis root, not the core group)


def parse_api_path(path: str) -> ApiPath | None:
    """None when the path is not under /api or /apis at all (or too short to name a version)."""
    parts = [p for p in path.split("/") if p]
    if not parts:
        return None
    if parts[0] == "api":
        if len(parts) < 2:
            return ApiPath("", "")
        group, version, rest = "", parts[1], parts[2:]
    elif parts[0] == "apis":
        if len(parts) < 3:
            return ApiPath(parts[1] if len(parts) == 2 else "", "", named_group=True)
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    legacy_watch = False
    if rest and rest[0] == "watch":
        legacy_watch = True
        rest = rest[1:]
    if not rest:
        return ApiPath(group, version, legacy_watch=legacy_watch)
    # /namespaces/{ns}/{resource}...: but /api/v1/namespaces/{name}/status|finalize address a namespace.
    if rest[0] == "namespaces" and len(rest) >= 3 and not (group == "" and rest[2] in ("status", "finalize")):
        namespace, rest = rest[1], rest[2:]
    else:
        namespace = ""
    if len(rest) > 3:
        return ApiPath(group, version, resource="\0invalid")
    return ApiPath(group, version, resource=rest[0], namespace=namespace,
                   name=rest[1] if len(rest) > 1 else "", subresource=rest[2] if len(rest) > 2 else "",
                   legacy_watch=legacy_watch)
