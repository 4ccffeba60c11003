"""The Ray cluster inside a RayJob (`rayClusterSpec`) or RayService (`rayClusterConfig`).

Workers get the GPU share and the replica count; the head gets `spec.resources` with KaiwoConfig's
`ray.headPodMemory` and no GPUs. Upstream mutated one shared defaults map while walking the
groups, so the head could inherit the workers' GPUs; here each group gets its own defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.render.context import RenderContext
from kaiwo_ray.render.errors import RenderError
from kaiwo_ray.render.podspec import default_template, require_template, set_missing_images, update_pod_spec
from kaiwo_ray.render.resources import resource_defaults

HEAD_TEMPLATE_PATH = "template.spec.rayClusterConfig.headGroupSpec.template"


def default_ray_cluster(ctx: RenderContext) -> JsonObj:
    """Kaiwo's cluster: autoscaling off, dashboard on all interfaces, one fixed-size worker group."""
    image = ctx.workload.spec.image or ctx.config.ray.default_ray_image
    return {
        "enableInTreeAutoscaling": False,
        "headGroupSpec": {
            "rayStartParams": {"dashboard-host": "0.0.0.0"},
            "template": default_template(ctx, "ray-head", "1Gi", image),
        },
        "workerGroupSpecs": [
            {
                "groupName": "default-worker-group",
                "replicas": 1,
                "minReplicas": 1,
                "maxReplicas": 1,
                "rayStartParams": {},
                "template": default_template(ctx, "ray-worker", "200Gi", image),
            }
        ],
    }


def update_ray_cluster(cluster: Any, ctx: RenderContext, field: str) -> dict[str, str]:
    """Mutate every group's pod template; returns the head template's labels (the Ray object's base labels)."""
    if not isinstance(cluster, dict):
        raise RenderError(field, "required: Kaiwo creates the Ray cluster (clusterSelector is not supported)")
    head = cluster.get("headGroupSpec")
    if not isinstance(head, dict):
        raise RenderError(f"{field}.headGroupSpec", "required (a head group with a pod template)")
    workers = cluster.get("workerGroupSpecs") or []
    if not isinstance(workers, list) or not all(isinstance(group, dict) for group in workers):
        raise RenderError(f"{field}.workerGroupSpecs", "must be a list of worker groups")

    spec = ctx.workload.spec
    numbers = ctx.resources
    worker_defaults = resource_defaults(
        spec.resources, gpus_per_replica=numbers.gpus_per_replica, gpu_key=numbers.resource_key
    )
    default_image = ctx.config.ray.default_ray_image
    for index, group in enumerate(workers):
        group_field = f"{field}.workerGroupSpecs[{index}].template"
        template = require_template(group, group_field)
        update_pod_spec(template, ctx, defaults=worker_defaults, field=group_field)
        group["replicas"] = group["minReplicas"] = group["maxReplicas"] = numbers.replicas
        set_missing_images(template, default_image)

    head_resources = spec.resources
    if numbers.gpus_per_replica > 0 and head_resources:
        head_resources = _without_key(head_resources, numbers.resource_key)
    head_defaults = resource_defaults(
        head_resources,
        gpus_per_replica=0,
        gpu_key=numbers.resource_key,
        head_memory=ctx.config.ray.head_pod_memory,
    )
    head_field = f"{field}.headGroupSpec.template"
    head_template = require_template(head, head_field)
    # KubeRay's autoscaler runs beside the head and scales the cluster through the API server.
    autoscaling = cluster.get("enableInTreeAutoscaling") is True
    update_pod_spec(head_template, ctx, defaults=head_defaults, field=head_field, service_account_token=autoscaling)
    set_missing_images(head_template, default_image)
    return dict(head_template["metadata"]["labels"])


def worker_count(cluster: Mapping[str, Any]) -> list[int]:
    """Replica count of each worker group, in order (for AppWrapper pod sets)."""
    return [int(group.get("replicas") or 0) for group in cluster.get("workerGroupSpecs") or []]


def _without_key(resources: Mapping[str, Any], key: str) -> dict[str, Any]:
    """`spec.resources` minus the workload's GPU key: the head never gets the workers' GPUs."""
    stripped: dict[str, Any] = dict(resources)
    for side in ("requests", "limits"):
        values = resources.get(side)
        if isinstance(values, dict) and key in values:
            stripped[side] = {name: value for name, value in values.items() if name != key}
    return stripped
