"""The scheduler's pure decisions: filters, scoring, and the FitError wording."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from kaiwo_sandbox.cluster.nodes.scheduling import (
    NO_NODES,
    REASON_ANTI_AFFINITY,
    NodeVerdict,
    Placement,
    Unschedulable,
    failure_message,
    matches_affinity,
    node_state,
    place_pod,
    pod_priority,
    queue_order,
    tolerates,
    volume_problem,
)
from kaiwo_sandbox.cluster.pods import pod_requests_units
from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.semantics.qos import qos_class


def node(name: str, *, labels: dict[str, str] | None = None, gpus: int = 0, cpu: str = "8") -> JsonObj:
    capacity = {"cpu": cpu, "memory": "32Gi", "pods": "110"}
    if gpus:
        capacity["amd.com/gpu"] = str(gpus)
    return {"metadata": {"name": name, "labels": labels or {}}, "status": {"allocatable": capacity}}


def pod(*, gpus: int = 0, cpu: str = "1", scheduler: str | None = None, **spec: object) -> JsonObj:
    resources: JsonObj = {"requests": {"cpu": cpu}}
    if gpus:
        resources["limits"] = {"amd.com/gpu": str(gpus)}
    body: JsonObj = {"containers": [{"name": "c", "resources": resources}], **spec}
    if scheduler:
        body["schedulerName"] = scheduler
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": body}


@pytest.mark.parametrize(("operator", "values", "labels", "expected"), [
    ("In", ["a", "b"], {"k": "a"}, True),
    ("In", ["a"], {}, False),
    ("NotIn", ["a"], {"k": "b"}, True),
    ("NotIn", ["a"], {}, True),
    ("Exists", [], {"k": ""}, True),
    ("DoesNotExist", [], {"k": "x"}, False),
    ("Gt", ["5"], {"k": "7"}, True),
    ("Lt", ["5"], {"k": "7"}, False),
    ("Gt", ["5"], {"k": "seven"}, False),
])
def test_node_affinity_operators(operator: str, values: list[str], labels: dict[str, str], expected: bool) -> None:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "k", "operator": operator, "values": values}]}]}}}
    assert matches_affinity({"affinity": affinity}, node_state(node("n", labels=labels))) is expected


def test_affinity_terms_are_ored_and_match_fields_name_the_node() -> None:
    terms = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["x"]}]},
             {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}]
    spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": terms}}}}
    assert matches_affinity(spec, node_state(node("n")))
    assert not matches_affinity(spec, node_state(node("other")))


def test_tolerations() -> None:
    taint = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
    assert tolerates([{"key": "gpu", "operator": "Exists"}], taint)
    assert tolerates([{"key": "gpu", "value": "true", "effect": "NoSchedule"}], taint)
    assert not tolerates([{"key": "gpu", "value": "false"}], taint)
    assert not tolerates([{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}], taint)
    assert tolerates([{"operator": "Exists"}], taint)


def test_requests_use_limits_and_the_init_container_max_rule() -> None:
    spec = {"containers": [{"resources": {"requests": {"cpu": "500m"}}}, {"resources": {"limits": {"cpu": "1"}}}],
            "initContainers": [{"resources": {"requests": {"cpu": "4", "memory": "1Gi"}}}]}
    assert pod_requests_units({"spec": spec}) == {"cpu": Decimal(4), "memory": Decimal(2**30)}


def test_native_sidecars_run_alongside_the_main_containers() -> None:
    # A restartable init container keeps running, so it adds to the main containers' requests.
    spec = {"containers": [{"resources": {"requests": {"cpu": "1"}}}],
            "initContainers": [{"restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}}]}
    assert pod_requests_units({"spec": spec}) == {"cpu": Decimal("1.5")}


def test_a_malformed_quantity_charges_nothing_instead_of_failing() -> None:
    assert pod_requests_units({"spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]}}) == {}


def test_qos_classes() -> None:
    guaranteed = {"spec": {"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}
    burstable = {"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}}
    assert qos_class(guaranteed["spec"]) == "Guaranteed"
    assert qos_class(burstable["spec"]) == "Burstable"
    assert qos_class({"containers": [{}]}) == "BestEffort"
    # amounts, not spellings: 1 CPU is 1000m
    assert qos_class({"containers": [{"resources": {"requests": {"cpu": "1000m", "memory": "1Gi"},
                                                     "limits": {"cpu": "1", "memory": "1024Mi"}}}]}) == "Guaranteed"


def test_fit_error_sorts_reasons_as_strings() -> None:
    verdicts = [NodeVerdict(("Insufficient cpu",), True)] * 10 + [NodeVerdict(("Too many pods",), True)] * 2
    message = failure_message(12, verdicts)
    assert message == ("0/12 nodes are available: 10 Insufficient cpu, 2 Too many pods. preemption: 0/12 nodes are "
                       "available: 12 No preemption victims found for incoming pod.")
    assert failure_message(0, []) == NO_NODES


def test_one_node_can_lack_several_resources() -> None:
    decision = place_pod(pod(gpus=2, cpu="100"), [node_state(node("n", cpu="1"))])
    assert isinstance(decision, Unschedulable)
    assert decision.message.startswith("0/1 nodes are available: 1 Insufficient amd.com/gpu, 1 Insufficient cpu.")


def test_scoring_spreads_or_packs_and_breaks_ties_by_name() -> None:
    nodes = [node_state(node("b", gpus=8)), node_state(node("a", gpus=8)), node_state(node("c", gpus=8))]
    nodes[2].charge({"amd.com/gpu": Decimal(6), "cpu": Decimal(6)})
    assert place_pod(pod(gpus=2, scheduler="kaiwo-scheduler"), nodes) == Placement("c")
    assert place_pod(pod(gpus=2), nodes) == Placement("a")
    assert place_pod(pod(gpus=4, scheduler="kaiwo-scheduler"), nodes) == Placement("a")


def test_volume_prefilter() -> None:
    with_claim = {"spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}}
    assert volume_problem(with_claim, {}) == 'persistentvolumeclaim "data" not found'
    assert volume_problem(with_claim, {"data": "Pending"}) == "pod has unbound immediate PersistentVolumeClaims"
    assert volume_problem(with_claim, {"data": "Bound"}) is None


def test_queue_order_is_priority_then_age() -> None:
    old = {"metadata": {"name": "old", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {}}
    new_high = {"metadata": {"name": "new", "creationTimestamp": "2026-01-02T00:00:00Z"}, "spec": {"priority": 10}}
    assert sorted([old, new_high], key=lambda p: queue_order(p, pod_priority(p, {}))) == [new_high, old]


def test_priority_comes_from_the_pod_its_class_or_the_global_default() -> None:
    classes = {"high": 1000}
    assert pod_priority({"spec": {"priority": 5, "priorityClassName": "high"}}, classes) == 5
    assert pod_priority({"spec": {"priorityClassName": "high"}}, classes) == 1000
    assert pod_priority({"spec": {"priorityClassName": "unknown"}}, classes, global_default=7) == 7
    assert pod_priority({"spec": {}}, classes) == 0


def test_required_pod_anti_affinity_spreads_pods_one_per_host() -> None:
    """The InterPodAffinity filter: a pod whose required anti-affinity term matches a pod already on a
    node (same topology domain) does not go there; with no such node left it is unschedulable."""
    def node(name: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "10"}}}

    def pod(name: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "ns", "labels": {"app": "spread"}},
                "spec": {"containers": [{"name": "c"}], "affinity": {"podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [{
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "spread"}}}]}}}}

    nodes = [node_state(node("a")), node_state(node("b"))]
    placed = []
    for name in ("p1", "p2"):
        decision = place_pod(pod(name), nodes)
        assert isinstance(decision, Placement)
        placed.append(decision.node)
        next(n for n in nodes if n.name == decision.node).pod_labels.append(("ns", {"app": "spread"}))
    assert sorted(placed) == ["a", "b"]
    third = place_pod(pod("p3"), nodes)
    assert isinstance(third, Unschedulable) and REASON_ANTI_AFFINITY in third.message
    other_namespace = place_pod({**pod("p4"), "metadata": {"name": "p4", "namespace": "elsewhere"}}, nodes)
    assert isinstance(other_namespace, Placement)  # the term counts pods of the pod's own namespace only
