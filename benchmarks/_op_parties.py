"""The parties of benchmarks/operator.py's main phases, each on a sandbox of its own: kaiwo-ray
(`kaiwo_party`: backlog drain, writes per CR, a cold start to a quiet resync, RSS) and a peer
(`peer_party`: backlog drain, writes per CR), each yielded as a `Party` for the latency slices and
printing its figures at `report`; and py-spy over the latency runs (BENCH_PYSPY, diagnosis only).
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _diagnosis import stacks_line, stalls_line
from _load import Loader
from _objects import setup_cluster_objects
from _op_figures import (
    NAMESPACE,
    TARGET_P50_20_MS,
    TARGET_P99_20_MS,
    TARGET_P99_100_MS,
    TARGET_RESYNC_S,
    TARGET_RSS_MB,
    out,
)
from _op_lines import gc_pauses_line, lat_line, overlaps_line, segments_line, spells_line, waits_line
from _op_measure import (
    Party,
    Result,
    Scale,
    drain,
    job_fingerprint,
    latency,
    seed,
    settled_writes,
    writes_by_resource,
)
from _op_peers import Peer, check_writes
from _op_processes import OperatorProcess, operator_process, peer_process
from _sandbox import SandboxProcess, sandbox_process
from _watcher import job_watcher


@contextmanager
def kaiwo_party(scale: Scale, floor_watch: str, workers: int | None, cold_starts: int = 1) -> Iterator[Party]:
    """kaiwo-ray on its sandbox: the backlog drain, writes per CR, cold starts to a quiet resync and RSS
    printed; yields the operator that runs the latency slices, then prints their figures at `report`."""
    result = Result("kaiwo-ray")
    with sandbox_process(users=("kaiwo-ray", "loader")) as sandbox, \
            operator_process(sandbox.kubeconfigs["kaiwo-ray"], workers) as first, \
            operator_process(sandbox.kubeconfigs["kaiwo-ray"], workers) as second:
        setup_cluster_objects(sandbox.kubeconfigs["admin"], [NAMESPACE])
        loader = Loader(sandbox.kubeconfigs["loader"], NAMESPACE)
        backlog = [f"live-{i}" for i in range(scale.crs)]
        out(seed(sandbox, scale, backlog))
        with job_watcher(sandbox.kubeconfigs["admin"], NAMESPACE) as seen:
            first.wait_imported()
            second.wait_imported()
            _kaiwo_backlog(sandbox, first, seen, backlog, result)
            health = _kaiwo_resync(sandbox, second, scale.crs, workers, cold_starts)
            result.rss_mb = health["rss_mb"]
            verdict = " MISSED" if result.rss_mb > TARGET_RSS_MB else ""
            cached = {k: v for k, v in health["cached"].items() if v}
            out(f"kaiwojob_controller_rss_{scale.crs}_crs: {result.rss_mb:.0f} MB (target <= {TARGET_RSS_MB:.0f} MB; "
                f"whole operator process, cached: {cached}){verdict}")
            out(f"  (the operator's garbage-collector pauses from its start to the resync drained: "
                f"{gc_pauses_line(health['gc_pauses'])})")
            second.ask("gc-reset")
            reconciles_before = health["reconciles"]  # (the cold starts since ran in other processes)
            out(f"  (API connections opened by the operator before the latency runs: {health['connections_opened']})")
            sandbox.gc_pauses()
            if os.environ.get("BENCH_STALLS"):
                sandbox.stalls()  # from here on: the latency runs
            spies = py_spy({"sandbox": sandbox.process.pid, "operator": second.process.pid})

            def report() -> None:
                stop_py_spy(spies)
                _kaiwo_report(result, sandbox, second, floor_watch, reconciles_before)

            yield Party(result, sandbox, "kaiwo-ray", "create jobs",
                        lambda rate, seconds, prefix, warm: latency(loader, seen, prefix, rate, seconds, warm),
                        lambda: second.ask("drain"), report)


def _kaiwo_backlog(sandbox: SandboxProcess, first: OperatorProcess, seen: Any, backlog: list[str],
                   result: Result) -> None:
    """The first operator drains the backlog; its drain and writes per CR to PENDING printed."""
    crs = len(backlog)
    since = time.time()
    drain(sandbox, first, seen, backlog, max(110.0, crs / 20), result)
    drained = first.ask("drain", timeout=900)
    result.first_job = job_fingerprint(sandbox.kubeconfigs["admin"], backlog[0])
    writes = writes_by_resource(sandbox, "kaiwo-ray", since)
    first.stop()
    out(f"kaiwojob_backlog_drain: {result.drain_s:.2f} s for {crs} CRs = {result.throughput:.0f} CR/s "
        f"(start -> last child Job observed; CPU per CR: operator {result.cpu_ms_per_cr:.2f} ms, sandbox "
        f"{result.sandbox_cpu_ms_per_cr:.2f} ms; caches synced in {first.synced_s:.2f} s; queue idle at "
        f"{drained['drained_s']:.2f} s after {drained['reconciles']} reconciles, "
        f"{drained['errors']} errors, {drained['retries']} retries; results {drained['results']})")
    out(f"kaiwojob_writes_per_cr_to_pending: {sum(writes.values()) / crs:.2f} writes "
        f"({', '.join(f'{k}: {v / crs:.2f}' for k, v in sorted(writes.items()))})")


def _kaiwo_resync(sandbox: SandboxProcess, second: OperatorProcess, crs: int, workers: int | None,
                  cold_starts: int) -> dict[str, Any]:
    """A second operator's cold start to a quiet resync of the drained backlog (and `cold_starts` - 1
    more, each in a fresh process), printed; returns the second operator's health once it is idle."""
    since = time.time()
    second.start()
    drained = second.ask("drain", timeout=900)
    health: dict[str, Any] = second.ask("health")
    starts = [(drained["drained_s"], second.synced_s)]
    for _ in range(cold_starts - 1):  # more cold starts of fresh processes: this figure is noisy
        with operator_process(sandbox.kubeconfigs["kaiwo-ray"], workers) as again:
            again.start()
            starts.append((again.ask("drain", timeout=900)["drained_s"], again.synced_s))
    writes = writes_by_resource(sandbox, "kaiwo-ray", since)
    resync_s = statistics.median(s for s, _ in starts)
    verdict = " MISSED" if resync_s > TARGET_RESYNC_S or writes else ""
    each = f"; each: {', '.join(f'{s:.2f} s (synced {c:.2f} s)' for s, c in starts)}" if len(starts) > 1 else ""
    out(f"kaiwojob_quiet_resync_{crs}: {resync_s:.2f} s (target <= {TARGET_RESYNC_S:.0f} s "
        f"with 0 writes; cold start of a second operator to its queue drained and idle"
        f"{f', median of {len(starts)}' if len(starts) > 1 else ''}: caches synced {second.synced_s:.2f} s, "
        f"{drained['reconciles']} reconciles, "
        f"{sum(writes.values())} writes{': ' + str(dict(writes)) if writes else ''}; the process's "
        f"imports before that: {second.imports_s:.1f} s{each}){verdict}")
    return health


