"""Measuring the sandbox with the real `kubernetes` client: the floor every operator benchmark is
compared with. The server runs in its own process (`kaiwo-ray sandbox --no-cluster`), so client
and server don't share a GIL; watchers run in processes of their own for the same reason.

    from _sandbox_floor import sandbox_floor
    for line in sandbox_floor().lines(): print(line)
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TARGET_CREATES_PER_S = 400.0
TARGET_CREATE_P99_MS = 10.0
TARGET_WATCH_P99_MS = 20.0
SENT_AT = "bench.kaiwo.silogen.ai/sent-at"


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


@dataclass(slots=True)
class Figures:
    creates_per_s: float = 0.0
    create_ms: list[float] = field(default_factory=list)
    get_ms: list[float] = field(default_factory=list)
    watch_ms: list[float] = field(default_factory=list)
    watch_rate: float = 0.0
    watchers: int = 0
    server_cpu_per_create_ms: float = float("nan")
    client_cpu_per_create_ms: float = float("nan")
    load_average: float = float("nan")

    def lines(self) -> list[str]:
        def ms(values: list[float], q: float) -> str:
            return f"{percentile(values, q):.2f} ms"

        return [
            f"sandbox creates/s (1 client, ConfigMaps): {self.creates_per_s:.0f} creates/s "
            f"(target >= {TARGET_CREATES_PER_S:.0f})",
            f"sandbox create latency p50: {ms(self.create_ms, 50)}",
            f"sandbox create latency p99: {ms(self.create_ms, 99)} (target <= {TARGET_CREATE_P99_MS:.0f} ms)",
            f"sandbox get latency p50: {ms(self.get_ms, 50)}",
            f"sandbox get latency p99: {ms(self.get_ms, 99)}",
            f"sandbox watch delivery p50 ({self.watch_rate:.0f} writes/s, {self.watchers} watchers): "
            f"{ms(self.watch_ms, 50)}",
            f"sandbox watch delivery p99 ({self.watch_rate:.0f} writes/s, {self.watchers} watchers): "
            f"{ms(self.watch_ms, 99)} (target <= {TARGET_WATCH_P99_MS:.0f} ms)",
            f"sandbox server CPU per create: {self.server_cpu_per_create_ms:.2f} ms "
            "(what the server costs, independent of machine load)",
            f"client CPU per create (kubernetes client): {self.client_cpu_per_create_ms:.2f} ms",
            f"machine load average during the run: {self.load_average:.1f} on {os.cpu_count()} cores",
        ]


@dataclass(slots=True)
class ServerProcess:
    kubeconfig: Path
    pid: int

    def cpu_seconds(self) -> float:
        """User+system CPU the server process has used so far (Linux /proc)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def sandbox_process(extra_args: tuple[str, ...] = ()) -> Iterator[ServerProcess]:
    """A `kaiwo-ray sandbox --no-cluster` in a child process."""
    with tempfile.TemporaryDirectory(prefix="kaiwo-bench-") as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        process = subprocess.Popen(
            [sys.executable, "-m", "hosts.cli.main", "sandbox", "--kubeconfig", str(kubeconfig),
             "--no-cluster", *extra_args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert process.stdout is not None
            deadline = time.monotonic() + 60
            for line in process.stdout:
                if "listening on" in line:
                    break
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"sandbox did not start: {line}")
            yield ServerProcess(kubeconfig, process.pid)
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()


def _k8s() -> Any:
    """The kubernetes package, untyped here: its generated signatures want models, we pass dicts."""
    import kubernetes

    return kubernetes


def _client(kubeconfig: Path) -> Any:
    return _k8s().config.new_client_from_config(config_file=str(kubeconfig))


def measure_creates(kubeconfig: Path, count: int = 1000, namespace: str = "default",
                    server: ServerProcess | None = None) -> tuple[float, list[float], float, float]:
    """(creates per second, per-create latencies in ms, client and server CPU ms per create) for
    `count` sequential ConfigMap creates (server CPU is NaN without a `server` process)."""
    kubernetes = _k8s()
    core = kubernetes.client.CoreV1Api(_client(kubeconfig))
    prefix = f"bench-{os.getpid()}-{time.monotonic_ns() % 100000}"
    for i in range(20):  # warm up connections and caches
        core.create_namespaced_config_map(namespace, {"metadata": {"name": f"{prefix}-warm-{i}"}, "data": {"k": "v"}})
    latencies: list[float] = []
    server_cpu = server.cpu_seconds() if server is not None else float("nan")
    client_cpu = time.process_time()
    started = time.perf_counter()
    for i in range(count):
        t0 = time.perf_counter()
        core.create_namespaced_config_map(namespace, {"metadata": {"name": f"{prefix}-{i}", "labels": {"b": "1"}},
                                                      "data": {"key": "value"}})
        latencies.append((time.perf_counter() - t0) * 1000)
    elapsed = time.perf_counter() - started
    client_ms = (time.process_time() - client_cpu) / count * 1000
    server_ms = (server.cpu_seconds() - server_cpu) / count * 1000 if server is not None else float("nan")
    return count / elapsed, latencies, client_ms, server_ms


def measure_gets(kubeconfig: Path, count: int = 1000, namespace: str = "default") -> list[float]:
    kubernetes = _k8s()
    core = kubernetes.client.CoreV1Api(_client(kubeconfig))
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "bench-get"}, "data": {"key": "value"}})
    latencies: list[float] = []
    for _ in range(count):
        t0 = time.perf_counter()
        core.read_namespaced_config_map("bench-get", namespace)
        latencies.append((time.perf_counter() - t0) * 1000)
    return latencies


