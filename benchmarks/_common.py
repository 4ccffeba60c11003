"""Shared pieces of the operator benchmarks: a sandbox in a child process (with per-user kubeconfigs
so the audit log tells who wrote what), a Job watcher in a child process that timestamps each Job's
first watch event, a paced KaiwoJob creator, and the queue objects a KaiwoJob needs.

Every actor of a measurement runs in its own process (sandbox, operator, watcher, load client), so
none of them shares a GIL with another; wall-clock timestamps (`time.time()`) are compared across
processes on the same machine.
"""

from __future__ import annotations

import asyncio
import bisect
import cProfile
import gc
import math
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

GROUP, VERSION = "kaiwo.silogen.ai", "v1alpha1"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
CONTEXT = multiprocessing.get_context("spawn")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def quantile_interval(values: list[float], q: float, z: float = 1.645) -> tuple[float, float]:
    """The order statistics between which the true q-th percentile lies with about 90% confidence (for
    the default z), distribution-free: how many samples fall below the true percentile is
    binomial(n, q/100), so [x_(r), x_(s)] with r, s that binomial's mean -/+ z standard deviations
    (Conover, the normal approximation), ranks rounded outwards. Where s is past the worst sample the
    upper end is unbounded (inf): 200 samples cannot bound a p99 from above, 400 can."""
    if not values:
        return float("nan"), float("nan")
    ordered = sorted(values)
    n, p = len(ordered), q / 100
    half = z * math.sqrt(n * p * (1 - p))
    low = max(1, math.floor(n * p - half))
    high = math.ceil(n * p + half)
    return ordered[low - 1], (ordered[high - 1] if high <= n else math.inf)


def ratio_interval(mine: list[float], theirs: list[float], q: float) -> tuple[float, float]:
    """The range the ratio of two samples' q-th percentiles spans when each percentile is anywhere in
    its `quantile_interval`: how far one run's ratio can be from the parties' true one by sampling
    alone (spells shared by the samples widen it further). The upper end is inf where our percentile
    is unbounded above, the lower end 0 where theirs is."""
    mine_low, mine_high = quantile_interval(mine, q)
    their_low, their_high = quantile_interval(theirs, q)
    return mine_low / their_high, mine_high / their_low


PATH_PARTS = ("create -> stored", "stored -> child stored", "child stored -> watcher")
"""The parts of a create -> child sample's path, split at the sandbox's audit stamps."""


@dataclass
class PathOverlaps:
    """`path_overlaps`' answer: per part of the path (`PATH_PARTS`), the latencies (ms) of the samples
    another write met there and of the rest; how many samples were counted; which writes met them."""

    parts: list[tuple[list[float], list[float]]]
    counted: int
    writes: Counter[str]


def path_overlaps(samples: list[tuple[str, float, float, float]], stored: dict[str, float],
                  child: dict[str, float], writes: list[tuple[float, str, str]]) -> PathOverlaps:
    """Which samples another write of the operator met, and where. `samples`: (KaiwoJob name, sent, seen
    by the watcher, ms); `stored` and `child`: when the API server answered each KaiwoJob's create and
    its child's write; `writes`: every write of the operator, (answered, "verb resource[/sub]", name).
    A write answered strictly inside a part counts (the parts are open), so a sample's own child write,
    which ends its second part and starts its third, counts in neither. Samples without both stamps
    are left out."""
    ordered = sorted(writes)
    times = [t for t, _what, _name in ordered]
    which: Counter[str] = Counter()

    def met(start: float, end: float) -> bool:
        first, last = bisect.bisect_right(times, start), bisect.bisect_left(times, end)
        which.update(what for _t, what, _name in ordered[first:last])
        return first < last

    parts: list[tuple[list[float], list[float]]] = [([], []) for _ in PATH_PARTS]
    counted = 0
    for name, sent, seen, ms in samples:
        if name not in stored or name not in child:
            continue
        counted += 1
        spans = ((sent, stored[name]), (stored[name], child[name]), (child[name], seen))
        for (hit, rest), (start, end) in zip(parts, spans, strict=True):
            (hit if met(start, end) else rest).append(ms)
    return PathOverlaps(parts, counted, which)


def pinned_apart() -> bool:
    """Whether `sandbox_process` pins each sandbox apart (`pin_apart`): BENCH_PIN=1 asks for it, 0 (or
    unset) does not. benchmarks/operator.py asks for it unless BENCH_PIN says otherwise."""
    return os.environ.get("BENCH_PIN", "0").strip().lower() not in ("", "0", "false", "no")


def pin_apart(sandbox_pid: int) -> None:
    """BENCH_PIN=1: the sandbox on the first CPU alone, this process (and so every party and client it
    starts from now on) on the others, as if the API server had a machine of its own, as it does on a
    cluster. Shared, an operator woken by an answer is placed on the API server's CPU and runs there
    first (wake-affine placement, wakeup preemption), so the API server's next writes wait for the
    operator's burst: at 20 CR/s that held the child Job's watch frame 1.4-1.8 ms after the create was
    answered for kaiwo-ray and 0.7-1.0 ms for the floor operator; pinned, 0.41-0.50 ms for both. On one
    CPU nothing is pinned."""
    if not _CPU_SPLIT:  # the split is made once: every later sandbox goes to the same first CPU
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            return
        _CPU_SPLIT.extend(({cpus[0]}, set(cpus[1:])))
        os.sched_setaffinity(0, _CPU_SPLIT[1])
    os.sched_setaffinity(sandbox_pid, _CPU_SPLIT[0])


_CPU_SPLIT: list[set[int]] = []  # (the sandboxes' CPUs, everything else's), once pin_apart has run


