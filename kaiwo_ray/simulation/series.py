"""Time series of a simulation (pure): GPUs allocated, GPUs used and pending workloads per queue,
as step functions made from what the recorder stamped (submissions, admissions, evictions, finishes).

A series is a list of `[time, value]` points: `value` holds from `time` until the next point's time;
the first point is at 0 and the last at the run's end. Only points where the value changes are kept
(besides the two ends), so a series has at most about two points per admission.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from kaiwo_ray.simulation.trace import TraceEntry, TraceWorkload

Series = list[list[float]]


# The recorder's shapes (report.Interval, report.WorkloadRecord), as protocols: report.py builds its
# report with these series, so this module cannot import it back.
class Interval(Protocol):
    @property
    def start(self) -> float: ...
    @property
    def end(self) -> float: ...
    @property
    def cause(self) -> str: ...
    @property
    def pods(self) -> int: ...


class WorkloadRecord(Protocol):
    @property
    def replicas(self) -> int: ...
    @property
    def submitted(self) -> float | None: ...
    @property
    def finished(self) -> float | None: ...
    @property
    def intervals(self) -> Sequence[Interval]: ...


def held_gpus(workload: TraceWorkload, interval: Interval) -> int:
    """GPUs an admitted span holds: the whole workload's, or those of its `pods` pods."""
    return workload.gpus * interval.pods if interval.pods else workload.total_gpus


def whole_spans(intervals: Sequence[Interval], replicas: int) -> list[tuple[float, float, str]]:
    """When the workload was wholly admitted, as `(start, end, cause)`: each interval, where an interval
    is the whole workload's (`replicas` 0); for a service, whose pods Kueue admits one by one (one
    interval each), the spans in which `replicas` of them were admitted at once, each ended by the
    cause of the pod whose end broke it ("" when it ended with the run or the service's deletion)."""
    if not replicas:
        return [(i.start, i.end, i.cause) for i in intervals]
    # Starts before ends at the same moment: a span of no length (a service admitted as the run ends)
    # is still an admission.
    changes = sorted([(i.start, 0, i.pods or 1, "") for i in intervals]
                     + [(i.end, 1, -(i.pods or 1), i.cause) for i in intervals])
    spans: list[tuple[float, float, str]] = []
    admitted, since = 0, None
    for time, _order, delta, cause in changes:
        admitted += delta
        if since is None and admitted >= replicas:
            since = time
        elif since is not None and admitted < replicas:
            spans.append((since, time, cause))
            since = None
    return spans


def _step(deltas: Iterable[tuple[float, float]], ended: float) -> Series:
    """The step function that starts at 0 and changes by each `(time, delta)`, sampled at its changes."""
    by_time: dict[float, float] = {}
    for time, delta in deltas:
        by_time[time] = by_time.get(time, 0.0) + delta
    points: Series = [[0.0, 0.0]]
    value = 0.0
    for time in sorted(by_time):
        if time > ended:
            break
        value += by_time[time]
        shown = round(value, 3) + 0.0  # + 0.0: -0.0 (a float sum a hair below 0) prints as 0.0
        if time <= 0.0:
            points[0][1] = shown
        elif shown != points[-1][1]:
            points.append([round(time, 3) + 0.0, shown])
    if ended > 0 and points[-1][0] < round(ended, 3):
        points.append([round(ended, 3) + 0.0, points[-1][1]])
    return points


def _used_deltas(workload: TraceWorkload, interval: Interval) -> list[tuple[float, float]]:
    """GPUs busy (utilization-weighted) during one admitted span: the profile restarts with each
    admission, as the pod does; after its last timed segment, 0."""
    deltas: list[tuple[float, float]] = []
    time, previous = interval.start, 0.0
    for segment in workload.utilization:
        if time >= interval.end:
            break
        value = held_gpus(workload, interval) * segment.percent / 100
        deltas.append((time, value - previous))
        previous = value
        if segment.seconds is None:
            time = interval.end
            break
        time += segment.seconds
    if previous:
        deltas.append((min(time, interval.end), -previous))
    return deltas


def _pending_spans(record: WorkloadRecord, ended: float) -> list[tuple[float, float]]:
    """When the workload waited in its queue: from submission to its first admission, and from each
    eviction to its next admission (or the run's end); a service until all its pods were admitted."""
    if record.submitted is None:
        return []
    spans: list[tuple[float, float]] = []
    waiting_since: float | None = record.submitted
    for start, end, cause in whole_spans(record.intervals, record.replicas):
        if waiting_since is not None:
            spans.append((waiting_since, start))
        waiting_since = end if cause else None
    if waiting_since is not None and record.finished is None:
        spans.append((waiting_since, ended))
    return [(start, end) for start, end in spans if end > start]


def time_series(pairs: Sequence[tuple[TraceEntry, WorkloadRecord]], ended: float) -> dict[str, Any]:
    """`gpus_allocated`, `gpus_used` and `pending` (queue -> workloads waiting) over the run."""
    allocated: list[tuple[float, float]] = []
    used: list[tuple[float, float]] = []
    pending: dict[str, list[tuple[float, float]]] = {}
    for entry, record in pairs:
        workload = entry.workload
        for interval in record.intervals:
            gpus = held_gpus(workload, interval)
            allocated += [(interval.start, gpus), (interval.end, -gpus)]
            used += _used_deltas(workload, interval)
        queue = pending.setdefault(workload.queue, [])
        for start, end in _pending_spans(record, ended):
            queue += [(start, 1.0), (end, -1.0)]
    return {
        "gpus_allocated": _step(allocated, ended),
        "gpus_used": _step(used, ended),
        "pending": {name: _step(pending[name], ended) for name in sorted(pending)},
    }
