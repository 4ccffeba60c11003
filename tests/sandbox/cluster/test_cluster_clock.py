"""The cluster's own scaled clock (`kaiwo-ray sandbox --scaled-clock`): timestamps and every simulated
controller's timers run 1/F times as fast as the wall clock, so a pod's run time is the same number of
seconds in its spec and in its status."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from kaiwo_sandbox.contracts import ScaledClock

NODE_CONTROLLERS = ["scheduler", "kubelet"]

FACTOR = 0.05  # 20 cluster seconds in one wall second


def test_a_pod_runs_its_seconds_of_the_clusters_time(sandbox_factory: Any, clients_factory: Any,
                                                     make_node: Any, wait_for: Any) -> None:
    origin = time.time()
    sb = sandbox_factory(nodes=[make_node("n1")], cluster=NODE_CONTROLLERS, clock=ScaledClock(FACTOR, origin))
    c = clients_factory(sb)
    created = c.core.create_namespaced_pod("default", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sleeper"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "20"]}]}})
    wait_for(lambda: c.core.read_namespaced_pod_status("sleeper", "default").status.phase == "Succeeded")
    wall_end = time.time()
    state = c.core.read_namespaced_pod_status("sleeper", "default").status.container_statuses[0].state.terminated
    # 20 seconds of the cluster's timestamps (whole seconds: 19 to 21)...
    assert 19 <= (state.finished_at - state.started_at).total_seconds() <= 21
    # ...1/F times as far from the origin as the wall clock is (the pod ended before we saw it, by
    # the poll's latency: up to half a wall second, 10 cluster seconds).
    cluster_end = datetime.fromtimestamp(origin + (wall_end - origin) / FACTOR, UTC)
    assert -10.0 <= (state.finished_at - cluster_end).total_seconds() <= 1.0
    assert created.metadata.creation_timestamp <= state.started_at
    assert state.finished_at > datetime.fromtimestamp(wall_end, UTC)  # the cluster's clock runs ahead


def test_the_clock_reads_cluster_seconds_and_waits_wall_seconds() -> None:
    clock = ScaledClock(0.5, time.time() - 10.0)
    assert abs(clock.now().timestamp() - (clock.origin + 20.0)) < 1.0  # 10 wall seconds: 20 of the cluster's
    assert clock.time_factor == 1.0  # nothing else scales