def deployed_loop() -> asyncio.AbstractEventLoop:
    """The event loop a party runs on when deployed, for every process here: uvloop where installed.
    Ray creates each async actor's loop with it (ray._private.async_compat.get_new_event_loop, unless
    RAY_USE_UVLOOP=0), so our controllers run on it in production; the `kaiwo-ray sandbox` CLI serves on
    it (kaiwo_sandbox.instance.new_event_loop); `kopf run` picks it when installed. Plain asyncio here
    measured every party on a loop none of them is deployed on (and the sandbox ~15% slower)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    if os.environ.get("RAY_USE_UVLOOP", "1").lower() in ("0", "false"):
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run_deployed(main: Any) -> Any:
    """`asyncio.run(main)` on `deployed_loop()`."""
    with asyncio.Runner(loop_factory=deployed_loop) as runner:
        return runner.run(main)


def k8s() -> Any:
    """The kubernetes package, untyped here: its generated signatures want models, we pass dicts."""
    import kubernetes

    return kubernetes


def api_client(kubeconfig: Path) -> Any:
    return k8s().config.new_client_from_config(config_file=str(kubeconfig))


class LoopStalls:
    """Event-loop stalls in this process (BENCH_STALLS=1, diagnosis only): a watchdog thread polls a
    heartbeat the loop beats every 5 ms; when the loop is late by more than 50 ms it records how late and
    where the loop's thread was (its innermost frame in `ours`, else the innermost). Where the thread is
    when the watchdog gets the GIL back is the first point the loop let go of it, not always where it
    was stuck. The sampler takes the GIL 100 times a second: off by default."""

    def __init__(self, ours: str) -> None:
        self._ours = ours
        self._beat = time.monotonic()
        self._thread = threading.get_ident()
        self.where: Counter[str] = Counter()
        self.stalls: list[tuple[float, float]] = []  # (wall time the watchdog saw it, ms late)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """On the loop's thread, with the loop running."""
        self._thread = threading.get_ident()
        self._task = asyncio.get_running_loop().create_task(self._heartbeat(), name="bench-heartbeat")
        threading.Thread(target=self._watch, daemon=True, name="bench-stall-watchdog").start()

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _heartbeat(self) -> None:
        while True:
            self._beat = time.monotonic()
            await asyncio.sleep(0.005)

    def _watch(self) -> None:
        seen_beat = 0.0
        while True:
            time.sleep(0.01)
            beat = self._beat
            lag = time.monotonic() - beat
            if lag < 0.05 or beat == seen_beat:
                continue
            seen_beat = beat
            frame = sys._current_frames().get(self._thread)
            where, inner = "", ""
            while frame is not None:
                name = f"{frame.f_code.co_filename.rsplit('/', 2)[-1]}:{frame.f_code.co_name}:{frame.f_lineno}"
                inner = inner or name
                if self._ours in frame.f_code.co_filename and not where:
                    where = name
                frame = frame.f_back
            self.where[f"{where} <- {inner}"] += 1
            self.stalls.append((time.time(), lag * 1000))

    def take(self) -> tuple[int, float, list[tuple[str, int]], list[tuple[float, float]]]:
        """(count, longest ms, the most frequent places, the 5 longest as (wall time, ms)) since the last take."""
        stalls, where = self.stalls, self.where
        self.stalls, self.where = [], Counter()
        return (len(stalls), max((ms for _, ms in stalls), default=0.0), where.most_common(6),
                sorted(stalls, key=lambda s: -s[1])[:5])


_MachineSample = tuple[float, tuple[int, int], dict[int, tuple[int, int, int, int]]]
_REST_OF_MACHINE = "the rest of the machine"


