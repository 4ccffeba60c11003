"""The dashboard in a real headless Chromium (Debian's chromium + chromium-driver, `make browser`;
Chart.js vendored by `make vendor`): every page loads with no console errors, its charts hold the
sandbox's numbers, a new workload shows up live (SSE), and screenshots land in
test-artifacts/dashboard/ (gitignored)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from admin_support import RunningApp, kaiwojob, serve_app, submit
from e2e_harness import OperatorSandbox
from e2e_support import wait_for
from headless_chromium import start_chromium
from test_auth import rbac_sandbox, secured  # noqa: F401  (fixtures: an RBAC sandbox, the admin app checking tokens)

from kaiwo_ray.views.explain import ObjectRef
from kaiwo_ray.views.nodes import GpuReading
from kaiwo_sandbox.testing import RunningSandbox
from serve.state import AdminSettings

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "dashboard"
NS = "dash"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = start_chromium("1400,1000")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def workloads(env: OperatorSandbox, api: Any) -> None:
    env.sb.http("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    with api.client() as http:
        for job in (kaiwojob("train", NS, gpus=8, gpuModels=["mi300x"]), kaiwojob("etl", NS),
                    kaiwojob("lost", NS, clusterQueue="nope")):
            assert submit(http, job).status_code == 201
        wait_for(lambda: http.get(f"/api/v1/workloads?namespace={NS}&phase=RUNNING").json()["total"] == 2, 30,
                 "train and etl RUNNING")


def open_page(browser: Any, url: str, name: str) -> list[dict[str, Any]]:
    """Load `url`, wait for the page to say it rendered, save a screenshot; the console's entries."""
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get(url)
    browser.refresh()  # a hash change alone does not reload; start every page from a clean load
    wait_for(lambda: browser.execute_script("return document.body.dataset.ready === '1'"), 30, f"{name} rendered")
    browser.save_screenshot(str(ARTIFACTS / f"{name}.png"))
    entries: list[dict[str, Any]] = browser.get_log("browser")
    return entries


def errors(entries: list[dict[str, Any]]) -> list[str]:
    return [e["message"] for e in entries if e.get("level") == "SEVERE"]


def chart_data(browser: Any, canvas_id: str) -> list[list[float]]:
    data: list[list[float]] = browser.execute_script(
        "const c = Chart.getChart(document.getElementById(arguments[0]));"
        "return c ? c.data.datasets.map(d => d.data.map(v => typeof v === 'number' ? v : v.y)) : null;", canvas_id)
    assert data is not None, f"no chart on #{canvas_id}"
    return data


def test_overview_charts_show_the_sandbox(browser: Any, api: Any, workloads: None) -> None:
    console = open_page(browser, f"{api.url}/", "overview")
    assert errors(console) == []
    with httpx.Client(base_url=api.url) as http:
        overview = http.get("/api/v1/overview").json()
    [phases] = chart_data(browser, "phases")
    assert sum(phases) == overview["workloads"] and sum(phases) >= 3
    used, free = chart_data(browser, "quota")
    assert sum(used) >= 8 and sum(used) + sum(free) == 24  # 16 MI300X + 8 H100 of quota
    cells = browser.execute_script("return document.querySelectorAll('#heat .cell').length")
    assert cells == 24
    cards = browser.execute_script("return [...document.querySelectorAll('#cards .card')].map(c => c.innerText)")
    assert any(text.startswith(f"{overview['workloads']}\n") for text in cards), cards


def test_overview_updates_live(browser: Any, api: Any, workloads: None) -> None:
    open_page(browser, f"{api.url}/", "overview-before")
    wait_for(lambda: browser.execute_script("return document.getElementById('live').classList.contains('on')"),
             30, "the SSE stream is connected")
    before = sum(chart_data(browser, "phases")[0])
    with httpx.Client(base_url=api.url) as http:
        assert submit(http, kaiwojob("late", NS, entrypoint="sleep 1")).status_code == 201
    wait_for(lambda: sum(chart_data(browser, "phases")[0]) == before + 1, 30, "the new workload in the chart")
    browser.save_screenshot(str(ARTIFACTS / "overview-after.png"))
    assert errors(browser.get_log("browser")) == []


