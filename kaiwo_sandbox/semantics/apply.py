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

from kaiwo_sandbox.contracts import ApiError, JsonObj
from kaiwo_sandbox.semantics.fieldpaths import (
    FieldPathError,
    FieldSet,
    Path,
    added_fields_v1,
    all_paths,
    applied_fields_v1,
    canonical_json,
    compare,
    decode_fields_v1,
    encode_fields_v1,
    ensure_named_fields_are_members,
    fields_v1_has,
    merge_values,
    path_sort_key,
    path_string,
    remove_items,
    to_field_set,
)
from kaiwo_sandbox.semantics.merge_keys import Schema, schema_for
from kaiwo_sandbox.semantics.patching import clone_json

__all__ = ["ManagerKey", "manager_from_user_agent", "record_update", "server_side_apply"]

BEFORE_FIRST_APPLY = "before-first-apply"
MAX_UPDATE_MANAGERS = 10
ANCIENT_CHANGES = "ancient-changes"
KUBECTL = "kubectl"  # the field manager of `kubectl apply --server-side`
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
LAST_APPLIED_LIMIT = 256 * 1024  # the annotation size the apiserver still syncs

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


class _Entry:
    """One manager's field set. Sets read from an object stay encoded until a write touches
    them: most writes (status updates above all) change a few fields that most managers do not
    own, and decoding every manager's fieldsV1 on every write would dominate the write path."""

    __slots__ = ("_fields", "_raw", "api_version", "time")

    def __init__(self, fields: FieldSet | None, api_version: str, time: str | None,
                 raw: JsonObj | None = None) -> None:
        self._fields = fields
        self._raw = raw
        self.api_version = api_version
        self.time = time

    @property
    def fields(self) -> FieldSet:
        if self._fields is None:
            try:
                self._fields = decode_fields_v1(self._raw or {})
            except (FieldPathError, ValueError):
                self._fields = set()
                self._raw = None
        return self._fields

    @fields.setter
    def fields(self, value: FieldSet) -> None:
        self._fields = value
        self._raw = None  # the encoding no longer matches

    def owned(self, paths: FieldSet) -> FieldSet:
        """The members of `paths` this manager owns."""
        if self._fields is None:
            return {p for p in paths if fields_v1_has(self._raw, p)}
        return self._fields & paths

    def discard(self, paths: FieldSet) -> None:
        if paths and self.owned(paths):
            self.fields = self.fields - paths

    def same_as(self, fields_v1: JsonObj, fields: FieldSet) -> bool:
        """Whether this manager owns exactly `fields` (encoded as `fields_v1`), decoding nothing
        when the stored encoding is byte-for-byte what we would write."""
        if self._fields is None:
            return self._raw == fields_v1
        return self._fields - _STRIPPED == fields - _STRIPPED

    def encoded(self) -> JsonObj | None:
        """fieldsV1, or None when the manager owns nothing (and its entry goes)."""
        if self._raw is not None:
            # Shared with the object it was read from: fieldsV1 tries are never edited in place.
            return self._raw or None
        assert self._fields is not None
        fields = self._fields - _STRIPPED
        return encode_fields_v1(fields) if fields else None


Managed = dict[ManagerKey, _Entry]


def manager_from_user_agent(user_agent: str | None) -> str:
    """The apiserver's default field manager when a request names none (prefixFromUserAgent):
    the User-Agent up to its first '/' (`kubectl-client-side-apply`, `OpenAPI-Generator`), and
    the empty string when there is no User-Agent."""
    return (user_agent or "").split("/", 1)[0]


def _key(manager: str, operation: str, api_version: str, subresource: str | None) -> ManagerKey:
    return ManagerKey(manager, operation, "" if operation == "Apply" else api_version, subresource or "")


def _decode_managed(entries: Any) -> Managed | None:
    """The managers recorded on an object, or None when the list is absent, empty or unusable."""
    if not isinstance(entries, list) or not entries:
        return None
    managed: Managed = {}
    for entry in entries:
        if not isinstance(entry, dict):
            return None
        raw = entry.get("fieldsV1") or {}
        if not isinstance(raw, dict):
            return None
        operation = str(entry.get("operation") or "")
        api_version = str(entry.get("apiVersion") or "")
        key = _key(str(entry.get("manager") or ""), operation, api_version, str(entry.get("subresource") or ""))
        time = entry.get("time")
        decoded = _Entry(None, api_version, time if isinstance(time, str) else None, raw)
        previous = managed.get(key)
        if previous is not None:
            decoded.fields = decoded.fields | previous.fields
        managed[key] = decoded
    return managed