class MachineSampler:
    """Who used the machine when: the CPU time the hypervisor took from this VM (/proc/stat `steal`) and
    each of this process's descendants' CPU time (/proc/<pid>/stat), read 20 times a second on a daemon
    thread (about 0.1 ms a read), so a slow spell can be pinned on a process, or on the host: a VM whose
    vCPU is not running stalls every process on it at once, the clocks keep going, and every latency
    measured across the gap grows by it. Resolution: one clock tick (10 ms)."""

    def __init__(self, interval: float = 0.05) -> None:
        self._interval = interval
        self._tick_ms = 1000.0 / os.sysconf("SC_CLK_TCK")
        # (wall time, (steal, busy) ticks since boot over all CPUs, {pid: (user ticks, system ticks, minor
        # page faults, its threads' run-queue wait ns) since it started})
        self._samples: list[_MachineSample] = []
        self._labels: dict[int, str] = {os.getpid(): "benchmark"}
        self._probes: list[tuple[float, int]] = []  # (wall time, thread CPU ns of the fixed probe)
        self._memory_probes: list[tuple[float, int]] = []  # (wall time, thread CPU ns of the memory probe)
        self._started = False

    def label(self, pid: int | None, text: str) -> None:
        if pid is not None:
            self._labels[pid] = text

    def start(self) -> MachineSampler:
        if not self._started:
            self._started = True
            threading.Thread(target=self._sample, daemon=True, name="bench-machine-sampler").start()
        return self

    @staticmethod
    def _machine() -> tuple[int, int]:
        """(steal, busy) ticks since boot over all CPUs; busy: user, nice, system, irq and softirq."""
        try:
            with open("/proc/stat", encoding="ascii") as stat:
                fields = stat.readline().split()
        except OSError:
            return 0, 0
        if len(fields) < 9 or fields[0] != "cpu":
            return 0, 0
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[1:9])
        return steal, user + nice + system + irq + softirq

    @staticmethod
    def _probe() -> int:
        """This thread's CPU time (ns) for a fixed bit of interpreter work (about 90 us): when the host
        slows this VM's CPUs without taking them (a busy sibling hyperthread, a lower clock), the
        same work costs more CPU time, which neither steal nor any process's CPU share shows."""
        began = time.thread_time_ns()
        total = 0
        for i in range(1_000):
            total += i * i
        return time.thread_time_ns() - began + (total & 0)

    @staticmethod
    def _memory_probe_data() -> tuple[Any, Any]:
        """A 64 MB array (eight times the L3 cache here) and 5,000 fixed random places in it."""
        import numpy

        return (numpy.arange(8 * 2**20, dtype=numpy.int64),
                numpy.random.default_rng(7).integers(0, 8 * 2**20, 5_000))

    @staticmethod
    def _memory_probe(data: tuple[Any, Any]) -> int:
        """This thread's CPU time (ns) for 5,000 reads at random places in memory (about 0.1 ms): the
        fixed probe runs from the caches, this one from memory, so it slows when something else on the
        host takes the memory bandwidth or the shared cache, which a large heap's every request feels."""
        array, places = data
        began = time.thread_time_ns()
        array.take(places).sum()
        return time.thread_time_ns() - began

    @staticmethod
    def _cpu_ticks(pid: int) -> tuple[int, int, int, int] | None:
        """(utime, stime, minflt, run-queue wait ns of its threads): system time and minor faults tell
        kernel work (a heap growing page by page, TLS handshakes' syscalls) from the interpreter's own,
        and the wait (/proc/<pid>/task/<tid>/schedstat: time runnable but not running) tells threads
        that had work but no CPU, because other processes had both, from ones that were busy themselves."""
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            waited = 0
            for tid in os.listdir(f"/proc/{pid}/task"):
                with suppress(OSError), open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as schedstat:
                    waited += int(schedstat.read().split()[1])
        except (OSError, IndexError, ValueError):
            return None
        return int(fields[11]), int(fields[12]), int(fields[7]), waited

    def _sample(self) -> None:
        import psutil

        me = psutil.Process()
        pids: list[int] = [me.pid]
        refreshed = 0.0
        memory = self._memory_probe_data()
        while True:
            now = time.time()
            if now - refreshed > 1.0:
                with suppress(psutil.Error):
                    pids = [me.pid, *(child.pid for child in me.children(recursive=True))]
                refreshed = now
            cpu = {pid: ticks for pid in pids if (ticks := self._cpu_ticks(pid)) is not None}
            self._samples.append((now, self._machine(), cpu))
            self._probes.append((now, self._probe()))
            self._memory_probes.append((now, self._memory_probe(memory)))
            time.sleep(self._interval)

    def _around(self, start: float, end: float) -> tuple[_MachineSample, _MachineSample] | None:
        samples = list(self._samples)
        before = [s for s in samples if s[0] <= start] or samples[:1]
        after = [s for s in samples if s[0] >= end] or samples[-1:]
        return (before[-1], after[0]) if before and after and after[0][0] > before[-1][0] else None

    def steal_ms(self, start: float, end: float) -> float:
        """Steal (ms, summed over the CPUs) between two wall times, widened to the samples around them."""
        around = self._around(start, end)
        return (around[1][1][0] - around[0][1][0]) * self._tick_ms if around else 0.0

    def busiest(self, start: float, end: float, top: int = 4) -> list[tuple[str, float, float, int, float]]:
        """The processes that used the most CPU between two wall times: (label, ms, of which system ms,
        minor page faults, ms its threads waited for a CPU), most first, then what the rest of the
        machine used meanwhile."""
        around = self._around(start, end)
        if around is None:
            return []
        (_, (_, busy0), cpu0), (_, (_, busy1), cpu1) = around
        used = [(self._labels.get(pid, f"pid {pid}"), *self._used(cpu0.get(pid, now), now))
                for pid, now in cpu1.items()]
        # the rest of the machine's busy time: other processes, kernel threads, interrupts
        rest = (busy1 - busy0) * self._tick_ms - sum(u[1] for u in used)
        ranked = sorted((u for u in used if u[1] > 0), key=lambda u: -u[1])[:top]
        return [*ranked, (_REST_OF_MACHINE, max(rest, 0.0), 0.0, 0, 0.0)]

    def _used(self, before: tuple[int, int, int, int], after: tuple[int, int, int, int]) -> tuple[float, float, int, float]:
        """What a process used between two of its samples: (CPU ms, of which system ms, minor page faults,
        ms its threads waited for a CPU; a thread that ended meanwhile takes its wait with it)."""
        (user0, system0, faults0, wait0), (user1, system1, faults1, wait1) = before, after
        return ((user1 + system1 - user0 - system0) * self._tick_ms, (system1 - system0) * self._tick_ms,
                faults1 - faults0, (wait1 - wait0) / 1e6)

    def waited_ms(self, pid: int, start: float, end: float) -> tuple[float, float]:
        """(ms a process's threads waited for a CPU, ms of CPU it used) between two wall times."""
        around = self._around(start, end)
        if around is None or pid not in around[0][2] or pid not in around[1][2]:
            return 0.0, 0.0
        cpu_ms, _, _, waited = self._used(around[0][2][pid], around[1][2][pid])
        return waited, cpu_ms

    def slowdown(self, start: float, end: float, *, memory: bool = False) -> float | None:
        """The probe's median CPU cost between two wall times over its median over the whole run:
        1.0 is the CPU (or with `memory`, the memory) at its usual speed, 1.5 a third slower."""
        probes = list(self._memory_probes if memory else self._probes)
        inside = sorted(ns for t, ns in probes if start <= t <= end)
        every = sorted(ns for _, ns in probes)
        if not inside or not every:
            return None
        return inside[len(inside) // 2] / max(every[len(every) // 2], 1)

    def during(self, start: float, end: float) -> str:
        """One phrase: the host's steal, the CPU's speed and the busiest processes over a span (a slow
        spell)."""
        busy = ", ".join(f"{label} {ms:.0f}" + (f" (system {system:.0f}, {faults} page faults, waited for a CPU "
                                                  f"{waited:.0f})" if label != _REST_OF_MACHINE else "")
                         for label, ms, system, faults, waited in self.busiest(start, end))
        slowdown, memory = self.slowdown(start, end), self.slowdown(start, end, memory=True)
        speed = f", a fixed probe's CPU cost x{slowdown:.2f} of its run median" if slowdown is not None else ""
        speed += f", a memory probe's x{memory:.2f}" if memory is not None else ""
        return f"host steal {self.steal_ms(start, end):.0f} ms{speed}, CPU ms {busy or 'none'}"


MACHINE = MachineSampler()  # started by a benchmark's main (MACHINE.start())


class StackSampler:
    """BENCH_SAMPLE=1 (diagnosis only): the event loop's thread's stack, 50 times a second, kept with its
    wall time, so that what a process did during a slow spell can be set beside what it does otherwise.
    A sample is its innermost frame, the two above it and the innermost frame in `ours`; an idle loop
    samples as `selectors.py:select`. About 30 us a sample."""

    def __init__(self, ours: str, interval: float = 0.02) -> None:
        self._ours = ours
        self._interval = interval
        self._thread = threading.get_ident()
        self.samples: list[tuple[float, str]] = []

    def start(self) -> None:
        """On the loop's thread."""
        self._thread = threading.get_ident()
        threading.Thread(target=self._run, daemon=True, name="bench-stack-sampler").start()

    def _key(self, frame: Any) -> str:
        names: list[str] = []
        ours = ""
        while frame is not None:
            code = frame.f_code
            name = f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_name}"
            if len(names) < 3:
                names.append(name)
            if not ours and self._ours in code.co_filename:
                ours = f"{name}:{frame.f_lineno}"
            if len(names) >= 3 and ours:
                break
            frame = frame.f_back
        return " < ".join(names) + (f" [{ours}]" if ours and ours.rsplit(":", 1)[0] not in names else "")

    def _run(self) -> None:
        while True:
            time.sleep(self._interval)
            frame = sys._current_frames().get(self._thread)
            self.samples.append((time.time(), self._key(frame)))

    def between(self, spans: list[tuple[float, float]]) -> dict[str, int]:
        """Samples by stack within any of `spans` (wall times)."""
        counts: Counter[str] = Counter()
        for t, key in list(self.samples):
            if any(a <= t <= b for a, b in spans):
                counts[key] += 1
        return dict(counts)


def stacks_line(who: str, spell: dict[str, int], whole: dict[str, int], top: int = 6) -> str:
    """A process's sampled stacks in a spell against over the whole measurement, the ones that gained
    most first: "share in the spell / share overall"."""
    spell_n, whole_n = max(sum(spell.values()), 1), max(sum(whole.values()), 1)
    gained = sorted(spell, key=lambda k: -(spell[k] / spell_n - whole.get(k, 0) / whole_n))[:top]
    parts = ", ".join(f"{k} {100 * spell[k] / spell_n:.0f}%/{100 * whole.get(k, 0) / whole_n:.0f}%"
                      for k in gained)
    return f"    ({who}, sampled stacks in the worst spell / over the 100 CR/s slices ({spell_n} samples): {parts})"


