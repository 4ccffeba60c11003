"""The statistics the benchmarks judge their samples with: percentiles, distribution-free intervals
around a percentile and around the ratio of two samples' percentiles, a create -> child latency sample
set (`Latency`) with where its slow spells lie, and which of a sample's path parts another write met
(`path_overlaps`). Pure functions and data, no I/O: tests/benchmarks/test_bench_statistics.py loads
this module on its own.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from dataclasses import dataclass, field


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
