"""The subresources that are not a view of the object's own fields being written: pods/binding (the
scheduler's write) and /scale (replicas through the resource's scale paths)."""

from __future__ import annotations

from typing import Protocol

from kaiwo_sandbox.contracts import GVR, PODS, ApiError, Clock, JsonObj, ResourceInfo, rfc3339
from kaiwo_sandbox.semantics import scale
from kaiwo_sandbox.storage import pipeline
from kaiwo_sandbox.storage.owners import ObjKey
from kaiwo_sandbox.storage.tables import Tables

BINDING = GVR("", "v1", "pods/binding")


class SubresourceStore(Protocol):
    """What these subresources use of the object store (store.ObjectStore, which serves them):
    declared here so that this module does not import the store that imports it."""

    clock: Clock
    tables: Tables

    def resolve(self, gvr: GVR) -> ResourceInfo: ...

    def get_ref(self, gvr: GVR, namespace: str | None, name: str) -> JsonObj: ...

    def update_owned(self, gvr: GVR, obj: JsonObj, *, dry_run: bool = False, field_manager: str | None = None,
                     user: str = ..., namespace: str | None = None, name: str | None = None) -> JsonObj: ...

    def commit_update(self, info: ResourceInfo, key: ObjKey, old: JsonObj, new: JsonObj) -> JsonObj: ...


def _not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def bind(store: SubresourceStore, namespace: str, name: str, node_name: str, *, dry_run: bool = False) -> JsonObj:
    """POST pods/binding: set spec.nodeName once (what the scheduler does)."""
    info = store.resolve(PODS)
    key = (namespace, name)
    old = store.tables.bucket(info).get(key)
    if old is None:
        raise ApiError.not_found(PODS, name)
    if old["metadata"].get("deletionTimestamp"):
        raise ApiError.conflict(BINDING, name, f"pod {name} is being deleted, cannot be assigned to a host")
    bound = (old.get("spec") or {}).get("nodeName")
    if bound:
        raise ApiError.conflict(BINDING, name, f'pod {name} is already assigned to node "{bound}"')
    new: JsonObj = pipeline.clone(old)
    new.setdefault("spec", {})["nodeName"] = node_name
    status = new.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                       "lastTransitionTime": rfc3339(store.clock.now())})
    status["conditions"] = conditions
    if dry_run:
        return new
    return store.commit_update(info, key, old, new)


def get_scale(store: SubresourceStore, gvr: GVR, namespace: str | None, name: str) -> JsonObj:
    info = store.resolve(gvr)
    if "scale" not in info.subresources:
        raise _not_found()
    return scale.scale_of(info, store.get_ref(gvr, namespace, name))


def update_scale(store: SubresourceStore, gvr: GVR, namespace: str | None, name: str, requested: JsonObj, *,
                 dry_run: bool = False, field_manager: str | None = None, user: str) -> JsonObj:
    """PUT /scale: the requested replicas written through the resource's spec.replicas path."""
    info = store.resolve(gvr)
    if "scale" not in info.subresources:
        raise _not_found()
    replicas = (requested.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise ApiError.invalid("Scale", "autoscaling", name, [{
            "reason": "FieldValueInvalid", "field": "spec.replicas",
            "message": f"Invalid value: {replicas}: must be greater than or equal to 0"}])
    current = pipeline.clone(store.get_ref(gvr, namespace, name))
    sent_rv = (requested.get("metadata") or {}).get("resourceVersion")
    if sent_rv:
        current["metadata"]["resourceVersion"] = sent_rv
    scale.set_path(current, scale.scale_paths(info)["specReplicasPath"], replicas)
    store.update_owned(gvr, current, dry_run=dry_run, field_manager=field_manager, user=user,
                       namespace=namespace, name=name)
    result = get_scale(store, gvr, namespace, name)
    if dry_run:
        result["spec"]["replicas"] = replicas
    return result
