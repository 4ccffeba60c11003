"""Plain Jobs, Deployments, RayJobs and RayServices brought under Kaiwo at admission (upstream's
internal/webhook/v1, without its side effects).

Mutating (CREATE and UPDATE, objects labelled `kaiwo.silogen.ai/managed: "true"`): the Kueue queue
label defaults to the default queue (a Deployment's pod template gets it too, as Kueue's
Deployment integration does), a Job's pods get `terminationGracePeriodSeconds: 0` when unset
(upstream's two defaults), and `kaiwo.silogen.ai/user` records the submitting user from the review's
`userInfo` (RFC 1123-sanitised), kept from the old object on updates so nobody can re-attribute a
workload; `kaiwo.silogen.ai/submitted-by` records the username unsanitised, as GPU accounting
charges it (kaiwo_ray/admission/submitter.py). Upstream creates the KaiwoJob, a LocalQueue and a finalizer inside admission; here a
controller does that from the labels, so a dry run or a retried request has no effects.

Validating (CREATE): with enforcement on (`ENFORCE_KAIWO_ON_GPU_WORKLOADS=true`), a workload whose
containers request or limit `amd.com/gpu` or `nvidia.com/gpu` and lacks the managed label is refused
with the label to add; what the operator renders for a KaiwoJob/KaiwoService (Kaiwo's `run-id` label) is
Kaiwo's already. Upstream labels such workloads silently in its mutating webhook, so its
validating refusal never fires; here the user is told, and Kueue's quota cannot be skipped.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kaiwo_ray.admission.review import ALLOW, Verdict, forbidden, pointer
from kaiwo_ray.admission.submitter import stamp_ops
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.labels import LABEL_MANAGED, LABEL_QUEUE, LABEL_RUN_ID, LABEL_USER
from kaiwo_ray.render.names import sanitize_rfc1123

GPU_RESOURCES = ("amd.com/gpu", "nvidia.com/gpu")


@dataclass(frozen=True, slots=True)
class Settings:
    """From the operator's environment: `DEFAULT_CLUSTER_QUEUE_NAME` and `ENFORCE_KAIWO_ON_GPU_WORKLOADS`."""

    default_queue: str = "kaiwo"
    enforce_on_gpu_workloads: bool = False
    # `KAIWO_TRUSTED_SUBMITTERS`: usernames (the admin API's service account) whose
    # `kaiwo.silogen.ai/submitted-by` is kept at CREATE: they submit for an authenticated caller.
    trusted_submitters: frozenset[str] = frozenset()


def mutate_kaiwo(request: Mapping[str, Any], settings: Settings) -> Verdict:
    """KaiwoJob/KaiwoService (CREATE and UPDATE): record the authenticated submitter."""
    obj = request.get("object")
    if not isinstance(obj, Mapping) or (obj.get("metadata") or {}).get("deletionTimestamp"):
        return ALLOW
    return Verdict(patch=stamp_ops(request, settings.trusted_submitters))


def _ray_pod_specs(cluster: Any) -> Iterator[Any]:
    if not isinstance(cluster, Mapping):
        return
    head = cluster.get("headGroupSpec") or {}
    yield ((head.get("template") or {}).get("spec")) if isinstance(head, Mapping) else None
    for group in cluster.get("workerGroupSpecs") or []:
        if isinstance(group, Mapping):
            yield (group.get("template") or {}).get("spec")