def _encode_managed(managed: Managed) -> list[JsonObj]:
    entries: list[tuple[tuple[str, str, str, str, str], JsonObj]] = []
    for key, entry in managed.items():
        fields = entry.encoded()
        if fields is None:
            continue
        body: JsonObj = {"manager": key.manager, "operation": key.operation, "apiVersion": entry.api_version}
        if entry.time is not None:
            body["time"] = entry.time
        body["fieldsType"] = "FieldsV1"
        body["fieldsV1"] = fields
        if key.subresource:
            body["subresource"] = key.subresource
        # The apiserver's order: operation, time, manager, apiVersion, subresource.
        entries.append(((key.operation, entry.time or "", key.manager, entry.api_version, key.subresource), body))
    entries.sort(key=lambda pair: pair[0])
    return [body for _, body in entries]


def _view(obj: JsonObj | None, ignore_status: bool, only_status: bool) -> JsonObj:
    """What a request may own of an object, sharing its values (read-only use): no
    managedFields, and no status (main resource) or only status (/status)."""
    if obj is None:
        return {}
    if only_status:
        return {"status": obj["status"]} if "status" in obj else {}
    view = {k: v for k, v in obj.items() if not (ignore_status and k == "status")}
    metadata = view.get("metadata")
    if isinstance(metadata, dict) and "managedFields" in metadata:
        view["metadata"] = {k: v for k, v in metadata.items() if k != "managedFields"}
    return view


def _cap_update_managers(managed: Managed) -> None:
    """At most MAX_UPDATE_MANAGERS Update entries: the oldest are folded, per apiVersion, into an
    "ancient-changes" entry, as the apiserver's capManagersManager does."""
    updaters = [k for k, e in managed.items() if k.operation == "Update" and e.encoded() is not None]
    if len(updaters) <= MAX_UPDATE_MANAGERS:
        return
    updaters.sort(key=lambda k: (managed[k].time or "", k.identifier()))
    first_by_version: dict[str, ManagerKey] = {}
    count = len(updaters)
    for key in updaters:
        if count <= MAX_UPDATE_MANAGERS:
            break
        entry = managed[key]
        version = entry.api_version
        if version not in first_by_version:
            first_by_version[version] = key
            continue
        bucket = ManagerKey(ANCIENT_CHANGES, "Update", version, "")
        if bucket not in managed:
            managed[bucket] = managed.pop(first_by_version[version])
        merged = managed[bucket].fields | entry.fields
        managed[bucket] = _Entry(merged, version, entry.time)
        del managed[key]
        count -= 1


def _with_managed(obj: JsonObj, managed: Managed) -> JsonObj:
    """A copy of `obj` (top level and metadata) carrying the encoded managedFields."""
    _cap_update_managers(managed)
    out = dict(obj)
    metadata = out.get("metadata")
    if not isinstance(metadata, dict):
        return out
    metadata = dict(metadata)
    out["metadata"] = metadata
    encoded = _encode_managed(managed)
    if encoded:
        metadata["managedFields"] = encoded
    else:
        metadata.pop("managedFields", None)
    return out


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
    """Put back what this request may not change, as the reset-fields strategies do. Builds a new
    top level: `candidate` may be the caller's own configuration."""
    if ignore_status:
        out = {k: v for k, v in candidate.items() if k != "status"}
        if "status" in live:
            out["status"] = live["status"]
        return out
    if only_status:
        out = dict(live)
        out.pop("status", None)
        if "status" in candidate:
            out["status"] = candidate["status"]
        return out
    return candidate


def _typed_error(kind: str, name: str, api_version: str, exc: Exception, what: str) -> ApiError:
    """What the apiserver answers when structured-merge-diff cannot type an object: a plain Go
    error, so a 500 with no reason (`Error from server: failed to create typed patch object ...`)."""
    group_version = api_version if "/" in api_version else f"/{api_version}"
    return ApiError(500, "", f"failed to create typed {what} object ({name}; {group_version}, Kind={kind}): {exc}")


def _object_name(obj: JsonObj) -> str:
    """namespace/name as the fieldmanager prints objects (an empty namespace leaves the slash)."""
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(metadata, dict)
    return f"{metadata.get('namespace') or ''}/{metadata.get('name') or ''}"


