"""Pod templates: Kaiwo's default templates and the mutation every generated template goes through.

`update_pod_spec` follows upstream's `UpdatePodSpec` step by step (the order decides which label or
annotation wins and the env order containers see). It mutates the template it is given, which is
always a fresh copy owned by the current render.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.quantity import parse_quantity
from kaiwo_ray.render.context import RenderContext
from kaiwo_ray.render.errors import RenderError
from kaiwo_ray.render.names import is_dns1123_label, is_dns1123_subdomain
from kaiwo_ray.render.resources import ResourceDefaults, fill_container_resources, requests_any
from kaiwo_ray.render.security import harden_pod_template

GPU_MODEL_LABEL = "kaiwo/gpu-model"
_TOLERATION_TRIGGER_KEYS = ("amd.com/gpu", "nvidia.com/gpu")
SECURITY_CONTEXT_UID = 1000


def copy_json(value: Any) -> Any:
    """Deep copy of JSON-shaped data (user-supplied specs), several times faster than copy.deepcopy."""
    return orjson.loads(orjson.dumps(value))


def default_template(
    ctx: RenderContext, container_name: str, shm_size: str, image: str | None = None
) -> JsonObj:
    """Kaiwo's template for workloads without a user-supplied one: one container, /dev/shm, non-root.

    `image` is set up front only to keep `name`/`image` together in the output; the result is the same
    as upstream's later defaulting (`spec.image`, then Ray's default image).
    """
    spec: JsonObj = {
        "schedulerName": ctx.config.scheduling.kube_scheduler_name,
        "restartPolicy": "Never",
    }
    if not ctx.workload.spec.dangerous:
        spec["securityContext"] = {
            "runAsUser": SECURITY_CONTEXT_UID,
            "runAsGroup": SECURITY_CONTEXT_UID,
            "fsGroup": SECURITY_CONTEXT_UID,
        }
    container: JsonObj = {"name": container_name}
    if image:
        container["image"] = image
    container["imagePullPolicy"] = "Always"
    container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    spec["containers"] = [container]
    spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm_size}}]
    return {"metadata": {}, "spec": spec}


def require_template(parent: Any, field: str) -> JsonObj:
    """`parent["template"]`, checked to be a pod template with at least one container."""
    template = parent.get("template") if isinstance(parent, dict) else None
    if not isinstance(template, dict):
        raise RenderError(field, "required (a pod template with at least one container)")
    pod_spec_of(template, field)
    return template


def pod_spec_of(template: Any, field: str) -> JsonObj:
    """The template's pod spec, checked to have at least one container (RenderError otherwise).

    Also checks the shape of every part the mutation extends (maps are maps, lists are lists), so a
    malformed user template is reported by path instead of crashing the render.
    """
    if not isinstance(template, dict):
        raise RenderError(field, "must be a pod template object")
    meta = template.get("metadata")
    if meta is not None:
        _expect(meta, dict, f"{field}.metadata")
        for key in ("labels", "annotations"):
            _expect(meta.get(key), dict, f"{field}.metadata.{key}")
    spec = template.get("spec")
    if not isinstance(spec, dict):
        raise RenderError(f"{field}.spec", "required (a pod spec with at least one container)")
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise RenderError(f"{field}.spec.containers", "must list at least one container")
    for key in ("volumes", "imagePullSecrets", "tolerations"):
        _expect(spec.get(key), list, f"{field}.spec.{key}")
    _expect(spec.get("affinity"), dict, f"{field}.spec.affinity")
    for key in ("containers", "initContainers"):
        _expect(spec.get(key), list, f"{field}.spec.{key}")
        for index, container in enumerate(spec.get(key) or []):
            path = f"{field}.spec.{key}[{index}]"
            if not isinstance(container, dict):
                raise RenderError(path, "must be a container object")
            _expect(container.get("env"), list, f"{path}.env")
            _expect(container.get("volumeMounts"), list, f"{path}.volumeMounts")
            resources = container.get("resources")
            _expect(resources, dict, f"{path}.resources")
            if resources:
                _expect(resources.get("requests"), dict, f"{path}.resources.requests")
                _expect(resources.get("limits"), dict, f"{path}.resources.limits")
    return spec


def _expect(value: Any, kind: type, field: str) -> None:
    """None or `kind`; anything else is a RenderError at `field`."""
    if value is not None and not isinstance(value, kind):
        raise RenderError(field, "must be a map" if kind is dict else "must be a list")


def check_resources(resources: Any, field: str) -> None:
    """`spec.resources`: ResourceRequirements with quantity values (reported by path when malformed)."""
    _expect(resources, dict, field)
    for side in ("requests", "limits"):
        values = (resources or {}).get(side)
        _expect(values, dict, f"{field}.{side}")
        for name, quantity in (values or {}).items():
            try:
                parse_quantity(quantity)
            except ValueError as exc:
                raise RenderError(f"{field}.{side}.{name}", str(exc)) from None


def update_pod_spec(
    template: JsonObj,
    ctx: RenderContext,
    *,
    defaults: ResourceDefaults,
    field: str,
    service_account_token: bool = False,
) -> None:
    """Apply labels, annotations, pull secrets, volumes, GPU affinity, env, mounts, resources, toleration;
    then (not upstream, unless `spec.dangerous`) the Pod Security "restricted" fields the template lacks.
    `service_account_token`: keep the pods' API token (a Ray head running the autoscaler needs it)."""
    spec = ctx.workload.spec
    numbers = ctx.resources
    pod = pod_spec_of(template, field)

    meta = template.get("metadata")
    meta = dict(meta) if isinstance(meta, dict) else {}
    labels: dict[str, str] = dict(meta.get("labels") or {})
    if spec.pod_template_spec_labels:
        labels.update(spec.pod_template_spec_labels)
    for key, value in ctx.cr_labels.items():
        labels.setdefault(key, value)
    labels.update(ctx.system_labels)
    meta["labels"] = labels
    if ctx.pod_annotations:
        annotations = dict(meta.get("annotations") or {})
        annotations.update(ctx.pod_annotations)
        meta["annotations"] = annotations
    template["metadata"] = meta

    if spec.image_pull_secrets:
        pod["imagePullSecrets"] = [*(pod.get("imagePullSecrets") or []), *copy_json(spec.image_pull_secrets)]
    add_namespace_pull_secrets(pod, ctx)

    volumes: list[JsonObj] = list(pod.get("volumes") or [])
    plan = ctx.storage
    if plan is not None:
        if plan.data_claim:
            volumes.append({"name": "data", "persistentVolumeClaim": {"claimName": plan.data_claim}})
        if plan.hf_claim:
            volumes.append({"name": "hf", "persistentVolumeClaim": {"claimName": plan.hf_claim}})
    taken = {str(v.get("name")) for v in volumes if isinstance(v, dict)}
    for index, secret in enumerate(spec.secret_volumes):
        _check_secret_volume(index, secret.name, secret.secret_name, taken)
        taken.add(secret.name)
        volumes.append({"name": secret.name, "secret": {"secretName": secret.secret_name}})
    if volumes:
        pod["volumes"] = volumes

    if spec.gpu_models and numbers.gpus_per_replica > 0:
        affinity = dict(pod.get("affinity") or {})
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": GPU_MODEL_LABEL, "operator": "In", "values": list(spec.gpu_models)}
                        ]
                    }
                ]
            }
        }
        pod["affinity"] = affinity

    gpu_env = [
        {"name": "NUM_GPUS", "value": str(numbers.total_gpus)},
        {"name": "NUM_REPLICAS", "value": str(numbers.replicas)},
        {"name": "NUM_GPUS_PER_REPLICA", "value": str(numbers.gpus_per_replica)},
    ]
    containers = [dict(container) for container in pod["containers"]]
    for container in containers:
        _mutate_container(container, ctx)
        if not container.get("image") and spec.image:
            container["image"] = spec.image
        container["env"] = [*(container.get("env") or []), *(dict(var) for var in gpu_env)]
        fill_container_resources(container, defaults)
    pod["containers"] = containers
    if pod.get("initContainers"):
        init_containers = [dict(container) for container in pod["initContainers"]]
        for container in init_containers:
            _mutate_container(container, ctx)
        pod["initContainers"] = init_containers

    priority_class = ctx.pod_priority_class_name
    if priority_class and not pod.get("priorityClassName"):  # a template's own class wins
        pod["priorityClassName"] = priority_class

    config = ctx.config.nodes
    if config.add_taints_to_gpu_nodes and any(requests_any(c, _TOLERATION_TRIGGER_KEYS) for c in containers):
        pod["tolerations"] = [
            *(pod.get("tolerations") or []),
            {"key": config.default_gpu_taint_key, "operator": "Exists", "effect": "NoSchedule"},
        ]

    if not spec.dangerous:
        harden_pod_template(template, field, service_account_token=service_account_token)


