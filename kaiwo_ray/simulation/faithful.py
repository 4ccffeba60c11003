"""How faithful a simulation is: the same trace recorded live (a real-time cluster with a time factor)
and simulated (virtual time), compared workload by workload. Pure: two Recordings in, figures out.

A start agrees when |start_live - start_sim| <= max(2 % of the wait, 2 simulated seconds) (the wait is
the simulated one: from submission to the first admission). Preemptions agree when the same workloads
are preempted as often, in the same order. Two evictions have an order only where they are more than
TIE_SECONDS apart in at least one run: the start tolerance, since a live run's reaction can move an
eviction by as much as it moves a start (a preemptor that evicts several workloads at once evicts them
at one instant, in no order).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kaiwo_ray.simulation.report import Recording, WorkloadRecord

RELATIVE_TOLERANCE = 0.02
ABSOLUTE_TOLERANCE = 2.0  # simulated seconds
TIE_SECONDS = ABSOLUTE_TOLERANCE  # evictions closer than this in both runs have no order


@dataclass(frozen=True, slots=True)
class StartDifference:
    name: str
    live: float | None
    simulated: float | None
    tolerance: float

    @property
    def difference(self) -> float | None:
        if self.live is None or self.simulated is None:
            return None
        return abs(self.live - self.simulated)

    @property
    def agrees(self) -> bool:
        if self.live is None or self.simulated is None:
            return self.live is None and self.simulated is None  # both never started
        return abs(self.live - self.simulated) <= self.tolerance


@dataclass(frozen=True, slots=True)
class Eviction:
    """A workload's `count`-th eviction (or termination), at `moment`."""

    moment: float
    name: str
    count: int

    @property
    def key(self) -> tuple[str, int]:
        return self.name, self.count


@dataclass(slots=True)
class Comparison:
    starts: list[StartDifference] = field(default_factory=list)
    preemptions_live: list[frozenset[str]] = field(default_factory=list)  # grouped, for reading
    preemptions_simulated: list[frozenset[str]] = field(default_factory=list)
    evictions_live: list[Eviction] = field(default_factory=list)
    evictions_simulated: list[Eviction] = field(default_factory=list)

    @property
    def within(self) -> int:
        return sum(1 for s in self.starts if s.agrees)

    @property
    def share_within(self) -> float:
        return self.within / len(self.starts) if self.starts else 1.0

    @property
    def same_preemptions(self) -> bool:
        return ({e.key for e in self.evictions_live} == {e.key for e in self.evictions_simulated}
                and not self.order_disagreements())

    def order_disagreements(self) -> list[tuple[tuple[str, int], tuple[str, int]]]:
        """Pairs of evictions (both runs have) that the runs put in opposite orders while more than
        TIE_SECONDS apart in at least one of them: (first in the simulation, first live)."""
        live = {e.key: e.moment for e in self.evictions_live}
        both = [e for e in self.evictions_simulated if e.key in live]
        found = []
        for index, first in enumerate(both):
            for second in both[index + 1:]:
                sim_gap = second.moment - first.moment
                live_gap = live[second.key] - live[first.key]
                if live_gap < 0 and max(sim_gap, -live_gap) > TIE_SECONDS:
                    found.append((first.key, second.key))
        return found

    def worst(self, count: int = 5) -> list[StartDifference]:
        """The furthest apart first (a start on one side only counts as furthest of all)."""
        return sorted(self.starts, key=lambda s: (s.difference is not None or s.agrees,
                                                  -(s.difference or 0.0) / max(s.tolerance, 1e-9)))[:count]


def tolerance(submitted: float | None, started: float | None) -> float:
    wait = 0.0 if submitted is None or started is None else max(started - submitted, 0.0)
    return max(RELATIVE_TOLERANCE * wait, ABSOLUTE_TOLERANCE)


