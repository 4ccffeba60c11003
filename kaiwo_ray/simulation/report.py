"""What a simulation recorded (`Recording`) and the report made from it (pure).

Times are simulated seconds since the trace's start. A workload's wait is from its submission to
its first admission by Kueue; a GPU is allocated while a Kueue Workload holding it is admitted.
Figures are rounded (3 decimals) so that the JSON of two runs of the same inputs is byte-identical.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kaiwo_ray.simulation.series import held_gpus, time_series, whole_spans
from kaiwo_ray.simulation.trace import TraceEntry

HOUR = 3600.0
# Causes of an admission ended by the operator rather than Kueue: idle-GPU preemption deleted the
# KaiwoJob; the resource monitor terminated it (its WorkloadTerminatedEarly reason).
IDLE_GPU_PREEMPTION = "IdleGpuPreemption"
RESOURCE_MONITORING = "GpuUtilizationLow"


@dataclass(frozen=True, slots=True)
class Interval:
    """One admitted span of a workload; `cause` says why it ended early ("" if it finished or the
    simulation stopped): Kueue's Preempted reason (InClusterQueue, InCohortReclamation, ...) or
    its Evicted reason. `pods`: how many of the workload's pods it holds (a service's pods are
    admitted one by one, one interval each); 0: the whole workload."""

    start: float
    end: float
    cause: str = ""
    pods: int = 0


@dataclass(slots=True)
class WorkloadRecord:
    line: int
    name: str
    submitted: float | None = None
    intervals: list[Interval] = field(default_factory=list)
    finished: float | None = None
    terminated: float | None = None  # ended for good by the operator without finishing
    # A service's pods (its intervals are one pod's each); 0: each interval is the whole workload's.
    replicas: int = 0

    @property
    def started(self) -> float | None:
        """The first admission; a service's: the first moment all its pods were admitted."""
        spans = whole_spans(self.intervals, self.replicas)
        return spans[0][0] if spans else None


@dataclass(slots=True)
class Recording:
    workloads: list[WorkloadRecord]
    ended: float  # the simulated time the run stopped at
    interrupted: bool = False  # stopped by the user (Ctrl-C): the figures are those so far


def percentile(values: Sequence[float], share: float) -> float | None:
    """Nearest-rank percentile (`share` in 0..1) of `values`; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return ordered[rank - 1]


def _r(value: float | None) -> float | None:
    return None if value is None else round(value + 0.0, 3)


def _group_summary(pairs: Iterable[tuple[TraceEntry, WorkloadRecord]], ended: float) -> dict[str, Any]:
    waits: list[float] = []
    causes: Counter[str] = Counter()
    allocated = used = 0.0
    reclaimed: dict[str, float] = {IDLE_GPU_PREEMPTION: 0.0, RESOURCE_MONITORING: 0.0}
    count = never = 0
    for entry, record in pairs:
        count += 1
        if record.started is None or record.submitted is None:
            never += 1
        else:
            waits.append(record.started - record.submitted)
        for interval in record.intervals:
            ran = interval.end - interval.start
            allocated += ran * held_gpus(entry.workload, interval)
            used += entry.workload.used_gpu_seconds(ran, interval.pods)
            if interval.cause:
                causes[interval.cause] += 1
            if interval.cause in (IDLE_GPU_PREEMPTION, RESOURCE_MONITORING):
                reclaimed[interval.cause] += reclaimed_gpu_seconds(entry, interval, ended)
    return {
        "workloads": count,
        "started": count - never,
        "never_started": never,
        "wait_seconds": {"p50": _r(percentile(waits, 0.5)), "p95": _r(percentile(waits, 0.95)),
                         "max": _r(max(waits) if waits else None)},
        "preemptions": dict(sorted(causes.items())),
        "gpu_hours": {"allocated": _r(allocated / HOUR), "used": _r(used / HOUR),
                      "allocated_idle": _r((allocated - used) / HOUR)},
        "reclaimed_gpu_hours": {"idle_preemption": _r(reclaimed[IDLE_GPU_PREEMPTION] / HOUR),
                                "resource_monitoring": _r(reclaimed[RESOURCE_MONITORING] / HOUR)},
    }


def reclaimed_gpu_seconds(entry: TraceEntry, interval: Interval, ended: float | None = None) -> float:
    """GPU time the operator took back by ending this admission: what the workload would still have
    held had it run to the end of its trace duration (GPUs x (duration - the admitted span)); a service
    without a duration would have held them to the run's end."""
    duration = entry.workload.duration
    if duration is None:
        left = 0.0 if ended is None else ended - interval.end
    else:
        left = duration - (interval.end - interval.start)
    return held_gpus(entry.workload, interval) * max(0.0, left)


