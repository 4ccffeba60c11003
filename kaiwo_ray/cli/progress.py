"""What `kaiwo submit --wait` shows while a workload starts: phase, queue position, estimated start,
download and pods, in one line (pure `describe`), gathered by `observe` with three reads."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.cli.estimate import fetch_estimate, short
from kaiwo_ray.cli.workloads import phase, pods_of
from kaiwo_ray.kube import resources as R

if TYPE_CHECKING:
    from kaiwo_ray.cli.api import Api
    from kaiwo_ray.views.explain import StartEstimate

OWNER_KINDS = frozenset({"Job", "RayJob", "RayCluster", "RayService", "AppWrapper", "Pod"})


@dataclass
class Observation:
    workload: JsonObj
    pods: list[JsonObj] = field(default_factory=list)
    queue_position: tuple[int, int] | None = None  # (position, pending in the queue)
    download: JsonObj | None = None  # the download Job
    estimated_start: StartEstimate | None = None  # the admin API's forecast, while it waits


def _condition(obj: JsonObj, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def queue_position(mine: JsonObj | None, all_workloads: list[JsonObj],
                   local_queues: list[JsonObj]) -> tuple[int, int] | None:
    """Where a pending Kueue Workload stands among its ClusterQueue's pending ones, in Kueue's
    admission order (the shared read model of `kaiwo_ray.views.queues`)."""
    from kaiwo_ray.views.queues import cluster_queue_of, is_pending, local_queue_index, pending_in_order

    if mine is None or not is_pending(mine):
        return None
    index = local_queue_index(local_queues)
    cluster_queue = cluster_queue_of(mine, index)
    if cluster_queue is None:
        return None
    pending = pending_in_order(cluster_queue, all_workloads, index)
    name = (mine.get("metadata") or {}).get("name")
    namespace = (mine.get("metadata") or {}).get("namespace")
    for item in pending:
        if (item.name, item.namespace) == (name, namespace):
            return item.position, len(pending)
    return None


def describe(obs: Observation) -> str:
    parts = [phase(obs.workload) or "SUBMITTED"]
    if obs.queue_position is not None:
        position, total = obs.queue_position
        parts.append(f"queue position {position} of {total}")
    if obs.estimated_start is not None:
        parts.append(short(obs.estimated_start, datetime.now(UTC)))
    if obs.download is not None:
        status = obs.download.get("status") or {}
        if status.get("succeeded"):
            parts.append("download done")
        elif status.get("failed"):
            parts.append("download failed")
        else:
            parts.append("downloading" if status.get("active") else "download waiting")
    if obs.pods:
        counts = Counter(str((p.get("status") or {}).get("phase") or "Pending") for p in obs.pods)
        ready = sum(1 for p in obs.pods if _condition(p, "Ready"))
        parts.append(f"pods {ready}/{len(obs.pods)} ready ("
                     + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + ")")
    else:
        parts.append("no pods yet")
    return " | ".join(parts)


def observe(api: Api, workload: JsonObj) -> Observation:
    from kaiwo_ray.cli.api import path_of

    meta = workload.get("metadata") or {}
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    obs = Observation(workload=workload, pods=pods_of(api, workload))
    if phase(workload) in ("", "PENDING", "DOWNLOADING", "STARTING"):
        obs.queue_position = _queue_position(api, namespace, name)
        if obs.queue_position is not None and workload.get("kind") == "KaiwoJob":
            obs.estimated_start = fetch_estimate(api, namespace, name)
    if phase(workload) == "DOWNLOADING":
        obs.download = api.get_or_none(path_of(R.JOBS, namespace, f"{name}-download"))
    return obs


def _queue_position(api: Api, namespace: str, name: str) -> tuple[int, int] | None:
    """Where the workload's Kueue Workload waits in its queue, at the Kueue version the cluster serves;
    None when it is admitted, not yet queued, or the cluster has no Kueue."""
    from kaiwo_ray.cli.api import ApiStatusError, path_of

    workloads, queues = api.served(R.WORKLOADS), api.served(R.LOCALQUEUES)
    if workloads is None or queues is None:
        return None
    try:
        mine_list = api.list(path_of(workloads, namespace)).get("items") or []
        mine = next((w for w in mine_list for o in (w.get("metadata") or {}).get("ownerReferences") or []
                     if o.get("name") == name and o.get("kind") in OWNER_KINDS), None)
        if mine is None or _condition(mine, "QuotaReserved"):
            return None
        try:
            everyone = api.list(path_of(workloads)).get("items") or []
            local_queues = api.list(path_of(queues)).get("items") or []
        except ApiStatusError:  # not allowed cluster-wide: the namespace's view of the queue
            everyone = mine_list
            local_queues = api.list(path_of(queues, namespace)).get("items") or []
        return queue_position(mine, everyone, local_queues)
    except ApiStatusError:
        return None  # no Kueue on this cluster: no queue position
