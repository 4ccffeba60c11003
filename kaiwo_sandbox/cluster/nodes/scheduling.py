"""The kube-scheduler's decisions as pure functions: filter nodes the way the default plugins do
(in their order, first failing plugin wins), score the survivors, and word the failure exactly
like `FitError.Error()` so tools and humans reading `kubectl describe pod` see familiar text.

Filter order (default profile): NodeUnschedulable, TaintToleration, NodeAffinity,
NodeResourcesFit. VolumeBinding's PreFilter (unbound or missing PVCs) fails the pod before any
node is looked at. Scoring: `default-scheduler` spreads (LeastAllocated on cpu/memory);
`kaiwo-scheduler` bin-packs GPUs (RequestedToCapacityRatio on GPU resources, Kaiwo's profile).
Ties go to the node name that sorts first, so runs are reproducible.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from kaiwo_sandbox.cluster.pods import GPU_RESOURCES, pod_requests_units, quantity
from kaiwo_sandbox.contracts import JsonObj

DEFAULT_SCHEDULER = "default-scheduler"
KAIWO_SCHEDULER = "kaiwo-scheduler"
SCHEDULER_NAMES = frozenset({DEFAULT_SCHEDULER, KAIWO_SCHEDULER})
DEFAULT_MAX_PODS = Decimal(110)

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"

REASON_UNSCHEDULABLE_NODE = "node(s) were unschedulable"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_TOO_MANY_PODS = "Too many pods"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_POD_AFFINITY = "node(s) didn't match pod affinity rules"
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_PREEMPTION_VICTIMS = "No preemption victims found for incoming pod"
NO_NODES = "no nodes available to schedule pods"


@dataclass(slots=True)
class NodeState:
    """A node as the scheduler sees it: identity, what it offers, and what is charged to it."""

    name: str
    labels: Mapping[str, str]
    taints: list[JsonObj]
    unschedulable: bool
    allocatable: dict[str, Decimal]
    used: dict[str, Decimal] = field(default_factory=dict)
    pods: int = 0
    # (namespace, labels) of the pods bound here: filled only when a pod to place has pod (anti-)affinity
    pod_labels: list[tuple[str, Mapping[str, str]]] = field(default_factory=list)

    def charge(self, requests: Mapping[str, Decimal]) -> None:
        for name, value in requests.items():
            self.used[name] = self.used.get(name, Decimal(0)) + value
        self.pods += 1


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """Why one node was rejected. `resolvable` is False when evicting pods could never help."""

    reasons: tuple[str, ...]
    resolvable: bool


def node_state(node: JsonObj) -> NodeState:
    """Build the scheduler's view of a Node; a node that is not Ready carries the not-ready taint
    the node lifecycle controller would have put on it."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    raw = status.get("allocatable") or status.get("capacity") or {}
    allocatable = {name: quantity(value) for name, value in raw.items()}
    allocatable.setdefault("pods", DEFAULT_MAX_PODS)
    taints = [dict(t) for t in spec.get("taints") or []]
    if not node_ready(node) and not any(t.get("key") == NOT_READY_TAINT for t in taints):
        taints.append({"key": NOT_READY_TAINT, "effect": "NoSchedule"})
    return NodeState(
        name=str(meta.get("name", "")),
        labels=dict(meta.get("labels") or {}),
        taints=taints,
        unschedulable=bool(spec.get("unschedulable")),
        allocatable=allocatable,
    )


