"""A pending KaiwoJob's estimated start for `kaiwo explain` and `kaiwo submit --wait`: read from the
admin API's aggregated WorkloadSummary (its background forecast, docs/simulate.md), and rendered."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from kaiwo_ray.views.explain import StartEstimate

if TYPE_CHECKING:
    from kaiwo_ray.cli.api import Api

# The admin API's aggregated group (docs/admin-api.md); optional on a cluster.
SUMMARIES = "/apis/admin.kaiwo.silogen.ai/v1alpha1"


def fetch_estimate(api: Api, namespace: str, name: str) -> StartEstimate | None:
    """The admin API's last forecast for a pending KaiwoJob, from its aggregated WorkloadSummary; None
    where the cluster does not serve that API (it is optional), forbids it, or has no estimate."""
    from kaiwo_ray.cli.api import ApiStatusError
    from kaiwo_ray.cli.errors import ClusterError

    try:
        summary = api.get(f"{SUMMARIES}/namespaces/{namespace}/workloadsummaries/job.{name}")
    except (ApiStatusError, ClusterError):
        return None
    if not summary.get("estimatedStart") or not summary.get("estimatedAt"):
        return None
    return StartEstimate.model_validate({
        "start": summary["estimatedStart"], "earliest": summary.get("estimatedStartEarliest"),
        "latest": summary.get("estimatedStartLatest"), "computed": summary["estimatedAt"]})


def _in(delta: timedelta) -> str:
    minutes = max(0, round(delta.total_seconds() / 60))
    return f"{minutes}m" if minutes < 120 else f"{minutes // 60}h{minutes % 60:02d}m"


def estimate_line(estimate: StartEstimate, now: datetime) -> str:
    """`  estimated start: 2026-03-01 12:30Z (in 30m; 80 % interval 2026-03-01 12:20Z..2026-03-01 13:10Z;
    forecast 1m ago)` (one line)."""
    def at(t: datetime) -> str:
        return t.astimezone(UTC).strftime("%Y-%m-%d %H:%MZ")

    if estimate.start is None:
        return "  estimated start: not within the forecast's week"
    span = ""
    if estimate.earliest is not None and estimate.latest is not None and estimate.earliest != estimate.latest:
        span = f"; 80 % interval {at(estimate.earliest)}..{at(estimate.latest)}"
    return (f"  estimated start: {at(estimate.start)} (in {_in(estimate.start - now)}{span}; "
            f"forecast {_in(now - estimate.computed)} ago)")


def short(estimate: StartEstimate, now: datetime) -> str:
    """`starts ~12:30Z (in 30m)` for the one-line progress of `kaiwo submit --wait`."""
    if estimate.start is None:
        return "no start within a week forecast"
    return f"starts ~{estimate.start.astimezone(UTC).strftime('%H:%MZ')} (in {_in(estimate.start - now)})"