def stalls_line(who: str, taken: tuple[int, float, list[tuple[str, int]], list[tuple[float, float]]],
                since: float) -> str:
    """`LoopStalls.take()` as a report line; times relative to `since` (the first 100 CR/s sample)."""
    count, longest, where, worst = taken
    at = ", ".join(f"{ms:.0f} ms at t={t - since:.1f} s" for t, ms in worst)
    return (f"  ({who}: event-loop stalls over 50 ms during the latency runs: {count}, longest {longest:.0f} ms"
            f"{'; ' + at if at else ''}; sampled where: {where})")


class GcPauses:
    """The cyclic collector's pauses in this process, by generation: (count, total ms, longest ms)."""

    LONG_MS = 10.0  # pauses this long are also kept one by one, with when they began (`long`)

    def __init__(self) -> None:
        self._rows: dict[int, list[float]] = {}
        self._began = 0.0
        self._began_wall = 0.0
        self.long: list[tuple[float, float]] = []  # (wall time it began, ms)
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            self._began_wall = time.time()
            return
        row = self._rows.setdefault(info["generation"], [0, 0.0, 0.0])
        took = (time.perf_counter() - self._began) * 1000
        row[0] += 1
        row[1] += took
        row[2] = max(row[2], took)
        if took >= self.LONG_MS:
            self.long.append((self._began_wall, took))

    def snapshot(self) -> dict[int, tuple[float, ...]]:
        return {gen: tuple(row) for gen, row in sorted(self._rows.items())}

    def clear(self) -> None:
        self._rows.clear()
        self.long.clear()

    def close(self) -> None:
        """Stop recording (what was recorded stays readable)."""
        gc.callbacks.remove(self._on_gc)

    def take(self) -> dict[int, tuple[float, ...]]:
        """Since the last take (or clear), then reset."""
        taken = self.snapshot()
        self.clear()
        return taken


# -- the sandbox process --------------------------------------------------------------------------


def sized_nodes(cpu_nodes: int = 1) -> list[dict[str, Any]]:
    """The sandbox's default nodes with `cpu_nodes` CPU nodes in all: copies of the first, renamed,
    each with its own address, pod CIDR and machine id. A node holds 110 pods, so a load that keeps
    many pods running (services) needs more than the one CPU node the default cluster has."""
    from kaiwo_ray.nodes import cpu_node, default_nodes

    nodes = default_nodes()
    for n in range(2, cpu_nodes + 1):
        node = cpu_node(f"cpu-epyc-{n:02d}", f"10.0.4.{n}", uid_suffix=f"{n:02x}")
        # the default pod CIDRs come from the address and repeat every 16 nodes: one range each
        node["spec"] = {"podCIDR": f"10.245.{n}.0/24", "podCIDRs": [f"10.245.{n}.0/24"]}
        node["status"]["nodeInfo"]["bootID"] = f"00000000-0000-4000-8000-{n:012d}"
        nodes.append(node)
    return nodes


