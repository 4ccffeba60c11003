"""The object store: what a real apiserver does between decoding a request and answering it.

Every write runs the same pipeline, whoever calls (HTTP clients or in-process controllers):
decode (+ uid, creationTimestamp) -> PrepareForCreate -> (patch) -> defaulting -> prune -> mutating
admission -> validation -> managedFields -> resourceVersion/generation -> commit -> notify
subscribers and watchers; then garbage collection reacts (gc.py).

Stored objects are never mutated after commit: a write builds a new dict and swaps it in. That
lets history, watch events and HTTP serialisation share snapshots without copying; the public
`Store` methods hand out copies (an orjson round trip, much cheaper than deepcopy).
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import uuid
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson

from kaiwo_sandbox.contracts import (
    CRDS,
    GVR,
    NAMESPACES,
    PODS,
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
from kaiwo_sandbox.semantics import apply, event_conversion, patching, scale, strategies
from kaiwo_sandbox.semantics.builtin import pod_security
from kaiwo_sandbox.semantics.listing import ListResult, Selection, decode_continue, encode_continue
from kaiwo_sandbox.storage import crd_registration, pipeline
from kaiwo_sandbox.storage.gc import GarbageCollector
from kaiwo_sandbox.storage.history import History
from kaiwo_sandbox.storage.owners import ObjKey, OwnerIndex

log = logging.getLogger(__name__)

SYSTEM_USER = "system:sandbox"
DEFAULT_HISTORY = 10_000

# Aliases: inside ObjectStore the name `list` is the method.
JsonList = list[JsonObj]
FieldPaths = list[str]
EventList = list[WatchEvent]
Located = tuple[ResourceInfo, ObjKey, JsonObj]
LocatedList = list[Located]

_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's utilrand alphabet
_SYSTEM_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink")


def clone(obj: Any) -> Any:
    """Deep copy of a JSON value (orjson round trip: ~10x faster than copy.deepcopy)."""
    return orjson.loads(orjson.dumps(obj))


def random_suffix(length: int = 5) -> str:
    return "".join(secrets.choice(_NAME_ALPHABET) for _ in range(length))


def _key_string(key: ObjKey) -> str:
    return f"{key[0]}/{key[1]}"


KeyOrder = list[str]  # a bucket's keys as "namespace/name", sorted (`ObjectStore.list` shadows `list` in the class)


def _key_of(key_string: str) -> ObjKey:
    """The inverse of `_key_string` (neither a namespace nor a name holds a "/")."""
    namespace, _, name = key_string.partition("/")
    return namespace, name


def _strip_volatile(obj: JsonObj) -> JsonObj:
    """The object without what every write changes anyway (to detect no-op writes)."""
    meta = dict(obj.get("metadata") or {})
    meta.pop("resourceVersion", None)
    meta.pop("managedFields", None)
    out = dict(obj)
    out["metadata"] = meta
    return out


# How far the resourceVersion counter jumps when state is restored: more writes than a run can make
# in the persister's interval, whose versions a crash may have lost after clients saw them.
RESTORE_GAP = 100_000


@dataclass(slots=True)
class AdmissionNotes:
    """What admission plugins said about one write besides yes or no."""

    warnings: list[str] = dataclasses.field(default_factory=list)  # each becomes a `Warning: 299` header
    annotations: dict[str, str] = dataclasses.field(default_factory=dict)  # for the audit record


class ObjectStore:
    """In-memory apiserver storage with real semantics. Not thread-safe: run it on one event loop."""

    def __init__(self, clock: Clock | None = None, *, history_limit: int = DEFAULT_HISTORY) -> None:
        self.clock: Clock = clock or RealClock()
        self.registry = Registry()
        self._data: dict[StorageKey, dict[ObjKey, JsonObj]] = {}
        self._order: dict[StorageKey, KeyOrder] = {}  # each bucket's keys in list order (`_key_order`)
        self._rv = 0
        self.history = History(history_limit)
        self._subscribers: list[Callable[[WatchEvent], None]] = []
        self._watchers: dict[StorageKey, list[Callable[[WatchEvent], None]]] = {}
        self._hooks: list[AdmissionHook] = []
        self.owners = OwnerIndex()
        self.write_listeners: list[Callable[[], None]] = []  # persistence: "something changed"
        self._field_validation = "Ignore"  # the fieldValidation of the HTTP write in progress
        self.unknown_fields: list[str] = []  # what that write dropped (for Warn's Warning headers)
        self._notes: AdmissionNotes | None = None  # what admission said about the HTTP write in progress
        self._webhooks: AdmissionHook | None = None  # the HTTP write's admission webhooks (`webhook_admission`)
        self.gc = GarbageCollector(self)

    # ------------------------------------------------------------------ identity
    @property
    def resource_version(self) -> int:
        return self._rv

    def resolve(self, gvr: GVR) -> ResourceInfo:
        return self.registry.resolve(gvr)

    def primary(self, info: ResourceInfo) -> ResourceInfo:
        """The resource that owns a storage (core events for events.k8s.io events)."""
        if info.storage_group is None:
            return info
        found = self.registry.find(*info.storage)
        return found if found is not None else info

    def storage_gvr(self, info: ResourceInfo) -> GVR:
        owner = self.primary(info)
        return owner.gvr(owner.stored_version)

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

    def _bucket(self, info: ResourceInfo) -> dict[ObjKey, JsonObj]:
        return self._data.setdefault(info.storage, {})

    def _namespace_of(self, info: ResourceInfo, namespace: str | None) -> str:
        return (namespace or "") if info.namespaced else ""

    # ------------------------------------------------------------------ reads
    def get(self, gvr: GVR, namespace: str | None, name: str) -> JsonObj:
        result: JsonObj = clone(self.get_ref(gvr, namespace, name))
        return result

    def get_ref(self, gvr: GVR, namespace: str | None, name: str) -> JsonObj:
        """The stored snapshot (read-only) in `gvr`'s form; 404 when absent."""
        info = self.resolve(gvr)
        obj = self._bucket(info).get((self._namespace_of(info, namespace), name))
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
        return list(self._bucket(info).values())

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
        at_rv = self._rv
        start = ""
        if continue_token:
            if resource_version not in (None, "", "0"):
                raise ApiError.bad_request("specifying resource version is not allowed when using continue")
            at_rv, start = decode_continue(continue_token)
            if at_rv < self.history.floor:
                raise ApiError(410, "Expired", "The provided continue parameter is too old to display a "
                               "consistent list result. You can start a new list without the continue "
                               "parameter, or use the continue value from the response to resume the list.")
        elif resource_version_match == "Exact" and resource_version:
            at_rv = self.parse_resource_version(resource_version)
            self._require_reached(at_rv)
            self.history.require(at_rv)
        elif resource_version_match not in (None, "", "NotOlderThan", "Exact"):
            raise ApiError.bad_request(f"resourceVersionMatch: Unsupported value: \"{resource_version_match}\"")
        bucket = self._snapshot(info, at_rv)
        order = self._key_order(info, bucket)
        low, high = 0, len(order)
        if namespace:  # one namespace's keys are a contiguous run ("ns/" up to "ns0": "0" follows "/")
            prefix = self._namespace_of(info, namespace)
            low, high = bisect_left(order, f"{prefix}/"), bisect_left(order, f"{prefix}0")
        if start:
            low = max(low, bisect_right(order, start))
        items: list[JsonObj] = []
        next_token: str | None = None
        remaining: int | None = None
        for index in range(low, high):
            obj = bucket[_key_of(order[index])]
            if selection.everything or selection.matches(obj):
                if limit and len(items) >= limit:
                    next_token = encode_continue(at_rv, order[index - 1])
                    if selection.everything:
                        remaining = high - index
                    break
                items.append(self.view(info, gvr.version, obj))
        return ListResult(items, str(at_rv), next_token, remaining)

    def _key_order(self, info: ResourceInfo, bucket: dict[ObjKey, JsonObj]) -> KeyOrder:
        """`bucket`'s keys as "namespace/name", sorted: etcd's key order, in which the apiserver lists
        and pages. Kept for each live bucket as objects come and go (`_commit`, `_remove`), so that a
        page is a bisect and a walk of its own length; sorting every key for every page made a
        paginated list of 20,000 Jobs quadratic (1.2 s of the sandbox's CPU for one informer's list)."""
        live = self._data.get(info.storage)
        if bucket is not live:  # a snapshot rewound from history: its own order
            return sorted(map(_key_string, bucket))
        order = self._order.get(info.storage)
        if order is None:
            order = self._order[info.storage] = sorted(map(_key_string, bucket))
        return order

    def _snapshot(self, info: ResourceInfo, at_rv: int) -> dict[ObjKey, JsonObj]:
        """The storage as it was at `at_rv`, rebuilt by undoing newer events from history."""
        bucket = self._bucket(info)
        if at_rv >= self._rv:
            return bucket
        return self.history.rewind(bucket, self.primary(info).storage, at_rv)

    @staticmethod
    def parse_resource_version(value: str) -> int:
        try:
            return int(value)
        except ValueError:
            raise ApiError.bad_request(f'invalid resource version "{value}"') from None

    # ------------------------------------------------------------------ subscriptions
    def subscribe(self, callback: Callable[[WatchEvent], None]) -> Callable[[], None]:
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def add_watcher(self, storage: StorageKey, callback: Callable[[WatchEvent], None]) -> Callable[[], None]:
        """Like `subscribe`, but only for one storage (what HTTP watches use)."""
        callbacks = self._watchers.setdefault(storage, [])
        callbacks.append(callback)

        def remove() -> None:
            if callback in callbacks:
                callbacks.remove(callback)

        return remove

    def add_admission_hook(self, hook: AdmissionHook) -> Callable[[], None]:
        self._hooks.append(hook)

        def remove() -> None:
            if hook in self._hooks:
                self._hooks.remove(hook)

        return remove

    def events_since(self, info: ResourceInfo, rv: int) -> EventList:
        """Committed events of `info`'s storage newer than `rv`; 410 when history no longer has them,
        504 for a version this server has not reached (the watch cache's TooLargeResourceVersion)."""
        self._require_reached(rv)
        return self.history.since(self.primary(info).storage, rv)

    def _require_reached(self, rv: int) -> None:
        if rv > self._rv:
            raise ApiError(504, "Timeout", f"Too large resource version: {rv}, current: {self._rv}",
                           {"causes": [{"reason": "ResourceVersionTooLarge",
                                        "message": "Too large resource version"}], "retryAfterSeconds": 1})

    def _emit(self, kind: str, info: ResourceInfo, obj: JsonObj, old: JsonObj | None) -> None:
        event = WatchEvent(kind, self.storage_gvr(info), obj, old, self._rv)  # type: ignore[arg-type]
        self.history.record(event)
        for callback in list(self._watchers.get(self.primary(info).storage, ())):
            callback(event)
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception:
                log.exception("sandbox: subscriber failed on %s %s", kind, event.gvr)
        for listener in self.write_listeners:
            listener()

    def expire_history(self) -> None:
        """Forget all history (fault injection: the next resume or continue gets 410)."""
        self.history.forget(self._rv)

    @contextmanager
    def field_validation(self, mode: str) -> Iterator[FieldPaths]:
        """Scope one write's `fieldValidation`: Strict rejects unknown fields of custom resources
        with 400 instead of pruning them; Warn prunes and collects them in the yielded list (for
        Warning headers); Ignore just prunes. The store is synchronous, so this scopes one request."""
        previous = self._field_validation
        self._field_validation = mode
        self.unknown_fields = []
        try:
            yield self.unknown_fields
        finally:
            self._field_validation = previous

    @contextmanager
    def admission_notes(self) -> Iterator[AdmissionNotes]:
        """Scope one HTTP write: the warnings (`Warning` headers) and audit annotations admission plugins
        give it are collected in the yielded notes; outside a scope (the store's own and the simulated
        controllers' writes) they are dropped, as nobody would read them."""
        previous, self._notes = self._notes, AdmissionNotes()
        try:
            yield self._notes
        finally:
            self._notes = previous

    @contextmanager
    def webhook_admission(self, hook: AdmissionHook) -> Iterator[None]:
        """Scope one HTTP write's mutating admission webhooks: `hook` runs after the in-tree admission
        hooks, on the defaulted candidate. Webhooks are HTTP calls and the store is synchronous, so the
        API server calls them between passes of the same write (see apiserver/webhooks/dispatch.py):
        the hook here only captures the candidate, or replays the patches the webhooks answered."""
        previous, self._webhooks = self._webhooks, hook
        try:
            yield
        finally:
            self._webhooks = previous

    def _note(self, review: pod_security.Review) -> None:
        if self._notes is not None:
            self._notes.warnings.extend(review.warnings)
            self._notes.annotations.update(review.annotations)
        if review.denial is not None:
            raise review.denial

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
        self._require_verb(info, "create")
        obj = self._check_body(info, gvr, obj)
        meta = obj["metadata"]
        ns = self._namespace_for(info, meta, namespace)
        if meta.get("resourceVersion"):
            raise ApiError.bad_request("resourceVersion should not be set on objects to be created")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._generate_name(info, ns, str(meta["generateName"]))
        if info.namespaced:
            self._require_namespace_open(ns, info, str(meta.get("name") or ""))
        for system_field in _SYSTEM_META:
            meta.pop(system_field, None)
        obj = self._to_storage(info, obj)
        meta = obj["metadata"]
        # System fields first: PrepareForCreate (e.g. the Job selector) and admission may read them.
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339(self.clock.now())
        uid, created_at = meta["uid"], meta["creationTimestamp"]
        strategies.prepare_create(info, obj)
        obj = self._default(info, obj, owned=True)  # the store keeps the body it was handed
        if admit and (self._hooks or self._webhooks is not None):
            self._admit("CREATE", gvr, obj, None, user)
        self._validate(info, obj, None)
        if admit and info.namespaced:  # validating admission: PodSecurity
            self._pod_security(info, obj, ns)
        meta = obj["metadata"]
        name = str(meta["name"])
        key = (ns, name)
        if key in self._bucket(info):
            raise ApiError.already_exists(gvr, name)
        if info.resource == "customresourcedefinitions" and info.group == CRDS.group:
            self._check_crd(obj)
        for system_field, value in (("uid", uid), ("creationTimestamp", created_at)):
            meta[system_field] = value  # hooks and defaulting must not rewrite them
        if strategies.has_generation(info):
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if managed:
            obj = self._record_manager(info, gvr, None, obj, field_manager or user, None)
        if dry_run:
            return self.view(info, gvr.version, obj)
        pipeline.check_stored_size(obj)
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._commit(info, key, obj, None)
        self._emit("ADDED", info, obj, None)
        self._after_commit(info, obj, None)
        return self.view(info, gvr.version, obj)

    def _generate_name(self, info: ResourceInfo, ns: str, prefix: str) -> str:
        # names.SimpleNameGenerator: prefix cut to leave room for 5 random characters.
        prefix = prefix[: 63 - 5] if len(prefix) > 63 - 5 else prefix
        bucket = self._bucket(info)
        for _ in range(8):
            name = prefix + random_suffix()
            if (ns, name) not in bucket:
                return name
        return prefix + random_suffix(8)

    def _namespace_for(self, info: ResourceInfo, meta: JsonObj, namespace: str | None) -> str:
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

    def _require_namespace_open(self, ns: str, info: ResourceInfo, name: str) -> None:
        namespace = self._bucket(self.resolve(NAMESPACES)).get(("", ns))
        if namespace is None:
            raise ApiError.not_found(NAMESPACES, ns)
        if namespace["metadata"].get("deletionTimestamp"):
            qualified = f"{info.resource}.{info.group}" if info.group else info.resource
            raise ApiError(403, "Forbidden", f'{qualified} "{name}" is forbidden: unable to create new content '
                           f"in namespace {ns} because it is being terminated",
                           {"name": name, "group": info.group, "kind": info.resource,
                            "causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                                        "message": f"namespace {ns} is being terminated"}]})

    def _require_verb(self, info: ResourceInfo, verb: str) -> None:
        if verb not in info.verbs:
            raise ApiError.method_not_allowed(f"{verb} is not supported on resources of kind "
                                              f"\"{info.resource}.{info.group}\"".replace(".\"", "\""))

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
        self._require_verb(info, "update")
        obj = self._check_body(info, gvr, obj)
        meta = obj["metadata"]
        if name is not None and meta.get("name") not in (None, name):
            raise ApiError.bad_request(f"the name of the object ({meta.get('name')}) does not match the name "
                                       f"on the URL ({name})")
        name = name or meta.get("name")
        if not name:
            raise ApiError.invalid(info.kind, info.group, "",
                                   [{"reason": "FieldValueRequired", "message": "Required value: name is "
                                     "required", "field": "metadata.name"}])
        ns = self._namespace_for(info, meta, namespace)
        key = (ns, str(name))
        old = self._bucket(info).get(key)
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
        new = self._merge_subresource(info, old, obj, subresource)
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
            new = self._default(info, new)
            if admit and (self._hooks or self._webhooks is not None):
                self._admit("UPDATE", gvr, new, old, user)
        self._validate(info, new, old)
        if admit and subresource is None and info.namespaced and info.resource != "pods":
            self._pod_security(info, new, key[0])  # workload templates (pod updates are not judged)
        if old_meta.get("deletionTimestamp"):
            added = set(new["metadata"].get("finalizers") or ()) - set(old_meta.get("finalizers") or ())
            if added:
                raise ApiError.invalid(info.kind, info.group, key[1], [{
                    "reason": "FieldValueForbidden", "field": "metadata.finalizers",
                    "message": "Forbidden: no new finalizers can be added if the object is being deleted, "
                               f"found new finalizers {sorted(added)!r}".replace("'", '"')}])
        if _strip_volatile(new) == _strip_volatile(old):
            return self.view(info, gvr.version, old)  # no-op: no new resourceVersion, no event
        if "generation" in new["metadata"] and strategies.spec_changed(info, old, new):
            new["metadata"]["generation"] = int(old_meta.get("generation") or 0) + 1
        if managed:
            new = self._record_manager(info, gvr, old, new, manager, subresource)
        if dry_run:
            return self.view(info, gvr.version, new)
        return self.view(info, gvr.version, self._commit_update(info, key, old, new))

    def _merge_subresource(self, info: ResourceInfo, old: JsonObj, obj: JsonObj,
                           subresource: str | None) -> JsonObj:
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

    def _commit_update(self, info: ResourceInfo, key: ObjKey, old: JsonObj, new: JsonObj) -> JsonObj:
        pipeline.check_stored_size(new)
        self._rv += 1
        new["metadata"]["resourceVersion"] = str(self._rv)
        if new["metadata"].get("deletionTimestamp") and not strategies.finalizers_left(info, new):
            # The write that removes the last finalizer deletes the object: watchers see DELETED.
            self._remove(info, key, new, old)
            return new
        self._commit(info, key, new, old)
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
        self._require_verb(info, "patch")
        if subresource not in (None, "status"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if subresource == "status" and not info.has_status:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        ns = self._namespace_of(info, namespace)
        key = (ns, name)
        old = self._bucket(info).get(key)
        manager = field_manager or user
        if patch_type == "apply":
            return self._apply(info, gvr, key, old, patch, manager=manager, force=force, dry_run=dry_run,
                               user=user, subresource=subresource, field_manager=field_manager)
        if old is None:
            raise ApiError.not_found(gvr, name)
        view = self.view(info, gvr.version, old)
        well_typed = self._well_typed(info, gvr, view)  # before patching: a merge patch edits its copy in place
        if patch_type == "merge" and subresource == "status":
            # Of a /status patch only status (and metadata) is kept, and nothing below modifies
            # either in place: the patched object may share what the patch leaves alone with the
            # stored one, so nothing is copied but the patched paths.
            patched = patching.apply_merge_patch_sharing(view, patch)
            if isinstance(patched.get("metadata"), dict):
                patched["metadata"] = dict(patched["metadata"])
        else:
            patched = self._apply_patch(info, clone(view), patch, patch_type)
        if not isinstance(patched, dict):
            raise ApiError.bad_request("the patched object is not a JSON object")
        patched = self._check_body(info, gvr, patched)
        if well_typed:  # an object planted malformed in-process stays patchable
            self.decode_typed(info, gvr, patched)
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

    def _apply_patch(self, info: ResourceInfo, doc: JsonObj, patch: Any, patch_type: PatchType) -> Any:
        if patch_type == "merge":
            return patching.apply_merge_patch_in_place(doc, patch)  # `doc` is the caller's own copy
        if patch_type == "json":
            return patching.apply_json_patch(doc, patch)
        if patch_type == "strategic":
            if info.custom or not patching.strategic_merge_supported(info.group, info.kind):
                raise ApiError.unsupported_media_type(
                    "the body of the request was in an unknown format - accepted media types include: "
                    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
            return patching.apply_strategic_merge_patch(doc, patch, group=info.group, kind=info.kind)
        raise ApiError.unsupported_media_type(f"unsupported patch type {patch_type!r}")

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
        self.decode_typed(info, gvr, applied)
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
        merged = self._check_body(info, gvr, merged)
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
        self._require_verb(info, "delete")
        key = (self._namespace_of(info, namespace), name)
        old = self._bucket(info).get(key)
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
            self._rv += 1
            final["metadata"]["resourceVersion"] = str(self._rv)
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
        if _strip_volatile(new) == _strip_volatile(old):
            return self.view(info, gvr.version, old)
        committed = self._commit_update(info, key, old, new)
        return self.view(info, gvr.version, committed)

    def delete_collection(self, gvr: GVR, namespace: str | None, *, label_selector: str | None = None,
                          field_selector: str | None = None, propagation_policy: str | None = None,
                          dry_run: bool = False, user: str = SYSTEM_USER) -> JsonList:
        info = self.resolve(gvr)
        self._require_verb(info, "deletecollection")
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
        bucket = self._bucket(info)
        if bucket.pop(key, None) is not None and (order := self._order.get(info.storage)) is not None:
            at = bisect_left(order, _key_string(key))
            if at < len(order) and order[at] == _key_string(key):
                del order[at]
        self.owners.removed((info.storage, key), final, old)
        self._emit("DELETED", info, final, old)
        if info.group == CRDS.group and info.resource == CRDS.resource:
            self._unregister_crd(final)
        self.gc.removed(info, final, orphan=orphan)

    # ------------------------------------------------------------------ subresources
    def bind(self, namespace: str, name: str, node_name: str, *, dry_run: bool = False,
             user: str = SYSTEM_USER) -> JsonObj:
        """POST pods/binding: set spec.nodeName once (what the scheduler does)."""
        info = self.resolve(PODS)
        key = (namespace, name)
        old = self._bucket(info).get(key)
        if old is None:
            raise ApiError.not_found(PODS, name)
        if old["metadata"].get("deletionTimestamp"):
            raise ApiError.conflict(GVR("", "v1", "pods/binding"), name, f"pod {name} is being deleted, cannot "
                                    "be assigned to a host")
        bound = (old.get("spec") or {}).get("nodeName")
        if bound:
            raise ApiError.conflict(GVR("", "v1", "pods/binding"), name,
                                    f'pod {name} is already assigned to node "{bound}"')
        new: JsonObj = clone(old)
        new.setdefault("spec", {})["nodeName"] = node_name
        status = new.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                           "lastTransitionTime": rfc3339(self.clock.now())})
        status["conditions"] = conditions
        if dry_run:
            return new
        committed: JsonObj = self._commit_update(info, key, old, new)
        return committed

    def get_scale(self, gvr: GVR, namespace: str | None, name: str) -> JsonObj:
        info = self.resolve(gvr)
        if "scale" not in info.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return scale.scale_of(info, self.get_ref(gvr, namespace, name))

    def update_scale(self, gvr: GVR, namespace: str | None, name: str, requested: JsonObj, *, dry_run: bool = False,
                     field_manager: str | None = None, user: str = SYSTEM_USER) -> JsonObj:
        info = self.resolve(gvr)
        if "scale" not in info.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        replicas = (requested.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise ApiError.invalid("Scale", "autoscaling", name, [{
                "reason": "FieldValueInvalid", "field": "spec.replicas",
                "message": f"Invalid value: {replicas}: must be greater than or equal to 0"}])
        current = clone(self.get_ref(gvr, namespace, name))
        sent_rv = (requested.get("metadata") or {}).get("resourceVersion")
        if sent_rv:
            current["metadata"]["resourceVersion"] = sent_rv
        scale.set_path(current, scale.scale_paths(info)["specReplicasPath"], replicas)
        self.update_owned(gvr, current, dry_run=dry_run, field_manager=field_manager, user=user,
                          namespace=namespace, name=name)
        result = self.get_scale(gvr, namespace, name)
        if dry_run:
            result["spec"]["replicas"] = replicas
        return result

    # ------------------------------------------------------------------ pipeline steps
    def _check_body(self, info: ResourceInfo, gvr: GVR, obj: Any) -> JsonObj:
        return pipeline.check_body(info, gvr, obj)

    decode_typed = staticmethod(pipeline.decode_typed)

    def _well_typed(self, info: ResourceInfo, gvr: GVR, obj: JsonObj) -> bool:
        return pipeline.well_typed(info, gvr, obj)

    def _default(self, info: ResourceInfo, obj: JsonObj, *, owned: bool = False) -> JsonObj:
        return pipeline.default(info, obj, owned=owned, field_validation=self._field_validation,
                                unknown_sink=self.unknown_fields)

    def _admit(self, operation: str, gvr: GVR, obj: JsonObj, old: JsonObj | None, user: str) -> None:
        for hook in list(self._hooks):
            hook(operation, gvr, obj, old, user)  # old is the stored snapshot: hooks only read it
        if self._webhooks is not None:  # after the in-tree plugins, as the apiserver orders them
            self._webhooks(operation, gvr, obj, old, user)

    def _pod_security(self, info: ResourceInfo, obj: JsonObj, namespace: str) -> None:
        """The PodSecurity plugin: pods (enforce, audit, warn) and workload templates (audit, warn)."""
        if info.group == "" and info.resource == "pods":
            self._note(pod_security.review_pod(obj, self.find_ref(NAMESPACES, None, namespace)))
        elif (info.group, info.resource) in pod_security.POD_TEMPLATE_PATHS:
            self._note(pod_security.review_pod_controller(info.group, info.resource, obj,
                                                          self.find_ref(NAMESPACES, None, namespace)))

    def _validate(self, info: ResourceInfo, obj: JsonObj, old: JsonObj | None) -> None:
        pipeline.validate(info, obj, old)

    def _record_manager(self, info: ResourceInfo, gvr: GVR, old: JsonObj | None, new: JsonObj, manager: str,
                        subresource: str | None) -> JsonObj:
        return pipeline.record_manager(info, gvr, old, new, manager, subresource, rfc3339(self.clock.now()))

    def _commit(self, info: ResourceInfo, key: ObjKey, obj: JsonObj, old: JsonObj | None) -> None:
        bucket = self._bucket(info)
        if key not in bucket and (order := self._order.get(info.storage)) is not None:
            insort(order, _key_string(key))
        bucket[key] = obj
        self.owners.committed((info.storage, key), old, obj)

    def _after_commit(self, info: ResourceInfo, obj: JsonObj, old: JsonObj | None) -> None:
        if info.group == CRDS.group and info.resource == CRDS.resource:
            self._register_crd(obj)
        if (obj["metadata"].get("ownerReferences") and
                (old is None or old["metadata"].get("ownerReferences") != obj["metadata"]["ownerReferences"])):
            self.gc.check_owners(info, obj)
        if obj["metadata"].get("deletionTimestamp"):
            self.gc.deletion_started(info, obj)

    # ------------------------------------------------------------------ lookups for GC
    def stored(self, storage: StorageKey, key: ObjKey) -> JsonObj | None:
        """The object stored at `key` in `storage` as it is (not a copy: read, never mutate)."""
        return self._data.get(storage, {}).get(key)

    def by_uid(self, uid: str) -> tuple[ResourceInfo, ObjKey, JsonObj] | None:
        where = self.owners.locate(uid)
        if where is None:
            return None
        storage, key = where
        infos = self.registry.storage_infos(storage)
        obj = self._data.get(storage, {}).get(key)
        if not infos or obj is None:
            return None
        return self.primary(infos[0]), key, obj

    def dependents_of(self, uid: str) -> LocatedList:
        found: LocatedList = []
        for storage, key in self.owners.dependents(uid):
            infos = self.registry.storage_infos(storage)
            obj = self._data.get(storage, {}).get(key)
            if infos and obj is not None:
                found.append((self.primary(infos[0]), key, obj))
        return found

    def objects_in_namespace(self, namespace: str) -> LocatedList:
        found: LocatedList = []
        for storage, bucket in self._data.items():
            infos = self.registry.storage_infos(storage)
            if not infos or not infos[0].namespaced:
                continue
            info = self.primary(infos[0])
            found.extend((info, key, obj) for key, obj in bucket.items() if key[0] == namespace)
        return found

    def system_update(self, info: ResourceInfo, key: ObjKey, mutate: Callable[[JsonObj], None]) -> None:
        """A bookkeeping write (GC, namespace finalizer): no admission, no managedFields."""
        old = self._bucket(info).get(key)
        if old is None:
            return
        new: JsonObj = clone(old)
        mutate(new)
        if _strip_volatile(new) == _strip_volatile(old):
            return
        self._commit_update(info, key, old, new)

    # ------------------------------------------------------------------ CRDs
    def _check_crd(self, crd: JsonObj) -> None:
        crd_registration.check(crd)

    def _register_crd(self, crd: JsonObj) -> None:
        crd_registration.register(self.registry, crd)

    def _unregister_crd(self, crd: JsonObj) -> None:
        """A deleted CRD takes its objects with it (each deleted, with its watch event), then its resource."""
        info = crd_registration.served(self.registry, crd)
        if info is None:
            return
        bucket = self._data.get(info.storage, {})
        for key in sorted(bucket):
            obj = bucket[key]
            final = dict(obj)
            final["metadata"] = dict(obj["metadata"])
            self._rv += 1
            final["metadata"]["resourceVersion"] = str(self._rv)
            self._remove(info, key, final, obj)
        self._data.pop(info.storage, None)
        self._order.pop(info.storage, None)
        self.registry.remove(info.group, info.resource)

    def install_crds(self, crds: Iterable[JsonObj]) -> int:
        """Install CRDs at startup; one already stored (from `--state`) gets the shipped spec, so an
        upgrade of kaiwo-ray upgrades its CRDs. Returns how many were created or changed."""
        changed = 0
        crd_info = self.resolve(CRDS)
        for crd in crds:
            name = (crd.get("metadata") or {}).get("name", "")
            existing = self._bucket(crd_info).get(("", name))
            if existing is None:
                self.create_owned(CRDS, clone(crd), managed=False, admit=False)
                changed += 1
            elif existing.get("spec") != self._default(crd_info, clone(crd)).get("spec"):
                updated = clone(existing)
                updated["spec"] = clone(crd.get("spec"))
                self.update_owned(CRDS, updated, managed=False, admit=False)
                changed += 1
        return changed

    # ------------------------------------------------------------------ persistence
    def dump(self) -> JsonObj:
        """Everything needed to restart where we stopped: objects and the resourceVersion counter."""
        crd_bucket = self._data.get(self.resolve(CRDS).storage, {})
        objects = list(crd_bucket.values())
        for storage, bucket in self._data.items():
            if storage != (CRDS.group, CRDS.resource):
                objects.extend(bucket.values())
        return {"resourceVersion": self._rv, "objects": objects}

    def load(self, state: JsonObj) -> None:
        """Restore a `dump` (before anything else is written). History starts empty: watches that
        resume from a resourceVersion older than the restart get 410, as after an etcd compaction."""
        objects = state.get("objects") or []
        restored: list[tuple[ResourceInfo, JsonObj]] = []
        for obj in objects:
            api_version = str(obj.get("apiVersion", ""))
            group, _, version = api_version.rpartition("/")
            info = self._info_for_kind(group, version, str(obj.get("kind", "")))
            if info is None:
                log.warning("sandbox: dropping stored %s %s: kind not served", api_version, obj.get("kind"))
                continue
            meta = obj.get("metadata") or {}
            key = (meta.get("namespace") or "", meta.get("name", ""))
            self._commit(info, key, obj, self._bucket(info).get(key))
            if info.group == CRDS.group and info.resource == CRDS.resource:
                self._register_crd(obj)
            restored.append((info, obj))
        # What a restarted kube-controller-manager does when its informers sync: the garbage collector
        # and the namespace controller pick up, from the objects themselves, the deletions under way
        # (foreground, orphan, Terminating namespaces) and the dependents whose owners are gone.
        for info, obj in restored:
            if obj["metadata"].get("ownerReferences"):
                self.gc.check_owners(info, obj)
            if obj["metadata"].get("deletionTimestamp"):
                self.gc.deletion_started(info, obj)
        # The saved counter may lag what clients saw (a crash loses up to a second of writes): jump
        # past every version the previous run could have handed out, so none is ever reused for
        # other objects. A watch or list at any of them is then older than the history: 410, relist.
        self._rv = max(self._rv, int(state.get("resourceVersion") or 0)) + RESTORE_GAP
        self.history.forget(self._rv)

    def _info_for_kind(self, group: str, version: str, kind: str) -> ResourceInfo | None:
        for info in self.registry:
            if info.group == group and info.kind == kind and info.storage_group is None:
                return info
        return None

