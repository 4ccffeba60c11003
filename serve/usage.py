"""GPU-hours from the ledger (docs/accounting.md): `GET /api/v1/usage` (JSON or CSV) and the
`kaiwo_gpu_hours_*_total` counters appended to /metrics. Both read the ledger's ConfigMaps, which
the accounting controller's leader writes; this replica only reads them (decoded once per
resourceVersion: a sealed day is never decoded twice), so every replica answers the same."""

from __future__ import annotations

import asyncio
import re
import time
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric

from kaiwo_ray.kube.resources import KAIWOJOBS, KAIWOSERVICES
from kaiwo_ray.telemetry.ledger import Ledger
from kaiwo_ray.telemetry.ledger_store import read_all
from kaiwo_ray.telemetry.usage import GROUPS, UsageReport, counters, report, to_csv
from serve.auth import Access
from serve.errors import ApiError
from serve.models import StatusCause
from serve.state import AdminState, admin, current_user

router = APIRouter(prefix="/api/v1", tags=["usage"])
GROUP = "kaiwo.silogen.ai"
REFRESH_SECONDS = 2.0
_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class LedgerReader:
    """The stored ledger, re-read at most every REFRESH_SECONDS."""

    def __init__(self, state: AdminState) -> None:
        self.state = state
        self.cache: dict[str, tuple[str, dict[str, Any]]] = {}
        self.ledger = Ledger()
        self.read_at = 0.0
        self._lock = asyncio.Lock()

    async def get(self) -> Ledger:
        async with self._lock:
            if time.monotonic() - self.read_at >= REFRESH_SECONDS:
                namespace = self.state.settings.ledger_namespace
                self.ledger, _ = await read_all(self.state.client, namespace, self.cache)
                self.read_at = time.monotonic()
        return self.ledger


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
    now = time.time()
    start = parse_moment(since, "since", now)
    end = parse_moment(until, "until", now) if until else now
    if end <= start:
        message = "must be after since"
        raise ApiError(422, f"query.until: {message}", causes=[StatusCause(field="query.until", message=message)])
    state = admin(request)
    ledger = await reader(state).get()
    present = {o.namespace for o in ledger.owners.values()}
    namespaces = await visible_ledger_namespaces(request, state, present)
    width = ledger.bucket_seconds
    # a bucket counts when it overlaps the window: its start after since's bucket start
    result = report(ledger.rows, ledger.owners, ledger.reclaims.values(), by=groupBy,
                    since=start - start % width, until=end, bucket_seconds=width, namespaces=namespaces,
                    series=series, top=top)
    if format == "csv" or "text/csv" in request.headers.get("accept", ""):
        return Response(to_csv(result), media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="gpu-usage-by-{groupBy}.csv"'})
    return Response(result.model_dump_json(), media_type="application/json")


def usage_families(ledger: Ledger) -> list[Metric]:
    labels = ["namespace", "user", "queue", "vendor"]
    totals, reclaimed = counters(ledger.rows, ledger.owners, ledger.reclaims.values())
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
        ledger = await reader(state).get()
    except Exception:
        return b""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(usage_families(ledger)))
    return generate_latest(registry)
