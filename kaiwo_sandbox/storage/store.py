"""The object store: what a real apiserver does between decoding a request and answering it.

Every write runs the same pipeline, whoever calls (HTTP clients or in-process controllers):
decode (+ uid, creationTimestamp) -> PrepareForCreate -> (patch) -> defaulting -> prune -> mutating
admission -> validation -> managedFields -> resourceVersion/generation -> commit -> notify
subscribers and watchers; then garbage collection reacts (gc.py).

`ObjectStore` is that pipeline and the reads, over collaborators with one job each:
- `tables.Tables`: the committed objects, their key order, the owner index, the resourceVersion counter;
- `fanout.Fanout`: history and who hears of each change (HTTP watches, subscribers, persistence);
- `admission.Admission`: in-process hooks, PodSecurity and the scopes of one HTTP write;
- `pipeline` and `namespaces`: the pure stages of a write;
- `gc.GarbageCollector`: what the garbage collector and the namespace controller do after a change.
Beside it: `subresources` (binding, scale), `snapshot` (dump and restore), `crd_install`.

Stored objects are never mutated after commit: a write builds a new dict and swaps it in. That
lets history, watch events and HTTP serialisation share snapshots without copying; the public
methods without `_owned`/`_ref` hand out copies (an orjson round trip, much cheaper than deepcopy).
"""

from __future__ import annotations

import uuid
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from kaiwo_sandbox.contracts import (
    CRDS,
    GVR,
    NAMESPACES,
    AdmissionHook,
    ApiError,
    Clock,
    JsonObj,
    PatchType,
    RealClock,
    ResourceInfo,
    StorageKey,
    WatchEvent,
    rfc3339,
)
from kaiwo_sandbox.registry import Registry
from kaiwo_sandbox.semantics import apply, event_conversion, patching, strategies
from kaiwo_sandbox.semantics.listing import ListResult, Selection, decode_continue, encode_continue
from kaiwo_sandbox.storage import crd_registration, pipeline, subresources
from kaiwo_sandbox.storage.admission import Admission, AdmissionNotes, FieldPaths
from kaiwo_sandbox.storage.fanout import EventList, Fanout, require_reached
from kaiwo_sandbox.storage.gc import GarbageCollector
from kaiwo_sandbox.storage.namespaces import namespace_for, namespace_of, require_open
from kaiwo_sandbox.storage.owners import ObjKey
from kaiwo_sandbox.storage.pipeline import clone, strip_volatile
from kaiwo_sandbox.storage.tables import Bucket, Tables, key_of

__all__ = ["SYSTEM_USER", "ObjectStore", "clone"]

SYSTEM_USER = "system:sandbox"
DEFAULT_HISTORY = 10_000

JsonList = list[JsonObj]  # inside ObjectStore the name `list` is the method
_SYSTEM_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink")