def node_ready(node: JsonObj) -> bool:
    """Ready unless a Ready condition says otherwise (a seeded node without conditions is Ready)."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return True


def tolerates(tolerations: Iterable[JsonObj], taint: JsonObj) -> bool:
    for toleration in tolerations:
        effect = toleration.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key") or ""
        operator = toleration.get("operator") or "Equal"
        if not key:
            if operator == "Exists":
                return True
            continue
        if key != taint.get("key"):
            continue
        if operator == "Exists" or (toleration.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def expression_matches(labels: Mapping[str, str], expr: JsonObj) -> bool:
    """One NodeSelectorRequirement against a label set (shared with Kueue's flavor matching, as
    both real components use the same Kubernetes helper)."""
    key = expr.get("key", "")
    operator = expr.get("operator", "")
    values = [str(v) for v in expr.get("values") or []]
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        try:
            have, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def _field_matches(node_name: str, expr: JsonObj) -> bool:
    if expr.get("key") != "metadata.name":
        return False
    return expression_matches({"metadata.name": node_name}, expr)


def matches_node_selector_term(node: NodeState, term: JsonObj) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term selects nothing, as in the real scheduler
    return all(expression_matches(node.labels, e) for e in expressions) and all(
        _field_matches(node.name, f) for f in fields)


def matches_affinity(pod_spec: JsonObj, node: NodeState) -> bool:
    """nodeSelector (all pairs) AND required node affinity (terms ORed, expressions ANDed)."""
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if node.labels.get(key) != str(value):
            return False
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if not required:
        return True
    terms = required.get("nodeSelectorTerms") or []
    return any(matches_node_selector_term(node, term) for term in terms)


def filter_node(pod_spec: JsonObj, requests: Mapping[str, Decimal], node: NodeState) -> NodeVerdict | None:
    """None when the pod fits; otherwise the first failing plugin's reasons."""
    tolerations = pod_spec.get("tolerations") or []
    if node.unschedulable and not tolerates(tolerations, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}):
        return NodeVerdict((REASON_UNSCHEDULABLE_NODE,), resolvable=False)
    for taint in node.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return NodeVerdict(
                (f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}",),
                resolvable=False)
    if not matches_affinity(pod_spec, node):
        return NodeVerdict((REASON_AFFINITY,), resolvable=False)
    reasons: list[str] = []
    if Decimal(node.pods + 1) > node.allocatable.get("pods", DEFAULT_MAX_PODS):
        reasons.append(REASON_TOO_MANY_PODS)
    for name in sorted(requests):
        wanted = requests[name]
        if wanted <= 0:
            continue
        free = node.allocatable.get(name, Decimal(0)) - node.used.get(name, Decimal(0))
        if wanted > free:
            reasons.append(f"Insufficient {name}")
    if reasons:
        return NodeVerdict(tuple(reasons), resolvable=True)
    return None


def score_node(scheduler_name: str, requests: Mapping[str, Decimal], node: NodeState) -> float:
    """Higher is better. Both strategies look at the node as it would be after placement."""
    if scheduler_name == KAIWO_SCHEDULER:
        # RequestedToCapacityRatio, shape 0% -> 0, 100% -> 10, equal weights: only resources the
        # node has and that end up used count towards the average (as in the real scorer).
        ratios = []
        for name in GPU_RESOURCES:
            capacity = node.allocatable.get(name, Decimal(0))
            if capacity <= 0:
                continue
            after = node.used.get(name, Decimal(0)) + requests.get(name, Decimal(0))
            ratio = float(min(after, capacity) / capacity)
            if ratio > 0:
                ratios.append(ratio)
        return sum(ratios) / len(ratios) if ratios else 0.0
    # LeastAllocated on cpu and memory: the emptier the node stays, the better.
    shares = []
    for name in ("cpu", "memory"):
        capacity = node.allocatable.get(name, Decimal(0))
        if capacity <= 0:
            continue
        after = node.used.get(name, Decimal(0)) + requests.get(name, Decimal(0))
        shares.append(float(max(capacity - after, Decimal(0)) / capacity))
    return sum(shares) / len(shares) if shares else 0.0


@dataclass(frozen=True, slots=True)
class Placement:
    node: str


@dataclass(frozen=True, slots=True)
class Unschedulable:
    message: str


def failure_message(total_nodes: int, verdicts: Iterable[NodeVerdict], prefilter: str | None = None) -> str:
    """`FitError.Error()`: per-reason node counts sorted as strings, then the preemption summary."""
    if total_nodes == 0:
        return NO_NODES
    head = f"0/{total_nodes} nodes are available:"
    if prefilter:
        return (f"{head} {prefilter}. preemption: {head} "
                f"{total_nodes} {PREEMPTION_NOT_HELPFUL}.")
    reasons: Counter[str] = Counter()
    preemption: Counter[str] = Counter()
    for verdict in verdicts:
        reasons.update(verdict.reasons)
        preemption[NO_PREEMPTION_VICTIMS if verdict.resolvable else PREEMPTION_NOT_HELPFUL] += 1
    filter_part = ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items()))
    preemption_part = ", ".join(sorted(f"{count} {reason}" for reason, count in preemption.items()))
    return f"{head} {filter_part}. preemption: {head} {preemption_part}."


