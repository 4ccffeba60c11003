"""Benchmark: 1,000 single-pod Jobs through one Kueue LocalQueue/ClusterQueue to completion on the
simulated cluster (scheduler, kubelet, Job controller, Kueue, ...), created with the real
`kubernetes` client from this process while the sandbox runs in a child process.

The Jobs are queued first (their LocalQueue points at a ClusterQueue that does not exist yet, so
all 1,000 Workloads wait, as Kueue reports, "ClusterQueue bench doesn't exist"); creating the
ClusterQueue then releases them, so admissions/s is measured with 1,000 queued Jobs.

Prints wall time, Kueue admissions/s and the sandbox's RSS, each with its unit and target
(targets are for a 2-core machine); never fails on a missed target — figures go in the notes.

    .venv/bin/python benchmarks/cluster.py [--jobs N] [--time-factor F] [--run-seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

TARGET_ADMISSIONS_PER_S = 50.0
TARGET_RSS_MB = 500.0
TIMEOUT_S = 110.0


def _serve(conn: Connection, kubeconfig: str, time_factor: float) -> None:
    """Child process: the sandbox with every simulated controller, plus a store subscriber that
    timestamps each Workload's first quota reservation and finish."""
    import psutil

    from kaiwo_ray.api.crd import all_crds
    from kaiwo_ray.nodes import default_nodes
    from kaiwo_sandbox.contracts import WORKLOADS, WatchEvent
    from kaiwo_sandbox.instance import Sandbox, SandboxConfig

    created: dict[str, float] = {}
    admitted: dict[str, float] = {}
    finished: dict[str, float] = {}

    writes: dict[str, int] = {}  # committed writes (watch events) per resource, whoever made them

    def observe(event: WatchEvent) -> None:
        writes[event.gvr.resource] = writes.get(event.gvr.resource, 0) + 1
        if event.gvr.resource != WORKLOADS.resource or event.type == "DELETED":
            return
        name = event.object["metadata"]["name"]
        created.setdefault(name, time.monotonic())
        for cond in (event.object.get("status") or {}).get("conditions") or []:
            if cond.get("status") != "True":
                continue
            if cond.get("type") == "QuotaReserved":
                admitted.setdefault(name, time.monotonic())
            elif cond.get("type") == "Finished":
                finished.setdefault(name, time.monotonic())

    async def main() -> None:
        sandbox = Sandbox(SandboxConfig(cluster=True, time_factor=time_factor, kubeconfig_path=Path(kubeconfig),
                                        nodes=default_nodes(), extra_crds=list(all_crds())))
        await sandbox.start()
        sandbox.store.subscribe(observe)
        conn.send("ready")
        loop = asyncio.get_running_loop()
        while True:
            command = await loop.run_in_executor(None, conn.recv)
            if command == "stop":
                break
            conn.send({
                "workloads": len(created), "admitted": len(admitted), "finished": len(finished),
                "first_admission": min(admitted.values(), default=0.0),
                "last_admission": max(admitted.values(), default=0.0),
                "last_finish": max(finished.values(), default=0.0),
                "rss_mb": psutil.Process().memory_info().rss / 2**20,
                "controller_errors": sandbox.cluster.errors if sandbox.cluster else 0,
                "writes": dict(writes),
            })
        await sandbox.stop()

    from kaiwo_sandbox.instance import new_event_loop

    with asyncio.Runner(loop_factory=new_event_loop) as runner:  # the loop `kaiwo-ray sandbox` serves on
        runner.run(main())


API = "kueue.x-k8s.io/v1beta2"
FLAVOR = {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}}
LOCAL_QUEUE = {"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": "bench"}, "spec": {"clusterQueue": "bench"}}


def _cluster_queue(jobs: int) -> dict[str, Any]:
    """Quota for every Job at once: admission, not quota, is what is measured."""
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": "bench"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": ["cpu", "memory"],
                "flavors": [{"name": "default", "resources": [
                    {"name": "cpu", "nominalQuota": f"{jobs * 100}m"},
                    {"name": "memory", "nominalQuota": f"{jobs * 64}Mi"}]}]}]}}


