"""KaiwoJob (not Ray) -> `batch/v1` Job, suspended until Kueue admits it.

Upstream quirk kept on purpose: the Job always runs exactly ONE pod, even when the GPU arithmetic
asks for several replicas (`gpus: 16` on 8-GPU nodes gives one 8-GPU pod with NUM_GPUS=16,
NUM_REPLICAS=2). `context.workload_gpu_check` reports such a Job as not schedulable instead of
letting it run short of GPUs; multi-node training belongs in a RayJob.
"""

from __future__ import annotations

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.workloads import KaiwoJobSpec
from kaiwo_ray.render.context import RenderContext, object_meta
from kaiwo_ray.render.entrypoint import apply_entrypoint
from kaiwo_ray.render.errors import RenderError
from kaiwo_ray.render.podspec import (
    copy_json,
    default_template,
    pod_spec_of,
    require_images,
    require_template,
    update_pod_spec,
)
from kaiwo_ray.render.resources import resource_defaults

DEFAULT_TTL_SECONDS = 3600


def render_job(ctx: RenderContext, spec: KaiwoJobSpec, *, pod_template: bool = True) -> JsonObj:
    """The main Job: user `spec.job.spec` or Kaiwo's default, with backoffLimit 0 and a TTL.
    `pod_template=False`: without `spec.template` (most of the work), for a Job that exists and whose
    template, frozen at creation, a decision does not read (see `reconcile.workload._template_known`)."""
    if not pod_template:
        user_spec = embedded_spec(spec.job, "spec.job") if spec.job is not None else None
        if user_spec is not None:
            user_spec.pop("template", None)
        return _job(ctx, _job_fields(user_spec))
    if spec.job is not None:
        field = "spec.job.spec.template"
        job_spec = embedded_spec(spec.job, "spec.job")
        template = require_template(job_spec, field)
        job_spec = _job_fields(job_spec)
    else:
        field = "template"
        template = default_template(ctx, "workload", "1Gi", spec.image)
        job_spec = {**_job_fields(None), "template": template}
    apply_entrypoint(pod_spec_of(template, field), spec.entrypoint, f"{field}.spec")
    numbers = ctx.resources
    defaults = resource_defaults(
        spec.resources, gpus_per_replica=numbers.gpus_per_replica, gpu_key=numbers.resource_key
    )
    update_pod_spec(template, ctx, defaults=defaults, field=field)
    require_images(template, field)
    return _job(ctx, job_spec)


def _job_fields(job_spec: JsonObj | None) -> JsonObj:
    """The user's `job_spec` (None: Kaiwo's default Job) with what Kaiwo sets on every Job:
    suspended for Kueue, no retries, a TTL unless the user chose one."""
    if job_spec is None:
        return {"suspend": True, "backoffLimit": 0, "ttlSecondsAfterFinished": DEFAULT_TTL_SECONDS}
    if isinstance(job_spec.get("backoffLimit"), int) and job_spec["backoffLimit"] > 0:
        job_spec["backoffLimit"] = 0
    if job_spec.get("ttlSecondsAfterFinished") is None:
        job_spec["ttlSecondsAfterFinished"] = DEFAULT_TTL_SECONDS
    job_spec["suspend"] = True
    return job_spec


def _job(ctx: RenderContext, job_spec: JsonObj) -> JsonObj:
    labels = {**ctx.cr_labels, **ctx.system_labels, **ctx.kueue_labels}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": object_meta(ctx, ctx.name, labels),
        "spec": job_spec,
    }


def embedded_spec(embedded: JsonObj, field: str) -> JsonObj:
    """A fresh copy of a user-supplied object's `.spec` (its metadata is discarded, like upstream)."""
    spec = embedded.get("spec")
    if not isinstance(spec, dict):
        raise RenderError(f"{field}.spec", "required (only the embedded object's spec is used)")
    copied: JsonObj = copy_json(spec)
    return copied
