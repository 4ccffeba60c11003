"""Kueue's quota arithmetic, as pure functions: ClusterQueue quotas per flavor and resource,
cohort borrowing and lending limits, flavor assignment with Kueue's pending messages, and the
choice of preemption victims within a ClusterQueue.

Amounts are integers in milli-units (see `kaiwo_sandbox.semantics.quantity.parse_milli`). Nothing here touches the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kaiwo_sandbox.cluster.nodes.scheduling import expression_matches, tolerates
from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.semantics.quantity import QuantityError, format_milli, parse_milli

FlavorResource = tuple[str, str]  # (flavor, resource)
Usage = dict[FlavorResource, int]

FIT, PREEMPT, NO_FIT = "Fit", "Preempt", "NoFit"


class ClusterQueueSpecError(ValueError):
    """A ClusterQueue spec the simulated Kueue cannot use (reported on its Active condition)."""


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None

    @property
    def guaranteed(self) -> int:
        """The part of the nominal quota never lent to the cohort."""
        return max(0, self.nominal - self.lending_limit) if self.lending_limit is not None else 0


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    name: str
    resources: Mapping[str, ResourceQuota]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True)
class ClusterQueueSpec:
    name: str
    cohort: str | None = None
    groups: tuple[ResourceGroup, ...] = ()
    strict_fifo: bool = False
    namespace_selector: JsonObj | None = None
    within_cluster_queue: str = "Never"
    when_can_borrow: str = "MayStopSearch"
    when_can_preempt: str = "TryNextFlavor"
    stopped: bool = False

    def group_for(self, resource: str) -> ResourceGroup | None:
        for group in self.groups:
            if resource in group.covered:
                return group
        return None

    def quota(self, fr: FlavorResource) -> ResourceQuota | None:
        flavor, resource = fr
        for group in self.groups:
            for flavor_quotas in group.flavors:
                if flavor_quotas.name == flavor:
                    return flavor_quotas.resources.get(resource)
        return None

    def flavor_names(self) -> list[str]:
        return [f.name for g in self.groups for f in g.flavors]

    def flavor_resources(self) -> list[tuple[str, list[str]]]:
        """(flavor, covered resources) in spec order, for status reporting."""
        return [(f.name, list(g.covered)) for g in self.groups for f in g.flavors]


def _optional_quantity(value: object) -> int | None:
    return None if value is None else parse_milli(value)


def parse_cluster_queue(obj: JsonObj) -> ClusterQueueSpec:
    """Read a v1beta2 ClusterQueue (v1beta1 `cohort` accepted too). Raises ClusterQueueSpecError."""
    spec = obj.get("spec") or {}
    name = str((obj.get("metadata") or {}).get("name", ""))
    groups: list[ResourceGroup] = []
    try:
        for group in spec.get("resourceGroups") or []:
            covered = tuple(str(r) for r in group.get("coveredResources") or [])
            flavors: list[FlavorQuotas] = []
            for flavor in group.get("flavors") or []:
                resources: dict[str, ResourceQuota] = {}
                for res in flavor.get("resources") or []:
                    resources[str(res.get("name"))] = ResourceQuota(
                        parse_milli(res.get("nominalQuota", 0)),
                        _optional_quantity(res.get("borrowingLimit")),
                        _optional_quantity(res.get("lendingLimit")))
                flavors.append(FlavorQuotas(str(flavor.get("name", "")), resources))
            groups.append(ResourceGroup(covered, tuple(flavors)))
    except QuantityError as err:
        raise ClusterQueueSpecError(f"ClusterQueue {name}: {err}") from None
    preemption = spec.get("preemption") or {}
    fungibility = spec.get("flavorFungibility") or {}
    cohort = spec.get("cohortName") or spec.get("cohort") or None
    return ClusterQueueSpec(
        name=name,
        cohort=str(cohort) if cohort else None,
        groups=tuple(groups),
        strict_fifo=spec.get("queueingStrategy") == "StrictFIFO",
        namespace_selector=spec.get("namespaceSelector"),
        within_cluster_queue=str(preemption.get("withinClusterQueue") or "Never"),
        when_can_borrow=_fungibility(fungibility.get("whenCanBorrow"), "MayStopSearch"),
        when_can_preempt=_fungibility(fungibility.get("whenCanPreempt"), "TryNextFlavor"),
        stopped=(spec.get("stopPolicy") or "None") != "None",
    )


def _fungibility(value: object, default: str) -> str:
    # v1beta1 spelled MayStopSearch as Borrow / Preempt.
    if value in ("Borrow", "Preempt", "MayStopSearch"):
        return "MayStopSearch"
    if value == "TryNextFlavor":
        return "TryNextFlavor"
    return default


class QuotaBook:
    """Per-ClusterQueue usage plus the cohort arithmetic of Kueue's classical (one-level) cohorts.

    `available` mirrors Kueue: what is left of the queue's guaranteed (non-lendable) quota plus
    what the cohort has left, capped by the queue's borrowingLimit."""

    def __init__(self) -> None:
        self.specs: dict[str, ClusterQueueSpec] = {}
        self.usage: dict[str, Usage] = {}
        self._cohorts: dict[str, list[str]] = {}

    def set_specs(self, specs: Iterable[ClusterQueueSpec]) -> None:
        self.specs = {s.name: s for s in specs}
        self._cohorts = {}
        for spec in self.specs.values():
            if spec.cohort:
                self._cohorts.setdefault(spec.cohort, []).append(spec.name)

    def cohort_members(self, cq: str) -> list[str]:
        spec = self.specs.get(cq)
        if spec is None or not spec.cohort:
            return [cq]
        return self._cohorts.get(spec.cohort, [cq])

    def add_usage(self, cq: str, usage: Mapping[FlavorResource, int], sign: int = 1) -> None:
        book = self.usage.setdefault(cq, {})
        for fr, amount in usage.items():
            value = book.get(fr, 0) + sign * amount
            if value:
                book[fr] = value
            else:
                book.pop(fr, None)

    def used(self, cq: str, fr: FlavorResource, usage: Mapping[str, Usage] | None = None) -> int:
        return (usage or self.usage).get(cq, {}).get(fr, 0)

    def _cohort_available(self, cohort: str, fr: FlavorResource, usage: Mapping[str, Usage]) -> int:
        capacity = 0
        used = 0
        for member in self._cohorts.get(cohort, []):
            quota = self.specs[member].quota(fr)
            guaranteed = quota.guaranteed if quota else 0
            if quota:
                capacity += quota.nominal - guaranteed
            used += max(0, usage.get(member, {}).get(fr, 0) - guaranteed)
        return capacity - used

    def available(self, cq: str, fr: FlavorResource, usage: Mapping[str, Usage] | None = None) -> int:
        usage = self.usage if usage is None else usage
        spec = self.specs[cq]
        quota = spec.quota(fr) or ResourceQuota(0)
        used = usage.get(cq, {}).get(fr, 0)
        if not spec.cohort:
            return quota.nominal - used
        guaranteed = quota.guaranteed
        local = max(0, guaranteed - used)
        parent = self._cohort_available(spec.cohort, fr, usage)
        if quota.borrowing_limit is not None:
            stored_in_parent = quota.nominal - guaranteed
            used_in_parent = max(0, used - guaranteed)
            parent = min(parent, stored_in_parent - used_in_parent + quota.borrowing_limit)
        return local + parent

    def potential_available(self, cq: str, fr: FlavorResource) -> int:
        """The most this queue could ever hold of `fr` (empty cluster)."""
        spec = self.specs[cq]
        quota = spec.quota(fr) or ResourceQuota(0)
        if not spec.cohort:
            return quota.nominal
        capacity = 0
        for member in self._cohorts.get(spec.cohort, []):
            member_quota = self.specs[member].quota(fr)
            if member_quota:
                capacity += member_quota.nominal - member_quota.guaranteed
        total = quota.guaranteed + capacity
        if quota.borrowing_limit is not None:
            total = min(total, quota.nominal + quota.borrowing_limit)
        return total

    def borrowed(self, cq: str, fr: FlavorResource) -> int:
        quota = self.specs[cq].quota(fr) if cq in self.specs else None
        return max(0, self.used(cq, fr) - (quota.nominal if quota else 0))