def _watcher(kubeconfig: str, namespace: str, resource_version: str, expected: int,
             results: Any, ready: Any) -> None:
    kubernetes = _k8s()
    core = kubernetes.client.CoreV1Api(_client(Path(kubeconfig)))
    delays: list[float] = []
    watcher = kubernetes.watch.Watch()
    ready.set()
    # deserialize=False: plain JSON events, as the operator's informers consume them (building
    # pydantic models per event would measure the client's model layer, not delivery).
    for event in watcher.stream(core.list_namespaced_config_map, namespace, resource_version=resource_version,
                                label_selector="bench=watch", timeout_seconds=120, deserialize=False):
        now = time.time()
        annotations = (event["object"].get("metadata") or {}).get("annotations") or {}
        if event["type"] == "ADDED" and SENT_AT in annotations:
            delays.append((now - float(annotations[SENT_AT])) * 1000)
            if len(delays) >= expected:
                watcher.stop()
    results.put(delays)


def measure_watch_delivery(kubeconfig: Path, *, rate: float = 200.0, seconds: float = 5.0, watchers: int = 3,
                           namespace: str = "default") -> list[float]:
    """Delay (ms) from just before a create is sent to its ADDED event reaching each watcher,
    with one writer pacing `rate` creates/s and `watchers` watcher processes."""
    kubernetes = _k8s()
    core = kubernetes.client.CoreV1Api(_client(kubeconfig))
    rv = core.list_namespaced_config_map(namespace, limit=1).metadata.resource_version
    total = int(rate * seconds)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    readies = [context.Event() for _ in range(watchers)]
    processes = [context.Process(target=_watcher, args=(str(kubeconfig), namespace, rv, total, results, ready),
                                 daemon=True) for ready in readies]
    for process in processes:
        process.start()
    for ready in readies:
        ready.wait(60)
    time.sleep(1.0)  # let the watch requests reach the server (a pacing gap, not synchronisation)
    interval = 1.0 / rate
    next_at = time.perf_counter()
    for i in range(total):
        now = time.perf_counter()
        if now < next_at:
            time.sleep(next_at - now)
        next_at += interval
        core.create_namespaced_config_map(namespace, {"metadata": {
            "name": f"bench-watch-{os.getpid()}-{i}", "labels": {"bench": "watch"},
            "annotations": {SENT_AT: repr(time.time())}}})
    delays: list[float] = []
    for _ in processes:
        delays.extend(results.get(timeout=120))
    for process in processes:
        process.join(timeout=10)
    return delays


def sandbox_floor(*, creates: int = 1000, gets: int = 1000, watch_seconds: float = 5.0) -> Figures:
    """Start a sandbox process and measure every figure against it."""
    figures = Figures(watch_rate=200.0, watchers=3)
    with sandbox_process() as server:
        kubeconfig = server.kubeconfig
        (figures.creates_per_s, figures.create_ms, figures.client_cpu_per_create_ms,
         figures.server_cpu_per_create_ms) = measure_creates(kubeconfig, creates, server=server)
        figures.get_ms = measure_gets(kubeconfig, gets)
        figures.watch_ms = measure_watch_delivery(kubeconfig, rate=figures.watch_rate, seconds=watch_seconds,
                                                  watchers=figures.watchers)
    figures.load_average = os.getloadavg()[0]
    return figures


def summary(values: list[float]) -> str:
    return f"n={len(values)} mean={statistics.fmean(values):.2f} ms" if values else "n=0"