def _kaiwo_report(result: Result, sandbox: SandboxProcess, operator: OperatorProcess, floor_watch: str,
                  reconciles_before: int) -> None:
    """kaiwo-ray's figures once every latency slice ran: its health, the latency percentiles against
    their targets, the slow spells, where the time went and its requests per KaiwoJob."""
    assert result.lat20 is not None and result.lat100 is not None
    health = operator.ask("health")
    out(f"  (kaiwo-ray after the latency runs: {health['connections_opened']} API connections opened "
        f"since the start, {health['cached'].get('kaiwojobs')} KaiwoJobs cached, RSS "
        f"{health['rss_mb']:.0f} MB, {health['errors']} reconcile errors, relists "
        f"{ {k: v for k, v in health['relists'].items() if v > 1} or 'none after the first'}, sandbox "
        f"RSS {sandbox.rss_mb():.0f} MB; the operator's garbage-collector pauses during the latency "
        f"runs: {gc_pauses_line(health['gc_pauses'])})")
    out(f"  (the sandbox's garbage-collector pauses during the latency runs: "
        f"{gc_pauses_line(sandbox.gc_pauses())})")
    floor = f"; sandbox floor watch {floor_watch}" if floor_watch else ""
    out(lat_line("create_to_child", result.lat20, 20, 50, TARGET_P50_20_MS, floor))
    out(lat_line("create_to_child", result.lat20, 20, 99, TARGET_P99_20_MS, ""))
    out(lat_line("create_to_child", result.lat100, 100, 50, None, ""))
    out(lat_line("create_to_child", result.lat100, 100, 99, TARGET_P99_100_MS, ""))
    out(spells_line(result.lat100, sandbox))
    out(waits_line("kaiwo-ray", result.lat100, sandbox, operator.process.pid))
    if os.environ.get("BENCH_SAMPLE"):
        spells = result.lat100.slow_spells(TARGET_P99_100_MS)
        if spells:
            first = min(result.lat100.at)
            worst = [(first + spells[0][0] - 0.1, first + spells[0][0] + spells[0][1])]
            whole = result.lat100.spans()
            out(stacks_line("its sandbox", sandbox.stacks(worst), sandbox.stacks(whole)))
            out(stacks_line("the operator", operator.ask("stacks", worst), operator.ask("stacks", whole)))
    if os.environ.get("BENCH_STALLS"):
        first_100 = min(result.lat100.at, default=0.0)
        out(stalls_line("the operator", health["stalls"], first_100))
        out(stalls_line("its sandbox", sandbox.stalls(), first_100))
    out(segments_line(sandbox, result.lat100, "kaiwo-ray", "create jobs"))
    for lat, rate in ((result.lat20, 20), (result.lat100, 100)):
        out(overlaps_line(sandbox, lat, rate, "kaiwo-ray", "create jobs"))
    since = min(result.lat20.at, default=0.0) - 1.0
    created = sandbox.ask("requests", "loader", since).get("create kaiwojobs", 0) or 1
    asked = sandbox.ask("requests", "kaiwo-ray", since)
    per_cr = ", ".join(f"{k}: {v / created:.2f}" for k, v in sorted(asked.items()) if v / created >= 0.005)
    out(f"  (the operator's API requests per KaiwoJob created during the latency runs, its watches "
        f"aside: {per_cr}; reconciles per KaiwoJob: "
        f"{(health['reconciles'] - reconciles_before) / created:.2f})")