@dataclass(frozen=True, slots=True)
class FlavorInfo:
    """What flavor assignment needs from a ResourceFlavor."""

    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[JsonObj, ...] = ()
    tolerations: tuple[JsonObj, ...] = ()


def flavor_from_object(obj: JsonObj) -> FlavorInfo:
    spec = obj.get("spec") or {}
    return FlavorInfo(
        name=str((obj.get("metadata") or {}).get("name", "")),
        node_labels={str(k): str(v) for k, v in (spec.get("nodeLabels") or {}).items()},
        node_taints=tuple(spec.get("nodeTaints") or ()),
        tolerations=tuple(spec.get("tolerations") or ()),
    )


@dataclass(frozen=True, slots=True)
class PodSetRequest:
    """One pod set of a Workload: name, pod count, one pod's requests and its placement hints."""

    name: str
    count: int
    per_pod: Mapping[str, int]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity_terms: tuple[JsonObj, ...] = ()
    tolerations: tuple[JsonObj, ...] = ()

    def total(self) -> dict[str, int]:
        return {name: amount * self.count for name, amount in self.per_pod.items()}


@dataclass(slots=True)
class PodSetAssignment:
    name: str
    count: int
    flavors: dict[str, str]
    usage: dict[str, int]


@dataclass(slots=True)
class Assignment:
    mode: str  # FIT, PREEMPT or NO_FIT
    podsets: list[PodSetAssignment]
    usage: Usage
    borrows: bool = False
    message: str = ""

    def to_api(self) -> list[JsonObj]:
        return [{"name": ps.name,
                 "flavors": dict(ps.flavors),
                 "resourceUsage": {r: format_milli(r, q) for r, q in ps.usage.items()},
                 "count": ps.count} for ps in self.podsets]


