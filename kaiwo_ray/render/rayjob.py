"""KaiwoJob (Ray) -> `ray.io/v1` RayJob. Kueue's RayJob webhook suspends it; Kaiwo does not.

Upstream builds the RayJob's labels on the head template's label map, so the queue and priority
labels land on the head pod template too. Kept: Kueue ignores them there (the pods' owner is a
Kueue-managed RayCluster), and pods selected by `kueue.x-k8s.io/queue-name` stay the same set.
"""

from __future__ import annotations

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.workloads import KaiwoJobSpec
from kaiwo_ray.render.context import RenderContext, object_meta
from kaiwo_ray.render.entrypoint import ray_entrypoint
from kaiwo_ray.render.job import embedded_spec
from kaiwo_ray.render.podspec import SECURITY_CONTEXT_UID, add_namespace_pull_secrets, copy_json, pod_spec_of
from kaiwo_ray.render.raycluster import default_ray_cluster, update_ray_cluster
from kaiwo_ray.render.security import harden_pod_template

SUBMITTER_CONTAINER = "ray-job-submitter"
# KubeRay's GetDefaultSubmitterContainer resources (Kueue reserves them for the submitter pod set).
SUBMITTER_RESOURCES = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}


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
    if not ctx.workload.spec.dangerous:
        _harden_submitter(job_spec)
    submitter = job_spec.get("submitterPodTemplate")
    if isinstance(submitter, dict) and isinstance(submitter.get("spec"), dict):
        add_namespace_pull_secrets(submitter["spec"], ctx)
    labels = {**ctx.cr_labels, **head_labels, **ctx.system_labels, **ctx.kueue_labels}
    job_spec["rayClusterSpec"]["headGroupSpec"]["template"]["metadata"]["labels"].update(ctx.kueue_labels)
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": object_meta(ctx, ctx.name, labels),
        "spec": job_spec,
    }


def _harden_submitter(job_spec: JsonObj) -> None:
    """In K8sJobMode KubeRay runs `ray job submit` in a Job of its own, from `submitterPodTemplate` or,
    absent one, from a default template without any securityContext, which a restricted namespace
    refuses. So the RayJob carries KubeRay's default submitter made restricted (non-root uid 1000 like
    Kaiwo's default templates: it only runs the Ray CLI), and a user's own submitter template gets the
    restricted fields it lacks. Other submission modes have no submitter pod."""
    if job_spec.get("submissionMode") not in (None, "K8sJobMode"):
        return
    field = "spec.rayJob.spec.submitterPodTemplate"
    template = job_spec.get("submitterPodTemplate")
    if template is None:
        head = job_spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
        template = {
            "spec": {
                "restartPolicy": "Never",
                "securityContext": {"runAsUser": SECURITY_CONTEXT_UID, "runAsGroup": SECURITY_CONTEXT_UID},
                "containers": [
                    {"name": SUBMITTER_CONTAINER, "image": head["image"], "resources": copy_json(SUBMITTER_RESOURCES)}
                ],
            }
        }
        field = "submitterPodTemplate"
    pod_spec_of(template, field)
    harden_pod_template(template, field)
    job_spec["submitterPodTemplate"] = template
