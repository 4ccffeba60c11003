"""KaiwoService (Ray) -> `workload.codeflare.dev/v1beta2` AppWrapper wrapping a `ray.io/v1` RayService.

The wrapper is what Kueue queues (one Workload for head + workers); the AppWrapper controller creates
the RayService only once admitted. Pod sets are declared explicitly because AppWrapper cannot infer
them for a RayService. Unlike upstream (worker group 0 only) every worker group is declared, so Kueue
reserves quota for all of them.
"""

from __future__ import annotations

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.workloads import KaiwoServiceSpec
from kaiwo_ray.render.context import RenderContext, object_meta
from kaiwo_ray.render.job import embedded_spec
from kaiwo_ray.render.raycluster import (
    HEAD_TEMPLATE_PATH,
    default_ray_cluster,
    update_ray_cluster,
    worker_count,
)


def render_appwrapper(ctx: RenderContext, spec: KaiwoServiceSpec) -> JsonObj:
    """The main AppWrapper; its single component is the full RayService."""
    if spec.ray_service is not None:
        field = "spec.rayService.spec.rayClusterConfig"
        service_spec = embedded_spec(spec.ray_service, "spec.rayService")
    else:
        field = "rayClusterConfig"
        service_spec = {"rayClusterConfig": default_ray_cluster(ctx)}
    if spec.serve_config_v2:
        service_spec["serveConfigV2"] = spec.serve_config_v2
    cluster = service_spec.get("rayClusterConfig")
    head_labels = update_ray_cluster(cluster, ctx, field)
    assert isinstance(cluster, dict)  # checked by update_ray_cluster
    service_meta: JsonObj = {"name": ctx.name}
    if ctx.namespace:
        service_meta["namespace"] = ctx.namespace
    service_meta["labels"] = {**ctx.cr_labels, **head_labels, **ctx.system_labels}
    ray_service = {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": service_meta,
        "spec": service_spec,
    }
    pod_sets = [{"replicas": 1, "path": HEAD_TEMPLATE_PATH}]
    for index, replicas in enumerate(worker_count(cluster)):
        pod_sets.append(
            {
                "replicas": replicas,
                "path": f"template.spec.rayClusterConfig.workerGroupSpecs[{index}].template",
            }
        )
    labels = {**ctx.cr_labels, **ctx.kueue_labels, **ctx.system_labels}
    return {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": object_meta(ctx, ctx.name, labels),
        "spec": {"components": [{"podSets": pod_sets, "template": ray_service}]},
    }
