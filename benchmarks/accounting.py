"""Benchmark: the GPU ledger (issue 36, docs/accounting.md).

Figures (each with its unit and target; targets are for a 2-core machine; never fails on a miss):

1. ledger cost on top of the telemetry, 1,000 nodes x 8 GPUs at 1 Hz: per tick, the aggregator's
   compact snapshot built, pickled and unpickled (what AggregatorFeed moves over Ray) plus the accounting
   controller's charging and integration of every GPU, with its caches holding the pods and
   workloads; in CPU cores (target <= 0.1)
2. a usage query over 30 days of history, 10,000 workloads and 100 users (hourly buckets), grouped by
   user, by namespace for a user who may read 5 namespaces, by queue: p50 and p99 (target p99 <= 200 ms)
   with an admin API replica's garbage-collector settings, wall and CPU time (a shared machine's wall
   time includes waiting for a core); and the first read of the stored ConfigMaps (decode, once per
   resourceVersion)
3. memory and disk per day of history: the ledger rows of one day in memory (tracemalloc) and as
   stored (gzipped JSON in the day's ConfigMap)

    .venv/bin/python benchmarks/accounting.py [--nodes N] [--workloads N] [--days N]
"""

from __future__ import annotations

import argparse
import pickle
import random
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kaiwo_ray.controllers.accounting import AccountingController, AccountingSettings  # noqa: E402
from kaiwo_ray.kube import resources as R  # noqa: E402
from kaiwo_ray.kube.cache import ObjectCache  # noqa: E402
from kaiwo_ray.telemetry.ledger import Holder, Ledger, Owner  # noqa: E402
from kaiwo_ray.telemetry.ledger_store import DAY, HEAD, assemble, encode, slice_state  # noqa: E402
from kaiwo_ray.telemetry.model import GpuSample, NodeSample, PodRef  # noqa: E402
from kaiwo_ray.telemetry.sources import compact  # noqa: E402
from kaiwo_ray.telemetry.usage import UsageIndex, report  # noqa: E402


def line(name: str, value: float, unit: str, target: str) -> None:
    print(f"{name}: {value:.3f} {unit} (target {target})", flush=True)


# -- 1. per-tick cost at 1,000 x 8 -------------------------------------------------------------------

def _cluster(nodes: int) -> tuple[AccountingController, list[NodeSample]]:
    """A controller whose caches hold one KaiwoJob per node (8 GPUs, one pod), and a tick's samples."""
    controller = AccountingController(None, settings=AccountingSettings(enabled=True), feed=None)
    for res in controller.watches():
        controller.caches[res.resource] = ObjectCache()
    samples = []
    for n in range(nodes):
        uid = f"kj-{n:05d}"
        ns = f"team-{n % 50}"
        controller.caches[R.KAIWOJOBS].upsert({"metadata": {"name": f"job-{n}", "namespace": ns, "uid": uid,
                                                            "annotations": {"kaiwo.silogen.ai/submitted-by": f"u{n % 100}"}},
                                               "spec": {"user": f"u{n % 100}", "clusterQueue": "kaiwo"}})
        controller.caches[R.PODS].upsert({"metadata": {"name": f"job-{n}-pod", "namespace": ns, "uid": f"pod-{n}",
                                                       "labels": {"kaiwo.silogen.ai/run-id": uid}}})
        ref = PodRef(namespace=ns, pod=f"job-{n}-pod", container="main")
        gpus = tuple(GpuSample(uuid=f"GPU-{n}-{i}", index=i, vendor="nvidia", model="NVIDIA-H100-80GB-HBM3",
                               utilization=float((n * 7 + i) % 100), pods=(ref,)) for i in range(8))
        samples.append(NodeSample(node=f"node-{n:04d}", timestamp=0.0, backend="nvidia", gpus=gpus))
    return controller, samples


def tick_cost(nodes: int, ticks: int) -> None:
    controller, base = _cluster(nodes)
    ledger = Ledger(stale_after=5)
    cpu = 0.0
    for t in range(1, ticks + 1):
        samples = [s.model_copy(update={"timestamp": 1_800_000_000.0 + t}) for s in base]  # not timed: telemetry's
        start = time.process_time()
        answer = compact(samples)  # AggregatorActor.compact_snapshot
        moved = pickle.loads(pickle.dumps(answer, protocol=5))  # over Ray
        controller.account(ledger, moved, now=float(t))
        ledger.advance(1_800_000_000.0 + t)
        cpu += time.process_time() - start
    assert len(ledger.rows) == nodes, len(ledger.rows)
    line(f"ledger CPU, {nodes} nodes x 8 GPUs at 1 Hz", cpu / ticks, "cores", "<= 0.1")


# -- 2. usage queries over 30 days -----------------------------------------------------------------

