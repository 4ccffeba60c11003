"""What `kaiwo submit --wait` shows while a workload starts: phase, queue position, download and
pods, in one line (pure `describe`), gathered by `observe` with three reads."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kaiwo_ray.cli.workloads import phase, pods_of

if TYPE_CHECKING:
    from kaiwo_ray.cli.api import Api

JsonObj = dict[str, Any]
KUEUE = ("kueue.x-k8s.io", "v1beta1")
OWNER_KINDS = frozenset({"Job", "RayJob", "RayCluster", "RayService", "AppWrapper", "Pod"})


@dataclass
class Observation:
    workload: JsonObj
    pods: list[JsonObj] = field(default_factory=list)
    queue_position: tuple[int, int] | None = None  # (position, pending in the queue)
    download: JsonObj | None = None  # the download Job


def _condition(obj: JsonObj, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def queue_position(mine: JsonObj | None, all_workloads: list[JsonObj]) -> tuple[int, int] | None:
    """Where a pending Kueue Workload stands among the pending ones of the same queue:
    higher priority first, then older first (Kueue's BestEffortFIFO / StrictFIFO order)."""
    if mine is None or _condition(mine, "Admitted") or _condition(mine, "Finished"):
        return None
    queue = (mine.get("spec") or {}).get("queueName")
    pending = [w for w in all_workloads if (w.get("spec") or {}).get("queueName") == queue
               and not _condition(w, "Admitted") and not _condition(w, "Finished")]
    pending.sort(key=lambda w: (-int((w.get("spec") or {}).get("priority") or 0),
                                str((w.get("metadata") or {}).get("creationTimestamp") or ""),
                                str((w.get("metadata") or {}).get("name") or "")))
    uid = (mine.get("metadata") or {}).get("uid")
    for index, item in enumerate(pending):
        if (item.get("metadata") or {}).get("uid") == uid:
            return index + 1, len(pending)
    return None


def describe(obs: Observation) -> str:
    parts = [phase(obs.workload) or "SUBMITTED"]
    if obs.queue_position is not None:
        position, total = obs.queue_position
        parts.append(f"queue position {position} of {total}")
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
    from kaiwo_ray.cli.api import ApiStatusError, resource_path

    meta = workload.get("metadata") or {}
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    obs = Observation(workload=workload, pods=pods_of(api, workload))
    if phase(workload) in ("", "PENDING", "DOWNLOADING", "STARTING"):
        try:
            mine_list = api.list(resource_path(*KUEUE, "workloads", namespace)).get("items") or []
            mine = next((w for w in mine_list for o in (w.get("metadata") or {}).get("ownerReferences") or []
                         if o.get("name") == name and o.get("kind") in OWNER_KINDS), None)
            if mine is not None and not _condition(mine, "Admitted"):
                try:
                    everyone = api.list(resource_path(*KUEUE, "workloads")).get("items") or []
                except ApiStatusError:
                    everyone = mine_list
                obs.queue_position = queue_position(mine, everyone)
        except ApiStatusError:
            pass  # no Kueue on this cluster: no queue position
    if phase(workload) == "DOWNLOADING":
        obs.download = api.get_or_none(resource_path("batch", "v1", "jobs", namespace, f"{name}-download"))
    return obs