@contextmanager
def peer_party(scale: Scale, peer: Peer) -> Iterator[Party]:
    """A peer on its sandbox: its backlog drain and writes per CR printed; yields it for the latency
    slices, then prints their figures at `report`."""
    crs = scale.crs
    result = Result(peer.key)
    with sandbox_process(users=("peer", "loader")) as sandbox, \
            peer_process(sandbox.kubeconfigs["peer"], NAMESPACE, peer.module) as handle:
        setup_cluster_objects(sandbox.kubeconfigs["admin"], [NAMESPACE])
        loader = Loader(sandbox.kubeconfigs["loader"], NAMESPACE)
        backlog = [f"live-{i}" for i in range(crs)]
        out(seed(sandbox, scale, backlog))
        with job_watcher(sandbox.kubeconfigs["admin"], NAMESPACE) as seen:
            handle.wait_imported()
            since = time.time()
            drain(sandbox, handle, seen, backlog, max(110.0, crs / 20), result)
            writes, settled = settled_writes(sandbox, "peer", since, sum(peer.expected_writes.values()) * crs)
            result.first_job = job_fingerprint(sandbox.kubeconfigs["admin"], backlog[0])
            out(f"{peer.key}_backlog_drain: {result.drain_s:.2f} s for {crs} CRs = {result.throughput:.0f} CR/s "
                f"({peer.what}; start -> last child Job observed; CPU per CR: peer {result.cpu_ms_per_cr:.2f} ms, "
                f"sandbox {result.sandbox_cpu_ms_per_cr:.2f} ms)")
            out(f"{peer.key}_writes_per_cr: {sum(writes.values()) / crs:.2f} writes "
                f"({', '.join(f'{k}: {v / crs:.2f}' for k, v in sorted(writes.items()))}; "
                f"{check_writes(peer, writes, crs)}; all landed {settled - handle.began_wall:.1f} s after start)")
            sandbox.gc_pauses()
            if os.environ.get("BENCH_STALLS"):
                sandbox.stalls()  # from here on: the latency runs
            spies = py_spy({f"{peer.key}-sandbox": sandbox.process.pid, peer.key: handle.process.pid})

            def report() -> None:
                assert result.lat20 is not None and result.lat100 is not None
                stop_py_spy(spies)
                result.rss_mb = handle.ask("health")["rss_mb"]
                out(f"  ({peer.key}: the sandbox's garbage-collector pauses during the latency runs: "
                    f"{gc_pauses_line(sandbox.gc_pauses())})")
                for lat, rate in ((result.lat20, 20), (result.lat100, 100)):
                    out(lat_line(f"{peer.key}_create_to_child", lat, rate, 50, None, ""))
                    out(lat_line(f"{peer.key}_create_to_child", lat, rate, 99, None, ""))
                if os.environ.get("BENCH_STALLS"):
                    out(stalls_line(f"{peer.key}'s sandbox", sandbox.stalls(), min(result.lat100.at, default=0.0)))
                out(segments_line(sandbox, result.lat100, "peer", "patch jobs"))
                for lat, rate in ((result.lat20, 20), (result.lat100, 100)):
                    out(overlaps_line(sandbox, lat, rate, "peer", "patch jobs"))
                out(waits_line(peer.key, result.lat100, sandbox, handle.process.pid))
                out(f"{peer.key}_rss_{crs}_crs: {result.rss_mb:.0f} MB (whole peer process)")

            yield Party(result, sandbox, "peer", "patch jobs",
                        lambda rate, seconds, prefix, warm: latency(loader, seen, prefix, rate, seconds, warm),
                        lambda: None, report)


