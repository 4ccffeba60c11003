"""How faithful a simulation is: the same trace recorded live (a real-time cluster with a time factor)
and simulated (virtual time), compared workload by workload. Pure: two Recordings in, figures out.

A start agrees when |start_live - start_sim| <= max(2 % of the wait, 2 simulated seconds) (the wait is
the simulated one: from submission to the first admission). Preemptions agree when the same workloads
are preempted in the same order; evictions at one simulated instant (a preemptor that evicts several
workloads at once) have no order among themselves, so within TIE_SECONDS of each other they compare as
a set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kaiwo_ray.simulation.report import Recording, WorkloadRecord

RELATIVE_TOLERANCE = 0.02
ABSOLUTE_TOLERANCE = 2.0  # simulated seconds
TIE_SECONDS = 1.0  # simulated evictions closer than this count as one moment


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


@dataclass(slots=True)
class Comparison:
    starts: list[StartDifference] = field(default_factory=list)
    preemptions_live: list[frozenset[str]] = field(default_factory=list)
    preemptions_simulated: list[frozenset[str]] = field(default_factory=list)

    @property
    def within(self) -> int:
        return sum(1 for s in self.starts if s.agrees)

    @property
    def share_within(self) -> float:
        return self.within / len(self.starts) if self.starts else 1.0

    @property
    def same_preemptions(self) -> bool:
        return self.preemptions_live == self.preemptions_simulated

    def worst(self, count: int = 5) -> list[StartDifference]:
        """The furthest apart first (a start on one side only counts as furthest of all)."""
        return sorted(self.starts, key=lambda s: (s.difference is not None or s.agrees,
                                                  -(s.difference or 0.0) / max(s.tolerance, 1e-9)))[:count]


def tolerance(submitted: float | None, started: float | None) -> float:
    wait = 0.0 if submitted is None or started is None else max(started - submitted, 0.0)
    return max(RELATIVE_TOLERANCE * wait, ABSOLUTE_TOLERANCE)


def preemption_order(recording: Recording, tie_seconds: float = TIE_SECONDS) -> list[frozenset[str]]:
    """The preempted workloads' names in the order of their evictions, evictions within `tie_seconds`
    of the previous one grouped."""
    evictions = sorted((interval.end, record.name) for record in recording.workloads
                       for interval in record.intervals if interval.cause)
    groups: list[set[str]] = []
    last: float | None = None
    for moment, name in evictions:
        if last is None or moment - last > tie_seconds:
            groups.append(set())
        groups[-1].add(name)
        last = moment
    return [frozenset(group) for group in groups]


def compare(live: Recording, simulated: Recording) -> Comparison:
    live_by_name: dict[str, WorkloadRecord] = {r.name: r for r in live.workloads}
    comparison = Comparison(preemptions_live=preemption_order(live),
                            preemptions_simulated=preemption_order(simulated))
    for sim in simulated.workloads:
        other = live_by_name.get(sim.name)
        comparison.starts.append(StartDifference(sim.name, other.started if other else None, sim.started,
                                                 tolerance(sim.submitted, sim.started)))
    return comparison
