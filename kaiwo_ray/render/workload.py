"""Entry points: workload + KaiwoConfig + nodes -> the child objects the operator creates, in order.

`render_storage` (PVCs, download ConfigMap, download Job) and `render_main` (Job / RayJob /
Deployment / AppWrapper) are separate so the reconciler can hold the main object back until the
download Job has succeeded; `render_all` is both, in creation order (what `kaiwo-ray render` prints).
Pure: no I/O, no clock, no randomness; the same input gives byte-identical output.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from kaiwo_ray.api.aim import AIMNamespaceConfigSpec
from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.workloads import KaiwoJob, KaiwoService
from kaiwo_ray.render.appwrapper import render_appwrapper
from kaiwo_ray.render.context import PriorityClasses, RenderContext, Workload, render_context
from kaiwo_ray.render.deployment import render_deployment
from kaiwo_ray.render.errors import RenderError
from kaiwo_ray.render.gpus import ResourceConfig
from kaiwo_ray.render.job import render_job
from kaiwo_ray.render.podspec import check_resources
from kaiwo_ray.render.rayjob import render_rayjob
from kaiwo_ray.render.storage import render_storage as _render_storage
from kaiwo_ray.render.storage import validate_storage
from kaiwo_ray.render.validation import validate_for_children

Nodes = Sequence[Mapping[str, Any]]

# The CR name is also the value of the `kaiwo.silogen.ai/name` label (and a Deployment's `app` label),
# so it must be a DNS subdomain that is a valid label value too: at most 63 characters.
_CHILD_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9.]{0,61}[a-z0-9])?")


def prepare(
    workload: Workload, config: KaiwoConfigSpec, nodes: Nodes, *, numbers: ResourceConfig | None = None,
    priority_classes: PriorityClasses | None = None, namespace_config: AIMNamespaceConfigSpec | None = None,
) -> RenderContext:
    """Validate what the models cannot (cross-field rules) and derive the shared render facts."""
    name = workload.metadata.name
    if not name:
        raise RenderError("metadata.name", "required")
    if not _CHILD_NAME.fullmatch(name) or ".." in name or ".-" in name or "-." in name:
        raise RenderError(
            "metadata.name",
            f'invalid name "{name}": lower-case letters, digits, "-" and "." (starting and ending with a '
            "letter or digit), at most 63 characters: it names the children and labels their pods",
        )
    validate_storage(workload.spec.storage)
    check_resources(workload.spec.resources, "spec.resources")
    validate_for_children(workload)
    return render_context(workload, config, nodes, numbers=numbers, priority_classes=priority_classes,
                          namespace_config=namespace_config)


def main_kind(workload: Workload) -> tuple[str, str]:
    """(apiVersion, kind) of the main child, named like the CR: what to look up to observe it."""
    if isinstance(workload, KaiwoJob):
        return ("ray.io/v1", "RayJob") if workload.spec.effective_uses_ray else ("batch/v1", "Job")
    if workload.spec.effective_uses_ray:
        return ("workload.codeflare.dev/v1beta2", "AppWrapper")
    return ("apps/v1", "Deployment")


def render_main(
    workload: Workload, config: KaiwoConfigSpec, nodes: Nodes, *, numbers: ResourceConfig | None = None
) -> JsonObj:
    """The main object: Job, RayJob, Deployment or AppWrapper(RayService)."""
    return _main(prepare(workload, config, nodes, numbers=numbers))


def render_storage(
    workload: Workload, config: KaiwoConfigSpec, nodes: Nodes, *, numbers: ResourceConfig | None = None
) -> list[JsonObj]:
    """PVCs, download ConfigMap and download Job, in creation order ([] without storage)."""
    return _render_storage(prepare(workload, config, nodes, numbers=numbers))


def render_all(
    workload: Workload, config: KaiwoConfigSpec, nodes: Nodes, *, numbers: ResourceConfig | None = None
) -> list[JsonObj]:
    """Every child in creation order: storage children first, the main object last."""
    ctx = prepare(workload, config, nodes, numbers=numbers)
    return [*_render_storage(ctx), _main(ctx)]


def storage_of(ctx: RenderContext) -> list[JsonObj]:
    """`render_storage` from a context made once (`prepare`) for several renders of one decision."""
    return _render_storage(ctx)


def main_of(ctx: RenderContext, *, pod_template: bool = True) -> JsonObj:
    """`render_main` from a context made once (`prepare`) for several renders of one decision.
    `pod_template=False`: a batch Job is rendered without its pod template (`render_job`)."""
    return _main(ctx, pod_template=pod_template)


def _main(ctx: RenderContext, *, pod_template: bool = True) -> JsonObj:
    workload = ctx.workload
    if isinstance(workload, KaiwoJob):
        if workload.spec.effective_uses_ray:
            return render_rayjob(ctx, workload.spec)
        return render_job(ctx, workload.spec, pod_template=pod_template)
    assert isinstance(workload, KaiwoService)
    if workload.spec.effective_uses_ray:
        return render_appwrapper(ctx, workload.spec)
    return render_deployment(ctx, workload.spec)