def has_pod_affinity(pod: JsonObj) -> bool:
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    return any((affinity.get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
               for kind in ("podAffinity", "podAntiAffinity"))


def _selector_matches(selector: JsonObj, labels: Mapping[str, str]) -> bool:
    if not selector:
        return False  # a term without a selector selects nothing
    return all(labels.get(k) == str(v) for k, v in (selector.get("matchLabels") or {}).items()) and all(
        expression_matches(labels, e) for e in selector.get("matchExpressions") or [])


def _term_pods(term: JsonObj, namespace: str, node: NodeState, nodes: list[NodeState]) -> bool | None:
    """Whether a pod matching `term` runs in `node`'s topology domain; None when `node` has no value
    for the term's topologyKey (it is in no domain)."""
    key = str(term.get("topologyKey") or "")
    domain = node.labels.get(key)
    if domain is None:
        return None
    namespaces = set(term.get("namespaces") or [namespace])
    return any(other.labels.get(key) == domain and ns in namespaces and _selector_matches(term.get("labelSelector")
                                                                                          or {}, labels)
               for other in nodes for ns, labels in other.pod_labels)


def inter_pod_affinity(pod: JsonObj, node: NodeState, nodes: list[NodeState]) -> str | None:
    """The InterPodAffinity filter for required terms: None when `node` passes, else the reason."""
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace", ""))
    affinity = spec.get("affinity") or {}
    for term in (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []:
        if _term_pods(term, namespace, node, nodes):
            return REASON_ANTI_AFFINITY
    own = meta.get("labels") or {}
    for term in (affinity.get("podAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []:
        found = _term_pods(term, namespace, node, nodes)
        if found:
            continue
        # The first pod of a group that matches its own term may go anywhere in a domain, as upstream allows.
        anywhere = any(_selector_matches(term.get("labelSelector") or {}, labels)
                       for other in nodes for _, labels in other.pod_labels)
        if found is None or anywhere or not _selector_matches(term.get("labelSelector") or {}, own):
            return REASON_POD_AFFINITY
    return None


def place_pod(pod: JsonObj, nodes: list[NodeState], volume_problem: str | None = None) -> Placement | Unschedulable:
    """Pick a node for `pod` (not mutating the node states) or explain why none fits."""
    if volume_problem:
        return Unschedulable(failure_message(len(nodes), (), volume_problem))
    spec = pod.get("spec") or {}
    scheduler_name = spec.get("schedulerName") or DEFAULT_SCHEDULER
    requests = pod_requests_units(pod)
    verdicts: list[NodeVerdict] = []
    best: tuple[float, str] | None = None
    affinity = has_pod_affinity(pod)
    for node in nodes:
        verdict = filter_node(spec, requests, node)
        if verdict is None and affinity:
            reason = inter_pod_affinity(pod, node, nodes)
            verdict = NodeVerdict((reason,), resolvable=False) if reason else None
        if verdict is not None:
            verdicts.append(verdict)
            continue
        score = score_node(scheduler_name, requests, node)
        # Highest score wins; among equal scores the first name in sort order.
        if best is None or score > best[0] or (score == best[0] and node.name < best[1]):
            best = (score, node.name)
    if best is not None:
        return Placement(best[1])
    return Unschedulable(failure_message(len(nodes), verdicts))


def volume_problem(pod: JsonObj, pvc_phases: Mapping[str, str | None]) -> str | None:
    """VolumeBinding PreFilter: every claimed PVC must exist and be Bound (immediate binding).
    `pvc_phases` maps claim name -> phase (None when the claim does not exist)."""
    unbound = False
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if not claim:
            continue
        if claim not in pvc_phases or pvc_phases[claim] is None:
            return f'persistentvolumeclaim "{claim}" not found'
        if pvc_phases[claim] != "Bound":
            unbound = True
    return "pod has unbound immediate PersistentVolumeClaims" if unbound else None


def claim_names(pod: JsonObj) -> list[str]:
    return [
        str(volume["persistentVolumeClaim"]["claimName"])
        for volume in (pod.get("spec") or {}).get("volumes") or []
        if (volume.get("persistentVolumeClaim") or {}).get("claimName")
    ]


def pod_priority(pod: JsonObj, class_values: Mapping[str, int], global_default: int = 0) -> int:
    """`spec.priority`, else the value of its `priorityClassName` (what the Priority admission
    plugin would have written), else the cluster's globalDefault class."""
    spec = pod.get("spec") or {}
    priority = spec.get("priority")
    if isinstance(priority, int) and not isinstance(priority, bool):
        return priority
    name = spec.get("priorityClassName")
    if name and name in class_values:
        return class_values[name]
    return global_default


def queue_order(pod: JsonObj, priority: int = 0) -> tuple[int, str, str]:
    """PrioritySort: higher priority first, then older first, then by name."""
    meta = pod.get("metadata") or {}
    return (-priority, str(meta.get("creationTimestamp") or ""),
            f"{meta.get('namespace', '')}/{meta.get('name', '')}")