def _changes(old: JsonObj, new: JsonObj, schema: Schema) -> tuple[FieldSet, FieldSet]:
    """(added or modified, removed) between two views of an object."""
    added, modified, removed = compare(old, new, schema)
    return added | modified, removed


def record_update(old: JsonObj | None, new: JsonObj, *, manager: str, api_version: str, group: str,
                  kind: str, subresource: str | None, now: str, schema: JsonObj | None = None,
                  status_subresource: bool = True) -> JsonObj:
    """`new` with metadata.managedFields updated for an Update-operation write by `manager`
    (create when `old` is None, update, or a JSON/merge/strategic patch).

    `schema` is the CRD version's openAPIV3Schema for custom resources (list types); built-ins
    use the merge-key table. `status_subresource` False means the kind has no /status, so a write
    to the main resource may own status too. Managed fields the client sent in `new` replace the
    live ones when non-empty (that is how a client edits or resets them); otherwise the live
    ones are kept. The result is a new top-level object and metadata; deeper values are shared
    with `new` (never with `old`). Never raises: an object the field paths cannot address (a
    list item without its key) comes back without managedFields, as from a real apiserver.
    """
    typed = schema_for(group, kind, schema)
    managed = None if subresource else _decode_managed((new.get("metadata") or {}).get("managedFields"))
    if managed is None:
        managed = _decode_managed(((old or {}).get("metadata") or {}).get("managedFields")) or {}
    ignore_status, only_status = _reset_filter(subresource, status_subresource)
    before, after = _view(old, ignore_status, only_status), _view(new, ignore_status, only_status)
    try:
        if not before and not managed:
            # A create: everything is added by this manager; encode it directly.
            fields_v1 = added_fields_v1(after, typed, skip=_STRIPPED)
            if fields_v1:
                key = _key(manager, "Update", api_version, subresource)
                managed[key] = _Entry(None, api_version, now, fields_v1)
            return _with_managed(new, managed)
        changed, removed = _changes(before, after, typed)
    except FieldPathError:
        # The apiserver's UpdateNoErrors: a write never fails over bookkeeping; the object just
        # loses its managedFields rather than carry wrong ones.
        return _with_managed(new, {})
    for entry in managed.values():
        entry.discard(changed)
        entry.discard(removed)
    if changed - _STRIPPED:
        key = _key(manager, "Update", api_version, subresource)
        previous = managed.get(key)
        managed[key] = _Entry(changed | (previous.fields if previous else set()), api_version, now)
    return _with_managed(new, managed)


def _applied_fields(config: JsonObj, typed: Schema, *, creating: bool, ignore_status: bool, only_status: bool,
                    kind: str, api_version: str) -> tuple[FieldSet | None, JsonObj]:
    """(the applied field set, its fieldsV1). An apply that creates the object only records the
    set (no one else owns anything to conflict with or prune), so it gets the encoding alone,
    built in one walk, and the set is decoded from it only if something asks."""
    try:
        if creating:
            return None, applied_fields_v1(config, typed, skip=_STRIPPED, only_top="status" if only_status else None,
                                           except_top="status" if ignore_status else None)
        fields = _reset_paths(to_field_set(config, typed), ignore_status, only_status)
    except FieldPathError as exc:
        raise _typed_error(kind, _object_name(config), api_version, exc, "patch") from exc
    return fields, encode_fields_v1(fields - _STRIPPED)


