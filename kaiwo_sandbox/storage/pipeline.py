"""The write pipeline's stages, as the apiserver runs them on every write (HTTP or in-process):
decode (check_body, decode_typed), default (and prune, with fieldValidation), validate, and record
managedFields. Admission runs between defaulting and validation, in the store (its hooks are store
state). Pure functions of the resource's `ResourceInfo` and the object.
"""

from __future__ import annotations

from typing import Any

import orjson

from kaiwo_sandbox.contracts import GVR, ApiError, JsonObj, ResourceInfo
from kaiwo_sandbox.semantics import apply
from kaiwo_sandbox.semantics import schema as schema_module
from kaiwo_sandbox.semantics.builtin import defaults as builtin_defaults
from kaiwo_sandbox.semantics.builtin.decoding import check_builtin_types
from kaiwo_sandbox.semantics.builtin.validation import validate_builtin
from kaiwo_sandbox.semantics.metadata import validate_object_meta

JsonList = list[JsonObj]
# etcd's default --max-request-bytes. The real server stores protobuf (or JSON for custom resources);
# the sandbox measures the object's JSON, so a built-in object near the limit is refused a little earlier.
MAX_STORED_OBJECT_BYTES = 1536 * 1024


def check_body(info: ResourceInfo, gvr: GVR, obj: Any) -> JsonObj:
    """Decode: a body of the right shape, kind and apiVersion (400 otherwise), stamped with both."""
    if not isinstance(obj, dict):
        raise ApiError.bad_request(f"the body of the request is not a {info.kind} object")
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise ApiError.bad_request(f'{info.kind} in version "{gvr.version}" cannot be handled as a {info.kind}: '
                                   "json: cannot unmarshal into Go struct field .metadata of type v1.ObjectMeta")
    refs = meta.get("ownerReferences")
    if isinstance(refs, list) and not all(isinstance(ref, dict) for ref in refs):
        raise ApiError.bad_request(f'{info.kind} in version "{gvr.version}" cannot be handled as a {info.kind}: '
                                   "json: cannot unmarshal into Go struct field ObjectMeta.metadata."
                                   "ownerReferences of type v1.OwnerReference")
    kind = obj.get("kind")
    if kind and kind != info.kind:
        raise ApiError.bad_request(
            f"the kind in the data ({kind}) does not match the expected kind ({info.kind})")
    api_version = obj.get("apiVersion")
    if api_version and api_version not in {info.api_version(v) for v in info.versions}:
        raise ApiError.bad_request(f"the API version in the data ({api_version}) does not match the "
                                   f"expected API version ({gvr.api_version})")
    obj["apiVersion"] = gvr.api_version
    obj["kind"] = info.kind
    return obj


def decode_typed(info: ResourceInfo, gvr: GVR, obj: JsonObj) -> None:
    """The HTTP layer's typed decoding of a built-in kind's body (400 on a wrongly typed field). Bodies
    from clients and patch results pass it; in-process writers (simulated controllers, tests that plant
    malformed objects on purpose) write decoded objects and skip it."""
    if not info.custom:
        check_builtin_types(info.group, info.kind, gvr.version, obj)


def well_typed(info: ResourceInfo, gvr: GVR, obj: JsonObj) -> bool:
    try:
        decode_typed(info, gvr, obj)
    except ApiError:
        return False
    return True


def default(info: ResourceInfo, obj: JsonObj, *, owned: bool = False, field_validation: str = "Ignore",
            unknown_sink: list[str] | None = None) -> JsonObj:
    """Defaulting and pruning. `owned`: nothing else references any part of `obj` (a create's
    freshly decoded body), so it is defaulted in place; otherwise (an update's candidate shares
    status and managedFields with the stored object) on a copy. `field_validation` is the write's
    fieldValidation: Strict refuses unknown fields of a custom resource, Warn adds them to `unknown_sink`."""
    if info.custom:
        schema = info.schemas.get(info.stored_version)
        if schema is not None:
            if owned:
                schema_module.default_in_place(schema, obj)
            else:
                obj = schema_module.apply_defaults(schema, obj)
            if field_validation != "Ignore":
                unknown = schema_module.unknown_fields(schema, obj)
                if field_validation == "Warn":
                    if unknown_sink is not None:
                        unknown_sink.extend(unknown)
                elif unknown:
                    version = info.stored_version
                    raise ApiError.bad_request(
                        f'{info.kind} in version "{version}" cannot be handled as a {info.kind}: '
                        + schema_module.strict_decoding_message(unknown))
            schema_module.prune_in_place(schema, obj)  # ours by now: defaulted in place or copied
        return obj
    if builtin_defaults.has_builtin_defaults(info.group, info.kind):
        if owned:
            builtin_defaults.default_in_place(info.group, info.kind, obj)
            return obj
        return builtin_defaults.apply_builtin_defaults(info.group, info.kind, obj)
    return obj


def validate(info: ResourceInfo, obj: JsonObj, old: JsonObj | None) -> None:
    """Validation: ObjectMeta, then the CRD's schema or the built-in kind's rules; 422 with every cause."""
    causes: JsonList = validate_object_meta(obj, namespaced=info.namespaced, kind=info.kind)
    if info.custom:
        schema = info.schemas.get(info.stored_version)
        if schema is not None:
            causes.extend(schema_module.validate(schema, obj, old))
    else:
        causes.extend(validate_builtin(info.group, info.kind, obj, old))
    if causes:
        raise ApiError.invalid(info.kind, info.group, str((obj.get("metadata") or {}).get("name", "")), causes)


def check_stored_size(obj: JsonObj) -> None:
    """The storage's limit on one object, checked just before commit (never on dryRun, which does not
    reach etcd). The real apiserver passes etcd's error through unmapped: 500, no reason."""
    if len(orjson.dumps(obj)) > MAX_STORED_OBJECT_BYTES:
        raise ApiError(500, "", "etcdserver: request is too large")


def record_manager(info: ResourceInfo, gvr: GVR, old: JsonObj | None, new: JsonObj, manager: str,
                   subresource: str | None, now: str) -> JsonObj:
    """managedFields: what `manager` now owns of `new` after this write."""
    return apply.record_update(old, new, manager=manager, api_version=gvr.api_version, group=info.group,
                               kind=info.kind, subresource=subresource, now=now,
                               schema=info.schemas.get(gvr.version), status_subresource=info.has_status)