def _selector_matches(podset: PodSetRequest, flavor: FlavorInfo) -> bool:
    """Kueue's flavorSelector: only the keys the flavor labels count."""
    keys = flavor.node_labels
    for key, value in podset.node_selector.items():
        if key in keys and keys[key] != value:
            return False
    if not podset.affinity_terms:
        return True
    for term in podset.affinity_terms:
        relevant = [e for e in term.get("matchExpressions") or [] if e.get("key") in keys]
        if not relevant:
            return True  # a term with no relevant expression matches any flavor
        if all(expression_matches(flavor.node_labels, e) for e in relevant):
            return True
    return False


def _taint_text(taint: JsonObj) -> str:
    # Go prints a corev1.Taint struct: {key value effect <nil>}
    return f"{{{taint.get('key', '')} {taint.get('value', '')} {taint.get('effect', '')} <nil>}}"


def _flavor_problem(podset: PodSetRequest, flavor: FlavorInfo | None, name: str) -> str | None:
    if flavor is None:
        return f"flavor {name} not found"
    tolerations = list(podset.tolerations) + list(flavor.tolerations)
    for taint in flavor.node_taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return f"untolerated taint {_taint_text(taint)} in flavor {name}"
    if not _selector_matches(podset, flavor):
        return f"flavor {name} doesn't match node affinity"
    return None


_RANK = {NO_FIT: 0, PREEMPT: 1, FIT: 2}


def assign_flavors(cq: str, podsets: list[PodSetRequest], book: QuotaBook,
                   flavors: Mapping[str, FlavorInfo]) -> Assignment:
    """Pick a flavor for every resource of every pod set, in ClusterQueue order, as Kueue does:
    the first flavor that fits wins (unless it would borrow and whenCanBorrow is TryNextFlavor);
    a flavor needing preemption is kept as a fallback while later flavors are tried."""
    spec = book.specs[cq]
    assigned: Usage = {}
    result: list[PodSetAssignment] = []
    overall = FIT
    borrows = False
    messages: list[str] = []
    for podset in podsets:
        total = podset.total()
        reasons: list[str] = []
        chosen: dict[str, str] = {}
        podset_mode = FIT
        groups_done: set[int] = set()
        for resource in total:
            if resource in chosen:
                continue
            group = spec.group_for(resource)
            if group is None:
                reasons.append(f"resource {resource} unavailable in ClusterQueue")
                podset_mode = NO_FIT
                break
            if id(group) in groups_done:
                continue
            groups_done.add(id(group))
            requested = {r: q for r, q in total.items() if r in group.covered}
            best: tuple[str, int, bool] | None = None  # (flavor, rank, borrows)
            for flavor_quotas in group.flavors:
                fname = flavor_quotas.name
                problem = _flavor_problem(podset, flavors.get(fname), fname)
                if problem:
                    reasons.append(problem)
                    continue
                mode, flavor_borrows = FIT, False
                for res, req in requested.items():
                    fr = (fname, res)
                    res_mode, res_borrows, reason = _fits(cq, fr, assigned.get(fr, 0), req, book, spec)
                    if reason:
                        reasons.append(reason)
                    if _RANK[res_mode] < _RANK[mode]:
                        mode = res_mode
                    flavor_borrows = flavor_borrows or res_borrows
                    if mode == NO_FIT:
                        break
                if mode == NO_FIT:
                    continue
                rank = _RANK[mode]
                if best is None or rank > best[1] or (rank == best[1] and best[2] and not flavor_borrows):
                    best = (fname, rank, flavor_borrows)
                if mode == FIT and not (flavor_borrows and spec.when_can_borrow == "TryNextFlavor"):
                    break
                if mode == PREEMPT and spec.when_can_preempt == "MayStopSearch":
                    break
            if best is None:
                podset_mode = NO_FIT
                break
            for res in requested:
                chosen[res] = best[0]
            borrows = borrows or best[2]
            group_mode = FIT if best[1] == _RANK[FIT] else PREEMPT
            if _RANK[group_mode] < _RANK[podset_mode]:
                podset_mode = group_mode
        if podset_mode != FIT:
            messages.append(f"couldn't assign flavors to pod set {podset.name}: {', '.join(sorted(reasons))}")
        if _RANK[podset_mode] < _RANK[overall]:
            overall = podset_mode
        if podset_mode == NO_FIT:
            break
        usage = {res: total[res] for res in chosen}
        for res, amount in usage.items():
            fr = (chosen[res], res)
            assigned[fr] = assigned.get(fr, 0) + amount
        result.append(PodSetAssignment(podset.name, podset.count, dict(chosen), usage))
    return Assignment(overall, result, assigned, borrows, "; ".join(messages))


