"""Counters and histograms the controllers keep about themselves, as plain numbers (no Prometheus
dependency here): the admin API renders them under controller-runtime's metric names."""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# controller-runtime's buckets: reconcile time, and the work queue's exponential ones (1e-8 .. 1e3 s).
RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
                     0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0,
                     15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0)
QUEUE_BUCKETS = tuple(10.0 ** e for e in range(-8, 4))


@dataclass(slots=True)
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.buckets) + 1)  # the last slot is +Inf

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1

    def snapshot(self) -> dict[str, Any]:
        """Per-bucket (not cumulative) counts; `buckets` are the upper bounds, +Inf implied last."""
        return {"buckets": list(self.buckets), "counts": list(self.counts), "sum": self.total, "count": self.count}


@dataclass(slots=True)
class QueueStats:
    adds: int = 0
    retries: int = 0
    queue_duration: Histogram = field(default_factory=lambda: Histogram(QUEUE_BUCKETS))
    work_duration: Histogram = field(default_factory=lambda: Histogram(QUEUE_BUCKETS))


@dataclass(slots=True)
class RequestStats:
    """rest_client_requests_total{code,method}: "<error>" for requests that got no answer (client-go's)."""

    by_code_method: Counter[tuple[str, str]] = field(default_factory=Counter)

    def record(self, code: int | str, method: str) -> None:
        self.by_code_method[(str(code), method)] += 1

    def snapshot(self) -> list[list[Any]]:
        return [[code, method, count] for (code, method), count in sorted(self.by_code_method.items())]