def _sandbox_main(conn: Connection, workdir: str, cluster: bool | list[str], time_factor: float,
                  users: list[str], state: bool = False, cpu_nodes: int = 1) -> None:
    import psutil

    from hosts.runtime.gc_tuning import tune_for_long_lived_caches
    from kaiwo_ray.api.config import KaiwoConfigSpec
    from kaiwo_ray.api.crd import all_crds
    from kaiwo_ray.nodes import with_pool_labels
    from kaiwo_sandbox.apiserver.audit import AuditRecord
    from kaiwo_sandbox.apiserver.auth.authn import AUTHENTICATED, UserInfo
    from kaiwo_sandbox.contracts import WatchEvent
    from kaiwo_sandbox.instance import Sandbox, SandboxConfig, write_kubeconfig

    gc_pauses = GcPauses()  # the collector's pauses in the sandbox's process
    # every committed change, the simulated cluster's own included (the audit log has only HTTP
    # requests), counted per 100 ms: {(tenth of a second, "TYPE resource"): count}
    store_changes: Counter[tuple[int, str]] = Counter()

    async def main() -> None:
        admin = Path(workdir) / "admin.kubeconfig"
        # the node-pool labels the KaiwoQueueConfig controller would have put on the nodes
        nodes = with_pool_labels(sized_nodes(cpu_nodes), KaiwoConfigSpec())
        config = SandboxConfig(nodes=nodes, cluster=cluster, time_factor=time_factor, kubeconfig_path=admin,
                               extra_crds=list(all_crds()), state_dir=Path(workdir) / "state" if state else None)
        sandbox = Sandbox(config)
        await sandbox.start()
        tune_for_long_lived_caches(freeze_after=0)  # as `kaiwo-ray sandbox` runs it
        stalls = LoopStalls("kaiwo_sandbox")
        if os.environ.get("BENCH_STALLS"):
            stalls.start()
        stacks = StackSampler("kaiwo_sandbox")
        if os.environ.get("BENCH_SAMPLE"):
            stacks.start()

        def count_change(event: WatchEvent) -> None:
            store_changes[(int(time.time() * 10), f"{event.type} {event.gvr.resource}")] += 1

        sandbox.store.subscribe(count_change)
        paths = {"admin": str(admin)}
        tokens: dict[str, str] = {}
        for user in users:
            path = Path(workdir) / f"{user}.kubeconfig"
            tokens[user] = sandbox.mint_token(user)
            write_kubeconfig(path, sandbox.url, tokens[user], sandbox.cert.cert_pem if sandbox.cert else None)
            paths[user] = str(path)
        conn.send(paths)
        process = psutil.Process()
        loop = asyncio.get_running_loop()
        earlier: list[AuditRecord] = []  # the audit records of the incarnations before a restart
        fault_rules: list[dict[str, Any]] = []  # applied again after a restart
        earlier_hits: Counter[int] = Counter()  # requests the rules hit before a restart
        profiler: cProfile.Profile | None = None  # diagnosis only: the "profile" command

        def records(user: str) -> list[AuditRecord]:
            return [r for r in earlier if r.user == user] + sandbox.audit.records(user=user)

        def written(user: str, since: float) -> list[AuditRecord]:
            """`user`'s successful writes since `since`."""
            return [r for r in records(user) if r.verb in WRITE_VERBS and r.timestamp >= since and r.code < 300]

        def what(r: AuditRecord) -> str:
            return f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}"

        def by_tenth(counted: list[tuple[tuple[int, str], int]], start: float, end: float) -> dict[int, dict[str, int]]:
            """{tenth: {what: n}} for the tenths of a second from `start`'s to `end`'s (int(wall time * 10))."""
            series: dict[int, Counter[str]] = {}
            for (tenth, key), n in counted:
                if int(start * 10) <= tenth <= int(end * 10):
                    series.setdefault(tenth, Counter())[key] += n
            return {tenth: dict(keys) for tenth, keys in series.items()}

        while True:
            command, *args = await loop.run_in_executor(None, conn.recv)
            if command == "stop":
                break
            if command == "rss_mb":
                conn.send(process.memory_info().rss / 2**20)
            elif command == "cpu_s":
                times = process.cpu_times()
                conn.send(times.user + times.system)
            elif command == "writes":  # (user, since timestamp) -> [(verb, resource, subresource, ns, name)]
                conn.send([(r.verb, r.resource, r.subresource, r.namespace, r.name) for r in written(*args)])
            elif command == "timed_writes":  # (user, since) -> [(timestamp, "verb resource[/sub]", name)]
                conn.send([(r.timestamp, what(r), r.name) for r in written(*args)])
            elif command == "write_counts":  # (user, since) -> {"verb resource[/sub]": count} of successful writes
                conn.send(dict(Counter(what(r) for r in written(*args))))
            elif command == "requests":  # (user, since) -> {"verb resource[/sub]": count}, every verb
                user, since = args
                conn.send(dict(Counter(what(r) for r in records(user) if r.timestamp >= since)))
            elif command == "traffic":  # (start, end) -> {"user verb resource[/sub]": count}, every user
                start, end = args
                conn.send(dict(Counter(f"{r.user} {what(r)}" for r in [*earlier, *sandbox.audit.records()]
                                       if start <= r.timestamp <= end)))
            elif command == "store_changes_by_tenth":  # (start, end) -> {tenth: {"TYPE resource": n}}
                conn.send(by_tenth(list(store_changes.items()), *args))
            elif command == "traffic_by_tenth":  # (start, end) -> {tenth: {"user verb resource[/sub]": n}}
                first, last = int(args[0] * 10), int(args[1] * 10)
                conn.send(by_tenth([((tenth, f"{r.user} {what(r)}"), 1) for r in [*earlier, *sandbox.audit.records()]
                                    if first <= (tenth := int(r.timestamp * 10)) <= last], *args))
            elif command == "connections_made":  # (start, end) -> connections the lean front accepted then
                start, end = args
                conn.send(sum(1 for t in sandbox.lean.made_at if start <= t <= end))
            elif command == "failed_writes":  # user -> {"code verb resource[/sub]": count} of writes answered >= 400
                conn.send(dict(Counter(f"{r.code} {what(r)}"
                                       for r in records(args[0]) if r.verb in WRITE_VERBS and r.code >= 400)))
            elif command == "gc_pauses":  # since the last ask, then reset
                conn.send(gc_pauses.take())
            elif command == "stalls":  # BENCH_STALLS: since the last ask, then reset
                conn.send(stalls.take())
            elif command == "stacks":  # BENCH_SAMPLE: [(start, end)] -> {stack: samples}
                conn.send(stacks.between(args[0]))
            elif command == "errors":
                conn.send(sandbox.cluster.errors if sandbox.cluster else 0)
            elif command == "profile":  # diagnosis: see toggle_profile
                profiler = toggle_profile(profiler, args[0])
                conn.send(None)
            elif command == "seed":  # [(group, version, resource, object)] -> seconds it took
                conn.send(_seed(sandbox.store, args[0]))
            elif command == "seed_unrelated":  # (count, kinds) -> seconds it took
                conn.send(_seed(sandbox.store, unrelated_objects(*args)))
            elif command == "faults":  # [FaultInjector.add_json specs]: replace the rules (kept across restarts)
                fault_rules = list(args[0])
                for rule in sandbox.faults.rules():
                    earlier_hits[rule.code] += rule.hits
                sandbox.faults.clear()
                conn.send([sandbox.faults.add_json(spec) for spec in fault_rules])
            elif command == "fault_hits":  # code -> requests hit
                hits = Counter(earlier_hits)
                for rule in sandbox.faults.rules():
                    hits[rule.code] += rule.hits
                conn.send(dict(hits))
            elif command == "cut_watches":  # (expire: bool) -> streams cut; expire: every resumed watch gets 410
                cut = sandbox.faults.cut_watches()
                if args[0]:
                    sandbox.faults.expire_next(max(cut, 1))
                conn.send(cut)
            elif command == "restart":  # stop, then start from --state on the same port and tokens
                began = time.perf_counter()
                earlier.extend(sandbox.audit.records())
                for rule in sandbox.faults.rules():
                    earlier_hits[rule.code] += rule.hits
                config.port = sandbox.port
                await sandbox.stop()
                sandbox = Sandbox(config)
                await sandbox.start()
                for user, token in tokens.items():
                    sandbox.access.authn.add_static(token, UserInfo(user, (AUTHENTICATED,)))
                for spec in fault_rules:
                    sandbox.faults.add_json(spec)
                conn.send(time.perf_counter() - began)
            else:
                conn.send(None)
        await sandbox.stop()
        conn.send("stopped")

    run_deployed(main())


def toggle_profile(profiler: cProfile.Profile | None, path: str | None) -> cProfile.Profile | None:
    """The "profile" command of the benchmark's child processes (diagnosis only): no path starts a
    cProfile of the process; a path stops the running one and dumps it there. Returns the running one."""
    if path is None:
        started = cProfile.Profile()
        started.enable()
        return started
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(path)
    return None


def _seed(store: Any, objects: Any) -> float:
    """Create `objects` straight in the store, in the sandbox's process: what 100,000 HTTP creates
    would leave (defaulted, validated, with a resourceVersion and watch history), in a fraction of the
    time; the audit log does not see them, and they are all created by the loader's user."""
    from kaiwo_sandbox.contracts import GVR as SandboxGVR

    began = time.perf_counter()
    for group, version, resource, obj in objects:
        store.create_owned(SandboxGVR(group, version, resource), obj, field_manager="seed", user="seed")
    return time.perf_counter() - began


# what `unrelated_objects` makes, round robin; Pods and Jobs only where no simulated cluster would run them
UNRELATED_KINDS = ("configmaps", "secrets", "pods", "jobs")
UNRELATED_NAMESPACES = 10