def add_namespace_pull_secrets(pod: JsonObj, ctx: RenderContext) -> None:
    """The namespace's AIMNamespaceConfig `images.imagePullSecrets`, after the pod's own, each once:
    every pod kaiwo-ray creates in the namespace can pull from the registries its tenant admin set."""
    extra = ctx.namespace_pull_secrets
    if not extra:
        return
    pull_secrets = list(pod.get("imagePullSecrets") or [])
    for secret in extra:
        if secret not in pull_secrets:
            pull_secrets.append(secret)
    pod["imagePullSecrets"] = pull_secrets


def _check_secret_volume(index: int, name: str, secret_name: str, taken: set[str]) -> None:
    """Refuse a `secretVolumes` entry the API server would refuse in every pod we render."""
    field = f"spec.secretVolumes[{index}]"
    if not is_dns1123_label(name):
        raise RenderError(f"{field}.name", f"{name!r} is not a valid volume name (lower-case letters, digits "
                                           "and '-', at most 63, starting and ending alphanumeric)")
    if name in taken:
        raise RenderError(f"{field}.name", f"{name!r} is already the name of another volume of the pod (the "
                                           "operator's own are data, hf and dshm); choose another name")
    if not is_dns1123_subdomain(secret_name):
        raise RenderError(f"{field}.secretName", f"{secret_name!r} is not a valid Secret name")


