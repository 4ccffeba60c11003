"""Bounded per-GPU utilization history: every sample of the recent past, per-bucket summaries of the
older past, so memory stays flat however long the aggregator runs.

    fine:   (timestamp, utilization) for the last `fine_seconds` (default 10 min)
    coarse: (bucket start, mean, min, max, count) per `bucket_seconds` (default 1 min) for
            `coarse_seconds` (default 24 h)

A None utilization (unknown) is kept in `fine` as None and never averaged into `coarse`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class HistorySettings:
    fine_seconds: float = 600.0
    bucket_seconds: float = 60.0
    coarse_seconds: float = 86_400.0

    @property
    def coarse_buckets(self) -> int:
        return max(1, int(self.coarse_seconds // self.bucket_seconds))


@dataclass(slots=True)
class Bucket:
    start: float
    total: float = 0.0
    count: int = 0
    low: float = 100.0
    high: float = 0.0

    def add(self, value: float) -> None:
        self.total += value
        self.count += 1
        self.low = min(self.low, value)
        self.high = max(self.high, value)

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0


@dataclass(slots=True)
class GpuHistory:
    settings: HistorySettings = field(default_factory=HistorySettings)
    fine: deque[tuple[float, float | None]] = field(default_factory=deque)
    coarse: deque[Bucket] = field(default_factory=deque)

    def add(self, timestamp: float, utilization: float | None) -> None:
        fine = self.fine
        if fine and timestamp <= fine[-1][0]:
            return  # a replayed or reordered sample: history only moves forward
        fine.append((timestamp, utilization))
        horizon = timestamp - self.settings.fine_seconds
        while fine and fine[0][0] < horizon:
            fine.popleft()
        if utilization is None:
            return
        width = self.settings.bucket_seconds
        start = timestamp - (timestamp % width)
        coarse = self.coarse
        if not coarse or coarse[-1].start != start:
            coarse.append(Bucket(start))
            while len(coarse) > self.settings.coarse_buckets:
                coarse.popleft()
        coarse[-1].add(utilization)

    def recent(self, since: float = 0.0) -> list[tuple[float, float | None]]:
        return [entry for entry in self.fine if entry[0] >= since]

    def summary(self) -> list[tuple[float, float, float, float, int]]:
        return [(b.start, round(b.mean, 2), b.low, b.high, b.count) for b in self.coarse]