class ObjectStore:
    """In-memory apiserver storage with real semantics. Not thread-safe: run it on one event loop."""

    def __init__(self, clock: Clock | None = None, *, history_limit: int = DEFAULT_HISTORY) -> None:
        self.clock: Clock = clock or RealClock()
        self.registry = Registry()
        self.tables = Tables(self.registry)
        self.fanout = Fanout(history_limit)
        self.admission = Admission()
        self.gc = GarbageCollector(self)

    # ------------------------------------------------------------------ identity
    @property
    def resource_version(self) -> int:
        return self.tables.rv

    def resolve(self, gvr: GVR) -> ResourceInfo:
        return self.registry.resolve(gvr)

    def primary(self, info: ResourceInfo) -> ResourceInfo:
        """The resource that owns a storage (core events for events.k8s.io events)."""
        return self.tables.primary(info)

    def view(self, info: ResourceInfo, version: str, obj: JsonObj) -> JsonObj:
        """A stored snapshot as seen through `info`/`version` (no copy when nothing changes)."""
        if info.storage_group is not None:
            return event_conversion.from_core(obj)
        api_version = info.api_version(version)
        if obj.get("apiVersion") == api_version:
            return obj
        out = dict(obj)
        out["apiVersion"] = api_version
        return out

    def _to_storage(self, info: ResourceInfo, obj: JsonObj) -> JsonObj:
        if info.storage_group is not None:
            return event_conversion.to_core(obj)
        obj["apiVersion"] = info.api_version(info.stored_version)
        obj["kind"] = info.kind
        return obj

    # ------------------------------------------------------------------ reads
    def get(self, gvr: GVR, namespace: str | None, name: str) -> JsonObj:
        result: JsonObj = clone(self.get_ref(gvr, namespace, name))
        return result

    def get_ref(self, gvr: GVR, namespace: str | None, name: str) -> JsonObj:
        """The stored snapshot (read-only) in `gvr`'s form; 404 when absent."""
        info = self.resolve(gvr)
        obj = self.tables.bucket(info).get((namespace_of(info, namespace), name))
        if obj is None:
            raise ApiError.not_found(gvr, name)
        return self.view(info, gvr.version, obj)

    def find_ref(self, gvr: GVR, namespace: str | None, name: str) -> JsonObj | None:
        try:
            return self.get_ref(gvr, namespace, name)
        except ApiError:
            return None

    def refs(self, gvr: GVR) -> list[JsonObj]:
        """Every stored object of `gvr`'s kind as stored (read-only, unordered, no copy): for the
        store's own housekeeping, which would otherwise clone and sort tens of thousands of objects."""
        info = self.primary(self.resolve(gvr))
        return list(self.tables.bucket(info).values())

    def list(self, gvr: GVR, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None) -> tuple[list[JsonObj], str]:
        page = self.list_page(gvr, namespace, label_selector=label_selector, field_selector=field_selector)
        items: list[JsonObj] = clone(page.items)
        return items, page.resource_version

    def list_page(self, gvr: GVR, namespace: str | None = None, *, label_selector: str | None = None,
                  field_selector: str | None = None, limit: int | None = None,
                  continue_token: str | None = None, resource_version: str | None = None,
                  resource_version_match: str | None = None) -> ListResult:
        """A list as the apiserver serves it: ordered by namespace/name, paginated with a continue
        token that pins the list's resourceVersion (later pages show the same snapshot)."""
        info = self.resolve(gvr)
        selection = Selection.parse(label_selector, field_selector, info.kind)
        if limit is not None and limit <= 0:
            limit = None  # the apiserver pages only when limit > 0
        at_rv = self.tables.rv
        start = ""
        if continue_token:
            if resource_version not in (None, "", "0"):
                raise ApiError.bad_request("specifying resource version is not allowed when using continue")
            at_rv, start = decode_continue(continue_token)
            if at_rv < self.fanout.history.floor:
                raise ApiError(410, "Expired", "The provided continue parameter is too old to display a "
                               "consistent list result. You can start a new list without the continue "
                               "parameter, or use the continue value from the response to resume the list.")
        elif resource_version_match == "Exact" and resource_version:
            at_rv = self.parse_resource_version(resource_version)
            require_reached(at_rv, self.tables.rv)
            self.fanout.history.require(at_rv)
        elif resource_version_match not in (None, "", "NotOlderThan", "Exact"):
            raise ApiError.bad_request(f"resourceVersionMatch: Unsupported value: \"{resource_version_match}\"")
        bucket = self._snapshot(info, at_rv)
        order = self.tables.key_order(info, bucket)
        low, high = 0, len(order)
        if namespace:  # one namespace's keys are a contiguous run ("ns/" up to "ns0": "0" follows "/")
            prefix = namespace_of(info, namespace)
            low, high = bisect_left(order, f"{prefix}/"), bisect_left(order, f"{prefix}0")
        if start:
            low = max(low, bisect_right(order, start))
        items: list[JsonObj] = []
        next_token: str | None = None
        remaining: int | None = None
        for index in range(low, high):
            obj = bucket[key_of(order[index])]
            if selection.everything or selection.matches(obj):
                if limit and len(items) >= limit:
                    next_token = encode_continue(at_rv, order[index - 1])
                    if selection.everything:
                        remaining = high - index
                    break
                items.append(self.view(info, gvr.version, obj))
        return ListResult(items, str(at_rv), next_token, remaining)

    def _snapshot(self, info: ResourceInfo, at_rv: int) -> Bucket:
        """The storage as it was at `at_rv`, rebuilt by undoing newer events from history."""
        bucket = self.tables.bucket(info)
        if at_rv >= self.tables.rv:
            return bucket
        return self.fanout.history.rewind(bucket, self.primary(info).storage, at_rv)

    @staticmethod
    def parse_resource_version(value: str) -> int:
        try:
            return int(value)
        except ValueError:
            raise ApiError.bad_request(f'invalid resource version "{value}"') from None

    # ------------------------------------------------------------------ handed to the collaborators
    # The simulated cluster (through `contracts.Store`) and the API server reach every verb through
    # one object; these hand their calls to the collaborator that does the work.
    def subscribe(self, callback: Callable[[WatchEvent], None]) -> Callable[[], None]:
        return self.fanout.subscribe(callback)

    def add_admission_hook(self, hook: AdmissionHook) -> Callable[[], None]:
        return self.admission.add_hook(hook)

    def add_watcher(self, storage: StorageKey, callback: Callable[[WatchEvent], None]) -> Callable[[], None]:
        return self.fanout.add_watcher(storage, callback)

    def events_since(self, info: ResourceInfo, rv: int) -> EventList:
        """Committed events of `info`'s storage newer than `rv`; 410 when history no longer has them,
        504 for a version this server has not reached (the watch cache's TooLargeResourceVersion)."""
        return self.fanout.since(self.primary(info).storage, rv, self.tables.rv)

    def field_validation(self, mode: str) -> AbstractContextManager[FieldPaths]:
        return self.admission.field_validation(mode)

    def admission_notes(self) -> AbstractContextManager[AdmissionNotes]:
        return self.admission.notes()

    def webhook_admission(self, hook: AdmissionHook) -> AbstractContextManager[None]:
        return self.admission.webhooks(hook)

    decode_typed = staticmethod(pipeline.decode_typed)

    def bind(self, namespace: str, name: str, node_name: str, *, dry_run: bool = False,
             user: str = SYSTEM_USER) -> JsonObj:
        return subresources.bind(self, namespace, name, node_name, dry_run=dry_run)

    def get_scale(self, gvr: GVR, namespace: str | None, name: str) -> JsonObj:
        return subresources.get_scale(self, gvr, namespace, name)

    def update_scale(self, gvr: GVR, namespace: str | None, name: str, requested: JsonObj, *, dry_run: bool = False,
                     field_manager: str | None = None, user: str = SYSTEM_USER) -> JsonObj:
        return subresources.update_scale(self, gvr, namespace, name, requested, dry_run=dry_run,
                                         field_manager=field_manager, user=user)

    # ------------------------------------------------------------------ writes: create
    def create(self, gvr: GVR, obj: JsonObj, *, namespace: str | None = None, dry_run: bool = False,
               field_manager: str | None = None, user: str = SYSTEM_USER) -> JsonObj:
        stored = self.create_owned(gvr, clone(obj), namespace=namespace, dry_run=dry_run,
                                   field_manager=field_manager, user=user)
        result: JsonObj = clone(stored)
        return result

    def create_owned(self, gvr: GVR, obj: JsonObj, *, namespace: str | None = None, dry_run: bool = False,
                     field_manager: str | None = None, user: str = SYSTEM_USER,
                     managed: bool = True, admit: bool = True) -> JsonObj:
        """Create from a dict the store may keep (freshly decoded). Returns the stored snapshot."""
        info = self.resolve(gvr)
        pipeline.require_verb(info, "create")
        obj = pipeline.check_body(info, gvr, obj)
        meta = obj["metadata"]
        ns = namespace_for(info, meta, namespace)
        if meta.get("resourceVersion"):
            raise ApiError.bad_request("resourceVersion should not be set on objects to be created")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = pipeline.generate_name(str(meta["generateName"]), self.tables.bucket(info), ns)
        if info.namespaced:
            require_open(self.tables.bucket(self.resolve(NAMESPACES)).get(("", ns)), ns, info,
                         str(meta.get("name") or ""))
        for system_field in _SYSTEM_META:
            meta.pop(system_field, None)
        obj = self._to_storage(info, obj)
        meta = obj["metadata"]
        # System fields first: PrepareForCreate (e.g. the Job selector) and admission may read them.
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339(self.clock.now())
        uid, created_at = meta["uid"], meta["creationTimestamp"]
        strategies.prepare_create(info, obj)
        obj = self.admission.default(info, obj, owned=True)  # the store keeps the body it was handed
        if admit and self.admission.mutating:
            self.admission.admit("CREATE", gvr, obj, None, user)
        pipeline.validate(info, obj, None)
        if admit and info.namespaced:  # validating admission: PodSecurity
            self.admission.pod_security(info, obj, lambda: self.find_ref(NAMESPACES, None, ns))
        meta = obj["metadata"]
        name = str(meta["name"])
        key = (ns, name)
        if key in self.tables.bucket(info):
            raise ApiError.already_exists(gvr, name)
        if info.resource == "customresourcedefinitions" and info.group == CRDS.group:
            crd_registration.check(obj)
        for system_field, value in (("uid", uid), ("creationTimestamp", created_at)):
            meta[system_field] = value  # hooks and defaulting must not rewrite them
        if strategies.has_generation(info):
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if managed:
            obj = pipeline.record_manager(info, gvr, None, obj, field_manager or user, None, rfc3339(self.clock.now()))
        if dry_run:
            return self.view(info, gvr.version, obj)
        pipeline.check_stored_size(obj)
        obj["metadata"]["resourceVersion"] = str(self.tables.next_rv())
        self.tables.put(info, key, obj, None)
        self._emit("ADDED", info, obj, None)
        self._after_commit(info, obj, None)
        return self.view(info, gvr.version, obj)

    # ------------------------------------------------------------------ writes: update
    def update(self, gvr: GVR, obj: JsonObj, *, subresource: str | None = None, dry_run: bool = False,
               field_manager: str | None = None, user: str = SYSTEM_USER) -> JsonObj:
        stored = self.update_owned(gvr, clone(obj), subresource=subresource, dry_run=dry_run,
                                   field_manager=field_manager, user=user)
        result: JsonObj = clone(stored)
        return result

    def update_owned(self, gvr: GVR, obj: JsonObj, *, subresource: str | None = None, dry_run: bool = False,
                     field_manager: str | None = None, user: str = SYSTEM_USER, namespace: str | None = None,
                     name: str | None = None, managed: bool = True, admit: bool = True) -> JsonObj:
        """PUT. `namespace`/`name` are the URL's (checked against the body's)."""
        info = self.resolve(gvr)
        pipeline.require_verb(info, "update")
        obj = pipeline.check_body(info, gvr, obj)
        meta = obj["metadata"]
        if name is not None and meta.get("name") not in (None, name):
            raise ApiError.bad_request(f"the name of the object ({meta.get('name')}) does not match the name "
                                       f"on the URL ({name})")
        name = name or meta.get("name")
        if not name:
            raise ApiError.invalid(info.kind, info.group, "",
                                   [{"reason": "FieldValueRequired", "message": "Required value: name is "
                                     "required", "field": "metadata.name"}])
        ns = namespace_for(info, meta, namespace)
        key = (ns, str(name))
        old = self.tables.bucket(info).get(key)
        if old is None:
            raise ApiError.not_found(gvr, str(name))
        return self._update_from(info, gvr, key, old, obj, subresource=subresource, dry_run=dry_run,
                                 manager=field_manager or user, user=user, managed=managed, admit=admit)

    def _update_from(self, info: ResourceInfo, gvr: GVR, key: ObjKey, old: JsonObj, obj: JsonObj, *,
                     subresource: str | None, dry_run: bool, manager: str, user: str, managed: bool = True,
                     admit: bool = True, precondition: bool = True) -> JsonObj:
        """The shared tail of PUT and PATCH: `obj` is the full candidate (request form)."""
        meta = obj.setdefault("metadata", {})
        sent_rv = meta.get("resourceVersion")
        old_rv = old["metadata"].get("resourceVersion")
        if precondition and sent_rv and sent_rv != old_rv:
            raise ApiError.conflict(gvr, key[1], "the object has been modified; please apply your changes "
                                    "to the latest version and try again")
        obj = self._to_storage(info, obj)
        new = pipeline.merge_subresource(info, old, obj, subresource)
        new_meta = new["metadata"]
        old_meta = old["metadata"]
        for field in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                      "generation", "name", "namespace"):
            if field in old_meta:
                new_meta[field] = old_meta[field]
            else:
                new_meta.pop(field, None)
        if "managedFields" not in new_meta and "managedFields" in old_meta:
            new_meta["managedFields"] = old_meta["managedFields"]
        new_meta["resourceVersion"] = old_rv
        if subresource is None:
            new = self.admission.default(info, new)
            if admit and self.admission.mutating:
                self.admission.admit("UPDATE", gvr, new, old, user)
        pipeline.validate(info, new, old)
        if admit and subresource is None and info.namespaced and info.resource != "pods":
            # workload templates (pod updates are not judged)
            self.admission.pod_security(info, new, lambda: self.find_ref(NAMESPACES, None, key[0]))
        if old_meta.get("deletionTimestamp"):
            added = set(new["metadata"].get("finalizers") or ()) - set(old_meta.get("finalizers") or ())
            if added:
                raise ApiError.invalid(info.kind, info.group, key[1], [{
                    "reason": "FieldValueForbidden", "field": "metadata.finalizers",
                    "message": "Forbidden: no new finalizers can be added if the object is being deleted, "
                               f"found new finalizers {sorted(added)!r}".replace("'", '"')}])
        if strip_volatile(new) == strip_volatile(old):
            return self.view(info, gvr.version, old)  # no-op: no new resourceVersion, no event
        if "generation" in new["metadata"] and strategies.spec_changed(info, old, new):
            new["metadata"]["generation"] = int(old_meta.get("generation") or 0) + 1
        if managed:
            new = pipeline.record_manager(info, gvr, old, new, manager, subresource, rfc3339(self.clock.now()))
        if dry_run:
            return self.view(info, gvr.version, new)
        return self.view(info, gvr.version, self.commit_update(info, key, old, new))

    def commit_update(self, info: ResourceInfo, key: ObjKey, old: JsonObj, new: JsonObj) -> JsonObj:
        """Commit `new` over `old` (both stored at `key`), checked and admitted already: a new
        resourceVersion, then MODIFIED, or DELETED when it removes the last finalizer."""
        pipeline.check_stored_size(new)
        new["metadata"]["resourceVersion"] = str(self.tables.next_rv())
        if new["metadata"].get("deletionTimestamp") and not strategies.finalizers_left(info, new):
            # The write that removes the last finalizer deletes the object: watchers see DELETED.
            self._remove(info, key, new, old)
            return new
        self.tables.put(info, key, new, old)
        self._emit("MODIFIED", info, new, old)
        self._after_commit(info, new, old)
        return new

    # ------------------------------------------------------------------ writes: patch
    def patch(self, gvr: GVR, namespace: str | None, name: str, patch: Any, patch_type: PatchType, *,
              subresource: str | None = None, field_manager: str | None = None, force: bool = False,
              dry_run: bool = False, user: str = SYSTEM_USER) -> JsonObj:
        stored = self.patch_owned(gvr, namespace, name, clone(patch), patch_type, subresource=subresource,
                                  field_manager=field_manager, force=force, dry_run=dry_run, user=user)
        result: JsonObj = clone(stored)
        return result

    def patch_owned(self, gvr: GVR, namespace: str | None, name: str, patch: Any, patch_type: PatchType, *,
                    subresource: str | None = None, field_manager: str | None = None, force: bool = False,
                    dry_run: bool = False, user: str = SYSTEM_USER) -> JsonObj:
        info = self.resolve(gvr)
        pipeline.require_verb(info, "patch")
        if subresource not in (None, "status"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if subresource == "status" and not info.has_status:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        ns = namespace_of(info, namespace)
        key = (ns, name)
        old = self.tables.bucket(info).get(key)
        manager = field_manager or user
        if patch_type == "apply":
            return self._apply(info, gvr, key, old, patch, manager=manager, force=force, dry_run=dry_run,
                               user=user, subresource=subresource, field_manager=field_manager)
        if old is None:
            raise ApiError.not_found(gvr, name)
        view = self.view(info, gvr.version, old)
        well_typed = pipeline.well_typed(info, gvr, view)  # before patching: a merge patch edits its copy in place
        if patch_type == "merge" and subresource == "status":
            # Of a /status patch only status (and metadata) is kept, and nothing below modifies
            # either in place: the patched object may share what the patch leaves alone with the
            # stored one, so nothing is copied but the patched paths.
            patched = patching.apply_merge_patch_sharing(view, patch)
            if isinstance(patched.get("metadata"), dict):
                patched["metadata"] = dict(patched["metadata"])
        else:
            patched = pipeline.apply_patch(info, clone(view), patch, patch_type)
        if not isinstance(patched, dict):
            raise ApiError.bad_request("the patched object is not a JSON object")
        patched = pipeline.check_body(info, gvr, patched)
        if well_typed:  # an object planted malformed in-process stays patchable
            pipeline.decode_typed(info, gvr, patched)
        patched_meta = patched["metadata"]
        if patched_meta.get("name", name) != name:
            raise ApiError.bad_request(f"the name of the object ({patched_meta.get('name')}) does not match "
                                       f"the name on the URL ({name})")
        if info.namespaced:
            patched["metadata"]["namespace"] = ns  # a patch cannot move an object
        else:
            patched["metadata"].pop("namespace", None)
        return self._update_from(info, gvr, key, old, patched, subresource=subresource, dry_run=dry_run,
                                 manager=manager, user=user)

    def _apply(self, info: ResourceInfo, gvr: GVR, key: ObjKey, old: JsonObj | None, applied: Any, *,
               manager: str, force: bool, dry_run: bool, user: str, subresource: str | None,
               field_manager: str | None) -> JsonObj:
        if not field_manager:
            raise ApiError.bad_request("PATCH requests with apply content type must have a fieldManager")
        if not isinstance(applied, dict):
            raise ApiError.bad_request("the applied configuration must be an object")
        meta = applied.get("metadata") or {}
        if meta.get("name") not in (None, key[1]):
            raise ApiError.bad_request(f"the name of the object ({meta.get('name')}) does not match the name "
                                       f"on the URL ({key[1]})")
        if not applied.get("apiVersion") or not applied.get("kind"):
            raise ApiError.bad_request("invalid object type: apiVersion and kind must be set in an applied "
                                       "configuration")
        pipeline.decode_typed(info, gvr, applied)
        live = None if old is None else clone(self.view(info, gvr.version, old))
        merged = apply.server_side_apply(
            live, applied, manager=manager, force=force, api_version=gvr.api_version, group=info.group,
            kind=info.kind, subresource=subresource, now=rfc3339(self.clock.now()),
            schema=info.schemas.get(gvr.version), status_subresource=info.has_status)
        if old is None:
            if subresource is not None:
                raise ApiError.not_found(gvr, key[1])
            merged.setdefault("metadata", {})["name"] = key[1]
            return self.create_owned(gvr, merged, namespace=key[0] or None, dry_run=dry_run, user=user,
                                     managed=False)
        merged = pipeline.check_body(info, gvr, merged)
        if info.namespaced:
            merged["metadata"]["namespace"] = key[0]
        return self._update_from(info, gvr, key, old, merged, subresource=subresource, dry_run=dry_run,
                                 manager=manager, user=user, managed=False, precondition=True)

    # ------------------------------------------------------------------ writes: delete
    def delete(self, gvr: GVR, namespace: str | None, name: str, *, propagation_policy: str | None = None,
               resource_version: str | None = None, dry_run: bool = False, user: str = SYSTEM_USER) -> JsonObj:
        result: JsonObj = clone(self.delete_ref(gvr, namespace, name, propagation_policy=propagation_policy,
                                                resource_version=resource_version, dry_run=dry_run, user=user))
        return result

    def delete_ref(self, gvr: GVR, namespace: str | None, name: str, *, propagation_policy: str | None = None,
                   resource_version: str | None = None, uid: str | None = None, dry_run: bool = False,
                   user: str = SYSTEM_USER) -> JsonObj:
        info = self.resolve(gvr)
        pipeline.require_verb(info, "delete")
        key = (namespace_of(info, namespace), name)
        old = self.tables.bucket(info).get(key)
        if old is None:
            raise ApiError.not_found(gvr, name)
        old_meta = old["metadata"]
        if resource_version and resource_version != old_meta.get("resourceVersion"):
            raise ApiError.conflict(gvr, name, f"the ResourceVersion in the precondition ({resource_version}) "
                                    f"does not match the ResourceVersion in record "
                                    f"({old_meta.get('resourceVersion')}). The object might have been modified")
        if uid and uid != old_meta.get("uid"):
            raise ApiError.conflict(gvr, name, f"the UID in the precondition ({uid}) does not match the UID in "
                                    f"record ({old_meta.get('uid')}). The object might have been deleted and "
                                    "then recreated")
        policy = propagation_policy or strategies.default_propagation(info)
        if policy not in ("Background", "Foreground", "Orphan"):
            raise ApiError.bad_request(f'propagationPolicy: Unsupported value: "{policy}": supported values: '
                                       '"Foreground", "Background", "Orphan"')
        graceful = info.resource == "namespaces" or bool(old_meta.get("finalizers")) or policy == "Foreground"
        if not graceful:
            if dry_run:
                return self.view(info, gvr.version, old)
            final = dict(old)
            final["metadata"] = dict(old_meta)
            final["metadata"]["resourceVersion"] = str(self.tables.next_rv())
            self._remove(info, key, final, old, orphan=policy == "Orphan")
            return self.view(info, gvr.version, final)
        new: JsonObj = clone(old)
        meta = new["metadata"]
        if not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = rfc3339(self.clock.now())
            meta["deletionGracePeriodSeconds"] = 0
            if "generation" in meta:
                meta["generation"] = int(meta["generation"]) + 1
        finalizers = list(meta.get("finalizers") or [])
        if policy == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        if policy == "Orphan" and "orphan" not in finalizers and info.resource != "namespaces":
            finalizers.append("orphan")
        if finalizers:
            meta["finalizers"] = finalizers
        if info.resource == "namespaces":
            new.setdefault("status", {})["phase"] = "Terminating"
        if dry_run:
            return self.view(info, gvr.version, new)
        if strip_volatile(new) == strip_volatile(old):
            return self.view(info, gvr.version, old)
        committed = self.commit_update(info, key, old, new)
        return self.view(info, gvr.version, committed)

    def delete_collection(self, gvr: GVR, namespace: str | None, *, label_selector: str | None = None,
                          field_selector: str | None = None, propagation_policy: str | None = None,
                          dry_run: bool = False, user: str = SYSTEM_USER) -> JsonList:
        info = self.resolve(gvr)
        pipeline.require_verb(info, "deletecollection")
        page = self.list_page(gvr, namespace, label_selector=label_selector, field_selector=field_selector)
        deleted: JsonList = []
        for item in page.items:
            meta = item["metadata"]
            try:
                deleted.append(self.delete_ref(gvr, meta.get("namespace"), meta["name"],
                                               propagation_policy=propagation_policy, dry_run=dry_run, user=user))
            except ApiError as err:
                if err.code != 404:
                    raise
        return deleted

    def _remove(self, info: ResourceInfo, key: ObjKey, final: JsonObj, old: JsonObj, *,
                orphan: bool = False) -> None:
        """Drop an object for good (resourceVersion already bumped on `final`) and let GC react."""
        self.tables.remove(info, key, final, old)
        self._emit("DELETED", info, final, old)
        if info.group == CRDS.group and info.resource == CRDS.resource:
            self._unregister_crd(final)
        self.gc.removed(info, final, orphan=orphan)

    def system_update(self, info: ResourceInfo, key: ObjKey, mutate: Callable[[JsonObj], None]) -> None:
        """A bookkeeping write (GC, namespace finalizer): no admission, no managedFields."""
        old = self.tables.bucket(info).get(key)
        if old is None:
            return
        new: JsonObj = clone(old)
        mutate(new)
        if strip_volatile(new) == strip_volatile(old):
            return
        self.commit_update(info, key, old, new)

    # ------------------------------------------------------------------ after a commit
    def _emit(self, kind: str, info: ResourceInfo, obj: JsonObj, old: JsonObj | None) -> None:
        owner = self.primary(info)
        event = WatchEvent(kind, owner.gvr(owner.stored_version), obj, old, self.tables.rv)  # type: ignore[arg-type]
        self.fanout.publish(owner.storage, event)

    def _after_commit(self, info: ResourceInfo, obj: JsonObj, old: JsonObj | None) -> None:
        if info.group == CRDS.group and info.resource == CRDS.resource:
            crd_registration.register(self.registry, obj)
        if (obj["metadata"].get("ownerReferences") and
                (old is None or old["metadata"].get("ownerReferences") != obj["metadata"]["ownerReferences"])):
            self.gc.check_owners(info, obj)
        if obj["metadata"].get("deletionTimestamp"):
            self.gc.deletion_started(info, obj)

    def _unregister_crd(self, crd: JsonObj) -> None:
        """A deleted CRD takes its objects with it (each deleted, with its watch event), then its resource."""
        info = crd_registration.served(self.registry, crd)
        if info is None:
            return
        bucket = self.tables.bucket(info)
        for key in sorted(bucket):
            obj = bucket[key]
            final = dict(obj)
            final["metadata"] = dict(obj["metadata"])
            final["metadata"]["resourceVersion"] = str(self.tables.next_rv())
            self._remove(info, key, final, obj)
        self.tables.drop(info.storage)
        self.registry.remove(info.group, info.resource)
