"""Who submitted a workload, recorded at admission so GPU-hours are charged to an authenticated
identity (docs/accounting.md), not to the manifest's `spec.user`, which anyone may write.

CREATE: `kaiwo.silogen.ai/submitted-by` is set to the request's `userInfo.username`; a value the
client sent is overwritten, unless the requester is a trusted submitter (the admin API's service
account, which creates workloads for its authenticated callers and sets the annotation to the
caller itself). UPDATE: the stored value is kept (restored if changed, removed if added), so nobody
re-attributes a workload after the fact.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaiwo_ray.admission.review import pointer
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.labels import SUBMITTED_BY as SUBMITTED_BY  # handed on to the admin API


def _annotations(obj: Any) -> Mapping[str, str]:
    found = ((obj or {}).get("metadata") or {}).get("annotations") if isinstance(obj, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def stamp_ops(request: Mapping[str, Any], trusted: frozenset[str] = frozenset()) -> list[JsonObj]:
    """JSON Patch operations that make the annotation say who submitted (empty: already right)."""
    obj = request.get("object")
    if not isinstance(obj, Mapping):
        return []
    current = _annotations(obj).get(SUBMITTED_BY)
    wanted: str | None
    operation = request.get("operation")
    if operation == "CREATE":
        username = str((request.get("userInfo") or {}).get("username") or "")
        wanted = current if username in trusted and current else username
    elif operation == "UPDATE":
        wanted = _annotations(request.get("oldObject")).get(SUBMITTED_BY)
    else:
        return []
    if wanted == current:
        return []
    path = pointer("metadata", "annotations", SUBMITTED_BY)
    if not wanted:
        return [{"op": "remove", "path": path}]
    ops: list[JsonObj] = []
    if not isinstance((obj.get("metadata") or {}).get("annotations"), Mapping):
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    ops.append({"op": "add", "path": path, "value": wanted})
    return ops