def pod_specs(kind: str, obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The pod specs a workload of `kind` runs."""
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        return []
    found: list[Any]
    if kind in ("Job", "Deployment"):
        found = [(spec.get("template") or {}).get("spec")]
    elif kind == "RayJob":
        found = list(_ray_pod_specs(spec.get("rayClusterSpec")))
    elif kind == "RayService":
        found = list(_ray_pod_specs(spec.get("rayClusterConfig")))
    else:
        found = []
    return [s for s in found if isinstance(s, Mapping)]


def requests_gpus(kind: str, obj: Mapping[str, Any]) -> bool:
    for pod in pod_specs(kind, obj):
        for container in [*(pod.get("containers") or []), *(pod.get("initContainers") or [])]:
            resources = container.get("resources") or {} if isinstance(container, Mapping) else {}
            for side in ("requests", "limits"):
                amounts = resources.get(side) or {}
                if any(name in amounts for name in GPU_RESOURCES):
                    return True
    return False


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return labels if isinstance(labels, Mapping) else {}


def managed(obj: Mapping[str, Any]) -> bool:
    return _labels(obj).get(LABEL_MANAGED) == "true"


def mutate(request: Mapping[str, Any], settings: Settings) -> Verdict:
    obj = request.get("object")
    if request.get("operation") not in ("CREATE", "UPDATE") or not isinstance(obj, Mapping) or not managed(obj):
        return ALLOW
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return ALLOW
    if request.get("operation") == "CREATE" and LABEL_RUN_ID in _labels(obj):
        return ALLOW  # rendered by the operator for a KaiwoJob/KaiwoService labelled managed: its labels are Kaiwo's
    kind = str((request.get("kind") or {}).get("kind") or obj.get("kind") or "")
    labels = _labels(obj)
    ops: list[JsonObj] = []

    def set_label(key: str, value: str) -> None:
        if labels.get(key) != value:
            ops.append({"op": "add", "path": pointer("metadata", "labels", key), "value": value})

    if not labels.get(LABEL_QUEUE):
        set_label(LABEL_QUEUE, settings.default_queue)
    old_user = _labels(request.get("oldObject")).get(LABEL_USER) if request.get("operation") == "UPDATE" else None
    username = str((request.get("userInfo") or {}).get("username") or "")
    user = old_user or (sanitize_rfc1123(username) if username else "")
    if user:
        set_label(LABEL_USER, user)
    if kind == "Job":
        pod = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        if isinstance(pod, Mapping) and pod.get("terminationGracePeriodSeconds") is None:
            ops.append({"op": "add", "path": "/spec/template/spec/terminationGracePeriodSeconds", "value": 0})
    if kind == "Deployment":
        # Kueue queues a Deployment's pods, not the Deployment: its own Deployment webhook copies the
        # queue label onto the pod template, as here (for a Kueue without that integration as well).
        template_meta = ((obj.get("spec") or {}).get("template") or {}).get("metadata")
        queue = labels.get(LABEL_QUEUE) or settings.default_queue
        if not isinstance(template_meta, Mapping):
            ops.append({"op": "add", "path": "/spec/template/metadata", "value": {"labels": {LABEL_QUEUE: queue}}})
        elif not isinstance(template_meta.get("labels"), Mapping):
            ops.append({"op": "add", "path": "/spec/template/metadata/labels", "value": {LABEL_QUEUE: queue}})
        elif not template_meta["labels"].get(LABEL_QUEUE):
            ops.append({"op": "add", "path": pointer("spec", "template", "metadata", "labels", LABEL_QUEUE),
                        "value": queue})
    if ops and not isinstance((obj.get("metadata") or {}).get("labels"), Mapping):
        ops.insert(0, {"op": "add", "path": "/metadata/labels", "value": {}})
    return Verdict(patch=ops + stamp_ops(request, settings.trusted_submitters))


def validate(request: Mapping[str, Any], settings: Settings) -> Verdict:
    obj = request.get("object")
    if request.get("operation") != "CREATE" or not isinstance(obj, Mapping) or not settings.enforce_on_gpu_workloads:
        return ALLOW
    kind = str((request.get("kind") or {}).get("kind") or obj.get("kind") or "")
    labels = _labels(obj)
    if LABEL_MANAGED in labels or LABEL_RUN_ID in labels or not requests_gpus(kind, obj):
        return ALLOW  # opted in, or rendered by the operator for a KaiwoJob/KaiwoService (its objectSelector too)
    name = str((obj.get("metadata") or {}).get("name") or request.get("name") or "")
    return forbidden(f'{kind} "{name}" requests GPUs, and this cluster runs GPU workloads only under Kaiwo '
                     f"(ENFORCE_KAIWO_ON_GPU_WORKLOADS=true): add the label {LABEL_MANAGED}: \"true\" to its "
                     "metadata.labels (it is then queued through Kueue and tracked as a Kaiwo workload), or "
                     "submit it as a KaiwoJob/KaiwoService")