def history(workloads: int, users: int, days: int, seed: int = 7) -> Ledger:
    rng = random.Random(seed)
    ledger = Ledger()
    start = 1_800_000_000 - 1_800_000_000 % DAY - days * DAY
    for w in range(workloads):
        key = f"uid-{w:05d}"
        ledger.owners[key] = Owner(key, f"team-{w % 50}", "KaiwoJob", f"job-{w}", user=f"user-{w % users}",
                                   queue=f"queue-{w % 10}", cluster_queue=f"cq-{w % 5}")
        begin = start + rng.randrange(days * 24) * 3600
        hours = rng.randint(1, 24)
        gpus = rng.choice((1, 2, 4, 8))
        model = rng.choice(("NVIDIA-H100-80GB-HBM3", "AMD-Instinct-MI300X"))
        vendor = "nvidia" if model.startswith("NVIDIA") else "amd"
        for h in range(hours):
            bucket = begin + h * 3600
            used = rng.random()
            ledger.rows[(bucket, key, vendor, model)] = [3600.0 * gpus, 3600.0 * gpus * used,
                                                         3600.0 * gpus * (used < 0.05), 0.0]
    return ledger


def query_latency(ledger: Ledger, days: int, repeats: int) -> None:
    now = max(k[0] for k in ledger.rows) + 3600
    since = now - days * DAY
    mine = frozenset(f"team-{i}" for i in range(5))
    began = time.perf_counter()
    index = UsageIndex.build(ledger.rows)
    line("daily index of the sealed days (built once per set of ConfigMap versions)",
         (time.perf_counter() - began) * 1000, "ms", "-")
    for label, by, namespaces in (("by user", "user", None), ("by namespace, 5 namespaces", "namespace", mine),
                                  ("by queue", "queue", None)):
        times, cpu = [], []
        for _ in range(repeats):
            began, began_cpu = time.perf_counter(), time.process_time()
            report({}, ledger.owners, ledger.reclaims.values(), by=by, since=since, until=now,
                   bucket_seconds=3600, namespaces=namespaces, index=[index])
            times.append(time.perf_counter() - began)
            cpu.append(time.process_time() - began_cpu)
        times.sort()
        cpu.sort()
        p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
        line(f"usage query {label}, p50", statistics.median(times) * 1000, "ms", "-")
        line(f"usage query {label}, p99", p99 * 1000, "ms", "<= 200")
        line(f"usage query {label}, p99 CPU time", cpu[min(len(cpu) - 1, int(0.99 * len(cpu)))] * 1000, "ms",
             "(wall time minus waiting for a core)")


def stored_days(ledger: Ledger) -> list[dict[str, Any]]:
    days = sorted({k[0] // DAY * DAY for k in ledger.rows})
    items = []
    for n, day in enumerate(days):
        state = slice_state(ledger, day, day + DAY)
        state["generations"] = [n + 1]
        items.append({"metadata": {"name": f"{HEAD}-{n}", "resourceVersion": "1"},
                      "binaryData": {"ledger.json.gz": encode(state)}})
    return items


def first_read(items: list[dict[str, Any]]) -> None:
    began = time.perf_counter()
    ledger, _ = assemble(items)
    line("first read of the stored ledger (decode every day)", (time.perf_counter() - began) * 1000, "ms",
         "once per resourceVersion")
    assert ledger.rows


# -- 3. memory and disk per day ----------------------------------------------------------------------

def per_day(workloads: int, users: int, days: int) -> None:
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    ledger = history(workloads, users, days)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    items = stored_days(ledger)
    disk = sum(len(i["binaryData"]["ledger.json.gz"]) for i in items)
    line("ledger memory per day of history", (after - before) / days / 1024, "KiB/day",
         "- (the controller keeps only the open day)")
    line("ledger on disk per day of history (gzipped JSON, base64)", disk / len(items) / 1024, "KiB/day",
         "< 1024 (one ConfigMap per day)")


def live_day(nodes: int) -> None:
    """A full day at 1,000 nodes x 8 GPUs, one workload per node for 24 h: the head's worst day."""
    ledger = Ledger()
    for n in range(nodes):
        holders = [Holder(f"uid-{n}", "nvidia", "NVIDIA-H100-80GB-HBM3", 50.0)] * 8
        for h in range(25):
            ledger.observe(f"node-{n}", 1_800_000_000.0 + h * 3600, holders)
    size = len(encode(ledger.to_state()))
    line(f"head ConfigMap after a day, {nodes} nodes busy all day", size / 1024, "KiB", "< 1024")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=100)
    args = parser.parse_args()
    import os

    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    tick_cost(args.nodes, args.ticks)
    from hosts.runtime.gc_tuning import tune_for_long_lived_caches

    tune_for_long_lived_caches()  # what an admin API replica runs (AdminSettings.tune_gc)
    ledger = history(args.workloads, args.users, args.days)
    line("rows of history", float(len(ledger.rows)), "rows", "-")
    query_latency(ledger, args.days, args.repeats)
    first_read(stored_days(ledger))
    per_day(args.workloads, args.users, args.days)
    live_day(args.nodes)


if __name__ == "__main__":
    main()