def _fits(cq: str, fr: FlavorResource, assumed: int, request: int, book: QuotaBook,
          spec: ClusterQueueSpec) -> tuple[str, bool, str]:
    """(mode, borrows, reason) for asking `request` more of `fr` on top of `assumed` (earlier pod sets)."""
    quota = spec.quota(fr)
    if quota is None:
        return NO_FIT, False, (f"insufficient quota for {fr[1]} in flavor {fr[0]}, previously considered "
                               f"podsets requests ({format_milli(fr[1], assumed)}) + current podset request "
                               f"({format_milli(fr[1], request)}) > maximum capacity (0)")
    value = assumed + request
    max_capacity = book.potential_available(cq, fr)
    if value > max_capacity:
        return NO_FIT, False, (f"insufficient quota for {fr[1]} in flavor {fr[0]}, previously considered "
                               f"podsets requests ({format_milli(fr[1], assumed)}) + current podset request "
                               f"({format_milli(fr[1], request)}) > maximum capacity "
                               f"({format_milli(fr[1], max_capacity)})")
    available = book.available(cq, fr)
    borrows = book.used(cq, fr) + value > quota.nominal
    if value <= available:
        return FIT, borrows, ""
    reason = (f"insufficient unused quota for {fr[1]} in flavor {fr[0]}, "
              f"{format_milli(fr[1], value - available)} more needed")
    if spec.within_cluster_queue != "Never" and value <= quota.nominal:
        return PREEMPT, borrows, reason
    return NO_FIT, borrows, reason


@dataclass(frozen=True, slots=True)
class Candidate:
    """An admitted workload that could be preempted."""

    key: tuple[str, str]
    priority: int
    created: float  # queue-order timestamp
    admitted: float  # when quota was reserved
    usage: Mapping[FlavorResource, int]


def can_preempt(policy: str, incoming_priority: int, incoming_created: float, victim: Candidate) -> bool:
    if victim.priority < incoming_priority:
        return policy in ("LowerPriority", "LowerOrNewerEqualPriority")
    if victim.priority == incoming_priority and policy == "LowerOrNewerEqualPriority":
        return victim.created > incoming_created
    return False


def _fits_all(cq: str, need: Mapping[FlavorResource, int], book: QuotaBook, usage: Mapping[str, Usage]) -> bool:
    return all(amount <= book.available(cq, fr, usage) for fr, amount in need.items())


def _without(usage: Mapping[str, Usage], cq: str, remove: Mapping[FlavorResource, int]) -> dict[str, Usage]:
    copy = {name: dict(u) for name, u in usage.items()}
    own = copy.setdefault(cq, {})
    for fr, amount in remove.items():
        own[fr] = own.get(fr, 0) - amount
    return copy


def preemption_targets(cq: str, need: Mapping[FlavorResource, int], incoming_priority: int,
                       incoming_created: float, candidates: Iterable[Candidate], book: QuotaBook,
                       ) -> list[Candidate] | None:
    """Kueue's classical in-queue preemption: take the lowest-priority, most recently admitted
    workloads until the incoming one fits, then give back any that were not needed.
    Returns None when no set of allowed victims makes room."""
    policy = book.specs[cq].within_cluster_queue
    relevant = [c for c in candidates
                if can_preempt(policy, incoming_priority, incoming_created, c)
                and any(fr in need for fr in c.usage)]
    relevant.sort(key=lambda c: (c.priority, -c.admitted))
    usage: dict[str, Usage] = {name: dict(u) for name, u in book.usage.items()}
    chosen: list[Candidate] = []
    for victim in relevant:
        usage = _without(usage, cq, victim.usage)
        chosen.append(victim)
        if _fits_all(cq, need, book, usage):
            break
    else:
        return None
    # Fill back: keep only the victims whose removal is really needed.
    for victim in reversed(list(chosen)):
        restored = _without(usage, cq, {fr: -amount for fr, amount in victim.usage.items()})
        if _fits_all(cq, need, book, restored):
            usage = restored
            chosen.remove(victim)
    return chosen


def fits_now(cq: str, need: Mapping[FlavorResource, int], book: QuotaBook,
             released: Iterable[Mapping[FlavorResource, int]] = ()) -> bool:
    """Whether `need` fits once the given usages are released (victims already being evicted)."""
    usage: Mapping[str, Usage] = book.usage
    for item in released:
        usage = _without(usage, cq, item)
    return _fits_all(cq, need, book, usage)