def _job(index: int, run_seconds: float) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"bench-{index:04d}", "labels": {"kueue.x-k8s.io/queue-name": "bench"}},
        "spec": {"backoffLimit": 0, "template": {
            "metadata": {"annotations": {"sandbox.kaiwo-ray.dev/run-seconds": str(run_seconds)}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "work", "image": "busybox",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}},
    }


def _wait(conn: Connection, done: Callable[[dict[str, Any]], bool], started: float) -> dict[str, Any]:
    """Poll the sandbox's counters until `done` or the overall deadline."""
    while True:
        conn.send("stats")
        stats: dict[str, Any] = conn.recv()
        if done(stats) or time.monotonic() - started > TIMEOUT_S:
            return stats
        time.sleep(0.1)


def run(jobs: int, time_factor: float, run_seconds: float) -> int:
    import kubernetes as typed_kubernetes

    kubernetes: Any = typed_kubernetes  # its generated signatures want models; we pass dicts

    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    with tempfile.TemporaryDirectory(prefix="kaiwo-bench-") as tmp:
        kubeconfig = str(Path(tmp) / "kubeconfig")
        server = context.Process(target=_serve, args=(child, kubeconfig, time_factor), daemon=True)
        server.start()
        try:
            if not parent.poll(60) or parent.recv() != "ready":
                print("sandbox did not start", file=sys.stderr)
                return 1
            api = kubernetes.config.new_client_from_config(config_file=kubeconfig)
            custom = kubernetes.client.CustomObjectsApi(api)
            batch = kubernetes.client.BatchV1Api(api)
            custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors", FLAVOR)
            custom.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "default", "localqueues",
                                                   LOCAL_QUEUE)
            started = time.monotonic()
            for index in range(jobs):
                batch.create_namespaced_job("default", _job(index, run_seconds))
            created = time.monotonic()
            stats = _wait(parent, lambda s: s["workloads"] >= jobs, started)
            queued = time.monotonic()
            released = time.monotonic()
            custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", _cluster_queue(jobs))
            stats = _wait(parent, lambda s: s["finished"] >= jobs, started)
            parent.send("stats")
            stats = parent.recv()
            parent.send("stop")
        finally:
            server.join(timeout=15)
            if server.is_alive():
                server.terminate()
    done = stats.get("finished", 0) >= jobs
    wall = (stats["last_finish"] if done else time.monotonic()) - started
    span = max(stats["last_admission"] - released, 1e-9)
    rate = stats["admitted"] / span if stats["admitted"] else 0.0
    print(f"jobs created through the client: {jobs} in {created - started:.1f} s "
          f"({jobs / max(created - started, 1e-9):.0f} creates/s); all queued after {queued - started:.1f} s")
    print(f"cluster wall time, first create to last Job finished: {wall:.1f} s "
          f"({stats.get('finished', 0)}/{jobs} finished; target < 120 s)")
    print(f"kueue admissions/s ({stats['admitted']} queued Workloads, ClusterQueue created -> last quota "
          f"reservation {span:.1f} s): {rate:.0f} admissions/s "
          f"(target >= {TARGET_ADMISSIONS_PER_S:.0f} admissions/s)")
    print(f"sandbox RSS after the run: {stats['rss_mb']:.0f} MB (target <= {TARGET_RSS_MB:.0f} MB)")
    writes: dict[str, int] = stats.get("writes") or {}
    events = writes.get("events", 0)
    busiest = ", ".join(f"{r} {n / jobs:.1f}" for r, n in sorted(writes.items(), key=lambda kv: -kv[1])
                        if r != "events" and n >= jobs / 10)
    print(f"store writes per Job: {sum(writes.values()) / jobs:.1f} writes/Job "
          f"({events / jobs:.1f} Events; objects: {busiest})")
    print(f"controller reconcile errors: {stats.get('controller_errors', 0)}")
    return 0 if done else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--time-factor", type=float, default=0.01, help="simulated seconds -> real seconds")
    parser.add_argument("--run-seconds", type=float, default=5.0, help="simulated run time of each Job's pod")
    args = parser.parse_args()
    return run(args.jobs, args.time_factor, args.run_seconds)


if __name__ == "__main__":
    sys.exit(main())
