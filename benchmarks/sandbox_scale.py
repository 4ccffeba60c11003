"""Benchmark: how the sandbox's own costs grow with the objects it holds (issue 13: it must hold 100,000).

One sandbox (API server only, in its own process) is filled step by step with unrelated objects
(ConfigMaps, Secrets, Pods and suspended Jobs round robin, in 10 namespaces; `_objects.unrelated_objects`),
created straight in its store (the seeding rate is printed too), and at each level - 1,000 and 10,000
objects, and 100,000 with --scale - this process measures with the real `kubernetes` client:
- list latency: all ConfigMaps of the cluster (a quarter of the objects, the body read in full), one
  namespace's ConfigMaps, and a label-selected list of Jobs that matches none (what an operator's
  selected informer pays at start while the cluster is full of objects that are not its own);
- watch-start latency: a watch of all ConfigMaps from the current resourceVersion, to its response
  headers, and to the first event (a ConfigMap created once the watch is open);
- the sandbox process's RSS;
- creates/s over HTTP from one client (ConfigMaps, as benchmarks/sandbox.py measures it empty).
Each latency is the median of `--repeat` tries (the max beside it). Targets are for a 2-core machine;
a figure beyond one is printed, never raised.

    .venv/bin/python benchmarks/sandbox_scale.py [--scale] [--levels 1000,10000] [--repeat 5] [--creates 300]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from _machine import machine_load
from _objects import UNRELATED_KINDS, setup_cluster_objects
from _runtime import api_client, k8s
from _sandbox import sandbox_process

TARGET_LIST_100K_MS = 1000.0  # the 25,000 ConfigMaps of a 100,000-object sandbox, in one list
TARGET_SELECTED_LIST_MS = 100.0  # a label-selected list that matches none, at any level
TARGET_WATCH_START_MS = 50.0
TARGET_CREATES_PER_S = 400.0  # as the empty sandbox's target (benchmarks/_sandbox_floor.py)
TARGET_RSS_100K_MB = 2048.0


def out(line: str) -> None:
    print(line, flush=True)


def timed_ms(action: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """(median ms, max ms, the last result) of `repeat` runs of `action`."""
    times: list[float] = []
    result: Any = None
    for _ in range(repeat):
        began = time.perf_counter()
        result = action()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), max(times), result


def verdict(value: float, target: float | None, higher_is_better: bool = False) -> str:
    if target is None:
        return ""
    missed = value < target if higher_is_better else value > target
    return " MISSED" if missed else ""


def creates_per_s(client: Any, level: int, creates: int) -> None:
    core = k8s().client.CoreV1Api(client)

    def create(name: str) -> None:
        core.create_namespaced_config_map("default", {"metadata": {"name": name}, "data": {"k": "v"}},
                                          _preload_content=False).release_conn()

    for i in range(20):  # the connection and the server's paths warm, as in steady state
        create(f"warm-{level}-{i}")
    began = time.perf_counter()
    for i in range(creates):
        create(f"create-{level}-{i}")
    rate = creates / (time.perf_counter() - began)
    out(f"sandbox_creates_per_s_{level}: {rate:.0f} creates/s (1 client, sequential ConfigMap creates over HTTP "
        f"with the kubernetes client; target >= {TARGET_CREATES_PER_S:.0f})"
        f"{verdict(rate, TARGET_CREATES_PER_S, higher_is_better=True)}")


def measure(client: Any, level: int, repeat: int, creates: int, rss_mb: float) -> None:
    kubernetes = k8s()
    core = kubernetes.client.CoreV1Api(client)
    batch = kubernetes.client.BatchV1Api(client)

    def list_all() -> int:
        return len(core.list_config_map_for_all_namespaces(_preload_content=False).data)

    median, worst, size = timed_ms(list_all, repeat)
    target = TARGET_LIST_100K_MS if level >= 100_000 else None
    out(f"sandbox_list_all_configmaps_{level}: {median:.1f} ms (max {worst:.1f}; {level // len(UNRELATED_KINDS)} "
        f"ConfigMaps, {size / 2**20:.1f} MiB{f'; target <= {target:.0f} ms' if target else ''})"
        f"{verdict(median, target)}")
    median, worst, _ = timed_ms(lambda: core.list_namespaced_config_map("other-0", _preload_content=False).data,
                                repeat)
    out(f"sandbox_list_one_namespace_configmaps_{level}: {median:.1f} ms (max {worst:.1f}; "
        f"{level // len(UNRELATED_KINDS) // 10} ConfigMaps)")
    median, worst, _ = timed_ms(lambda: batch.list_job_for_all_namespaces(
        label_selector="kaiwo.silogen.ai/managed=true", _preload_content=False).data, repeat)
    out(f"sandbox_selected_list_jobs_none_match_{level}: {median:.1f} ms (max {worst:.1f}; "
        f"{level // len(UNRELATED_KINDS)} Jobs scanned; target <= {TARGET_SELECTED_LIST_MS:.0f} ms)"
        f"{verdict(median, TARGET_SELECTED_LIST_MS)}")

    headers_ms: list[float] = []
    event_ms: list[float] = []
    for attempt in range(repeat):
        rv = core.list_namespaced_config_map("default", limit=1).metadata.resource_version
        began = time.perf_counter()
        response = core.list_config_map_for_all_namespaces(watch=True, resource_version=rv, timeout_seconds=30,
                                                           _preload_content=False)
        headers_ms.append((time.perf_counter() - began) * 1000)
        first: list[float] = []

        def read(response: Any = response, first: list[float] = first) -> None:
            for _line in kubernetes.watch.watch.iter_resp_lines(response):
                first.append(time.perf_counter())
                return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        created = time.perf_counter()
        core.create_namespaced_config_map("default", {"metadata": {"name": f"watch-{level}-{attempt}"}},
                                          _preload_content=False).release_conn()
        reader.join(10)
        response.release_conn()
        if first:
            event_ms.append((first[0] - created) * 1000)
    median = statistics.median(headers_ms)
    out(f"sandbox_watch_start_{level}: {median:.1f} ms to the response headers (max {max(headers_ms):.1f}), "
        f"{statistics.median(event_ms) if event_ms else float('nan'):.1f} ms create -> first event "
        f"(n={len(event_ms)}/{repeat}; target <= {TARGET_WATCH_START_MS:.0f} ms){verdict(median, TARGET_WATCH_START_MS)}")

    creates_per_s(client, level, creates)
    target = TARGET_RSS_100K_MB if level >= 100_000 else None
    out(f"sandbox_rss_{level}: {rss_mb:.0f} MB (the sandbox process, before the creates above"
        f"{f'; target <= {target:.0f} MB' if target else ''}){verdict(rss_mb, target)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", action="store_true", help="add the 100,000-object level")
    parser.add_argument("--levels", default=None, help="comma-separated object counts (default 1000,10000)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--creates", type=int, default=300)
    args = parser.parse_args()
    levels = sorted(int(n) for n in (args.levels or ("1000,10000,100000" if args.scale else "1000,10000")).split(","))
    started = time.monotonic()
    out(f"levels: {levels}; load average at start {machine_load()}")
    with sandbox_process(users=("loader",)) as sandbox:
        setup_cluster_objects(sandbox.kubeconfigs["admin"], [])
        out(f"sandbox_rss_0: {sandbox.rss_mb():.0f} MB (empty but for the queue objects)")
        client = api_client(sandbox.kubeconfigs["admin"])
        creates_per_s(client, 0, args.creates)
        held = 0
        for level in levels:
            seconds = sandbox.seed_unrelated(level - held, first=held)
            out(f"  (seeded {level - held} objects in the sandbox's process in {seconds:.1f} s = "
                f"{(level - held) / seconds:.0f} objects/s; {level} held)")
            held = level
            measure(client, level, args.repeat, args.creates, sandbox.rss_mb())
    out(f"machine load average: {machine_load()}")
    out(f"benchmark wall time: {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