def test_workloads_list_detail_queues_and_nodes(browser: Any, api: Any, workloads: None) -> None:
    assert errors(open_page(browser, f"{api.url}/#/workloads", "workloads")) == []
    rows = browser.execute_script("return [...document.querySelectorAll('#list tbody tr')].map(r => r.innerText)")
    assert any("train" in row and "RUNNING" in row for row in rows), rows

    assert errors(open_page(browser, f"{api.url}/#/workloads/{NS}/kaiwojobs/lost", "workload-lost")) == []
    explain = browser.execute_script("return document.getElementById('explain').innerText")
    assert "ClusterQueueNotFound" in explain and "ClusterQueue nope does not exist" in explain

    assert errors(open_page(browser, f"{api.url}/#/workloads/{NS}/kaiwojobs/train", "workload-train")) == []
    assert "nothing holds it back" in browser.execute_script("return document.getElementById('explain').innerText")
    timeline = chart_data(browser, "timeline-chart")
    assert sum(len(points) for points in timeline) >= 5  # KaiwoJob, Job, Workload, Pod events
    wait_for(lambda: "simulated container" in browser.execute_script("return document.getElementById('log').innerText"),
             30, "the log tail")

    assert errors(open_page(browser, f"{api.url}/#/queues", "queues")) == []
    assert "amd.com/gpu" in browser.execute_script("return document.getElementById('main').innerText")

    assert errors(open_page(browser, f"{api.url}/#/nodes", "nodes")) == []
    used, idle = chart_data(browser, "node-gpus")
    assert sum(used) >= 8 and sum(used) + sum(idle) == 24


def test_gpu_telemetry_shows_per_gpu_on_the_detail_page_and_the_heat_map(browser: Any, env: OperatorSandbox,
                                                                          api: Any, workloads: None) -> None:
    """With a sample source (the telemetry seam), the workload's GPUs are plotted and the heat map
    shows utilization per GPU."""
    with httpx.Client(base_url=api.url) as http:
        pod = http.get(f"/api/v1/namespaces/{NS}/kaiwojobs/train").json()["pods"][0]["name"]
        node = next(n["name"] for n in http.get("/api/v1/nodes").json()["items"]
                    if any(p["name"] == pod for p in n["pods"]))
    samples = [GpuReading(node=node, index=i, utilization=10.0 * i + 5,
                         pod=ObjectRef(kind="Pod", name=pod, namespace=NS)) for i in range(8)]
    running = serve_app(AdminSettings(kubeconfig=str(env.sb.kubeconfig_path), auth="none",
                                      gpu_samples=lambda: samples))
    try:
        assert errors(open_page(browser, f"{running.url}/#/workloads/{NS}/kaiwojobs/train", "workload-gpus")) == []
        [utilization] = chart_data(browser, "gpu-util")
        assert utilization == [10.0 * i + 5 for i in range(8)]
        assert errors(open_page(browser, f"{running.url}/", "overview-telemetry")) == []
        shown = browser.execute_script("return [...document.querySelectorAll('#heat .cell')].map(c => c.innerText)")
        assert [str(10 * i + 5) for i in range(8)] == [s for s in shown if s][:8]
    finally:
        running.stop()


def test_a_namespaced_user_sees_their_namespace_without_errors(browser: Any, secured: RunningApp,  # noqa: F811
                                                               rbac_sandbox: RunningSandbox) -> None:  # noqa: F811
    """alice (a Role in team-a only) saves her token in the page: the overview, the list and her
    workload's page show team-a alone and make no request the admin API refuses."""
    browser.get(f"{secured.url}/")
    browser.execute_script("localStorage.setItem('kaiwoToken', arguments[0])", rbac_sandbox.mint_token("alice"))
    assert errors(open_page(browser, f"{secured.url}/", "alice-overview")) == []
    assert errors(open_page(browser, f"{secured.url}/#/workloads", "alice-workloads")) == []
    rows = browser.execute_script("return [...document.querySelectorAll('#list tbody tr')].map(r => r.innerText)")
    assert len(rows) == 2 and all("team-a" in row for row in rows), rows
    assert errors(open_page(browser, f"{secured.url}/#/workloads/team-a/kaiwojobs/one", "alice-detail")) == []
    assert "one" in browser.execute_script("return document.getElementById('main').innerText")
    browser.execute_script("localStorage.removeItem('kaiwoToken')")
