"""The operators under test, each in a child process of its own: kaiwo-ray's KaiwoJob controller
hosted by an in-process `Operator` (`operator_main`) and a peer of benchmarks/peers/ (`peer_main`),
both spawned ahead so that their imports overlap the set-up, then driven over a pipe through an
`OperatorProcess` (start, drain, resync, health, stop).
"""

from __future__ import annotations

import asyncio
import cProfile
import importlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from _diagnosis import GcPauses, LoopStalls, StackSampler, toggle_profile
from _machine import MACHINE
from _runtime import CONTEXT, run_deployed

# -- the operator under test, in its own process --------------------------------------------------


def _nice_from_env() -> None:
    """BENCH_OPERATOR_NICE=n: this operator process below the sandbox and the benchmark's clients
    (before any thread starts: threads take their creator's nice value)."""
    if os.environ.get("BENCH_OPERATOR_NICE"):
        os.nice(int(os.environ["BENCH_OPERATOR_NICE"]))


def operator_main(conn: Connection, kubeconfig: str, workers: int | None) -> None:
    _nice_from_env()
    imported = time.monotonic()

    import kubernetes.aio.client  # noqa: F401  (imported by the client on first use; timed apart)
    import psutil

    from hosts.runtime.controller_host import Operator
    from kaiwo_ray.controllers import workloads  # noqa: F401
    from kaiwo_ray.controllers.manager import HostSettings

    imports_s = time.monotonic() - imported

    logging.basicConfig(level=logging.WARNING)

    gc_pauses = GcPauses()  # the collector's pauses in this process

    stalls = LoopStalls("kaiwo_ray")  # BENCH_STALLS=1: event-loop stalls over 50 ms, and where
    stacks = StackSampler("kaiwo_ray")  # BENCH_SAMPLE=1: the loop's stack 50 times a second

    async def main() -> None:
        loop = asyncio.get_running_loop()
        if os.environ.get("BENCH_STALLS"):
            stalls.start()
        if os.environ.get("BENCH_SAMPLE"):
            stacks.start()

        async def recv() -> Any:
            return await loop.run_in_executor(None, conn.recv)

        conn.send("imported")
        await recv()  # "start"
        # BENCH_PROFILE=path: a cProfile of the start and first drain, to path.<pid> (diagnosis only)
        profile_to = os.environ.get("BENCH_PROFILE")
        profiler: cProfile.Profile | None = None
        if profile_to:
            profiler = cProfile.Profile()
            profiler.enable()
        began_wall, began = time.time(), time.monotonic()
        settings = HostSettings(kubeconfig=kubeconfig, lease=False, tune_gc=True,  # as `kaiwo-ray up` runs it
                                batch_scheduling=True)
        if os.environ.get("BENCH_SETTLE_S"):  # diagnosis only: another settle window (HostSettings.coalesce_seconds)
            settings.coalesce_seconds = float(os.environ["BENCH_SETTLE_S"])
        if workers is not None:
            settings.workers = workers
        operator = Operator(["kaiwojob"], settings)
        await operator.start()
        controller = operator.host("kaiwojob").controller
        assert controller is not None
        conn.send({"began_wall": began_wall, "synced_s": time.monotonic() - began, "imports_s": imports_s})

        async def drained(stable: float = 0.3, timeout: float = 900.0) -> float:
            """Seconds since start at which the queue went (and stayed `stable` s) empty."""
            deadline = time.monotonic() + timeout
            idle_since: float | None = None
            while time.monotonic() < deadline:
                idle = len(controller.queue) == 0 and controller._in_flight == 0
                now = time.monotonic()
                if idle and idle_since is None:
                    idle_since = now
                elif not idle:
                    idle_since = None
                if idle_since is not None and now - idle_since >= stable:
                    return idle_since
                await asyncio.sleep(0.002)
            return float("nan")

        while True:
            command, *_args = await recv()
            if command == "drain":
                drained_s = await drained() - began
                if profiler is not None:
                    profiler.disable()
                    profiler.dump_stats(f"{profile_to}.{os.getpid()}")
                    profiler = None
                conn.send({"drained_s": drained_s, "reconciles": controller.stats.reconciles,
                           "errors": controller.stats.errors, "retries": controller.stats.retries,
                           "results": dict(controller.stats.results)})
            elif command == "resync":
                started = time.monotonic()
                before = controller.stats.reconciles
                controller.enqueue_all()
                conn.send({"seconds": await drained() - started, "reconciles": controller.stats.reconciles - before})
            elif command == "health":
                report = controller.health()
                report["rss_mb"] = psutil.Process().memory_info().rss / 2**20
                pool = getattr(controller.client, "_lean", None)
                report["connections_opened"] = getattr(pool, "opened", None)
                report["gc_pauses"] = gc_pauses.snapshot()
                report["stalls"] = stalls.take()
                conn.send(report)
            elif command == "profile":  # diagnosis: see _diagnosis.toggle_profile
                profiler = toggle_profile(profiler, _args[0])
                conn.send(None)
            elif command == "stacks":  # BENCH_SAMPLE: [(start, end)] -> {stack: samples}
                conn.send(stacks.between(_args[0]))
            elif command == "gc-reset":
                gc_pauses.clear()
                stalls.take()
                conn.send("reset")
            elif command == "stop":
                stalls.stop()
                await operator.stop()
                conn.send("stopped")
                return

    run_deployed(main())


