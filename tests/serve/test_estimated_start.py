"""Estimated start times through the admin API: the operator on the sandbox runs a KaiwoJob that holds
the only NVIDIA node's 8 GPUs for a declared hour, another waits for them, and the admin API's
background forecast (a child process simulating the cluster forward) gives the waiting one a start,
shown in WorkloadSummary, explain and the dashboard."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from admin_support import RunningApp, kaiwojob, serve_app, submit
from e2e_harness import OperatorSandbox
from test_dashboard import browser, errors, open_page  # noqa: F401  (browser: a fixture)

from kaiwo_ray.simulation.forecast import DEFAULT_ABOVE, DEFAULT_BELOW, SCALE_FLOOR_SECONDS
from kaiwo_sandbox.testing import eventually
from serve.state import AdminSettings

NS = "forecast"
PREFIX = "/apis/admin.kaiwo.silogen.ai/v1alpha1"


@pytest.fixture(scope="module")
def forecasting(env: OperatorSandbox) -> Iterator[RunningApp]:
    running = serve_app(AdminSettings(kubeconfig=str(env.sb.kubeconfig_path), auth="none", forecast_interval=1.0))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def waiting(env: OperatorSandbox, forecasting: RunningApp) -> Iterator[tuple[datetime, dict[str, Any]]]:
    """`hold` (8 NVIDIA GPUs, declared 1 h) running and `wait` (the same, 10 min) pending with an
    estimate: hold's start and wait's WorkloadSummary."""
    env.sb.http("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    gpus: dict[str, Any] = {"gpus": 8, "gpuVendor": "nvidia"}
    with forecasting.client() as http:
        try:
            assert submit(http, kaiwojob("hold", NS, duration="1h", **gpus)).status_code == 201
            hold = eventually(lambda: _started(http, "hold"), 60, "hold runs")
            assert submit(http, kaiwojob("wait", NS, duration="10m", **gpus)).status_code == 201

            def estimated() -> dict[str, Any] | None:
                summary: dict[str, Any] = http.get(f"{PREFIX}/namespaces/{NS}/workloadsummaries/job.wait").json()
                return summary if summary.get("estimatedStart") else None

            yield hold, eventually(estimated, 90, "the waiting job's estimate")
        finally:
            for name in ("hold", "wait"):
                http.delete(f"/api/v1/namespaces/{NS}/kaiwojobs/{name}")


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _started(http: httpx.Client, name: str) -> datetime | None:
    stamp = (http.get(f"/api/v1/namespaces/{NS}/kaiwojobs/{name}").json().get("summary") or {}).get("started")
    return _time(stamp) if stamp else None


def test_a_waiting_job_is_estimated_to_start_when_the_running_one_ends(
        forecasting: RunningApp, waiting: tuple[datetime, dict[str, Any]]) -> None:
    hold, summary = waiting
    # hold ends an hour after it started; wait starts then (to the second, give or take the
    # one-second spacing of the forecast's submissions and the stamps' whole seconds).
    start = _time(summary["estimatedStart"])
    assert abs((start - (hold + timedelta(hours=1))).total_seconds()) <= 3, (summary, hold)
    # both run times declared: the three scenarios agree, and with no past estimates to calibrate by
    # the interval is that point widened by the defaults, in units of how far ahead it looks
    ahead = max((start - _time(summary["estimatedAt"])).total_seconds(), SCALE_FLOOR_SECONDS)
    earliest, latest = _time(summary["estimatedStartEarliest"]), _time(summary["estimatedStartLatest"])
    assert abs((start - earliest).total_seconds() - DEFAULT_BELOW * ahead) <= 1, summary
    assert abs((latest - start).total_seconds() - DEFAULT_ABOVE * ahead) <= 1, summary
    with forecasting.client() as http:
        running = http.get(f"{PREFIX}/namespaces/{NS}/workloadsummaries/job.hold").json()
        assert running["phase"] == "RUNNING" and running["estimatedStart"] is None
        listed = http.get(f"{PREFIX}/namespaces/{NS}/workloadsummaries").json()["items"]
        assert {i["metadata"]["name"]: i["estimatedStart"] for i in listed} == {
            "job.hold": None, "job.wait": summary["estimatedStart"]}
        explained = http.get(f"/api/v1/namespaces/{NS}/kaiwojobs/wait/explain").json()
        assert _time(explained["estimated_start"]["start"]) == start
        assert http.get(f"/api/v1/namespaces/{NS}/kaiwojobs/hold/explain").json()["estimated_start"] is None


def test_the_dashboard_shows_the_estimate_on_the_workload_page(
        browser: Any, forecasting: RunningApp, waiting: tuple[datetime, dict[str, Any]]) -> None:  # noqa: F811
    _hold, summary = waiting
    assert errors(open_page(browser, f"{forecasting.url}/#/workloads/{NS}/kaiwojobs/wait", "workload-wait")) == []
    line = browser.execute_script("return document.getElementById('estimated-start').innerText")
    assert line.startswith("Estimated start: " + summary["estimatedStart"][:16].replace("T", " ") + "Z"), line
