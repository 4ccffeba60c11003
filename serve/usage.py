"""GPU-hours from the ledger (docs/accounting.md): `GET /api/v1/usage` (JSON or CSV) and the
`kaiwo_gpu_hours_*_total` counters appended to /metrics. Both read the ledger's ConfigMaps, which
the accounting controller's leader writes; this replica only reads them (decoded once per
resourceVersion: a sealed day is never decoded twice), so every replica answers the same."""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric

from kaiwo_ray import clock
from kaiwo_ray.kube.errors import KubeError
from kaiwo_ray.kube.resources import CONFIGMAPS, KAIWOJOBS, KAIWOSERVICES
from kaiwo_ray.telemetry.ledger import Ledger, Owner, Reclaim, RowKey
from kaiwo_ray.telemetry.ledger_store import LABEL, split
from kaiwo_ray.telemetry.usage import GROUPS, UsageIndex, UsageReport, counters, report, to_csv
from serve.auth import Access
from serve.errors import ApiError
from serve.models import StatusCause
from serve.state import AdminState, admin, current_user

router = APIRouter(prefix="/api/v1", tags=["usage"])
GROUP = "kaiwo.silogen.ai"
REFRESH_SECONDS = 2.0
_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@dataclass(slots=True)
class LedgerView:
    """What a query reads: the sealed days (merged and indexed once per set of ConfigMap versions) and
    the head (re-read every REFRESH_SECONDS)."""

    sealed: Ledger = field(default_factory=Ledger)
    sealed_index: UsageIndex = field(default_factory=UsageIndex)
    head: Ledger = field(default_factory=Ledger)
    head_index: UsageIndex = field(default_factory=UsageIndex)
    owners: dict[str, Owner] = field(default_factory=dict)
    sealed_counters: tuple[dict[Any, list[float]], dict[Any, float]] = field(default_factory=lambda: ({}, {}))

    @property
    def bucket_seconds(self) -> int:
        return self.head.bucket_seconds

    @property
    def reclaims(self) -> list[Reclaim]:
        return [*self.sealed.reclaims.values(), *self.head.reclaims.values()]

    def all_rows(self) -> dict[RowKey, list[float]]:
        return {**self.sealed.rows, **self.head.rows}  # sealed days and the head never share a bucket


class LedgerReader:
    """The stored ledger, re-read at most every REFRESH_SECONDS."""

    def __init__(self, state: AdminState) -> None:
        self.state = state
        self.cache: dict[str, tuple[str, dict[str, Any]]] = {}
        self.view = LedgerView()
        self.sealed_key: tuple[tuple[str, str], ...] = ()
        self.read_at = float("-inf")
        self._lock = asyncio.Lock()

    async def get(self) -> LedgerView:
        async with self._lock:
            if time.monotonic() - self.read_at >= REFRESH_SECONDS:
                listed = await self.state.client.list(CONFIGMAPS, self.state.settings.ledger_namespace,
                                                      label_selector=LABEL)
                self.view = self.refresh(listed.get("items") or [])
                self.read_at = time.monotonic()
        return self.view

    def refresh(self, items: list[dict[str, Any]]) -> LedgerView:
        head_state, days = split(items, self.cache)
        key = tuple(sorted((name, rv) for name, (rv, _) in days.items()))
        sealed, sealed_index, sealed_counters = self.view.sealed, self.view.sealed_index, self.view.sealed_counters
        if key != self.sealed_key:
            sealed = Ledger()
            for _, day in days.values():
                sealed.load(day, with_nodes=False)
            sealed_index = UsageIndex.build(sealed.rows)
            sealed_counters = counters(sealed.rows, sealed.owners, [])
            self.sealed_key = key
        head = Ledger()
        head.load(head_state)
        head.bucket_seconds = int(head_state.get("bucket_seconds") or head.bucket_seconds)
        return LedgerView(sealed, sealed_index, head, UsageIndex.build(head.rows), {**sealed.owners, **head.owners},
                          sealed_counters)


def reader(state: AdminState) -> LedgerReader:
    found: LedgerReader | None = state.extras.get("ledger")
    if found is None:
        found = state.extras["ledger"] = LedgerReader(state)
    return found


def parse_moment(text: str, field: str, now: float) -> float:
    """`7d`, `24h`, `30m` (before now), RFC 3339, or epoch seconds; 422 naming the field otherwise."""
    value = text.strip()
    match = _RELATIVE.match(value)
    if match:
        return now - float(match.group(1)) * _UNITS[match.group(2)]
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        message = f"{value!r} is not a time: use 7d, 24h, 30m, RFC 3339 or epoch seconds"
        raise ApiError(422, f"query.{field}: {message}",
                       causes=[StatusCause(field=f"query.{field}", message=message)]) from None


