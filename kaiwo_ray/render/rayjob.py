"""KaiwoJob (Ray) -> `ray.io/v1` RayJob. Kueue's RayJob webhook suspends it; Kaiwo does not.

Upstream builds the RayJob's labels on the head template's label map, so the queue and priority
labels land on the head pod template too. Kept: Kueue ignores them there (the pods' owner is a
Kueue-managed RayCluster), and pods selected by `kueue.x-k8s.io/queue-name` stay the same set.
"""

from __future__ import annotations

from kaiwo_ray.api.workloads import KaiwoJobSpec
from kaiwo_ray.render.context import JsonObj, RenderContext, object_meta
from kaiwo_ray.render.entrypoint import ray_entrypoint
from kaiwo_ray.render.job import embedded_spec
from kaiwo_ray.render.raycluster import default_ray_cluster, update_ray_cluster


def render_rayjob(ctx: RenderContext, spec: KaiwoJobSpec) -> JsonObj:
    """The main RayJob: user `spec.rayJob.spec` (must carry a cluster) or Kaiwo's default cluster."""
    if spec.ray_job is not None:
        field = "spec.rayJob.spec.rayClusterSpec"
        job_spec = embedded_spec(spec.ray_job, "spec.rayJob")
        if isinstance(job_spec.get("backoffLimit"), int) and job_spec["backoffLimit"] > 0:
            job_spec["backoffLimit"] = 0
    else:
        field = "rayClusterSpec"
        job_spec = {"shutdownAfterJobFinishes": True, "rayClusterSpec": default_ray_cluster(ctx)}
    if spec.entrypoint:
        job_spec["entrypoint"] = ray_entrypoint(spec.entrypoint)
    head_labels = update_ray_cluster(job_spec.get("rayClusterSpec"), ctx, field)
    labels = {**ctx.cr_labels, **head_labels, **ctx.system_labels, **ctx.kueue_labels}
    job_spec["rayClusterSpec"]["headGroupSpec"]["template"]["metadata"]["labels"].update(ctx.kueue_labels)
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": object_meta(ctx, ctx.name, labels),
        "spec": job_spec,
    }