def server_side_apply(live: JsonObj | None, applied: JsonObj, *, manager: str, force: bool,
                      api_version: str, group: str, kind: str, subresource: str | None, now: str,
                      schema: JsonObj | None = None, status_subresource: bool = True) -> JsonObj:
    """Merge an applied configuration into `live` (or create from it when `live` is None) for
    `manager`, with managedFields, pruning of fields the manager stopped applying, and 409
    conflicts with other managers unless `force`. `schema`/`status_subresource` as in
    `record_update`. The result shares nothing with the inputs.
    """
    if not isinstance(applied, dict):
        raise ApiError.bad_request("error decoding YAML: the applied configuration must be an object")
    applied_meta = applied.get("metadata")
    if isinstance(applied_meta, dict) and applied_meta.get("managedFields") is not None:
        raise ApiError.bad_request("metadata.managedFields must be nil")
    typed = schema_for(group, kind, schema)
    ignore_status, only_status = _reset_filter(subresource, status_subresource)
    live_obj = _view(live, False, False)  # read-only: merging builds new containers
    managed: Managed = {}
    if live is not None:
        decoded = _decode_managed((live.get("metadata") or {}).get("managedFields"))
        if decoded is None:
            # An object nobody tracked yet: its current fields belong to "before-first-apply".
            owned, _ = _changes({}, _view(live_obj, ignore_status, only_status), typed)
            if owned - _STRIPPED:
                managed[_key(BEFORE_FIRST_APPLY, "Update", api_version, subresource)] = \
                    _Entry(owned, api_version, None)
        else:
            managed = decoded
    config = applied
    key = _key(manager, "Apply", api_version, subresource)
    previous = managed.get(key)
    applied_fields, applied_v1 = _applied_fields(config, typed, creating=live is None, ignore_status=ignore_status,
                                                 only_status=only_status, kind=kind, api_version=api_version)
    try:
        merged = merge_values(live_obj, config, typed)
        if previous is not None and applied_fields is not None and previous.same_as(applied_v1, applied_fields):
            # The same fields as last time (the steady state of a reconcile loop): nothing to prune.
            managed[key] = _Entry(None, api_version, previous.time, applied_v1)
        else:
            last_applied = previous.fields if previous else set()
            managed[key] = _Entry(applied_fields, api_version, previous.time if previous else None, applied_v1)
            if applied_fields is not None and not last_applied <= applied_fields:
                # Only fields applied last time and not now can go.
                merged = _prune(merged, managed, last_applied, typed)
        merged = _reset_object(merged, live_obj, ignore_status, only_status)
        if len(managed) > 1:
            changed, removed = _changes(_view(live_obj, ignore_status, only_status),
                                        _view(merged, ignore_status, only_status), typed)
        else:
            changed, removed = set(), set()  # no other manager to conflict with or to lose fields
    except FieldPathError as exc:
        raise _typed_error(kind, _object_name(live_obj), api_version, exc, "live") from exc
    conflicts = {other: entry.owned(changed) for other, entry in managed.items() if other != key}
    conflicts = {other: paths for other, paths in conflicts.items() if paths}
    if conflicts and not force:
        if manager == KUBECTL:
            # Upgrading from client-side apply: what the last-applied annotation holds may be taken.
            allowed = _last_applied_fields(live_obj, typed)
            conflicts = {other: paths - allowed for other, paths in conflicts.items()}
            unresolved = {other: paths for other, paths in conflicts.items() if paths}
            if unresolved:
                raise _conflict_error(unresolved)
            conflicts = {other: entry.owned(changed) for other, entry in managed.items() if other != key}
        else:
            raise _conflict_error(conflicts)
    for other, lost in conflicts.items():
        managed[other].discard(lost)
    for entry in managed.values():
        entry.discard(removed)
    if merged != live_obj or previous is None:
        managed[key].time = now
    result = clone_json(merged)
    if manager == KUBECTL:
        _sync_last_applied(result, applied)
    return _with_managed(result, managed)


def _annotations(obj: JsonObj) -> JsonObj | None:
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return annotations if isinstance(annotations, dict) else None


def _last_applied_fields(live: JsonObj, schema: Schema) -> FieldSet:
    """The fields of the client-side apply annotation (lastAppliedManager): conflicts on them do
    not block `kubectl apply --server-side` on an object `kubectl apply` managed before."""
    text = (_annotations(live) or {}).get(LAST_APPLIED)
    if not isinstance(text, str) or not text:
        return set()
    try:
        last = json.loads(text)
        return to_field_set(last, schema) if isinstance(last, dict) else set()
    except (ValueError, FieldPathError):
        return set()


def _sync_last_applied(result: JsonObj, applied: JsonObj) -> None:
    """Keep the client-side apply annotation in step with `kubectl apply --server-side`
    (lastAppliedUpdater), so a later client-side apply diffs against what was applied."""
    annotations = _annotations(result)
    if annotations is None or LAST_APPLIED not in annotations:
        return
    config = clone_json(applied)
    config_annotations = _annotations(config)
    if config_annotations is not None:
        config_annotations.pop(LAST_APPLIED, None)
    text = canonical_json(config) + "\n"
    if len(text) <= LAST_APPLIED_LIMIT:
        annotations[LAST_APPLIED] = text


def _prune(merged: JsonObj, managed: Managed, last_applied: FieldSet, schema: Schema) -> JsonObj:
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