def unrelated_objects(count: int, kinds: tuple[str, ...] = UNRELATED_KINDS, first: int = 0,
                      namespaces: int = UNRELATED_NAMESPACES) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """`count` objects no operator here owns (numbered from `first`), round robin over `kinds`, in the
    namespaces other-0..9 (created along with the first batch), labelled as an ordinary app, never for
    kaiwo: the rest of a busy cluster, which an operator's label-selected watches and lists must skip at
    the API server's cost, not its own."""
    for n in range(namespaces if first == 0 else 0):
        yield "", "v1", "namespaces", {"metadata": {"name": f"other-{n}"}}
    labels = {"app.kubernetes.io/name": "unrelated", "tier": "backend"}
    container = {"name": "app", "image": "registry.example.com/app:1.2.3", "command": ["/bin/app", "--serve"],
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}
    for i in range(first, first + count):
        kind = kinds[i % len(kinds)]
        meta = {"name": f"unrelated-{i}", "namespace": f"other-{i % namespaces}", "labels": dict(labels)}
        if kind == "configmaps":
            yield "", "v1", kind, {"metadata": meta, "data": {"config.yaml": f"replicas: {i}\nlevel: info\n" * 4}}
        elif kind == "secrets":
            yield "", "v1", kind, {"metadata": meta, "type": "Opaque", "data": {"token": "c2VjcmV0LXZhbHVl" * 4}}
        elif kind == "pods":
            yield "", "v1", kind, {"metadata": meta, "spec": {"containers": [dict(container)],
                                                             "restartPolicy": "Always"}}
        else:
            yield "batch", "v1", kind, {"metadata": meta, "spec": {"suspend": True, "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {"containers": [dict(container)], "restartPolicy": "Never"}}}}


class SandboxProcess:
    """Handle on the sandbox child: kubeconfigs per user, RSS/CPU, and the audit log's writes."""

    def __init__(self, conn: Connection, process: Any, kubeconfigs: dict[str, Path]) -> None:
        self._conn = conn
        self.process = process
        self.kubeconfigs = kubeconfigs
        self._lock = threading.Lock()

    def ask(self, *command: Any) -> Any:
        with self._lock:
            self._conn.send(command)
            return self._conn.recv()

    def rss_mb(self) -> float:
        return float(self.ask("rss_mb"))

    def cpu_s(self) -> float:
        return float(self.ask("cpu_s"))

    def stalls(self) -> tuple[int, float, list[tuple[str, int]], list[tuple[float, float]]]:
        """The sandbox's event-loop stalls since the last call (BENCH_STALLS=1; `LoopStalls.take`)."""
        count, longest, where, worst = self.ask("stalls")
        return count, longest, list(where), list(worst)

    def gc_pauses(self) -> dict[int, tuple[float, float, float]]:
        """The collector's pauses in the sandbox since the last call: (count, total ms, longest ms) by
        generation."""
        return dict(self.ask("gc_pauses"))

    def writes(self, user: str, since: float = 0.0) -> list[tuple[str, str, str, str, str]]:
        return list(self.ask("writes", user, since))

    def timed_writes(self, user: str, since: float = 0.0) -> list[tuple[float, str, str]]:
        """`user`'s successful writes since `since`: (when the server answered, "verb resource[/sub]",
        object name), oldest first."""
        return [tuple(w) for w in self.ask("timed_writes", user, since)]

    def stacks(self, spans: list[tuple[float, float]]) -> dict[str, int]:
        """BENCH_SAMPLE=1: the sandbox loop's sampled stacks within `spans` (`StackSampler.between`)."""
        return dict(self.ask("stacks", spans))

    def store_changes_by_tenth(self, start: float, end: float) -> dict[int, Counter[str]]:
        """Every change committed in the tenths of a second from `start`'s to `end`'s (int(wall time *
        10)), the simulated cluster's own included, by type and resource."""
        return {tenth: Counter(kinds) for tenth, kinds in self.ask("store_changes_by_tenth", start, end).items()}

    def store_changes(self, start: float, end: float) -> tuple[Counter[str], float]:
        """`store_changes_by_tenth` summed, and the seconds its whole tenths cover."""
        total = Counter[str]()
        for kinds in self.store_changes_by_tenth(start, end).values():
            total.update(kinds)
        return total, (int(end * 10) - int(start * 10) + 1) / 10

    def traffic_by_tenth(self, start: float, end: float) -> dict[int, Counter[str]]:
        """`traffic` per tenth of a second (int(wall time * 10)) from `start`'s to `end`'s, in one scan."""
        return {tenth: Counter(keys) for tenth, keys in self.ask("traffic_by_tenth", start, end).items()}

    def connections_made(self, start: float, end: float) -> int:
        """Connections the sandbox accepted between two wall times (a TLS handshake each)."""
        return int(self.ask("connections_made", start, end))

    def traffic(self, start: float, end: float) -> Counter[str]:
        """Every request the server answered between two wall times, by "user verb resource[/sub]"."""
        return Counter(self.ask("traffic", start, end))

    def failed_writes(self, user: str) -> dict[str, int]:
        """"code verb resource[/subresource]" -> writes by `user` the server answered with that error
        (injected faults included)."""
        return dict(self.ask("failed_writes", user))

    def set_faults(self, rules: list[dict[str, Any]]) -> None:
        """Replace the fault rules (FaultInjector.add_json specs, docs/sandbox.md); kept across `restart`."""
        self.ask("faults", rules)

    def fault_hits(self) -> dict[int, int]:
        return dict(self.ask("fault_hits"))

    def cut_watches(self, expire: bool = False) -> int:
        """Close every open watch; `expire`: each resumed watch then gets 410 Gone. Returns streams cut."""
        return int(self.ask("cut_watches", expire))

    def restart(self) -> float:
        """Stop the sandbox and start it again from its `--state` (needs `state=True`): clients keep
        their URL and tokens, every resourceVersion they hold gets 410. Returns the seconds it took."""
        return float(self.ask("restart"))

    def seed_unrelated(self, count: int, kinds: tuple[str, ...] = UNRELATED_KINDS, first: int = 0) -> float:
        """`count` unrelated objects (numbered from `first`) created in the sandbox's own process;
        returns the seconds it took."""
        return float(self.ask("seed_unrelated", count, kinds, first))

    def seed_kaiwojobs(self, namespace: str, names: list[str], entrypoint: str = "sleep 600") -> float:
        """KaiwoJobs created in the sandbox's own process (for a backlog of 10,000 and more: as the
        load client would create them, 10x faster); returns the seconds it took."""
        return float(self.ask("seed", [(GROUP, VERSION, "kaiwojobs", kaiwojob(name, namespace, entrypoint))
                                       for name in names]))


@contextmanager
def sandbox_process(*, cluster: bool | list[str] = False, time_factor: float = 1.0,
                    users: tuple[str, ...] = ("kaiwo-ray", "loader"), state: bool = False,
                    cpu_nodes: int = 1) -> Iterator[SandboxProcess]:
    """The sandbox in a child process; `state`: persisted in a temporary `--state` directory, so that
    `SandboxProcess.restart()` restores it (same URL, same tokens) as a restarted `kaiwo-ray sandbox`.
    `cpu_nodes`: how many CPU nodes the cluster has (`sized_nodes`)."""
    with tempfile.TemporaryDirectory(prefix="kaiwo-opbench-") as tmp:
        parent, child = CONTEXT.Pipe()
        process = CONTEXT.Process(target=_sandbox_main, args=(child, tmp, cluster, time_factor, list(users), state, cpu_nodes),
                                  daemon=True, name="sandbox")
        process.start()
        MACHINE.label(process.pid, f"sandbox {process.pid}")
        if pinned_apart() and process.pid is not None:
            pin_apart(process.pid)
        if not parent.poll(90):
            process.kill()
            raise RuntimeError("the sandbox process did not start within 90 s")
        paths = parent.recv()
        handle = SandboxProcess(parent, process, {user: Path(p) for user, p in paths.items()})
        try:
            yield handle
        finally:
            try:
                parent.send(("stop",))
                parent.poll(15)
            except (BrokenPipeError, OSError):
                pass
            process.join(timeout=15)
            if process.is_alive():
                process.kill()


# -- the Job watcher process ----------------------------------------------------------------------


def _first_seen(what: str, event: dict[str, Any]) -> str | None:
    """The key an event makes `what` true for the first time, if it does: "jobs" - a Job's ADDED
    (keyed by name); "kaiwojobs-running" - a KaiwoJob whose status says RUNNING; "pods-running" - a
    Pod in phase Running (keyed by its Job's name)."""
    obj = event.get("object") or {}
    meta = obj.get("metadata") or {}
    if what == "jobs":
        return str(meta["name"]) if event.get("type") == "ADDED" else None
    status = obj.get("status") or {}
    if what == "kaiwojobs-running":
        return str(meta["name"]) if status.get("status") == "RUNNING" else None
    if what == "pods-running":
        job = (meta.get("labels") or {}).get("batch.kubernetes.io/job-name")
        return str(job) if job and status.get("phase") == "Running" else None
    raise ValueError(f"unknown watch {what!r}")


def _watcher_main(conn: Connection, kubeconfig: str, namespace: str, what: str = "jobs") -> None:
    """Record when each object first met `what` (`_first_seen`), from raw watch lines parsed with
    orjson: the cheapest client-side decode, so the figure is the operator's, not the watcher's."""
    import orjson

    kubernetes = k8s()
    client = api_client(Path(kubeconfig))
    if what == "jobs":
        lister: Callable[..., Any] = partial(kubernetes.client.BatchV1Api(client).list_namespaced_job, namespace)
    elif what == "pods-running":
        lister = partial(kubernetes.client.CoreV1Api(client).list_namespaced_pod, namespace)
    else:
        lister = partial(kubernetes.client.CustomObjectsApi(client).list_namespaced_custom_object,
                         GROUP, VERSION, namespace, "kaiwojobs")
    seen: dict[str, float] = {}
    lock = threading.Lock()
    rv = orjson.loads(lister(limit=1, _preload_content=False).data)["metadata"]["resourceVersion"]
    # The instrument's own pauses are not the operator's latency: what is imported and set up stays
    # out of the collector's sight, and the pauses left are reported ("gc").
    gc.collect()
    gc.freeze()
    pauses = GcPauses()

    def watch() -> None:
        nonlocal rv
        while True:
            response = lister(watch=True, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=300,
                              _preload_content=False)
            for line in kubernetes.watch.watch.iter_resp_lines(response):
                now = time.time()
                event = orjson.loads(line)
                rv = (event.get("object") or {}).get("metadata", {}).get("resourceVersion", rv)
                key = _first_seen(what, event)
                if key is not None:
                    with lock:
                        seen.setdefault(key, now)

    threading.Thread(target=watch, daemon=True).start()
    conn.send("ready")
    while True:
        command = conn.recv()
        if command == "stop":
            return
        if command == "gc":
            conn.send(pauses.long[:])
            pauses.clear()
            continue
        with lock:
            conn.send(len(seen) if command == "count" else dict(seen))


class JobWatch:
    """`watch()`: Job name -> wall time its first ADDED event reached the watcher; `watch.count()`:
    how many, without shipping 10,000 entries across the pipe at every poll."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def __call__(self) -> dict[str, float]:
        self._conn.send("collect")
        result: dict[str, float] = self._conn.recv()
        return result

    def count(self) -> int:
        self._conn.send("count")
        return int(self._conn.recv())

    def long_gc_pauses(self) -> list[tuple[float, float]]:
        """The watcher process's collector pauses of 10 ms or more since the last ask: (wall, ms)."""
        self._conn.send("gc")
        return list(self._conn.recv())


@contextmanager
def job_watcher(kubeconfig: Path, namespace: str, what: str = "jobs") -> Iterator[JobWatch]:
    """Yields a `JobWatch` of the objects in `namespace` (Jobs' ADDED events by default; `_first_seen`
    says what else)."""
    parent, child = CONTEXT.Pipe()
    process = CONTEXT.Process(target=_watcher_main, args=(child, str(kubeconfig), namespace, what), daemon=True,
                              name=f"watcher ({what})")
    process.start()
    if not parent.poll(60):
        process.kill()
        raise RuntimeError("the Job watcher did not start within 60 s")
    parent.recv()
    time.sleep(0.3)  # the watch request is sent right after "ready": a pacing gap, not synchronisation
    try:
        yield JobWatch(parent)
    finally:
        parent.send("stop")
        process.join(timeout=10)
        if process.is_alive():
            process.kill()


def wait_for(check: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)  # polling under a deadline
    return check()


# -- load ----------------------------------------------------------------------------------------


def kaiwojob(name: str, namespace: str, entrypoint: str = "sleep 600", **spec: Any) -> dict[str, Any]:
    """A KaiwoJob; `spec` adds fields (storage=..., ...)."""
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "KaiwoJob",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"user": "bench@example.com", "image": "busybox", "entrypoint": entrypoint, **spec}}


