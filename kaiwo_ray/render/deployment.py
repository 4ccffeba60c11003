"""KaiwoService (not Ray) -> `apps/v1` Deployment. Kueue's pod integration gates each pod, so the
queue and priority labels go on the pod template (and, being the same map upstream, on the Deployment).
"""

from __future__ import annotations

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.workloads import KaiwoServiceSpec
from kaiwo_ray.render.context import RenderContext, object_meta
from kaiwo_ray.render.entrypoint import apply_entrypoint
from kaiwo_ray.render.errors import RenderError
from kaiwo_ray.render.job import embedded_spec
from kaiwo_ray.render.podspec import (
    default_template,
    pod_spec_of,
    require_images,
    require_template,
    update_pod_spec,
)
from kaiwo_ray.render.resources import resource_defaults


def render_deployment(ctx: RenderContext, spec: KaiwoServiceSpec) -> JsonObj:
    """The main Deployment: `replicas` from the GPU arithmetic, selector `app=<name>`, restartPolicy Always."""
    if spec.deployment is not None:
        field = "spec.deployment.spec.template"
        deployment_spec = embedded_spec(spec.deployment, "spec.deployment")
        template = require_template(deployment_spec, field)
    else:
        field = "template"
        template = default_template(ctx, "workload", "1Gi", spec.image)
        deployment_spec = {"replicas": 1, "selector": {"matchLabels": {}}, "template": template}
    pod = pod_spec_of(template, field)
    pod["restartPolicy"] = "Always"
    selector = deployment_spec.get("selector")
    selector = dict(selector) if isinstance(selector, dict) else {}
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(match_labels, dict):
        raise RenderError("spec.deployment.spec.selector.matchLabels", "must be a map")
    selector["matchLabels"] = {**match_labels, "app": ctx.name}
    deployment_spec["selector"] = selector
    numbers = ctx.resources
    deployment_spec["replicas"] = numbers.replicas
    apply_entrypoint(pod, spec.entrypoint, f"{field}.spec")
    defaults = resource_defaults(
        spec.resources, gpus_per_replica=numbers.gpus_per_replica, gpu_key=numbers.resource_key
    )
    update_pod_spec(template, ctx, defaults=defaults, field=field)
    require_images(template, field)
    labels = template["metadata"]["labels"]
    labels["app"] = ctx.name
    labels.update(ctx.kueue_labels)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": object_meta(ctx, ctx.name, labels),
        "spec": deployment_spec,
    }
