"""Run by test_the_deployed_operator_keeps_one_telemetry_actor_per_telemetry_node in a fresh interpreter:
a real Ray cluster (ray.cluster_utils) shaped like deploy/'s (a head, a plain worker, and a node of the
gpu-telemetry group offering `kaiwo_gpu_telemetry` as its rayStartParams do), the fleet started as the
deployed operator starts it (actors.operator_app.start_telemetry, from deploy/'s head environment), then a
second telemetry node joining and leaving. Prints one line per observation; exits non-zero on the first
failed expectation."""

from __future__ import annotations

import sys
from typing import Any

import ray
from ray.cluster_utils import Cluster

from actors.operator_app import start_telemetry
from kaiwo_ray.controllers.manager import HostSettings
from kaiwo_sandbox.testing import eventually

NAMESPACE = "kaiwo"
HEAD_ENV = {"KAIWO_ACTOR_RESOURCES": '{"node:__internal_head__": 0.001}',  # as deploy/base/rayservice.yaml
            "KAIWO_TELEMETRY_BACKEND": "none", "KAIWO_TELEMETRY_INTERVAL": "0.2"}  # no GPUs on this machine


def placed(fleet: Any) -> dict[str, str]:
    """Ray node id -> the Kubernetes node name its telemetry actor reports (each actor asked)."""
    healths = ray.get([handle.health.remote() for handle in fleet.actors.values()], timeout=60)
    return {h["ray_node_id"]: h["node"] for h in healths}


def main() -> None:
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "env_vars": {"KAIWO_NODE_NAME": "k8s-cpu-head"},
        "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 4}})
    cluster.add_node(num_cpus=1, env_vars={"KAIWO_NODE_NAME": "k8s-cpu-worker"})
    gpu = cluster.add_node(num_cpus=0, resources={"kaiwo_gpu_telemetry": 1},
                           env_vars={"KAIWO_NODE_NAME": "k8s-gpu-1"})
    ray.init(address=cluster.address, namespace=NAMESPACE)
    fleet = start_telemetry(HEAD_ENV, HostSettings(), NAMESPACE)
    if fleet is None:
        print("FAILED: no fleet", flush=True)
        sys.exit(1)
    fleet.settings.reconcile_interval = 0.5
    try:
        first = eventually(lambda: (p := placed(fleet)) and p, timeout=60, interval=0.2,
                           message="an actor on the telemetry node")
        print("placed", sorted(first.items()), "gpu", gpu.node_id, flush=True)
        second = cluster.add_node(num_cpus=0, resources={"kaiwo_gpu_telemetry": 1},
                                  env_vars={"KAIWO_NODE_NAME": "k8s-gpu-2"})
        joined = eventually(lambda: p if len(p := placed(fleet)) == 2 else None, timeout=60,
                            interval=0.2, message="an actor on the joining telemetry node")
        print("joined", sorted(joined.values()), flush=True)
        cluster.remove_node(second, allow_graceful=False)
        eventually(lambda: len(fleet.actors) == 1, timeout=60, interval=0.2,
                   message="the dead node's actor dropped")
        print("left", sorted(placed(fleet).values()), flush=True)
    finally:
        fleet.stop()
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