def _mutate_container(container: JsonObj, ctx: RenderContext) -> None:
    """Mounts, `spec.env` (+ HF_HOME) and secret mounts: what main and init containers both get."""
    spec = ctx.workload.spec
    mounts: list[JsonObj] = list(container.get("volumeMounts") or [])
    env: list[JsonObj] = list(container.get("env") or [])
    if spec.env:
        env.extend(copy_json(spec.env))
    plan = ctx.storage
    if plan is not None:
        if plan.data_claim:
            mounts.append({"name": "data", "mountPath": plan.data_mount_path})
        if plan.hf_claim:
            mounts.append({"name": "hf", "mountPath": plan.hf_mount_path})
            env.append({"name": "HF_HOME", "value": plan.hf_mount_path})
    paths = {str(m.get("mountPath")) for m in mounts if isinstance(m, dict)}
    for index, secret in enumerate(spec.secret_volumes):
        if secret.mount_path in paths:
            raise RenderError(f"spec.secretVolumes[{index}].mountPath",
                              f"{secret.mount_path!r} is already mounted in container {container.get('name')!r} "
                              "(mount paths must be unique; the operator mounts /dev/shm and the storage volumes)")
        paths.add(secret.mount_path)
        mount: JsonObj = {"name": secret.name, "mountPath": secret.mount_path}
        if secret.sub_path:
            mount["subPath"] = secret.sub_path
        mounts.append(mount)
    if mounts:
        container["volumeMounts"] = mounts
    if env:
        container["env"] = env


def set_missing_images(template: Mapping[str, Any], image: str) -> None:
    """Give every container (main and init) without an image `image` (Ray's last-resort default)."""
    pod = template["spec"]
    for key in ("containers", "initContainers"):
        for container in pod.get(key) or []:
            if not container.get("image"):
                container["image"] = image


def require_images(template: Mapping[str, Any], field: str) -> None:
    """Refuse containers left without an image: the API server would reject the child anyway."""
    pod = template["spec"]
    for key in ("containers", "initContainers"):
        for index, container in enumerate(pod.get(key) or []):
            if not container.get("image"):
                raise RenderError(
                    "spec.image",
                    f"required: container {container.get('name', index)!r} in {field}.spec.{key} has no image",
                )
