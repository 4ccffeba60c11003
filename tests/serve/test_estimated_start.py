"""Estimated start times through the admin API: the operator on the sandbox runs a KaiwoJob that holds
the only NVIDIA node's 8 GPUs for a declared hour, another waits for them, and the admin API's
background forecast (a child process simulating the cluster forward) gives the waiting one a start."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from admin_support import RunningApp, kaiwojob, serve_app, submit
from e2e_harness import OperatorSandbox

from kaiwo_sandbox.testing import eventually
from serve.state import AdminSettings

NS = "forecast"
PREFIX = "/apis/admin.kaiwo.silogen.ai/v1alpha1"


@pytest.fixture(scope="module")
def forecasting(env: OperatorSandbox) -> Iterator[RunningApp]:
    running = serve_app(AdminSettings(kubeconfig=str(env.sb.kubeconfig_path), auth="none", forecast_interval=1.0))
    yield running
    running.stop()


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_waiting_job_is_estimated_to_start_when_the_running_one_ends(
        env: OperatorSandbox, forecasting: RunningApp) -> None:
    env.sb.http("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    with forecasting.client() as http:
        try:
            _scenario(http)
        finally:
            for name in ("hold", "wait"):
                http.delete(f"/api/v1/namespaces/{NS}/kaiwojobs/{name}")


def _scenario(http: httpx.Client) -> None:
    gpus: dict[str, Any] = {"gpus": 8, "gpuVendor": "nvidia"}
    assert submit(http, kaiwojob("hold", NS, duration="1h", **gpus)).status_code == 201
    hold = eventually(lambda: _started(http, "hold"), 60, "hold runs")
    assert submit(http, kaiwojob("wait", NS, duration="10m", **gpus)).status_code == 201

    def estimated() -> dict[str, Any] | None:
        summary: dict[str, Any] = http.get(f"{PREFIX}/namespaces/{NS}/workloadsummaries/job.wait").json()
        return summary if summary.get("estimatedStart") else None

    summary = eventually(estimated, 90, "the waiting job's estimate")
    # hold ends an hour after it started; wait starts then (to the second, give or take the
    # one-second spacing of the forecast's submissions and the stamps' whole seconds).
    start = _time(summary["estimatedStart"])
    assert abs((start - (hold + timedelta(hours=1))).total_seconds()) <= 3, (summary, hold)
    # both run times declared: the three scenarios agree
    assert summary["estimatedStartEarliest"] == summary["estimatedStartLatest"] == summary["estimatedStart"]
    assert summary["estimatedAt"] is not None
    running = http.get(f"{PREFIX}/namespaces/{NS}/workloadsummaries/job.hold").json()
    assert running["estimatedStart"] is None
    explained = http.get(f"/api/v1/namespaces/{NS}/kaiwojobs/wait/explain").json()
    assert explained["estimated_start"]["start"].startswith(summary["estimatedStart"][:19])
    assert http.get(f"/api/v1/namespaces/{NS}/kaiwojobs/hold/explain").json()["estimated_start"] is None


def _started(http: httpx.Client, name: str) -> datetime | None:
    obj = http.get(f"/api/v1/namespaces/{NS}/kaiwojobs/{name}").json()
    stamp = (obj.get("summary") or {}).get("started")
    return _time(stamp) if stamp else None
