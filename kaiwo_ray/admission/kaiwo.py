"""Validation of KaiwoJob, KaiwoService, KaiwoQueueConfig and KaiwoConfig at admission: what the
controllers would refuse later (`SpecValid=False/InvalidSpec` on a workload, `...InvalidSpec` on the
queue config) is refused at `kubectl apply`, with every field path the models report and the first
the renderer reports. The renderer keeps its own checks for clusters that run without webhooks.

A workload is rendered against the default KaiwoConfig and no nodes: what depends on the cluster
(GPU discovery, a configured queue) is the controllers' to judge, not a spec error. An update that
leaves the spec as it was is allowed, so an object stored before the webhook existed can still take
its controller's metadata writes (finalizers, labels) and be deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaiwo_ray.admission.review import ALLOW, Verdict, invalid
from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.errors import ManifestError
from kaiwo_ray.api.load import parse_object
from kaiwo_ray.api.queueconfig import KaiwoQueueConfig
from kaiwo_ray.api.workloads import KaiwoJob, KaiwoService
from kaiwo_ray.render.errors import RenderError
from kaiwo_ray.render.nodepools import NodeDiscoveryError
from kaiwo_ray.render.queue import render_queue_config
from kaiwo_ray.render.workload import render_all

GROUP = "kaiwo.silogen.ai"
SINGLETONS = frozenset({"KaiwoQueueConfig", "KaiwoConfig"})
SINGLETON_NAME = "kaiwo"


def causes_of(obj: Mapping[str, Any]) -> list[dict[str, str]]:
    """Every reason `obj` (a Kaiwo object as stored) would be refused; empty when it is valid."""
    kind = str(obj.get("kind", ""))
    name = str((obj.get("metadata") or {}).get("name") or "")
    if kind in SINGLETONS and name != SINGLETON_NAME:
        return [{"field": "metadata.name", "reason": "FieldValueInvalid",
                 "message": f'must be "{SINGLETON_NAME}": the operator reads only the {kind} named '
                            f'"{SINGLETON_NAME}"'}]
    try:
        parsed = parse_object({k: v for k, v in obj.items() if k != "status"})
        if isinstance(parsed, KaiwoJob | KaiwoService):
            render_all(parsed, KaiwoConfigSpec(), [])
        elif isinstance(parsed, KaiwoQueueConfig):
            render_queue_config(parsed)
    except ManifestError as err:
        return [{"field": e.path, "reason": e.reason, "message": e.message} for e in err.errors]
    except RenderError as err:
        return [{"field": err.field, "reason": "FieldValueInvalid", "message": err.reason}]
    except NodeDiscoveryError:
        return []  # the cluster's nodes, not the spec: the controller reports it
    return []


def review(request: Mapping[str, Any]) -> Verdict:
    """The validating webhook of the four Kaiwo kinds (CREATE and UPDATE)."""
    obj = request.get("object")
    if request.get("operation") not in ("CREATE", "UPDATE") or not isinstance(obj, Mapping):
        return ALLOW
    old = request.get("oldObject")
    if request.get("operation") == "UPDATE" and isinstance(old, Mapping) and old.get("spec") == obj.get("spec") \
            and (old.get("metadata") or {}).get("name") == (obj.get("metadata") or {}).get("name"):
        return ALLOW
    causes = causes_of(obj)
    if not causes:
        return ALLOW
    kind = str((request.get("kind") or {}).get("kind") or obj.get("kind") or "")
    group = str((request.get("kind") or {}).get("group") or GROUP)
    return invalid(kind, group, str((obj.get("metadata") or {}).get("name") or request.get("name") or ""), causes)
