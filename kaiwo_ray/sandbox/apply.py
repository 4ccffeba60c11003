"""Server-side apply and managedFields, following the apiserver's fieldmanager on top of
sigs.k8s.io/structured-merge-diff.

Managers are identified as the apiserver identifies them: Apply entries by (manager,
subresource), Update entries by (manager, apiVersion, subresource). Every write records which
fields it set:
- `record_update` (create, update, and the three classic patches): fields the write added or
  changed move to the writing manager; fields it removed leave every manager.
- `server_side_apply`: the applied configuration is merged into the live object; fields this
  manager applied last time and no longer applies are removed unless another manager owns them;
  the manager's set becomes exactly the applied fields; a field another manager owns that the
  apply changes is a 409 conflict unless `force`, which takes it over. Equal values are no
  conflict: both managers then own the field.

Fields no manager can own (apiVersion, kind, metadata.name/namespace/uid/...) are stripped, and
the half of the object a request cannot change (status on the main resource, everything but status
on /status) is reset to the live value and never owned by that request, as the apiserver's
reset-fields strategies do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kaiwo_ray.sandbox.fieldpaths import (
    FieldPathError,
    FieldSet,
    Path,
    all_paths,
    compare,
    decode_fields_v1,
    encode_fields_v1,
    ensure_named_fields_are_members,
    merge_values,
    path_sort_key,
    path_string,
    remove_items,
    to_field_set,
)
from kaiwo_ray.sandbox.merge_keys import Schema, is_builtin, schema_for
from kaiwo_ray.sandbox.patching import clone_json
from kaiwo_ray.sandbox.types import ApiError, JsonObj

__all__ = ["ManagerKey", "manager_from_user_agent", "record_update", "server_side_apply"]

BEFORE_FIRST_APPLY = "before-first-apply"

# Paths no manager owns (the fieldmanager's stripMeta set).
_STRIPPED: frozenset[Path] = frozenset({
    (("f", "apiVersion"),),
    (("f", "kind"),),
    (("f", "metadata"),),
    (("f", "metadata"), ("f", "name")),
    (("f", "metadata"), ("f", "namespace")),
    (("f", "metadata"), ("f", "creationTimestamp")),
    (("f", "metadata"), ("f", "selfLink")),
    (("f", "metadata"), ("f", "uid")),
    (("f", "metadata"), ("f", "clusterName")),
    (("f", "metadata"), ("f", "generation")),
    (("f", "metadata"), ("f", "managedFields")),
    (("f", "metadata"), ("f", "resourceVersion")),
})


@dataclass(frozen=True, slots=True, order=True)
class ManagerKey:
    """How the apiserver tells managers apart (BuildManagerIdentifier): Apply entries keep one
    identity across apiVersions, Update entries are per apiVersion."""

    manager: str
    operation: str
    api_version: str
    subresource: str

    def identifier(self) -> str:
        """The JSON identifier the apiserver sorts conflicting managers by."""
        body: JsonObj = {"manager": self.manager, "operation": self.operation}
        if self.api_version:
            body["apiVersion"] = self.api_version
        if self.subresource:
            body["subresource"] = self.subresource
        return json.dumps(body, separators=(",", ":"))

    def describe(self) -> str:
        """As conflict messages name a manager: `"kubectl" using apps/v1`."""
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text


@dataclass(slots=True)
class _Entry:
    fields: FieldSet
    api_version: str
    time: str | None


Managed = dict[ManagerKey, _Entry]


def manager_from_user_agent(user_agent: str | None) -> str:
    """The apiserver's default field manager when a request names none: the User-Agent up to
    its first '/' (`kubectl-client-side-apply`, `OpenAPI-Generator`), truncated to 128."""
    if not user_agent:
        return "unknown"
    return user_agent.split("/", 1)[0][:128]


def _key(manager: str, operation: str, api_version: str, subresource: str | None) -> ManagerKey:
    return ManagerKey(manager, operation, "" if operation == "Apply" else api_version, subresource or "")


def _decode_managed(entries: Any) -> Managed | None:
    """The managers recorded on an object, or None when the list is absent, empty or unusable."""
    if not isinstance(entries, list) or not entries:
        return None
    managed: Managed = {}
    try:
        for entry in entries:
            if not isinstance(entry, dict):
                return None
            operation = str(entry.get("operation") or "")
            api_version = str(entry.get("apiVersion") or "")
            key = _key(str(entry.get("manager") or ""), operation, api_version,
                       str(entry.get("subresource") or ""))
            fields = decode_fields_v1(entry.get("fieldsV1") or {})
            previous = managed.get(key)
            if previous is not None:
                fields |= previous.fields
            time = entry.get("time")
            managed[key] = _Entry(fields, api_version, time if isinstance(time, str) else None)
    except (FieldPathError, ValueError):
        return None
    return managed


def _encode_managed(managed: Managed) -> list[JsonObj]:
    entries: list[tuple[tuple[str, str, str, str, str], JsonObj]] = []
    for key, entry in managed.items():
        fields = entry.fields - _STRIPPED
        if not fields:
            continue
        body: JsonObj = {"manager": key.manager, "operation": key.operation, "apiVersion": entry.api_version}
        if entry.time is not None:
            body["time"] = entry.time
        body["fieldsType"] = "FieldsV1"
        body["fieldsV1"] = encode_fields_v1(fields)
        if key.subresource:
            body["subresource"] = key.subresource
        # The apiserver's order: operation, time, manager, apiVersion, subresource.
        entries.append(((key.operation, entry.time or "", key.manager, entry.api_version, key.subresource), body))
    entries.sort(key=lambda pair: pair[0])
    return [body for _, body in entries]


def _without_managed_fields(obj: JsonObj | None) -> JsonObj:
    out = clone_json(obj) if obj is not None else {}
    metadata = out.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    return out


def _with_managed(obj: JsonObj, managed: Managed) -> JsonObj:
    metadata = obj.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        return obj
    encoded = _encode_managed(managed)
    if encoded:
        metadata["managedFields"] = encoded
    else:
        metadata.pop("managedFields", None)
    return obj


def _reset_filter(subresource: str | None, status_subresource: bool) -> tuple[bool, bool]:
    """(ignore status, ignore everything but status) for this request."""
    if subresource == "status":
        return False, True
    return status_subresource, False


def _reset_paths(paths: FieldSet, ignore_status: bool, only_status: bool) -> FieldSet:
    status = ("f", "status")
    if ignore_status:
        paths = {p for p in paths if p[0] != status}
    if only_status:
        paths = {p for p in paths if p[0] == status}
    return paths


def _reset_object(candidate: JsonObj, live: JsonObj, ignore_status: bool, only_status: bool) -> JsonObj:
    """Put back what this request may not change, as the reset-fields strategies do."""
    if ignore_status:
        candidate.pop("status", None)
        if "status" in live:
            candidate["status"] = clone_json(live["status"])
        return candidate
    if only_status:
        out = clone_json(live)
        out.pop("status", None)
        if "status" in candidate:
            out["status"] = candidate["status"]
        return out
    return candidate


def _typed_error(kind: str, name: str, api_version: str, exc: Exception, what: str) -> ApiError:
    group_version = api_version if "/" in api_version else f"/{api_version}"
    return ApiError(500, "", f"failed to create typed {what} object ({group_version}, Kind={kind}) {name}: {exc}")


def _object_name(obj: JsonObj) -> str:
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(metadata, dict)
    namespace, name = metadata.get("namespace"), metadata.get("name")
    return f"{namespace}/{name}" if namespace else str(name)


def _changes(old: JsonObj, new: JsonObj, schema: Schema, *, builtin: bool,
             ignore_status: bool, only_status: bool) -> tuple[FieldSet, FieldSet]:
    """(added or modified, removed) between two objects, limited to what the request may own."""
    added, modified, removed = compare(old, new, schema, mark_structs=not builtin)
    return (_reset_paths(added | modified, ignore_status, only_status),
            _reset_paths(removed, ignore_status, only_status))


def record_update(old: JsonObj | None, new: JsonObj, *, manager: str, api_version: str, group: str,
                  kind: str, subresource: str | None, now: str, schema: JsonObj | None = None,
                  status_subresource: bool = True) -> JsonObj:
    """`new` with metadata.managedFields updated for an Update-operation write by `manager`
    (create when `old` is None, update, or a JSON/merge/strategic patch).

    `schema` is the CRD version's openAPIV3Schema for custom resources (list types); built-ins
    use the merge-key table. `status_subresource` False means the kind has no /status, so a write
    to the main resource may own status too. Managed fields the client sent in `new` replace the
    live ones when non-empty (that is how a client edits or resets them); otherwise the live
    ones are kept.
    """
    typed = schema_for(group, kind, schema)
    builtin = is_builtin(group)
    managed = None if subresource else _decode_managed((new.get("metadata") or {}).get("managedFields"))
    if managed is None:
        managed = _decode_managed(((old or {}).get("metadata") or {}).get("managedFields")) or {}
    before = _without_managed_fields(old)
    after = _without_managed_fields(new)
    ignore_status, only_status = _reset_filter(subresource, status_subresource)
    try:
        changed, removed = _changes(before, after, typed, builtin=builtin,
                                    ignore_status=ignore_status, only_status=only_status)
    except FieldPathError as exc:
        raise _typed_error(kind, _object_name(after), api_version, exc, "") from exc
    for entry in managed.values():
        entry.fields -= changed
        entry.fields -= removed
    if changed - _STRIPPED:
        key = _key(manager, "Update", api_version, subresource)
        previous = managed.get(key)
        fields = changed | (previous.fields if previous else set())
        managed[key] = _Entry(fields, api_version, now)
    return _with_managed(after, managed)


def server_side_apply(live: JsonObj | None, applied: JsonObj, *, manager: str, force: bool,
                      api_version: str, group: str, kind: str, subresource: str | None, now: str,
                      schema: JsonObj | None = None, status_subresource: bool = True) -> JsonObj:
    """Merge an applied configuration into `live` (or create from it when `live` is None) for
    `manager`, with managedFields, pruning of fields the manager stopped applying, and 409
    conflicts with other managers unless `force`. `schema`/`status_subresource` as in
    `record_update`.
    """
    if not isinstance(applied, dict):
        raise ApiError.bad_request("error decoding YAML: the applied configuration must be an object")
    applied_meta = applied.get("metadata")
    if isinstance(applied_meta, dict) and applied_meta.get("managedFields") is not None:
        raise ApiError.bad_request("metadata.managedFields must be nil")
    typed = schema_for(group, kind, schema)
    builtin = is_builtin(group)
    ignore_status, only_status = _reset_filter(subresource, status_subresource)
    live_obj = _without_managed_fields(live)
    managed: Managed = {}
    if live is not None:
        decoded = _decode_managed((live.get("metadata") or {}).get("managedFields"))
        if decoded is None:
            # An object nobody tracked yet: its current fields belong to "before-first-apply".
            added, modified, _ = compare({}, live_obj, typed, mark_structs=not builtin)
            owned = _reset_paths(added | modified, ignore_status, only_status)
            if owned:
                managed[_key(BEFORE_FIRST_APPLY, "Update", api_version, subresource)] = \
                    _Entry(owned, api_version, None)
        else:
            managed = decoded
    config = clone_json(applied)
    name = _object_name(config if live is None else live_obj)
    try:
        applied_fields = _reset_paths(to_field_set(config, typed), ignore_status, only_status)
    except FieldPathError as exc:
        raise _typed_error(kind, name, api_version, exc, "patch") from exc
    try:
        merged = merge_values(live_obj, config, typed)
        key = _key(manager, "Apply", api_version, subresource)
        previous = managed.get(key)
        last_applied = previous.fields if previous else set()
        managed[key] = _Entry(applied_fields, api_version, previous.time if previous else None)
        merged = _prune(merged, managed, key, last_applied, typed)
        merged = _reset_object(merged, live_obj, ignore_status, only_status)
        changed, removed = _changes(live_obj, merged, typed, builtin=builtin,
                                    ignore_status=ignore_status, only_status=only_status)
    except FieldPathError as exc:
        raise _typed_error(kind, name, api_version, exc, "") from exc
    conflicts = {other: entry.fields & changed for other, entry in managed.items()
                 if other != key and entry.fields & changed}
    if conflicts and not force:
        raise _conflict_error(conflicts)
    for other, lost in conflicts.items():
        managed[other].fields -= lost
    for entry in managed.values():
        entry.fields -= removed
    if merged != live_obj or previous is None:
        managed[key].time = now
    return _with_managed(merged, managed)


def _prune(merged: JsonObj, managed: Managed, applier: ManagerKey, last_applied: FieldSet,
           schema: Schema) -> JsonObj:
    """Remove what the applier applied last time and no longer does, unless someone else (or the
    new configuration) still owns it: structured-merge-diff's prune, addBackOwnedItems and
    addBackDanglingItems, in that order."""
    if not last_applied:
        return merged
    last = ensure_named_fields_are_members(last_applied, schema)
    owned: FieldSet = set()
    for entry in managed.values():
        owned |= entry.fields
    owned = ensure_named_fields_are_members(owned, schema)
    merged_paths = all_paths(merged, schema)
    pruned = remove_items(merged, last, schema)
    pruned_paths = all_paths(pruned, schema)
    pruned = remove_items(merged, merged_paths - (pruned_paths | owned), schema)
    pruned_paths = all_paths(pruned, schema)
    result = remove_items(merged, (merged_paths - pruned_paths) & last, schema)
    assert isinstance(result, dict)
    del applier
    return result


def _conflict_error(conflicts: dict[ManagerKey, FieldSet]) -> ApiError:
    ordered = sorted(conflicts.items(), key=lambda pair: pair[0].identifier())
    causes: list[JsonObj] = []
    lines: list[str] = []
    for key, paths in ordered:
        lines.append(f"conflicts with {key.describe()}:")
        for path in sorted(paths, key=path_sort_key):
            causes.append({"reason": "FieldManagerConflict", "message": f"conflict with {key.describe()}",
                           "field": path_string(path)})
            lines.append(f"- {path_string(path)}")
    if len(causes) == 1:
        message = f"Apply failed with 1 conflict: {causes[0]['message']}: {causes[0]['field']}"
    else:
        message = f"Apply failed with {len(causes)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, {"causes": causes})
