"""The telemetry actors on a real local Ray: the sandbox backend reporting every simulated GPU node
from one actor, pushes reaching the aggregator, /metrics over HTTP, node reconciliation."""

from __future__ import annotations

import asyncio
import itertools
import urllib.request
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from prometheus_client.parser import text_string_to_metric_families

from actors.telemetry import TelemetryFleet
from kaiwo_ray.telemetry.settings import TelemetrySettings, actor_name
from kaiwo_ray.telemetry.sources import NativeSource
from kaiwo_sandbox.cluster.nodes.gpusim import ANNOTATION
from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox

pytestmark = [pytest.mark.ray, pytest.mark.slow]
_namespaces = itertools.count()


@pytest.fixture(scope="module")
def sandbox() -> Iterator[RunningSandbox]:
    with start_sandbox(cluster=True, time_factor=1.0) as sb:
        yield sb


@pytest.fixture
def fleet_of(ray_session: Any) -> Iterator[Any]:
    fleets: list[TelemetryFleet] = []

    def make(**settings: Any) -> TelemetryFleet:
        fleet = TelemetryFleet(TelemetrySettings(**settings), namespace=f"telemetry-test-{next(_namespaces)}")
        fleets.append(fleet.start())
        return fleet

    yield make
    for fleet in fleets:
        fleet.stop()


def _metrics(url: str) -> dict[str, list[Any]]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return {f.name: f.samples for f in text_string_to_metric_families(response.read().decode())}


