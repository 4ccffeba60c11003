"""Plain workloads brought under Kaiwo (pure): a Job, Deployment, RayJob or RayService labelled
`kaiwo.silogen.ai/managed: "true"` is tracked by a KaiwoJob/KaiwoService of the same name, as upstream's
Job webhook arranged it, but made by a controller instead of inside admission.

What upstream users see, kept here:
- the tracking CR has the workload's name and namespace, its labels (queue label defaulted), the workload
  embedded (`spec.job`, `spec.deployment`, `spec.rayJob`, `spec.rayService`) and `spec.user`, the submitting user (here the
  `kaiwo.silogen.ai/user` label admission set from the review's userInfo, RFC 1123-sanitised);
- the workload carries Kaiwo's system labels (run-id, name, type) and is controlled by the CR, so deleting
  the CR deletes the workload (upstream: the KaiwoJob controller's SetControllerReference);
- deleting the workload deletes the CR (upstream: its validating webhook deletes the KaiwoJob at DELETE;
  here the CR's ownerReference to the workload lets the garbage collector do it, with nothing done
  inside admission).

A tracking CR is marked by the annotation `TRACKS` (the workload's kind): its controller observes the
workload instead of rendering one, as the workload was admitted already and its pod template is the
user's (a Job's cannot change after creation).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.labels import LABEL_MANAGED, LABEL_NAME, LABEL_QUEUE, LABEL_RUN_ID, LABEL_TYPE, LABEL_USER

TRACKS = "kaiwo.silogen.ai/tracks"
KAIWO_API = "kaiwo.silogen.ai/v1alpha1"


@dataclass(frozen=True, slots=True)
class Tracking:
    """How a workload kind is tracked: the CR kind, its `kaiwo.silogen.ai/type` and the spec field the
    workload is embedded under."""

    cr_kind: str
    type_label: str
    field: str


TRACKED: dict[str, Tracking] = {
    "Job": Tracking("KaiwoJob", "job", "job"),
    "RayJob": Tracking("KaiwoJob", "job", "rayJob"),
    "Deployment": Tracking("KaiwoService", "service", "deployment"),
    "RayService": Tracking("KaiwoService", "service", "rayService"),
}


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def tracked_kind(cr: Mapping[str, Any]) -> str:
    """The kind of workload `cr` tracks ("" for a CR that renders its own)."""
    annotations = _meta(cr).get("annotations") or {}
    return str(annotations.get(TRACKS) or "") if isinstance(annotations, Mapping) else ""


def opted_in(obj: Mapping[str, Any]) -> bool:
    labels = _meta(obj).get("labels") or {}
    return isinstance(labels, Mapping) and labels.get(LABEL_MANAGED) == "true"


def tracker_for(kind: str, obj: Mapping[str, Any], default_queue: str) -> JsonObj:
    """The KaiwoJob/KaiwoService tracking `obj` (a stored workload of `kind`, one of `TRACKED`)."""
    how = TRACKED[kind]
    meta = _meta(obj)
    labels = {k: str(v) for k, v in (meta.get("labels") or {}).items()
              if k not in (LABEL_RUN_ID, LABEL_NAME, LABEL_TYPE)}
    labels.setdefault(LABEL_QUEUE, default_queue)
    embedded: JsonObj = {"metadata": {"labels": dict(labels)}, "spec": obj.get("spec") or {}}
    spec: JsonObj = {how.field: embedded, "clusterQueue": labels[LABEL_QUEUE]}
    if labels.get(LABEL_USER):
        spec["user"] = labels[LABEL_USER]
    return {
        "apiVersion": KAIWO_API, "kind": how.cr_kind,
        "metadata": {
            "name": meta.get("name"), "namespace": meta.get("namespace"), "labels": labels,
            "annotations": {TRACKS: kind},
            # Not the controller: the garbage collector deletes the CR once the workload is gone.
            "ownerReferences": [{"apiVersion": obj.get("apiVersion"), "kind": kind, "name": meta.get("name"),
                                 "uid": meta.get("uid")}],
        },
        "spec": spec,
    }


def tracks(cr: Mapping[str, Any], kind: str, obj: Mapping[str, Any]) -> bool:
    """Is `cr` the tracker of this very workload (not a same-named CR someone wrote, nor the tracker of
    a deleted predecessor)?"""
    uid = _meta(obj).get("uid")
    return tracked_kind(cr) == kind and any(
        ref.get("uid") == uid for ref in _meta(cr).get("ownerReferences") or () if isinstance(ref, Mapping))


def adoption_patch(kind: str, obj: Mapping[str, Any], cr: Mapping[str, Any]) -> JsonObj | None:
    """The merge patch that makes `obj` the CR's controlled child with Kaiwo's system labels (None when
    it is already). A Deployment's pods carry the run-id and type too: the KaiwoService controller
    watches its pods by type and finds their Kueue Workloads by run-id."""
    meta, cr_meta = _meta(obj), _meta(cr)
    uid = str(cr_meta.get("uid") or "")
    system = {LABEL_RUN_ID: uid, LABEL_NAME: str(cr_meta.get("name") or ""), LABEL_TYPE: TRACKED[kind].type_label}
    labels = meta.get("labels") or {}
    refs = list(meta.get("ownerReferences") or [])
    controlled = any(ref.get("uid") == uid and ref.get("controller") for ref in refs)
    patch: JsonObj = {}
    if any(labels.get(k) != v for k, v in system.items()):
        patch["metadata"] = {"labels": system}
    if not controlled and not any(ref.get("controller") for ref in refs):
        # A workload something else controls stays theirs; only the labels are Kaiwo's.
        refs.append({"apiVersion": KAIWO_API, "kind": str(cr.get("kind") or TRACKED[kind].cr_kind),
                     "name": str(cr_meta.get("name") or ""), "uid": uid, "controller": True,
                     "blockOwnerDeletion": True})
        patch.setdefault("metadata", {})["ownerReferences"] = refs
    if kind == "Deployment":
        template = ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}
        pod_labels = {LABEL_RUN_ID: uid, LABEL_TYPE: TRACKED[kind].type_label}
        if any((template.get("labels") or {}).get(k) != v for k, v in pod_labels.items()):
            patch["spec"] = {"template": {"metadata": {"labels": pod_labels}}}
    return patch or None