class Loader:
    """Creates KaiwoJobs as its own user: one at a time or many at once with the real `kubernetes`
    client, and paced (the latency runs) with kaiwo-ray's own `KubeClient` on an event loop of its own.
    The load client shares the 2 cores with the parties it measures, which on a cluster it would not:
    a paced create costs this process 0.6 ms of CPU that way against 1.6-2.0 ms through the
    `kubernetes` client (4 runs of 20 s at 100 a second), 10-13% of a core less taken from the API
    server and the operator it loads."""

    PACED_IN_FLIGHT = 4  # creates awaiting their answer at once, at most (the thread pool it replaced had 4)

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self._local = threading.local()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None

    def _api(self) -> Any:
        api = getattr(self._local, "api", None)
        if api is None:
            api = k8s().client.CustomObjectsApi(api_client(self.kubeconfig))
            self._local.api = api
        return api

    def create(self, name: str, entrypoint: str = "sleep 600") -> None:
        self._api().create_namespaced_custom_object(GROUP, VERSION, self.namespace, "kaiwojobs",
                                                    kaiwojob(name, self.namespace, entrypoint),
                                                    _preload_content=False).release_conn()

    def create_many(self, names: list[str], threads: int = 4, entrypoint: str = "sleep 600") -> float:
        """Create as fast as `threads` clients can; returns the seconds it took."""
        began = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda n: self.create(n, entrypoint), names))
        return time.perf_counter() - began

    def paced(self, names: list[str], rate: float) -> dict[str, float]:
        """Create at `rate` per second; returns name -> wall time just before its request was sent.
        Up to PACED_IN_FLIGHT creates await their answers at once, so a slow one does not delay the
        next one's send time; with that many waiting, the next waits for one of them. The loop and
        its client (and so its connections) live from one call to the next, so that a warm-up call
        leaves warm connections to the measured one."""
        if self._loop is None:
            from kaiwo_ray.kube.client import KubeClient

            self._loop = deployed_loop()
            threading.Thread(target=self._loop.run_forever, daemon=True, name="paced-loader").start()
            self._client = asyncio.run_coroutine_threadsafe(
                KubeClient.from_kubeconfig(str(self.kubeconfig)), self._loop).result()
        return asyncio.run_coroutine_threadsafe(self._paced(names, rate), self._loop).result()

    async def _paced(self, names: list[str], rate: float) -> dict[str, float]:
        from kaiwo_ray.kube.resources import KAIWOJOBS

        loop = asyncio.get_running_loop()
        sent: dict[str, float] = {}
        in_flight = asyncio.Semaphore(self.PACED_IN_FLIGHT)
        offsets = arrival_offsets(len(names), rate)
        start = loop.time() + 0.05

        async def one(index: int, name: str) -> None:
            delay = start + offsets[index] - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)  # pacing, not synchronisation
            async with in_flight:
                sent[name] = time.time()
                await self._client.create(KAIWOJOBS, kaiwojob(name, self.namespace), self.namespace, answer=False)

        await asyncio.gather(*(one(i, name) for i, name in enumerate(names)))
        return sent


