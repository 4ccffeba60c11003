"""The dashboard's GPU boxes and usage page in a real headless Chromium, against the sandbox's
simulated GPUs (read as the telemetry sampler reads them): every box is free, allocated-busy,
allocated-idle or unknown, in its legend's colour, and the counts are the API's; the GPU model is the
vendor's product name; chart panels say why they are empty without the chart library; the usage page
shows the ledger's numbers as /api/v1/usage answers them."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from admin_support import RunningApp, serve_app
from test_dashboard import browser, errors, open_page  # noqa: F401  (fixture: a headless Chromium)

from kaiwo_ray.telemetry.ledger import Holder, Ledger, Owner
from kaiwo_ray.telemetry.ledger_store import HEAD, LABEL, encode
from kaiwo_ray.telemetry.model import NodeSample
from kaiwo_ray.telemetry.sampler import sandbox_gpu
from kaiwo_sandbox.cluster.nodes.gpusim import ANNOTATION
from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox
from serve.state import AdminSettings
from serve.telemetry_samples import gpu_samples_from_snapshot

LEDGER_NS = "kube-system"


@pytest.fixture(scope="module")
def sb() -> Iterator[RunningSandbox]:
    with start_sandbox(cluster=True, time_factor=0.1) as sandbox:
        yield sandbox


def sandbox_samples(sb: RunningSandbox) -> Any:
    """The simulated GPUs as the sandbox sampler reads them, as the admin API's telemetry seam wants them."""
    def read() -> list[Any]:
        _, _, body = sb.http("GET", "/sandbox/gpus")
        by_node: dict[str, list[Any]] = {}
        for item in json.loads(body)["items"]:
            by_node.setdefault(str(item["node"]), []).append(sandbox_gpu(item))
        now = time.time()
        return gpu_samples_from_snapshot([(NodeSample(node=n, timestamp=now, backend="sandbox", gpus=tuple(g)), True)
                                          for n, g in by_node.items()])
    return read


@pytest.fixture(scope="module")
def app(sb: RunningSandbox) -> Iterator[RunningApp]:
    running = serve_app(AdminSettings(kubeconfig=str(sb.kubeconfig_path), auth="none", gpu_samples=sandbox_samples(sb),
                                      ledger_namespace=LEDGER_NS))
    yield running
    running.stop()


def boxes(browser: Any) -> list[tuple[str, str]]:  # noqa: F811
    shown: list[tuple[str, str]] = browser.execute_script(
        "return [...document.querySelectorAll('#heat .cell')].map(c => [c.dataset.state, getComputedStyle(c).backgroundColor])")
    return shown


def legend(browser: Any) -> dict[str, str]:  # noqa: F811
    found: dict[str, str] = browser.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('.legend span[data-state]')].map("
        "s => [s.dataset.state, getComputedStyle(s.querySelector('i')).backgroundColor]))")
    return found


def job(name: str, gpus: int, utilization: str, resource: str = "amd.com/gpu") -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {
                "metadata": {"annotations": {ANNOTATION: utilization}},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "busybox", "command": ["sleep", "100000"],
                    "resources": {"limits": {resource: str(gpus)}, "requests": {resource: str(gpus)}}}]}}}}


