"""Reading the ledger (pure): usage per user, namespace, queue, ... over a window, the idle report,
the cumulative counters /metrics exposes, and the CSV export. The ledger's rows are bucketed
(`Ledger.bucket_seconds`): a window takes the buckets that start inside it, so its edges are
rounded to the bucket width."""

from __future__ import annotations

import csv
import heapq
import io
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kaiwo_ray.telemetry.ledger import ALLOCATED, IDLE, UNKNOWN, USED, Owner, Reclaim, RowKey

GroupBy = Literal["user", "namespace", "queue", "clusterqueue", "vendor", "model", "workload"]
GROUPS: tuple[str, ...] = ("user", "namespace", "queue", "clusterqueue", "vendor", "model", "workload")
UNATTRIBUTED = "(unattributed)"


class UsageRow(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    allocated_gpu_hours: float = 0.0
    used_gpu_hours: float = 0.0
    idle_gpu_hours: float = 0.0
    unknown_gpu_hours: float = 0.0
    reclaimed_gpu_hours: dict[str, float] = Field(default_factory=dict)
    """By cause: gpu-preemption, resource-monitoring."""
    workloads: int = 0
    declared_users: list[str] = Field(default_factory=list)
    """Users the manifests claimed (`spec.user`) where it differs from the authenticated one."""


class UsageSeriesPoint(BaseModel):
    start: float
    key: str
    allocated_gpu_hours: float
    used_gpu_hours: float
    idle_gpu_hours: float
    unknown_gpu_hours: float


class IdleHolder(BaseModel):
    namespace: str
    kind: str
    name: str
    user: str
    declared_user: str = ""
    queue: str = ""
    idle_gpu_hours: float
    allocated_gpu_hours: float
    preemption_enabled: bool


class UsageReport(BaseModel):
    group_by: str
    since: float
    until: float
    bucket_seconds: int
    items: list[UsageRow]
    series: list[UsageSeriesPoint] = Field(default_factory=list)
    top_idle: list[IdleHolder] = Field(default_factory=list)


def group_key(owner: Owner | None, vendor: str, model: str, by: str) -> str:
    if by == "vendor":
        return vendor
    if by == "model":
        return model
    if owner is None:
        return UNATTRIBUTED
    if by == "user":
        value = owner.user
    elif by == "namespace":
        value = owner.namespace
    elif by == "queue":
        value = owner.queue
    elif by == "clusterqueue":
        value = owner.cluster_queue
    else:
        value = f"{owner.namespace}/{owner.kind}/{owner.name}"
    return value or UNATTRIBUTED


def _visible(owner: Owner | None, namespaces: frozenset[str] | None) -> bool:
    return namespaces is None or (owner is not None and owner.namespace in namespaces)


DAY = 86_400
Entry = tuple[int, str, str, str, list[float]]  # (bucket or day start, owner key, vendor, model, values)


def _add(sums: dict[Any, list[float]], key: Any, values: list[float]) -> None:
    total = sums.get(key)
    if total is None:
        sums[key] = list(values)
    else:
        total[0] += values[0]
        total[1] += values[1]
        total[2] += values[2]
        total[3] += values[3]


@dataclass(slots=True)
class UsageIndex:
    """The rows summed per day as well, built once per read of the ledger: a window of whole days reads
    the daily sums (a workload's hours in a day become one entry), and only its first and last day the
    hourly rows, so a 30-day query over 10,000 workloads touches tens of thousands of entries, not
    every hour of every workload. `owner_daily` also sums over vendor and model, for the groupings by
    the workload's attributes (user, namespace, queue, ...)."""

    daily: dict[int, dict[tuple[str, str, str], list[float]]] = field(default_factory=dict)
    owner_daily: dict[int, dict[str, list[float]]] = field(default_factory=dict)
    hourly: dict[int, list[Entry]] = field(default_factory=dict)
    owner_all: dict[str, list[float]] = field(default_factory=dict)  # every day summed, per workload

    @staticmethod
    def build(rows: Mapping[RowKey, list[float]]) -> UsageIndex:
        index = UsageIndex()
        for (bucket, owner, vendor, model), values in rows.items():
            day = bucket - bucket % DAY
            index.hourly.setdefault(day, []).append((bucket, owner, vendor, model, values))
            _add(index.daily.setdefault(day, {}), (owner, vendor, model), values)
            _add(index.owner_daily.setdefault(day, {}), owner, values)
            _add(index.owner_all, owner, values)
        return index

    def owner_totals(self, since: float, until: float, into: dict[str, list[float]]) -> None:
        """Per workload, the sums of [since, until) added into `into`. A window that holds most days
        starts from the sums of all days and takes off what lies outside it (the usual "last 30 days"
        over 30 days of history touches each workload once, not once per day)."""
        inside = [d for d in self.owner_daily if d >= since and d + DAY <= until]
        if len(inside) * 2 < len(self.owner_daily):
            for owner, values in self.owner_window(since, until):
                _add(into, owner, values)
            return
        subtract: dict[str, list[float]] = {}
        for day, sums in self.owner_daily.items():
            if day + DAY <= since or day >= until:
                for owner, values in sums.items():
                    _add(subtract, owner, values)
            elif not (day >= since and day + DAY <= until):  # a partial day: its hours outside the window
                for e in self.hourly[day]:
                    if not since <= e[0] < until:
                        _add(subtract, e[1], e[4])
        for owner, values in self.owner_all.items():
            gone = subtract.get(owner)
            if gone is not None:
                values = [values[0] - gone[0], values[1] - gone[1], values[2] - gone[2], values[3] - gone[3]]
                if values[0] <= 1e-9 and values[3] <= 1e-9:
                    continue  # nothing of it in the window
            _add(into, owner, values)

    def window(self, since: float, until: float) -> Iterator[Entry]:
        for day, sums in self.daily.items():
            if day >= since and day + DAY <= until:
                for (owner, vendor, model), values in sums.items():
                    yield day, owner, vendor, model, values
            elif day + DAY > since and day < until:
                yield from (e for e in self.hourly[day] if since <= e[0] < until)

    def owner_window(self, since: float, until: float) -> Iterator[tuple[str, list[float]]]:
        for day, sums in self.owner_daily.items():
            if day >= since and day + DAY <= until:
                yield from sums.items()
            elif day + DAY > since and day < until:
                yield from ((e[1], e[4]) for e in self.hourly[day] if since <= e[0] < until)


def report(rows: Mapping[RowKey, list[float]], owners: Mapping[str, Owner], reclaims: Iterable[Reclaim], *,
           by: str, since: float, until: float, bucket_seconds: int, namespaces: frozenset[str] | None = None,
           series: bool = False, top: int = 10, index: Iterable[UsageIndex] | None = None) -> UsageReport:
    """Usage per `by` key in [since, until), only of workloads in `namespaces` (None: all). With `index`
    (indexes of disjoint rows; no series, which needs every bucket) whole days are read from the daily sums."""
    totals: dict[str, list[float]] = {}
    members: dict[str, set[str]] = {}
    points: dict[tuple[float, str], list[float]] = {}
    per_owner: dict[str, list[float]] = {}  # owner key -> [allocated, used, idle, unknown] seconds
    if index is not None and not series and by not in ("vendor", "model"):
        # the fast path: sum per workload first, then put each workload in its group once
        for idx in index:
            idx.owner_totals(since, until, per_owner)
        for owner_key in [k for k in per_owner if not _visible(owners.get(k), namespaces)]:
            del per_owner[owner_key]
        for owner_key, values in per_owner.items():
            key = group_key(owners.get(owner_key), "", "", by)
            _add(totals, key, values)
            members.setdefault(key, set()).add(owner_key)
    else:
        entries: Iterable[Entry]
        if index is not None and not series:
            entries = (e for idx in index for e in idx.window(since, until))
        else:
            entries = ((b, o, v, m, vals) for (b, o, v, m), vals in rows.items() if since <= b < until)
        _accumulate(entries, owners, by, namespaces, series, totals, members, points, per_owner)
    declared: dict[str, set[str]] = {}
    for key, keys in members.items():
        for owner_key in keys:
            owner = owners.get(owner_key)
            if owner is not None and owner.declared_user and owner.declared_user != owner.user:
                declared.setdefault(key, set()).add(owner.declared_user)
    reclaimed: dict[str, dict[str, float]] = {}
    for entry in reclaims:
        if not since <= entry.at < until:
            continue
        owner = owners.get(entry.owner)
        if not _visible(owner, namespaces):
            continue
        key = group_key(owner, entry.vendor, "", by)
        causes = reclaimed.setdefault(key, {})
        causes[entry.cause] = causes.get(entry.cause, 0.0) + entry.seconds
        totals.setdefault(key, [0.0, 0.0, 0.0, 0.0])
    items = [UsageRow(key=key, allocated_gpu_hours=_h(v[ALLOCATED]), used_gpu_hours=_h(v[USED]),
                      idle_gpu_hours=_h(v[IDLE]), unknown_gpu_hours=_h(v[UNKNOWN]),
                      reclaimed_gpu_hours={c: _h(s) for c, s in sorted(reclaimed.get(key, {}).items())},
                      workloads=len(members.get(key, ())), declared_users=sorted(declared.get(key, ())))
             for key, v in totals.items()]
    items.sort(key=lambda r: (-r.allocated_gpu_hours, r.key))
    out_series = [UsageSeriesPoint(start=start, key=key, allocated_gpu_hours=_h(v[ALLOCATED]),
                                   used_gpu_hours=_h(v[USED]), idle_gpu_hours=_h(v[IDLE]),
                                   unknown_gpu_hours=_h(v[UNKNOWN]))
                  for (start, key), v in sorted(points.items())]
    return UsageReport(group_by=by, since=since, until=until, bucket_seconds=bucket_seconds, items=items,
                       series=out_series, top_idle=idle_report(per_owner, owners, top))


def _accumulate(entries: Iterable[Entry], owners: Mapping[str, Owner], by: str, namespaces: frozenset[str] | None,
                series: bool, totals: dict[str, list[float]], members: dict[str, set[str]],
                points: dict[tuple[float, str], list[float]], per_owner: dict[str, list[float]]) -> None:
    """Entries into the groups' totals and members, the per-bucket points (with `series`) and per-workload sums."""
    by_owner = by not in ("vendor", "model")
    seen: dict[str, str | None] = {}  # owner key -> its group, "" for vendor/model (None: not visible)
    for bucket, owner_key, vendor, model, values in entries:
        if owner_key not in seen:
            owner = owners.get(owner_key)
            visible = _visible(owner, namespaces)
            seen[owner_key] = (group_key(owner, vendor, model, by) if by_owner else "") if visible else None
        key = seen[owner_key]
        if key is None:
            continue
        if not by_owner:
            key = vendor if by == "vendor" else model
        _add(totals, key, values)
        members.setdefault(key, set()).add(owner_key)
        if series:
            _add(points, (float(bucket), key), values)
        _add(per_owner, owner_key, values)


def idle_report(per_owner: Mapping[str, list[float]], owners: Mapping[str, Owner], top: int) -> list[IdleHolder]:
    """The workloads that held the most idle GPU-hours (per owner key: [allocated, used, idle, unknown] seconds)."""
    ranked = heapq.nlargest(top, ((v[IDLE], v[ALLOCATED], k) for k, v in per_owner.items() if v[IDLE] > 1e-9))
    out = []
    for idle, allocated, key in ranked:
        owner = owners.get(key) or Owner(key)
        out.append(IdleHolder(namespace=owner.namespace, kind=owner.kind, name=owner.name or key, user=owner.user,
                              declared_user=owner.declared_user, queue=owner.queue, idle_gpu_hours=_h(idle),
                              allocated_gpu_hours=_h(allocated), preemption_enabled=owner.preemption))
    return out


CounterKey = tuple[str, str, str, str]  # (namespace, user, queue, vendor)


def counters(rows: Mapping[RowKey, list[float]], owners: Mapping[str, Owner],
             reclaims: Iterable[Reclaim]) -> tuple[dict[CounterKey, list[float]], dict[tuple[CounterKey, str], float]]:
    """Lifetime GPU-hours per (namespace, user, queue, vendor): [allocated, used, idle, unknown], and
    reclaimed per (labels, cause). Monotone as long as rows are only added to (the ledger never
    subtracts), so they are Prometheus counters."""
    out: dict[CounterKey, list[float]] = {}
    for (_, owner_key, vendor, _), values in rows.items():
        owner = owners.get(owner_key)
        key = (owner.namespace if owner else "", owner.user if owner else "", owner.queue if owner else "", vendor)
        total = out.setdefault(key, [0.0, 0.0, 0.0, 0.0])
        for i in range(4):
            total[i] += values[i] / 3600.0
    reclaimed: dict[tuple[CounterKey, str], float] = {}
    for entry in reclaims:
        owner = owners.get(entry.owner)
        key = (owner.namespace if owner else "", owner.user if owner else "", owner.queue if owner else "",
               entry.vendor)
        reclaimed[(key, entry.cause)] = reclaimed.get((key, entry.cause), 0.0) + entry.seconds / 3600.0
    return out, reclaimed


CSV_COLUMNS = ("key", "allocated_gpu_hours", "used_gpu_hours", "idle_gpu_hours", "unknown_gpu_hours",
               "reclaimed_gpu_hours_gpu_preemption", "reclaimed_gpu_hours_resource_monitoring", "workloads",
               "declared_users")


def to_csv(usage: UsageReport) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow((usage.group_by, *CSV_COLUMNS[1:]))
    for row in usage.items:
        writer.writerow((row.key, f"{row.allocated_gpu_hours:.6f}", f"{row.used_gpu_hours:.6f}",
                         f"{row.idle_gpu_hours:.6f}", f"{row.unknown_gpu_hours:.6f}",
                         f"{row.reclaimed_gpu_hours.get('gpu-preemption', 0.0):.6f}",
                         f"{row.reclaimed_gpu_hours.get('resource-monitoring', 0.0):.6f}", row.workloads,
                         " ".join(row.declared_users)))
    return buffer.getvalue()


def _h(seconds: float) -> float:
    return round(seconds / 3600.0, 6)