async def visible_ledger_namespaces(request: Request, state: AdminState, present: set[str]) -> frozenset[str] | None:
    """None: the user may list Kaiwo workloads everywhere; else the namespaces of the ledger they may."""
    user = await current_user(request)
    kinds = (KAIWOJOBS, KAIWOSERVICES)
    if all([await state.auth.allowed(user, Access("list", r.plural, GROUP)) for r in kinds]):
        return None
    allowed = set()
    for namespace in sorted(present):
        if all([await state.auth.allowed(user, Access("list", r.plural, GROUP, namespace)) for r in kinds]):
            allowed.add(namespace)
    return frozenset(allowed)


@router.get("/usage", response_model=UsageReport,
            responses={200: {"content": {"text/csv": {}}, "description": "JSON, or CSV with format=csv"}})
async def get_usage(
    request: Request,
    groupBy: Annotated[str, Query(description="user | namespace | queue | clusterqueue | vendor | model | workload")]
    = "user",
    since: Annotated[str, Query(description="7d, 24h, RFC 3339 or epoch seconds")] = "30d",
    until: Annotated[str | None, Query(description="as since; default now")] = None,
    format: Annotated[str, Query(description="json | csv")] = "json",
    series: bool = False,
    top: Annotated[int, Query(ge=0, le=1000)] = 10,
) -> Response:
    """GPU-hours allocated, used, idle, unknown and reclaimed per group over [since, until), of the
    namespaces whose Kaiwo workloads the caller may list (rows are the ledger's buckets: hourly)."""
    if groupBy not in GROUPS:
        message = f"must be one of {', '.join(GROUPS)} (got {groupBy!r})"
        raise ApiError(422, f"query.groupBy: {message}", causes=[StatusCause(field="query.groupBy", message=message)])
    if format not in ("json", "csv"):
        message = f"must be json or csv (got {format!r})"
        raise ApiError(422, f"query.format: {message}", causes=[StatusCause(field="query.format", message=message)])
    now = clock.timestamp()  # the ledger's buckets are of the operator's clock
    start = parse_moment(since, "since", now)
    end = parse_moment(until, "until", now) if until else now
    if end <= start:
        message = "must be after since"
        raise ApiError(422, f"query.until: {message}", causes=[StatusCause(field="query.until", message=message)])
    state = admin(request)
    try:
        view = await reader(state).get()
    except KubeError as err:  # the admin API's identity may not read the ledger's ConfigMaps, say
        raise ApiError(503, f"the GPU ledger (ConfigMaps labelled {LABEL} in {state.settings.ledger_namespace}) "
                            f"cannot be read: {err}") from None
    present = {o.namespace for o in view.owners.values()}
    namespaces = await visible_ledger_namespaces(request, state, present)
    width = view.bucket_seconds
    # a bucket counts when it overlaps the window: its start after since's bucket start
    result = report(view.all_rows() if series else {}, view.owners, view.reclaims, by=groupBy,
                    since=start - start % width, until=end, bucket_seconds=width, namespaces=namespaces,
                    series=series, top=top, index=None if series else [view.sealed_index, view.head_index])
    if format == "csv" or "text/csv" in request.headers.get("accept", ""):
        return Response(to_csv(result), media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="gpu-usage-by-{groupBy}.csv"'})
    return Response(result.model_dump_json(), media_type="application/json")


def usage_families(view: LedgerView) -> list[Metric]:
    labels = ["namespace", "user", "queue", "vendor"]
    totals, reclaimed = counters(view.head.rows, view.owners, view.reclaims)  # sealed days: summed once
    for key, values in view.sealed_counters[0].items():
        total = totals.setdefault(key, [0.0, 0.0, 0.0, 0.0])
        for i in range(4):
            total[i] += values[i]
    families = {name: CounterMetricFamily(f"kaiwo_gpu_hours_{name}", doc, labels=labels) for name, doc in (
        ("allocated", "GPU-hours bound to the running pods of workloads (docs/accounting.md)"),
        ("used", "GPU-hours of utilization (the utilization integral)"),
        ("idle", "GPU-hours allocated while utilization was below the idle threshold"),
        ("unknown", "GPU-hours allocated while no telemetry was available"))}
    for key, values in sorted(totals.items()):
        for name, value in zip(("allocated", "used", "idle", "unknown"), values, strict=True):
            families[name].add_metric(list(key), value)
    back = CounterMetricFamily("kaiwo_gpu_hours_reclaimed", "GPU-hours idle preemption or resource monitoring "
                               "ended early, by cause", labels=[*labels, "cause"])
    for (key, cause), value in sorted(reclaimed.items()):
        back.add_metric([*key, cause], value)
    return [*families.values(), back]


class _Families:
    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> list[Metric]:
        return self.metrics


async def usage_metrics(state: AdminState) -> bytes:
    """The counters' exposition ("" when the ledger cannot be read: the rest of the scrape stands)."""
    try:
        view = await reader(state).get()
    except Exception:
        return b""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(usage_families(view)))
    return generate_latest(registry)
