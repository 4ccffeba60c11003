"""Who used the machine, and where the parties run: the CPU split that gives each sandbox a CPU of
its own (`pin_apart`, BENCH_PIN), the sampler of the host's steal, probe speeds and every descendant
process's CPU time (`MachineSampler`, one per benchmark process: `MACHINE`), and one-off reads of a
process's RSS and CPU seconds and of the load average for the report lines.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import suppress
from typing import Any


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


def process_rss_mb(pid: int) -> float:
    import psutil

    return float(psutil.Process(pid).memory_info().rss / 2**20)


def process_cpu_s(pid: int) -> float:
    import psutil

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def machine_load() -> str:
    return f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