def test_gpu_boxes_tell_free_busy_idle_and_unknown_apart_in_the_legend_colours(
        sb: RunningSandbox, app: RunningApp, browser: Any) -> None:  # noqa: F811
    http = httpx.Client(base_url=app.url)
    total = http.get("/api/v1/overview").json()["nodes"]
    assert total["gpus_used"] == 0 and total["gpus"] == 24
    assert errors(open_page(browser, f"{app.url}/", "gpus-none-running")) == []
    colours = legend(browser)
    assert set(colours) == {"free", "busy", "idle", "unknown"} and len(set(colours.values())) == 4
    shown = boxes(browser)
    assert len(shown) == 24 and all(state == "free" and colour == colours["free"] for state, colour in shown), shown

    h100 = next(n for n in http.get("/api/v1/nodes").json()["items"] if n["gpu_resource"] == "nvidia.com/gpu")
    code, _, text = sb.http("PATCH", f"/api/v1/nodes/{h100['name']}",
                            {"metadata": {"labels": {"kaiwo/gpu-model": "nvidiah10080gbhbm3"}}},
                            headers={"Content-Type": "application/merge-patch+json"})
    assert code == 200, text
    for body in (job("busy", 2, "90"), job("idle", 1, "0"), job("broken", 1, "ninety")):
        code, _, text = sb.http("POST", "/apis/batch/v1/namespaces/default/jobs", body)
        assert code == 201, text

    def running_four() -> bool:
        states = [s for s in sandbox_samples(sb)() if s.pod is not None]
        return len(states) == 4 and http.get("/api/v1/overview").json()["nodes"]["gpus_used"] == 4 \
            and any(s.utilization == 90 for s in states)

    eventually(running_four, 60, "four GPUs held, the busy ones at 90 %", interval=0.2)
    assert errors(open_page(browser, f"{app.url}/", "gpus-busy-idle-unknown")) == []
    shown = boxes(browser)
    counts = {state: sum(1 for s, _ in shown if s == state) for state in colours}
    total = http.get("/api/v1/overview").json()["nodes"]
    assert counts == {"free": total["gpus"] - total["gpus_used"], "busy": 2, "idle": 1, "unknown": 1}, shown
    assert all(colour == colours[state] for state, colour in shown), shown
    rows = browser.execute_script("return [...document.querySelectorAll('#heat .row')].map(r => r.innerText)")
    assert not any("nvidiah10080gbhbm3" in row for row in rows), rows
    assert any(h100["gpu_model"] and h100["gpu_model"] in row for row in rows), (h100, rows)
    http.close()


def test_chart_panels_say_why_they_are_empty_without_the_chart_library(app: RunningApp,
                                                                      browser: Any) -> None:  # noqa: F811
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*chart.umd.min.js"]})
    try:
        open_page(browser, f"{app.url}/", "overview-no-chart-library")
        notes = browser.execute_script("return [...document.querySelectorAll('.nochart')].map(n => n.innerText)")
        assert len(notes) == 2 and all("make vendor" in n for n in notes), notes  # phases, quota
    finally:
        browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})


def test_the_usage_page_shows_the_ledger_as_the_api_answers_it(sb: RunningSandbox, app: RunningApp,
                                                               browser: Any) -> None:  # noqa: F811
    ledger = Ledger(bucket_seconds=3600, stale_after=120)  # one sample a minute (what the ledger would hold)
    ledger.owners.update({
        "a": Owner("a", "team-a", "KaiwoJob", "train", user="alice", declared_user="bob", queue="gpu"),
        "b": Owner("b", "team-b", "Job", "notebook", user="bob", queue="gpu", preemption=False)})
    start = time.time() - 7200
    for t in range(0, 7200, 60):
        ledger.observe("n1", start + t, [Holder("a", "amd", "MI300X", 80.0)] * 4)
        ledger.observe("n2", start + t, [Holder("b", "nvidia", "H100", 0.0)] * 2)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": HEAD, "labels": {LABEL: "head"}},
            "binaryData": {"ledger.json.gz": encode({**ledger.to_state(), "generation": 1, "bucket_seconds": 3600})}}
    code, _, text = sb.http("POST", f"/api/v1/namespaces/{LEDGER_NS}/configmaps", body)
    assert code == 201, text
    with httpx.Client(base_url=app.url) as http:
        api = eventually(lambda: (r := http.get("/api/v1/usage", params={"groupBy": "user", "since": "7d"}).json())
                         and r["items"] and r, 10, "the ledger read")
    assert errors(open_page(browser, f"{app.url}/#/usage", "usage")) == []
    rows = browser.execute_script(
        "return [...document.querySelectorAll('#usage-users tbody tr')].map(r => [r.dataset.key, "
        "...[...r.cells].slice(1, 5).map(c => c.innerText)])")
    expected = [[r["key"], *(f"{v:.1f}" if v >= 10 else f"{v:.2f}" for v in (
        r["allocated_gpu_hours"], r["used_gpu_hours"], r["idle_gpu_hours"], r["unknown_gpu_hours"]))]
        for r in api["items"]]
    assert rows == expected and [r[0] for r in rows] == ["alice", "bob"], rows
    idle = browser.execute_script("return document.getElementById('usage-idle').innerText")
    assert "team-b/Job/notebook" in idle and "off" in idle
    assert "declared bob" not in idle  # alice's workload was busy: not an idle holder
    split = browser.execute_script("return Chart.getChart(document.getElementById('usage-user-split'))"
                                   ".data.datasets.map(d => d.data)")
    assert split[0] == [r["used_gpu_hours"] for r in api["items"]]
    assert split[1] == [r["idle_gpu_hours"] for r in api["items"]]