def arrival_offsets(count: int, rate: float) -> list[float]:
    """Seconds from the start at which each of `count` paced creates is sent: one every 1/rate (the
    default), or, with BENCH_ARRIVALS=poisson (diagnosis), a Poisson process of the same mean rate, as
    independent submitters make, drawn the same for every party (seeded by count and rate). Steady
    pacing at 20 a second puts each create exactly one 50 ms settle window after the one before, so
    our deferred status write meets the next create every time; a Poisson stream meets it by chance."""
    if os.environ.get("BENCH_ARRIVALS", "steady") != "poisson":
        return [i / rate for i in range(count)]
    import random

    draw = random.Random(f"{count}/{rate}")
    offsets, at = [], 0.0
    for _ in range(count):
        offsets.append(at)
        at += draw.expovariate(rate)
    return offsets


def setup_cluster_objects(kubeconfig: Path, namespaces: list[str], cpu_nodes: int = 1) -> None:
    """Namespaces, plus the Kueue objects of the default queue config for the sandbox's nodes and a
    LocalQueue `kaiwo` in each namespace: what a KaiwoJob's Job needs (the KaiwoQueueConfig
    controller is not what is measured, so its output is created directly)."""
    from kaiwo_ray.api.config import KaiwoConfigSpec
    from kaiwo_ray.api.queueconfig import KaiwoQueueConfig
    from kaiwo_ray.nodes import with_pool_labels
    from kaiwo_ray.render.nodepools import default_queue_config
    from kaiwo_ray.render.queue import render_queue_config

    kubernetes = k8s()
    client = api_client(kubeconfig)
    core = kubernetes.client.CoreV1Api(client)
    custom = kubernetes.client.CustomObjectsApi(client)
    for namespace in namespaces:
        core.create_namespace({"metadata": {"name": namespace}})
    config = KaiwoConfigSpec()
    spec = default_queue_config(with_pool_labels(sized_nodes(cpu_nodes), config), config)
    kqc = KaiwoQueueConfig.model_validate({"metadata": {"name": "kaiwo", "uid": "bench"},
                                           "spec": spec.model_dump(by_alias=True, exclude_none=True)})
    plurals = {"Topology": "topologies", "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues",
               "LocalQueue": "localqueues", "WorkloadPriorityClass": "workloadpriorityclasses"}
    queue = ""
    for obj in render_queue_config(kqc):
        obj["metadata"].pop("ownerReferences", None)
        group, version = obj["apiVersion"].split("/")
        if obj["kind"] == "ClusterQueue":
            queue = obj["metadata"]["name"]
        if obj["kind"] == "LocalQueue":
            continue
        custom.create_cluster_custom_object(group, version, plurals[obj["kind"]], obj)
    for namespace in namespaces:
        custom.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", namespace, "localqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": queue, "namespace": namespace}, "spec": {"clusterQueue": queue}})


@dataclass(slots=True)
class Latency:
    sent: int
    observed: int
    ms: list[float]
    at: list[float] = field(default_factory=list)  # when each sample was sent (wall), as `ms`
    names: list[str] = field(default_factory=list)  # each sample's object, as `ms`
    # the benchmark's own collector pauses of 10 ms or more meanwhile: (wall, ms, which process)
    instrument_pauses: list[tuple[float, float, str]] = field(default_factory=list)

    def p(self, q: float) -> float:
        return percentile(self.ms, q)

    @classmethod
    def merged(cls, parts: list[Latency]) -> Latency:
        """One party's slices as one run's samples."""
        return cls(sum(p.sent for p in parts), sum(p.observed for p in parts), [ms for p in parts for ms in p.ms],
                   [at for p in parts for at in p.at], [n for p in parts for n in p.names],
                   [x for p in parts for x in p.instrument_pauses])

    def spans(self, gap_s: float = 1.0) -> list[tuple[float, float]]:
        """The wall-time spans the samples were sent in (a merged Latency has one per slice), each to
        its last sample's answer."""
        spans: list[list[float]] = []
        for at, ms in sorted(zip(self.at, self.ms, strict=True)):
            if spans and at - spans[-1][1] <= gap_s:
                spans[-1][1] = max(spans[-1][1], at + ms / 1000)
            else:
                spans.append([at, at + ms / 1000])
        return [(a, b) for a, b in spans]

    def slow_spells(self, over_ms: float, gap_s: float = 0.5) -> list[tuple[float, float, int, float]]:
        """Where the tail is: runs of samples slower than `over_ms` (sent at most `gap_s` apart), as
        (start s from the first send, length s, samples, worst ms), the worst spell first."""
        if not self.at:
            return []
        first = min(self.at)
        slow = sorted((t - first, ms) for t, ms in zip(self.at, self.ms, strict=True) if ms > over_ms)
        spells: list[list[float]] = []  # [start, end, count, worst]
        for t, ms in slow:
            if spells and t - spells[-1][1] <= gap_s:
                spell = spells[-1]
                spell[1], spell[2], spell[3] = t, spell[2] + 1, max(spell[3], ms)
            else:
                spells.append([t, t, 1, ms])
        return sorted(((a, b - a, int(n), w) for a, b, n, w in spells), key=lambda x: (-x[2], -x[3]))


def latencies(sent: dict[str, float], seen: dict[str, float]) -> Latency:
    pairs = [(name, at, (seen[name] - at) * 1000) for name, at in sent.items() if name in seen]
    return Latency(len(sent), len(pairs), [ms for _, _, ms in pairs], [at for _, at, _ in pairs],
                   [name for name, _, _ in pairs])


def process_rss_mb(pid: int) -> float:
    import psutil

    return float(psutil.Process(pid).memory_info().rss / 2**20)


def process_cpu_s(pid: int) -> float:
    import psutil

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def machine_load() -> str:
    return f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
