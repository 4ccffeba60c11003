"""In-process instruments for diagnosis, off unless a BENCH_* variable asks: event-loop stalls and
where the loop was (`LoopStalls`, BENCH_STALLS), the loop's sampled stacks (`StackSampler`,
BENCH_SAMPLE), the cyclic collector's pauses (`GcPauses`, always on: its pauses are reported beside
the figures), a toggled cProfile (`toggle_profile`), and the report lines the first two print.
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import sys
import threading
import time
from collections import Counter
from typing import Any


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
