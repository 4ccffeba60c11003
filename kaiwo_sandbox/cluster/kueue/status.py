"""ClusterQueue and LocalQueue status as Kueue reports it, computed from the quota book and the
per-queue Workload counts. Pure: the controller decides when to write."""

from __future__ import annotations

from dataclasses import dataclass

from kaiwo_sandbox.cluster.kueue.admission import QuotaBook, Usage
from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.semantics.quantity import format_milli

Active = tuple[str, str, str]  # (status, reason, message) of the Active condition


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """Everything but the conditions' timestamps: what decides whether a write is needed."""

    body: JsonObj
    active: Active


def cluster_queue_usage(book: QuotaBook, cq: str) -> list[JsonObj]:
    """flavorsUsage/flavorsReservation: every flavor and covered resource of the spec, in order."""
    spec = book.specs.get(cq)
    if spec is None:
        return []
    result = []
    for flavor, resources in spec.flavor_resources():
        entries = [{"name": r, "total": format_milli(r, book.used(cq, (flavor, r))),
                    "borrowed": format_milli(r, book.borrowed(cq, (flavor, r)))} for r in resources]
        result.append({"name": flavor, "resources": entries})
    return result


def cluster_queue_status(book: QuotaBook, cq: str, problem: tuple[str, str] | None, pending: int,
                         reserving: int) -> QueueStatus:
    usage = cluster_queue_usage(book, cq)
    active = ("False", *problem) if problem else ("True", "Ready", "Can admit new workloads")
    body = {"pendingWorkloads": pending, "reservingWorkloads": reserving, "admittedWorkloads": reserving,
            "flavorsReservation": usage, "flavorsUsage": usage}
    return QueueStatus(body, active)


def local_queue_status(cq_exists: bool, cq_active: bool, pending: int, reserving: int, usage: Usage) -> QueueStatus:
    if not cq_exists:
        active: Active = ("False", "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")
    elif not cq_active:
        active = ("False", "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")
    else:
        active = ("True", "Ready", "Can submit new workloads to localQueue")
    flavors: dict[str, list[JsonObj]] = {}
    for (flavor, resource), amount in sorted(usage.items()):
        flavors.setdefault(flavor, []).append({"name": resource, "total": format_milli(resource, amount)})
    by_flavor = [{"name": f, "resources": r} for f, r in flavors.items()]
    body = {"pendingWorkloads": pending, "reservingWorkloads": reserving, "admittedWorkloads": reserving,
            "flavorsReservation": by_flavor, "flavorsUsage": by_flavor}
    return QueueStatus(body, active)