def allocation_timeline(pairs: Sequence[tuple[TraceEntry, WorkloadRecord]], ended: float,
                        bucket: float = HOUR) -> list[float]:
    """Mean GPUs allocated in each `bucket` seconds from 0 to `ended`."""
    buckets = [0.0] * max(1, math.ceil(ended / bucket)) if ended > 0 else []
    for entry, record in pairs:
        for interval in record.intervals:
            start, end = interval.start, interval.end
            index = int(start // bucket)
            while start < end and index < len(buckets):
                stop = min(end, (index + 1) * bucket)
                buckets[index] += (stop - start) * held_gpus(entry.workload, interval)
                start, index = stop, index + 1
    return [round(value / bucket, 3) for value in buckets]


def build_report(trace: Sequence[TraceEntry], recording: Recording, gpus_in_cluster: int) -> dict[str, Any]:
    by_line = {record.line: record for record in recording.workloads}
    pairs = [(entry, by_line[entry.line]) for entry in trace]
    overall = _group_summary(pairs, recording.ended)
    capacity = gpus_in_cluster * recording.ended / HOUR
    timeline = allocation_timeline(pairs, recording.ended)
    allocated_hours = overall["gpu_hours"]["allocated"] or 0.0
    overall["gpu_hours"]["capacity"] = _r(capacity)
    overall["gpu_hours"]["unallocated"] = _r(capacity - allocated_hours)
    overall["gpu_hours"]["idle"] = _r(capacity - (overall["gpu_hours"]["used"] or 0.0))
    overall["allocation"] = {
        "gpus_in_cluster": gpus_in_cluster,
        "mean_gpus": _r(allocated_hours * HOUR / recording.ended if recording.ended > 0 else 0.0),
        "peak_gpus": _peak(pairs),
        "hourly_mean_gpus": timeline,
    }
    return {
        "interrupted": recording.interrupted,
        "simulated_seconds": _r(recording.ended),
        "overall": overall,
        "queues": _grouped(pairs, lambda entry: entry.workload.queue, recording.ended),
        "users": _grouped(pairs, lambda entry: entry.workload.user, recording.ended),
        "never_started": [{"line": entry.line, "name": entry.name, "namespace": entry.workload.namespace,
                           "queue": entry.workload.queue}
                          for entry, record in pairs if record.started is None],
        "workloads": [_workload_row(entry, record) for entry, record in pairs],
        "series": time_series(pairs, recording.ended),
    }


def _grouped(pairs: Sequence[tuple[TraceEntry, WorkloadRecord]], key: Any, ended: float) -> dict[str, Any]:
    groups: dict[str, list[tuple[TraceEntry, WorkloadRecord]]] = {}
    for pair in pairs:
        groups.setdefault(key(pair[0]), []).append(pair)
    return {name: _group_summary(groups[name], ended) for name in sorted(groups)}


def _peak(pairs: Sequence[tuple[TraceEntry, WorkloadRecord]]) -> int:
    changes: list[tuple[float, int]] = []
    for entry, record in pairs:
        for interval in record.intervals:
            gpus = held_gpus(entry.workload, interval)
            changes += [(interval.start, gpus), (interval.end, -gpus)]
    peak = current = 0
    for _, delta in sorted(changes, key=lambda change: (change[0], change[1])):  # ends before starts
        current += delta
        peak = max(peak, current)
    return peak


def _workload_row(entry: TraceEntry, record: WorkloadRecord) -> dict[str, Any]:
    started = record.started
    return {
        "line": entry.line, "name": entry.name, "namespace": entry.workload.namespace,
        "queue": entry.workload.queue, "user": entry.workload.user,
        "submitted": _r(record.submitted), "started": _r(started),
        "wait": _r(None if started is None or record.submitted is None else started - record.submitted),
        "finished": _r(record.finished),
        "terminated": _r(record.terminated),
        "preemptions": [interval.cause for interval in record.intervals if interval.cause],
    }


def _format_seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 120:
        return f"{value:.0f}s"
    if value < 2 * HOUR:
        return f"{value / 60:.1f}m"
    return f"{value / HOUR:.1f}h"


def render_table(report: Mapping[str, Any]) -> str:
    """The terminal view: one row per queue, per user and overall, then what never started."""
    header = ("", "WORKLOADS", "NEVER", "WAIT P50", "WAIT P95", "WAIT MAX", "GPU-H ALLOC", "GPU-H USED",
              "PREEMPTED")
    rows: list[tuple[str, ...]] = [header]

    def row(label: str, summary: Mapping[str, Any]) -> tuple[str, ...]:
        wait = summary["wait_seconds"]
        hours = summary["gpu_hours"]
        preempted = ", ".join(f"{cause} {n}" for cause, n in summary["preemptions"].items()) or "-"
        return (label, str(summary["workloads"]), str(summary["never_started"]), _format_seconds(wait["p50"]),
                _format_seconds(wait["p95"]), _format_seconds(wait["max"]), f"{hours['allocated']:.1f}",
                f"{hours['used']:.1f}", preempted)

    for name, summary in report["queues"].items():
        rows.append(row(f"queue {name}", summary))
    for name, summary in report["users"].items():
        rows.append(row(f"user {name}", summary))
    rows.append(row("overall", report["overall"]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["   ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip() for r in rows]
    overall = report["overall"]
    hours, allocation = overall["gpu_hours"], overall["allocation"]
    lines += [
        "",
        f"Simulated {_format_seconds(report['simulated_seconds'])} on {allocation['gpus_in_cluster']} GPUs: "
        f"{allocation['mean_gpus']:.1f} allocated on average, {allocation['peak_gpus']} at peak.",
        f"GPU-hours: {hours['capacity']:.1f} capacity, {hours['allocated']:.1f} allocated, {hours['used']:.1f} used; "
        f"idle {hours['idle']:.1f} ({hours['unallocated']:.1f} unallocated, {hours['allocated_idle']:.1f} "
        "allocated but idle).",
    ]
    taken_back = overall.get("reclaimed_gpu_hours") or {}
    reclaimed = (taken_back.get("idle_preemption") or 0.0, taken_back.get("resource_monitoring") or 0.0)
    if any(reclaimed):
        lines.append(f"Reclaimed GPU-hours: {reclaimed[0]:.1f} by idle GPU preemption, {reclaimed[1]:.1f} by "
                     "resource monitoring.")
    never = report["never_started"]
    if report.get("interrupted"):
        lines.append(f"Interrupted after {_format_seconds(report['simulated_seconds'])} simulated: the figures "
                     "so far; workloads not started by then count as never started.")
    elif never:
        lines.append(f"Never started ({len(never)}): " + ", ".join(
            f"{w['namespace']}/{w['name']} (line {w['line']}, queue {w['queue']})" for w in never))
    return "\n".join(lines)


# The figures `--compare` sets side by side, by path in a group summary.
COMPARED: tuple[tuple[str, ...], ...] = (
    ("wait_seconds", "p50"), ("wait_seconds", "p95"), ("wait_seconds", "max"), ("never_started",),
    ("gpu_hours", "allocated"), ("gpu_hours", "allocated_idle"),
)


def _figure(summary: Mapping[str, Any] | None, path: tuple[str, ...]) -> Any:
    value: Any = summary
    for part in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def compare_reports(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Per group (overall, each queue, each user) and compared figure: A's value, B's and B - A
    (None where either is missing); plus both runs' preemptions and idle GPU-hours overall."""
    groups: list[tuple[str, Mapping[str, Any] | None, Mapping[str, Any] | None]] = [
        ("overall", a["overall"], b["overall"])]
    for section in ("queues", "users"):
        for name in sorted(set(a[section]) | set(b[section])):
            groups.append((f"{section[:-1]} {name}", a[section].get(name), b[section].get(name)))
    rows = []
    for label, left, right in groups:
        figures = {}
        for path in COMPARED:
            x, y = _figure(left, path), _figure(right, path)
            delta = _r(y - x) if isinstance(x, int | float) and isinstance(y, int | float) else None
            figures[".".join(path)] = {"a": x, "b": y, "difference": delta}
        rows.append({"group": label, "figures": figures})
    overall_a, overall_b = a["overall"], b["overall"]
    return {
        "groups": rows,
        "idle_gpu_hours": {"a": overall_a["gpu_hours"]["idle"], "b": overall_b["gpu_hours"]["idle"],
                           "difference": _r(overall_b["gpu_hours"]["idle"] - overall_a["gpu_hours"]["idle"])},
        "preemptions": {"a": overall_a["preemptions"], "b": overall_b["preemptions"]},
        "reclaimed_gpu_hours": {"a": overall_a.get("reclaimed_gpu_hours"), "b": overall_b.get("reclaimed_gpu_hours")},
    }


def render_comparison(a_name: str, b_name: str, comparison: Mapping[str, Any]) -> str:
    """One row per group: each compared figure as `A -> B`; differences marked with `*`."""
    titles = ("WAIT P50", "WAIT P95", "WAIT MAX", "NEVER", "GPU-H ALLOC", "GPU-H IDLE-ALLOC")
    rows: list[tuple[str, ...]] = [("", *titles)]
    for group in comparison["groups"]:
        cells = [group["group"]]
        for path, figure in zip(COMPARED, group["figures"].values(), strict=True):
            show = _format_seconds if path[0] == "wait_seconds" else _format_number
            changed = figure["a"] != figure["b"]
            cells.append(f"{show(figure['a'])} -> {show(figure['b'])}{' *' if changed else ''}")
        rows.append(tuple(cells))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"A: {a_name}", f"B: {b_name}", ""]
    lines += ["   ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip() for r in rows]
    idle = comparison["idle_gpu_hours"]
    pre = comparison["preemptions"]
    lines += ["", f"Idle GPU-hours: {idle['a']:.1f} -> {idle['b']:.1f} ({idle['difference']:+.1f}).",
              "Preemptions: " + _causes(pre["a"]) + " -> " + _causes(pre["b"]) + ".",
              "(* : differs between A and B)"]
    return "\n".join(lines)


def _format_number(value: float | None) -> str:
    return "-" if value is None else (f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}")


def _causes(causes: Mapping[str, int]) -> str:
    return ", ".join(f"{cause} {count}" for cause, count in causes.items()) or "none"