def py_spy(pids: dict[str, int]) -> list[Any]:
    """BENCH_PYSPY=dir (diagnosis only): py-spy records each of `pids` (BENCH_PYSPY_HZ times a second,
    50 by default, without pausing it) from now to `stop_py_spy`, in back-to-back one-second
    recordings of collapsed stacks, each file named by the wall time it began (dir/<name>.<time>.txt):
    a slow spell's seconds can then be compared with the others. Sampling from outside sees the work
    whether or not it holds the GIL, which an in-process sampler (`StackSampler`) cannot."""
    import subprocess

    target = os.environ.get("BENCH_PYSPY")
    if not target:
        return []
    Path(target).mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    spy = str(Path(sys.executable).parent / "py-spy")
    hz = os.environ.get("BENCH_PYSPY_HZ", "50")

    def record(name: str, pid: int) -> None:
        while not stop.is_set():
            began = time.time()
            out_file = str(Path(target, f"{name}.{began:.3f}.txt"))
            subprocess.run([spy, "record", "--nonblocking", "-r", hz, "-d", "1", "-f", "raw", "-o", out_file,
                            "--pid", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)

    threads = [threading.Thread(target=record, args=item, daemon=True) for item in pids.items()]
    for thread in threads:
        thread.start()
    return [stop, *threads]


def stop_py_spy(spies: list[Any]) -> None:
    if not spies:
        return
    stop, *threads = spies
    stop.set()
    for thread in threads:
        thread.join(timeout=10)
