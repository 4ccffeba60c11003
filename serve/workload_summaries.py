"""WorkloadSummary, the admin API's resource in its aggregated group (pure): one object per KaiwoJob or
KaiwoService with its phase, queue position and why it waits, as a Kubernetes object, a list, a
`meta.k8s.io/v1` Table (what `kubectl get` prints) and watch events.

A summary is named `job.NAME` or `service.NAME` (a KaiwoJob and a KaiwoService may share a name in one
namespace; `kaiwo`'s own `job/NAME` selectors read the same). Its resourceVersion is its workload's.
A pending KaiwoJob's `estimatedStart` (with `estimatedStartEarliest`/`Latest` and `estimatedAt`) is
the admin API's last background forecast (serve/forecasts.py); null where there is none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.cli.table import age
from kaiwo_ray.simulation.forecast import Estimate
from kaiwo_ray.views.queues import ClusterQueueView, PendingWorkload
from kaiwo_ray.views.workloads import WorkloadSummary

GROUP = "admin.kaiwo.silogen.ai"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
RESOURCE = "workloadsummaries"
KIND = "WorkloadSummary"
SUBRESOURCES = ("explain", "events", "gpus")
PREFIXES = {"KaiwoJob": "job", "KaiwoService": "service"}
KIND_OF_PREFIX = {prefix: kind for kind, prefix in PREFIXES.items()}
QueueIndex = Mapping[tuple[str, str], PendingWorkload]

COLUMNS: list[JsonObj] = [
    {"name": "Name", "type": "string", "format": "name", "priority": 0,
     "description": "job.NAME or service.NAME: the KaiwoJob or KaiwoService summarized"},
    {"name": "Phase", "type": "string", "format": "", "priority": 0, "description": "The workload's status.status"},
    {"name": "Queue", "type": "string", "format": "", "priority": 0, "description": "Its ClusterQueue"},
    {"name": "Position", "type": "integer", "format": "", "priority": 0,
     "description": "1-based place among the ClusterQueue's pending workloads, while it waits"},
    {"name": "Why-Pending", "type": "string", "format": "", "priority": 0,
     "description": "Kueue's reason it is not admitted yet, or the workload's own problem"},
    {"name": "Age", "type": "string", "format": "", "priority": 0, "description": "Time since creation"},
    {"name": "User", "type": "string", "format": "", "priority": 1, "description": "spec.user"},
    {"name": "GPUs", "type": "integer", "format": "", "priority": 1, "description": "GPUs asked for"},
    {"name": "Estimated-Start", "type": "string", "format": "date-time", "priority": 1,
     "description": "When it is expected to start, where known"},
]


def summary_name(kind: str, name: str) -> str:
    return f"{PREFIXES[kind]}.{name}"


def parse_name(summary: str) -> tuple[str, str] | None:
    """(workload kind, workload name) of a summary's name, None when it names neither kind."""
    prefix, dot, name = summary.partition(".")
    kind = KIND_OF_PREFIX.get(prefix)
    return (kind, name) if dot and name and kind else None


def queue_index(views: Iterable[ClusterQueueView]) -> dict[tuple[str, str], PendingWorkload]:
    """(namespace, workload name) -> its pending Kueue Workload's place (the first, for a multi-part one)."""
    index: dict[tuple[str, str], PendingWorkload] = {}
    for view in views:
        for pending in view.pending:
            if pending.kaiwo_workload:
                index.setdefault((pending.namespace, pending.kaiwo_workload), pending)
    return index


def _stamp(t: datetime | None) -> str | None:
    return None if t is None else t.strftime("%Y-%m-%dT%H:%M:%SZ")


def to_object(row: WorkloadSummary, resource_version: str, queues: QueueIndex,
              estimate: Estimate | None = None, estimated_at: datetime | None = None) -> JsonObj:
    waiting = queues.get((row.namespace, row.name))
    why = (waiting.message if waiting is not None else "") or row.message
    metadata: JsonObj = {"name": summary_name(row.kind, row.name), "namespace": row.namespace, "uid": row.uid,
                         "resourceVersion": resource_version, "creationTimestamp": row.created}
    if row.labels:
        metadata["labels"] = dict(row.labels)
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata,
            "workload": {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": row.kind, "name": row.name},
            "phase": row.phase, "user": row.user, "queue": row.queue,
            "queuePosition": waiting.position if waiting is not None else None,
            "whyPending": why or None, "estimatedStart": _stamp(estimate.start) if estimate else None,
            "estimatedStartEarliest": _stamp(estimate.earliest) if estimate else None,
            "estimatedStartLatest": _stamp(estimate.latest) if estimate else None,
            "estimatedAt": _stamp(estimated_at) if estimate else None, "gpus": row.gpus,
            "started": row.started, "finished": row.finished}


def to_list(items: list[JsonObj], resource_version: str, continue_token: str | None) -> JsonObj:
    metadata: JsonObj = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    return {"apiVersion": API_VERSION, "kind": f"{KIND}List", "metadata": metadata, "items": items}


def wants_table(accept: str) -> bool:
    """kubectl asks `application/json;as=Table;v=v1;g=meta.k8s.io,...`: the Table, in v1."""
    return any("as=Table" in part and "g=meta.k8s.io" in part for part in accept.split(","))


def _row(obj: JsonObj, include: str, now: datetime) -> JsonObj:
    cells = [obj["metadata"]["name"], obj.get("phase") or "", obj.get("queue") or "",
             obj.get("queuePosition") if obj.get("queuePosition") is not None else "<none>",
             obj.get("whyPending") or "<none>", age(obj["metadata"].get("creationTimestamp"), now),
             obj.get("user") or "<none>", obj.get("gpus") or 0, obj.get("estimatedStart") or "<unknown>"]
    row: JsonObj = {"cells": cells}
    if include == "Object":
        row["object"] = obj
    elif include == "Metadata":
        row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}
    return row


def to_table(objects: list[JsonObj], metadata: JsonObj, include: str, now: datetime) -> JsonObj:
    """kubectl's Table: column definitions (priority 1 only with -o wide) and one row per object, with
    the object's metadata (includeObject=Metadata, kubectl's default) so `kubectl get` can name it."""
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "columnDefinitions": COLUMNS,
            "rows": [_row(obj, include, now) for obj in objects]}


def watch_events(before: Mapping[str, JsonObj], after: Mapping[str, JsonObj]) -> list[tuple[str, JsonObj]]:
    """What changed between two views keyed by namespace/name: ADDED, MODIFIED (another
    resourceVersion or another queue position) and DELETED events, in key order."""
    events: list[tuple[str, JsonObj]] = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old is None and new is not None:
            events.append(("ADDED", new))
        elif new is None and old is not None:
            events.append(("DELETED", old))
        elif old is not None and new is not None and old != new:
            events.append(("MODIFIED", new))
    return events
