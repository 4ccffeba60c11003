"""Reading the ledger (pure): usage per user, namespace, queue, ... over a window, the idle report,
the cumulative counters /metrics exposes, and the CSV export. The ledger's rows are bucketed
(`Ledger.bucket_seconds`): a window takes the buckets that start inside it, so its edges are
rounded to the bucket width."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

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
    value = {"user": owner.user, "namespace": owner.namespace, "queue": owner.queue,
             "clusterqueue": owner.cluster_queue,
             "workload": f"{owner.namespace}/{owner.kind}/{owner.name}"}[by]
    return value or UNATTRIBUTED


def _visible(owner: Owner | None, namespaces: frozenset[str] | None) -> bool:
    return namespaces is None or (owner is not None and owner.namespace in namespaces)


DAY = 86_400
Entry = tuple[int, str, str, str, list[float]]  # (bucket or day start, owner key, vendor, model, values)


@dataclass(slots=True)
class UsageIndex:
    """The rows summed per day as well, built once per read of the ledger: a window of whole days reads
    the daily sums (a workload's hours in a day become one entry), and only its first and last day the
    hourly rows, so a 30-day query over 10,000 workloads touches tens of thousands of entries, not
    every hour of every workload."""

    daily: dict[int, dict[tuple[str, str, str], list[float]]] = field(default_factory=dict)
    hourly: dict[int, list[Entry]] = field(default_factory=dict)

    @staticmethod
    def build(rows: Mapping[RowKey, list[float]]) -> UsageIndex:
        index = UsageIndex()
        for (bucket, owner, vendor, model), values in rows.items():
            day = bucket - bucket % DAY
            index.hourly.setdefault(day, []).append((bucket, owner, vendor, model, values))
            sums = index.daily.setdefault(day, {})
            total = sums.get((owner, vendor, model))
            if total is None:
                sums[(owner, vendor, model)] = list(values)
            else:
                for i in range(4):
                    total[i] += values[i]
        return index

    def window(self, since: float, until: float) -> Iterator[Entry]:
        for day, sums in self.daily.items():
            if day >= since and day + DAY <= until:
                for (owner, vendor, model), values in sums.items():
                    yield day, owner, vendor, model, values
            elif day + DAY > since and day < until:
                yield from (e for e in self.hourly[day] if since <= e[0] < until)


def report(rows: Mapping[RowKey, list[float]], owners: Mapping[str, Owner], reclaims: Iterable[Reclaim], *,
           by: str, since: float, until: float, bucket_seconds: int, namespaces: frozenset[str] | None = None,
           series: bool = False, top: int = 10, index: Iterable[UsageIndex] | None = None) -> UsageReport:
    """Usage per `by` key in [since, until), only of workloads in `namespaces` (None: all). With `index`
    (indexes of disjoint rows; no series, which needs every bucket) whole days are read from the daily sums."""
    entries: Iterable[Entry]
    if index is not None and not series:
        entries = (e for idx in index for e in idx.window(since, until))
    else:
        entries = ((b, o, v, m, vals) for (b, o, v, m), vals in rows.items() if since <= b < until)
    by_owner = by not in ("vendor", "model")
    seen: dict[str, str | None] = {}  # owner key -> its group (None: not visible)
    totals: dict[str, list[float]] = {}
    members: dict[str, set[str]] = {}
    points: dict[tuple[float, str], list[float]] = {}
    per_owner: dict[str, list[float]] = {}
    for bucket, owner_key, vendor, model, values in entries:
        if by_owner:
            key = seen.get(owner_key, "")
            if key == "":
                owner = owners.get(owner_key)
                key = seen[owner_key] = group_key(owner, vendor, model, by) if _visible(owner, namespaces) else None
            if key is None:
                continue
        else:
            if owner_key not in seen:
                seen[owner_key] = "" if _visible(owners.get(owner_key), namespaces) else None
            if seen[owner_key] is None:
                continue
            key = vendor if by == "vendor" else model
        total = totals.get(key)
        if total is None:
            total = totals[key] = [0.0, 0.0, 0.0, 0.0]
            members[key] = set()
        total[0] += values[0]
        total[1] += values[1]
        total[2] += values[2]
        total[3] += values[3]
        members[key].add(owner_key)
        if series:
            point = points.setdefault((float(bucket), key), [0.0, 0.0, 0.0, 0.0])
            for i in range(4):
                point[i] += values[i]
        mine = per_owner.get(owner_key)
        if mine is None:
            mine = per_owner[owner_key] = [0.0, 0.0]
        mine[0] += values[IDLE]
        mine[1] += values[ALLOCATED]
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


def idle_report(per_owner: Mapping[str, list[float]], owners: Mapping[str, Owner], top: int) -> list[IdleHolder]:
    """The workloads that held the most idle GPU-hours: [idle seconds, allocated seconds] per owner key."""
    ranked = sorted(((v[0], v[1], k) for k, v in per_owner.items() if v[0] > 0), reverse=True)[:top]
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