class OperatorProcess:
    """An operator (ours or kopf) in a child process, spawned ahead so that its imports overlap the
    set-up; `start()` waits for them, then starts it and returns once its caches are synced."""

    def __init__(self, conn: Connection, process: Any) -> None:
        self.conn = conn
        self.process = process
        self.began_wall = 0.0
        self.synced_s = 0.0
        self.imports_s = float("nan")
        self._imported = False
        self._stopped = False

    def ask(self, *command: Any, timeout: float = 150.0) -> Any:
        self.conn.send(command)
        if not self.conn.poll(timeout):
            raise RuntimeError(f"{self.process.name} did not answer {command[0]!r} within {timeout:.0f} s")
        return self.conn.recv()

    def wait_imported(self, timeout: float = 120.0) -> None:
        if not self._imported:
            if not self.conn.poll(timeout):
                raise RuntimeError(f"{self.process.name} did not finish its imports within {timeout:.0f} s")
            self.conn.recv()
            self._imported = True

    def start(self) -> None:
        self.wait_imported()
        report = self.ask("start")
        self.began_wall, self.synced_s = report["began_wall"], report["synced_s"]
        self.imports_s = float(report.get("imports_s", float("nan")))

    def stop(self) -> None:
        if self._imported and not self._stopped and self.process.is_alive():
            self._stopped = True
            with suppress(RuntimeError, BrokenPipeError, OSError):
                self.ask("stop", timeout=20)


@contextmanager
def child_process(target: Any, args: tuple[Any, ...], name: str) -> Iterator[OperatorProcess]:
    parent, child = CONTEXT.Pipe()
    process = CONTEXT.Process(target=target, args=(child, *args), daemon=True, name=name)
    process.start()
    MACHINE.label(process.pid, f"{name} {process.pid}")
    handle = OperatorProcess(parent, process)
    try:
        yield handle
    finally:
        handle.stop()
        process.join(timeout=10)
        if process.is_alive():
            process.kill()


def operator_process(kubeconfig: Path, workers: int | None = None) -> Any:
    return child_process(operator_main, (str(kubeconfig), workers), "kaiwo-ray operator")


def peer_process(kubeconfig: Path, namespace: str, module: str) -> Any:
    return child_process(peer_main, (str(kubeconfig), namespace, module), f"peer operator ({module})")


def peer_main(conn: Connection, kubeconfig: str, namespace: str, module: str) -> None:
    _nice_from_env()
    # The floors are yardsticks for work, so they run in the CPU scheduling class our controllers run in
    # (hosts.runtime.cpu_policy), threads and all: against them the comparison is of the work each party
    # does, not of which one preempts the API server. kopf runs as its users deploy it (the default class).
    if module.startswith("floor_"):
        from hosts.runtime.cpu_policy import run_as_batch

        run_as_batch()
    os.environ["KUBECONFIG"] = kubeconfig
    import psutil

    peer = importlib.import_module(f"peers.{module}")

    conn.send("imported")
    conn.recv()  # "start"
    stop_flag, ready_flag = threading.Event(), threading.Event()
    began_wall = time.time()
    runner = threading.Thread(target=peer.run, args=(namespace, stop_flag, ready_flag), daemon=True)
    runner.start()
    ready_flag.wait(60)
    conn.send({"began_wall": began_wall, "synced_s": time.time() - began_wall})
    while True:
        command, *_args = conn.recv()
        if command == "health":
            conn.send({"rss_mb": psutil.Process().memory_info().rss / 2**20})
        elif command == "stop":
            stop_flag.set()
            runner.join(15)
            conn.send("stopped")
            return
        else:
            conn.send(None)
