"""List pages decoded straight into the fields a cache reads: the rest is skipped while parsing.

An informer's first list is most of an operator's cold start, and most of a list is bytes no
controller reads: every object's `metadata.managedFields` (half of a Job or a KaiwoJob as the API
server returns them) and, for a Kueue Workload, its spec (its Job's whole pod template). Decoded
with orjson, each of those fields becomes Python objects that the cache's transform then drops.
Here a page is decoded against a schema naming the fields that are kept (msgspec skips the others
without building them), then handed to the cache's transform as before, so what a cache holds is
exactly what `transform(orjson.loads(page))` would hold: a projection only has to keep a superset of
what its transform reads.

Only kinds whose objects have nothing at the top level but apiVersion, kind, metadata, spec and
status may use a projection (CRs, Jobs, Workloads; not ConfigMaps or Events).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from kaiwo_ray.api.jsonobj import JsonObj

PageDecoder = Callable[[bytes], JsonObj]
"""A list answer's bytes -> the list as a dict (`items` projected, `metadata` whole)."""

# ObjectMeta (k8s.io/apimachinery meta/v1) less managedFields: what every cache keeps of metadata.
OBJECT_META = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
               "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
               "ownerReferences", "finalizers")
_TOP_LEVEL = ("apiVersion", "kind", "spec", "status")
_UNSET = msgspec.UNSET


def _struct(name: str, fields: Sequence[str]) -> type[msgspec.Struct]:
    """A schema whose named fields keep any JSON value; fields it does not name are skipped."""
    return msgspec.defstruct(name, [(field, Any, _UNSET) for field in fields])


def _as_dict(value: Any, nested: frozenset[str]) -> Any:
    """A decoded struct as the dict orjson would have made of the same fields (absent ones left out);
    `nested`: the names of the fields that are themselves structs."""
    if not isinstance(value, msgspec.Struct):
        return value
    out: JsonObj = {}
    for field in value.__struct_fields__:
        item = getattr(value, field)
        if item is _UNSET:
            continue
        out[field] = _as_dict(item, nested) if field in nested else item
    return out


def page_decoder(*, meta: Sequence[str] = OBJECT_META, status: Sequence[str] | None = None,
                 spec: bool = True) -> PageDecoder:
    """A decoder for list answers keeping `meta` of each item's metadata, its apiVersion and kind, its
    spec unless `spec` is False, and its status whole or (`status` named) only those fields."""
    meta_struct = _struct("ProjectedMeta", meta)
    top: list[tuple[str, Any, Any]] = [("metadata", meta_struct | None, _UNSET)]
    for field in _TOP_LEVEL:
        if field == "spec" and not spec:
            continue
        if field == "status" and status is not None:
            top.append((field, _struct("ProjectedStatus", status) | None, _UNSET))
        else:
            top.append((field, Any, _UNSET))
    item_struct = msgspec.defstruct("ProjectedObject", top)
    page_struct = msgspec.defstruct("ProjectedList", [("items", list[item_struct] | None, None),  # type: ignore[valid-type]
                                                      ("metadata", Any, _UNSET)])
    decoder = msgspec.json.Decoder(page_struct)
    nested = frozenset({"metadata", "status"})

    def decode(data: bytes) -> JsonObj:
        page: Any = decoder.decode(data)
        listed: JsonObj = {"items": [_as_dict(item, nested) for item in page.items or ()]}
        if page.metadata is not _UNSET:
            listed["metadata"] = page.metadata
        return listed

    return decode


DecodeError = msgspec.DecodeError
