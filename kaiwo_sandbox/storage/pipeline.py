"""The write pipeline's stages, as the apiserver runs them on every write (HTTP or in-process):
decode (check_body, decode_typed), patch (apply_patch), merge a subresource's part (merge_subresource),
default (and prune, with fieldValidation), validate, and record managedFields. Admission runs between
defaulting and validation (admission.py: its hooks are state). Pure functions of the resource's
`ResourceInfo` and the objects.
"""

from __future__ import annotations

import secrets
from collections.abc import Container
from typing import Any

import orjson

from kaiwo_sandbox.contracts import GVR, ApiError, JsonObj, PatchType, ResourceInfo
from kaiwo_sandbox.semantics import apply, patching
from kaiwo_sandbox.semantics import schema as schema_module
from kaiwo_sandbox.semantics.builtin import defaults as builtin_defaults
from kaiwo_sandbox.semantics.builtin.decoding import check_builtin_types
from kaiwo_sandbox.semantics.builtin.validation import validate_builtin
from kaiwo_sandbox.semantics.metadata import validate_object_meta

JsonList = list[JsonObj]
# etcd's default --max-request-bytes. The real server stores protobuf (or JSON for custom resources);
# the sandbox measures the object's JSON, so a built-in object near the limit is refused a little earlier.
MAX_STORED_OBJECT_BYTES = 1536 * 1024
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's utilrand alphabet


def clone(obj: Any) -> Any:
    """Deep copy of a JSON value (orjson round trip: ~10x faster than copy.deepcopy)."""
    return orjson.loads(orjson.dumps(obj))


def random_suffix(length: int = 5) -> str:
    return "".join(secrets.choice(_NAME_ALPHABET) for _ in range(length))


def generate_name(prefix: str, taken: Container[tuple[str, str]], namespace: str) -> str:
    """names.SimpleNameGenerator: `prefix` cut to leave room for 5 random characters, a name not `taken`."""
    prefix = prefix[: 63 - 5] if len(prefix) > 63 - 5 else prefix
    for _ in range(8):
        name = prefix + random_suffix()
        if (namespace, name) not in taken:
            return name
    return prefix + random_suffix(8)


def strip_volatile(obj: JsonObj) -> JsonObj:
    """The object without what every write changes anyway (to detect no-op writes)."""
    meta = dict(obj.get("metadata") or {})
    meta.pop("resourceVersion", None)
    meta.pop("managedFields", None)
    out = dict(obj)
    out["metadata"] = meta
    return out


def require_verb(info: ResourceInfo, verb: str) -> None:
    if verb not in info.verbs:
        raise ApiError.method_not_allowed(f"{verb} is not supported on resources of kind "
                                          f"\"{info.resource}.{info.group}\"".replace(".\"", "\""))


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


def apply_patch(info: ResourceInfo, doc: JsonObj, patch: Any, patch_type: PatchType) -> Any:
    """`patch` applied to `doc` (the caller's own copy: a merge patch edits it in place)."""
    if patch_type == "merge":
        return patching.apply_merge_patch_in_place(doc, patch)
    if patch_type == "json":
        return patching.apply_json_patch(doc, patch)
    if patch_type == "strategic":
        if info.custom or not patching.strategic_merge_supported(info.group, info.kind):
            raise ApiError.unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
        return patching.apply_strategic_merge_patch(doc, patch, group=info.group, kind=info.kind)
    raise ApiError.unsupported_media_type(f"unsupported patch type {patch_type!r}")


def merge_subresource(info: ResourceInfo, old: JsonObj, obj: JsonObj, subresource: str | None) -> JsonObj:
    """The candidate a write of `subresource` makes of `old`: the main resource keeps the stored
    status, /status keeps all but status, /finalize (namespaces) takes only spec.finalizers."""
    if subresource is None:
        if info.has_status:
            obj.pop("status", None)
            if "status" in old:
                obj["status"] = old["status"]
        return obj
    if subresource == "status":
        if not info.has_status:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        # Stored objects are never modified, so the new one shares all but status (and the
        # top level and metadata, which later steps set fields of) with the old one.
        new: JsonObj = dict(old)
        new["metadata"] = dict(new["metadata"])
        if "managedFields" in (obj.get("metadata") or {}):
            new["metadata"]["managedFields"] = obj["metadata"]["managedFields"]
        new.pop("status", None)
        if "status" in obj:
            new["status"] = obj["status"]
        return new
    if subresource == "finalize" and info.resource == "namespaces":
        new = clone(old)
        new.setdefault("spec", {})["finalizers"] = list((obj.get("spec") or {}).get("finalizers") or [])
        return new
    raise ApiError(404, "NotFound", "the server could not find the requested resource")