def evictions(recording: Recording) -> list[Eviction]:
    """Every eviction and termination, by time (then name)."""
    found = sorted((interval.end, record.name) for record in recording.workloads
                   for interval in record.intervals if interval.cause)
    seen: dict[str, int] = {}
    result = []
    for moment, name in found:
        seen[name] = seen.get(name, 0) + 1
        result.append(Eviction(moment, name, seen[name]))
    return result


def preemption_order(recording: Recording, tie_seconds: float = 1.0) -> list[frozenset[str]]:
    """The preempted workloads' names in the order of their evictions, evictions within `tie_seconds`
    of the previous one grouped (for reading; `Comparison.same_preemptions` decides)."""
    groups: list[set[str]] = []
    last: float | None = None
    for eviction in evictions(recording):
        if last is None or eviction.moment - last > tie_seconds:
            groups.append(set())
        groups[-1].add(eviction.name)
        last = eviction.moment
    return [frozenset(group) for group in groups]


def compare(live: Recording, simulated: Recording) -> Comparison:
    live_by_name: dict[str, WorkloadRecord] = {r.name: r for r in live.workloads}
    comparison = Comparison(preemptions_live=preemption_order(live),
                            preemptions_simulated=preemption_order(simulated),
                            evictions_live=evictions(live), evictions_simulated=evictions(simulated))
    for sim in simulated.workloads:
        other = live_by_name.get(sim.name)
        comparison.starts.append(StartDifference(sim.name, other.started if other else None, sim.started,
                                                 tolerance(sim.submitted, sim.started)))
    return comparison


def events(recording: Recording) -> list[tuple[float, str, str]]:
    """(time, workload, what) for every submission, admission and end of an admission (`end
    finished`, `end <cause>` for an eviction or termination, `end` for one cut by the run's end), by time."""
    found: list[tuple[float, str, str]] = []
    for record in recording.workloads:
        if record.submitted is not None:
            found.append((record.submitted, record.name, "submit"))
        for interval in record.intervals:
            found.append((interval.start, record.name, "start"))
            if interval.cause:
                what = f"end {interval.cause}"
            elif record.finished is not None and interval.end == record.finished:
                what = "end finished"
            else:
                what = "end"
            found.append((interval.end, record.name, what))
    return sorted(found)


def first_divergence(comparison: Comparison) -> StartDifference | None:
    """The start outside the tolerance that came first (by the earlier of its two starts): where the runs
    part. Later ones are often its consequences."""
    outside = [s for s in comparison.starts if not s.agrees]
    if not outside:
        return None
    return min(outside, key=lambda s: (min(t for t in (s.live, s.simulated) if t is not None)
                                       if s.live is not None or s.simulated is not None else float("inf"), s.name))


def divergence(live: Recording, simulated: Recording, comparison: Comparison, window: float = 20.0) -> list[str]:
    """The first start outside the tolerance and, side by side, both runs' events within `window`
    simulated seconds before it (and a little after): what each run saw in what order. Empty when
    every start agrees."""
    first = first_divergence(comparison)
    if first is None:
        return []
    moments = [t for t in (first.live, first.simulated) if t is not None]
    low, high = min(moments) - window, max(moments) + 1.0
    lines = [f"first start outside the tolerance: {first.name}: live {_time(first.live)}, simulated "
             f"{_time(first.simulated)}, tolerance {first.tolerance:.2f} s; events from {low:.1f} to {high:.1f} s:"]
    live_events = [e for e in events(live) if low <= e[0] <= high]
    sim_events = [e for e in events(simulated) if low <= e[0] <= high]
    lines.append(f"  {'simulated':<40} live")
    for index in range(max(len(live_events), len(sim_events))):
        left = _event(sim_events[index]) if index < len(sim_events) else ""
        right = _event(live_events[index]) if index < len(live_events) else ""
        lines.append(f"  {left:<40} {right}")
    return lines


def _time(moment: float | None) -> str:
    return "never" if moment is None else f"{moment:.2f} s"


def _event(event: tuple[float, str, str]) -> str:
    return f"{event[0]:9.2f} {event[1]} {event[2]}"
