"""The resource monitor's decision for one KaiwoJob/KaiwoService (spec/cluster.md §9), pure.

Input: the workload as stored, the GPUs its running pods hold with their readings, how many GPUs
those pods requested, the monitoring config and now. Output: the `ResourceUnderutilization`
condition, the `GpuUtilizationLow` events, and whether to flag the workload TERMINATING.

Differences from upstream (docs/compatibility.md):
* every pod and every GPU is evaluated (upstream keeps the last sample per workload);
* unknown is not idle: when a GPU the pods requested has no live reading (its node's telemetry is
  gone, the device unreadable, a scrape that did not list it), the condition becomes
  `Unknown`/`GpuTelemetryUnavailable`, no event is emitted, and the termination clock restarts
  when it flips back to `True`. Upstream reads a missing sample as 0 % and may terminate on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from kaiwo_ray.api.config import ResourceMonitoringConfig
from kaiwo_ray.api.durations import parse_go_duration
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.meta import parse_time
from kaiwo_ray.reconcile import phases as ph
from kaiwo_ray.reconcile.conditions import Cond, find, same_conditions, set_conditions

CONDITION = "ResourceUnderutilization"
LOW = "GpuUtilizationLow"
NORMAL = "GpuUtilizationNormal"
UNKNOWN = "GpuTelemetryUnavailable"
EVENT_COMPONENT = "KaiwoResourceMonitor"
SKIPPED_PHASES = frozenset({ph.TERMINATING, ph.TERMINATED, ph.FAILED, ph.COMPLETE})


@dataclass(frozen=True, slots=True)
class GpuUse:
    """One GPU held by one pod of the workload."""

    pod: str
    gpu_id: str
    utilization: float | None  # None: unknown
    partition: str = "0"


@dataclass(slots=True)
class MonitorDecision:
    status: JsonObj | None = None  # the status to write (None: nothing changed)
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    terminate: bool = False
    condition: Cond | None = None


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def evaluate(obj: JsonObj, uses: Sequence[GpuUse], requested_gpus: int, config: ResourceMonitoringConfig,
             now: datetime) -> MonitorDecision:
    status: JsonObj = obj.get("status") or {}
    phase = str(status.get("status") or "")
    decision = MonitorDecision()
    namespace = (obj.get("metadata") or {}).get("namespace") or ""
    if phase in SKIPPED_PHASES or phase != ph.RUNNING or requested_gpus <= 0:
        return decision
    if config.target_namespaces and namespace not in config.target_namespaces:
        return decision
    threshold = float(config.low_utilization_threshold)
    known = [u for u in uses if u.utilization is not None]
    if len(known) < requested_gpus:
        missing = requested_gpus - len(known)
        cond = Cond(CONDITION, "Unknown", UNKNOWN,
                    f"No live GPU telemetry for {missing} of {requested_gpus} GPUs; nothing is decided on missing data")
    else:
        low = [u for u in known if u.utilization is not None and u.utilization < threshold]
        for use in low:
            decision.events.append(("Warning", LOW, f"Pod '{use.pod}' is underutilizing GPU {use.gpu_id}/{use.partition}"))
        if low:  # the message names counts, not values, so that a steady state costs no writes
            cond = Cond(CONDITION, "True", LOW, f"{len(low)} of {len(known)} GPUs below {threshold:g}%")
        else:
            cond = Cond(CONDITION, "False", NORMAL, f"All {len(known)} GPUs at or above {threshold:g}%")
    decision.condition = cond
    stored = status.get("conditions") or []
    conditions = stored
    if not same_conditions([c for c in stored if c.get("type") == CONDITION], [cond], [CONDITION]):
        conditions = set_conditions(stored, [cond], _stamp(now), owned_types=[CONDITION])
    current = find(conditions, CONDITION) or {}
    since = parse_time(current.get("lastTransitionTime"))
    if (config.terminate_underutilized and cond.status == "True" and since is not None
            and now - since >= _after(config.terminate_underutilized_after)):
        decision.terminate = True
        early = Cond("WorkloadTerminatedEarly", "False", LOW,
                     f"GPU utilization below {threshold:g}% for longer than {config.terminate_underutilized_after}")
        conditions = set_conditions(conditions, [early], _stamp(now), owned_types=["WorkloadTerminatedEarly"])
        decision.status = {"status": ph.TERMINATING, "conditions": conditions}
        decision.events.append(("Normal", "WorkloadTermination", "Workload flagged for termination"))
    elif conditions is not stored:
        decision.status = {"conditions": conditions}
    return decision


def _after(text: str) -> timedelta:
    return parse_go_duration(text or "24h")
