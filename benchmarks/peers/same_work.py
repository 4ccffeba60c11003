"""What kaiwo-ray writes on a KaiwoJob's way to PENDING, for the peers that do the same work (the
kopf same-work peer, the same-work floor): its children, its ResourceCreated message, its status."""

from __future__ import annotations

from datetime import datetime

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.reconcile.workload import parse_workload
from kaiwo_ray.render import effective_queue, render_all, workload_gpu_check

PENDING_EVENT = ("WorkloadPending", "Workload is pending admission")


def children_of(body: JsonObj, config: KaiwoConfigSpec, nodes: list[JsonObj]) -> list[JsonObj]:
    """What kaiwo-ray's reconciler would create for this KaiwoJob, in creation order."""
    return render_all(parse_workload(body), config, nodes)


def created_message(child: JsonObj) -> str:
    """kaiwo-ray's `ResourceCreated` message (spec/workloads.md §7.4)."""
    return f"Created {child['apiVersion']}, Kind={child['kind']}: {child['metadata']['name']}"


def pending_status(body: JsonObj, config: KaiwoConfigSpec, nodes: list[JsonObj], now: datetime) -> JsonObj:
    """The status kaiwo-ray writes for a KaiwoJob whose Job is not admitted yet."""
    workload = parse_workload(body)
    check = workload_gpu_check(workload, config, nodes)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    status: JsonObj = {"status": "PENDING", "conditions": [
        {"type": "Schedulable", "status": "True" if check.schedulable else "False", "reason": check.reason,
         "message": check.message, "lastTransitionTime": stamp},
        {"type": "Admitted", "status": "False", "reason": "Pending",
         "message": f"Workload is pending admission into '{effective_queue(workload, config)}'",
         "lastTransitionTime": stamp},
    ]}
    generation = (body.get("metadata") or {}).get("generation")
    if generation is not None:
        status["observedGeneration"] = generation
    return status