def test_one_sandbox_actor_reports_every_simulated_gpu_node(sandbox: RunningSandbox, fleet_of: Any,
                                                            ray_session: Any) -> None:
    fleet = fleet_of(backend="sandbox", interval=0.2, kubeconfig=str(sandbox.kubeconfig_path),
                     reconcile_interval=600)  # no automatic restart of the actor this test kills
    core = kubernetes.client.CoreV1Api(sandbox.api_client())
    core.create_namespace({"metadata": {"name": "telemetry"}})
    core.create_namespaced_pod("telemetry", {
        "metadata": {"name": "busy", "annotations": {ANNOTATION: "80"}},
        "spec": {"containers": [{"name": "main", "image": "busybox",
                                 "resources": {"limits": {"amd.com/gpu": "1"}}}]}})
    core.create_namespaced_pod("telemetry", {
        "metadata": {"name": "idle"},
        "spec": {"containers": [{"name": "main", "image": "busybox",
                                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
    assert len(fleet.actors) == 1  # one Ray node here stands in for the whole simulated cluster

    def readings() -> dict[str, Any]:
        found = ray_get(fleet.aggregator.pod_readings.remote([("telemetry", "busy", ""), ("telemetry", "idle", "")]))
        return {pod: [r.utilization for r in rows] for (_, pod), rows in found.items()}

    assert eventually(lambda: readings() == {"busy": [80.0], "idle": [0.0]}, timeout=30, interval=0.2)
    nodes = {sample.node for sample, live in ray_get(fleet.aggregator.snapshot.remote()) if live}
    assert nodes == {"gpu-amd-mi300x-01", "gpu-amd-mi300x-02", "gpu-nvidia-h100-01"}  # GPU nodes, by name

    families = _metrics(fleet.metrics_address())
    amd = [s for s in families["gpu_gfx_activity"] if s.labels["pod"] == "busy"]
    assert [(s.labels["namespace"], s.labels["container"], s.value) for s in amd] == [("telemetry", "main", 80.0)]
    nv = [s for s in families["DCGM_FI_DEV_GPU_UTIL"] if s.labels["pod"] == "idle"]
    assert [s.value for s in nv] == [0.0] and nv[0].labels["Hostname"] == "gpu-nvidia-h100-01"
    assert {s.labels["node"] for s in families["kaiwo_gpu_telemetry_up"] if s.value == 1.0} == nodes

    # the monitor's and preemption's way in: NativeSource asks the aggregator actor by name
    source = NativeSource(ray_namespace=fleet.namespace)
    answer = asyncio.run(source.readings([("telemetry", "busy", ""), ("telemetry", "idle", "")]))
    assert {pod: [u.utilization for u in uses] for (_, pod), uses in answer.items()} == {"busy": [80.0],
                                                                                        "idle": [0.0]}
    # the GPU ledger's way in (docs/accounting.md): AggregatorFeed reads every node's latest sample, compacted
    from kaiwo_ray.telemetry.sources import AggregatorFeed

    compact = asyncio.run(AggregatorFeed(ray_namespace=fleet.namespace).node_samples())
    held = {(ns, pod): util for _, _, _, gpus in compact for _, _, util, refs in gpus for ns, pod, _ in refs}
    assert held == {("telemetry", "busy"): 80.0, ("telemetry", "idle"): 0.0}
    assert {node for node, _, _, _ in compact} == nodes
    (sample,) = [s for s in families["kaiwo_gpu_utilization_percent"] if s.labels["pod"] == "busy"]

    def recent() -> list[float]:
        history = ray_get(fleet.aggregator.history.remote(sample.labels["node"], sample.labels["uuid"]))
        return [value for _, value in history["recent"]]

    # The GPU's history starts when its actor first sampled it, which may be before the busy pod was
    # bound to it (0.0 then): its latest samples are the pod's.
    assert eventually(lambda: (values := recent())[-3:] == [80.0] * 3 and values, timeout=10, interval=0.2)

    # the telemetry actor dies for good: its GPUs are unknown (None), never idle, once stale
    for handle in fleet.actors.values():
        ray_session.kill(handle, no_restart=True)
    eventually(lambda: all(u.utilization is None for uses in asyncio.run(source.readings(
        [("telemetry", "busy", ""), ("telemetry", "idle", "")])).values() for u in uses), timeout=30, interval=0.3)


def test_hardware_fleet_puts_one_pinned_actor_on_each_live_node(ray_session: Any, fleet_of: Any) -> None:
    fleet = fleet_of(backend="none", interval=0.2)
    alive = [n["NodeID"] for n in ray_session.nodes() if n["Alive"]]
    assert sorted(fleet.actors) == sorted(alive)
    health = eventually(lambda: (h := fleet.health())["actors"] and all(
        a.get("ticks", 0) > 0 for a in h["actors"].values()) and h, timeout=30, interval=0.2)
    (report,) = health["actors"].values()
    assert report["backend"] == "none" and report["ray_node_id"] == alive[0]
    assert eventually(lambda: fleet.health()["aggregator"]["live"], timeout=10)  # a node with no GPU is live
    # an actor killed for good comes back on the next reconcile
    ray_session.kill(fleet.actors[alive[0]], no_restart=True)
    eventually(lambda: not fleet._exists(alive[0]), timeout=10)
    started, _ = fleet.reconcile()
    assert started == [alive[0]] and fleet._exists(alive[0])
    assert actor_name(alive[0]).startswith("gpu-telemetry-")


def ray_get(ref: Any) -> Any:
    import ray

    return ray.get(ref, timeout=30)


def test_fleet_follows_nodes_joining_and_dying() -> None:
    """A real two-node Ray (ray.cluster_utils) in a fresh interpreter: our session Ray is one node."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).with_name("fleet_cluster_script.py")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, env=env,
                          cwd=root)
    lines = [line for line in done.stdout.splitlines() if line.split(" ")[0] in {"live", "joined", "removed",
                                                                                 "after", "snapshot", "FAILED:"}]
    assert done.returncode == 0, "\n".join(lines) + done.stderr[-3000:]
    assert "live ['k8s-head']" in lines
    assert "joined ['k8s-head', 'k8s-worker']" in lines
    assert "after ['k8s-head']" in lines  # the dead node's GPUs are unknown at once, not after stale_after
    assert "snapshot [('k8s-head', True), ('k8s-worker', False)]" in lines
