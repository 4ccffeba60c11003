"""Per-kind rules of the apiserver's registry strategies (PrepareForCreate, generation, deletion
defaults): the small facts that differ between kinds and that clients observe."""

from __future__ import annotations

from typing import Any

from kaiwo_sandbox.contracts import CRDS, JsonObj, ResourceInfo
from kaiwo_sandbox.semantics.qos import qos_class

# Built-in kinds whose strategy keeps metadata.generation (every custom resource does too).
GENERATION_RESOURCES = frozenset({
    ("", "replicationcontrollers"), ("apps", "deployments"), ("apps", "replicasets"), ("apps", "daemonsets"), ("batch", "jobs"),
    ("apiextensions.k8s.io", "customresourcedefinitions"), ("scheduling.k8s.io", "priorityclasses"),
})
# Built-in kinds whose PrepareForCreate resets .status (Nodes keep theirs: the kubelet registers with it).
STATUS_RESET_ON_CREATE = frozenset({
    ("", "pods"), ("", "services"), ("", "persistentvolumeclaims"), ("", "namespaces"), ("", "replicationcontrollers"),
    ("apps", "deployments"), ("apps", "replicasets"), ("apps", "daemonsets"), ("batch", "jobs"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
})
# batch/v1 Jobs still orphan their pods when deleted without a propagationPolicy.
ORPHAN_BY_DEFAULT = frozenset({("batch", "jobs")})


def has_generation(info: ResourceInfo) -> bool:
    return info.custom or (info.group, info.resource) in GENERATION_RESOURCES


def default_propagation(info: ResourceInfo) -> str:
    return "Orphan" if (info.group, info.resource) in ORPHAN_BY_DEFAULT else "Background"


def prepare_create(info: ResourceInfo, obj: JsonObj) -> None:
    """PrepareForCreate: what each kind's strategy resets before anything else sees the object."""
    gr = (info.group, info.resource)
    if info.custom and info.has_status:
        obj.pop("status", None)
    elif gr in STATUS_RESET_ON_CREATE:
        obj["status"] = {}
    if gr == ("", "pods"):
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(_dict(obj.get("spec")))}
    elif gr == ("", "namespaces"):
        obj["status"] = {"phase": "Active"}
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict) and "finalizers" not in spec:
            spec["finalizers"] = ["kubernetes"]
    elif gr == ("", "persistentvolumeclaims"):
        obj["status"] = {"phase": "Pending"}
    elif gr == ("apps", "daemonsets"):
        # DaemonSetStatus's int32 counts are not omitempty: a new one serializes them as 0, and typed
        # clients (the `kubernetes` package's V1DaemonSetStatus) require them.
        obj["status"] = {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0,
                         "numberReady": 0}
    elif gr in (("", "replicationcontrollers"), ("apps", "replicasets")):
        obj["status"] = {"replicas": 0}  # not omitempty either: typed clients require it
    elif gr == ("", "services"):
        obj["status"] = {"loadBalancer": {}}
    elif gr == (CRDS.group, CRDS.resource):
        obj["status"] = crd_status(obj)


def spec_changed(info: ResourceInfo, old: JsonObj, new: JsonObj) -> bool:
    """Whether a write changes what metadata.generation counts (spec, or all but metadata/status)."""
    skip = {"metadata", "apiVersion", "kind"}
    if info.has_status:
        skip.add("status")
    keys = (set(old) | set(new)) - skip
    return any(old.get(k) != new.get(k) for k in keys)


def finalizers_left(info: ResourceInfo, obj: JsonObj) -> bool:
    if obj["metadata"].get("finalizers"):
        return True
    return info.resource == "namespaces" and bool((obj.get("spec") or {}).get("finalizers"))




def _dict(value: Any) -> JsonObj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def crd_status(crd: JsonObj) -> JsonObj:
    """What the apiextensions controllers write once a CRD is accepted (they run instantly here)."""
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    if "singular" not in names and "kind" in names:
        names["singular"] = str(names["kind"]).lower()
    if "listKind" not in names and "kind" in names:
        names["listKind"] = f"{names['kind']}List"
    storage = [v.get("name") for v in spec.get("versions") or [] if isinstance(v, dict) and v.get("storage")]
    conditions = [
        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found",
         "lastTransitionTime": None},
        {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
         "message": "the initial names have been accepted", "lastTransitionTime": None},
    ]
    return {"acceptedNames": names, "conditions": conditions, "storedVersions": storage}
