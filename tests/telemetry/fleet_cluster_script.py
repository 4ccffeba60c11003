"""Run by test_fleet_follows_nodes in a fresh interpreter: a real two-node Ray cluster
(ray.cluster_utils), a telemetry fleet on it, a node joining and a node dying. Prints one line per
observation for the test to check; exits non-zero on the first failed expectation."""

from __future__ import annotations

import sys
import time
from typing import Any

import ray
from ray.cluster_utils import Cluster

from actors.telemetry import TelemetryFleet
from kaiwo_ray.telemetry.settings import TelemetrySettings


def wait(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    print(f"FAILED: {what}", flush=True)
    sys.exit(1)


def main() -> None:
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "env_vars": {"KAIWO_NODE_NAME": "k8s-head"},
        "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 4}})
    ray.init(address=cluster.address, namespace="fleet-test")
    fleet = TelemetryFleet(TelemetrySettings(backend="none", interval=0.2, reconcile_interval=0.5),
                           namespace="fleet-test").start()
    try:
        agg = fleet.aggregator
        live = lambda: ray.get(agg.health.remote(), timeout=30)["live"]  # noqa: E731
        wait(lambda: live() == ["k8s-head"], 60, "head node live")
        print("live", live(), flush=True)
        worker = cluster.add_node(num_cpus=1, env_vars={"KAIWO_NODE_NAME": "k8s-worker"})
        wait(lambda: len(fleet.actors) == 2, 60, "an actor started on the joining node")
        wait(lambda: live() == ["k8s-head", "k8s-worker"], 60, "worker node live")
        print("joined", live(), flush=True)
        cluster.remove_node(worker, allow_graceful=False)
        wait(lambda: len(fleet.actors) == 1, 60, "the dead node's actor dropped")
        print("removed", fleet.removed, flush=True)
        print("after", live(), flush=True)
        snapshot = {s.node: up for s, up in ray.get(agg.snapshot.remote(), timeout=30)}
        print("snapshot", sorted(snapshot.items()), flush=True)
    finally:
        fleet.stop()
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
