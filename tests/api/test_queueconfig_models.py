from __future__ import annotations

from typing import Any

import pytest
from kaiwo_api_examples import (
    EXAMPLE_A_DEFAULT_KQC,
    EXAMPLE_B_NAMESPACED,
    EXAMPLE_C_PRIORITIES,
    EXAMPLE_D_TOPOLOGY,
)

from kaiwo_ray.api.load import ManifestError, parse_object
from kaiwo_ray.api.queueconfig import ClusterQueueSpec, KaiwoQueueConfig, QueueConfigPhase


def kqc(spec: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo"},
        "spec": spec,
        **top,
    }


def group(covered: list[str], *flavors: tuple[str, list[str]]) -> dict[str, Any]:
    return {
        "coveredResources": covered,
        "flavors": [
            {
                "name": name,
                "resources": [{"name": r, "nominalQuota": q} for r, q in zip(covered, quotas, strict=False)],
            }
            for name, quotas in flavors
        ],
    }


def error_of(doc: dict[str, Any]) -> str:
    with pytest.raises(ManifestError) as info:
        parse_object(doc)
    return str(info.value)


@pytest.mark.parametrize(
    "doc", [EXAMPLE_A_DEFAULT_KQC, EXAMPLE_B_NAMESPACED, EXAMPLE_C_PRIORITIES, EXAMPLE_D_TOPOLOGY]
)
def test_cluster_md_examples_parse(doc: dict[str, Any]) -> None:
    assert isinstance(parse_object(doc), KaiwoQueueConfig)


def test_example_a_shapes() -> None:
    parsed = parse_object(EXAMPLE_A_DEFAULT_KQC)
    assert isinstance(parsed, KaiwoQueueConfig)
    cq = parsed.spec.cluster_queues[0]
    assert cq.spec.cohort == "kaiwo"
    assert cq.spec.namespace_selector == {}
    quotas = cq.spec.resource_groups[0].flavors[3].resources
    assert [(q.name, q.nominal_quota) for q in quotas] == [
        ("cpu", "230"),
        ("memory", "1979120929996"),
        ("amd.com/gpu", "16"),
        ("nvidia.com/gpu", "0"),
    ]
    assert parsed.spec.topologies[0].metadata.name == "default-topology"
    assert parsed.spec.resource_flavors[0].topology_name == "default-topology"


def test_example_c_priority_classes() -> None:
    parsed = parse_object(EXAMPLE_C_PRIORITIES)
    assert isinstance(parsed, KaiwoQueueConfig)
    high, low = parsed.spec.workload_priority_classes
    assert (high.metadata.name, high.value, high.description) == (
        "high-priority",
        1000,
        "High priority class",
    )
    assert (low.metadata.name, low.value, low.description) == ("low-priority", 10, None)
    assert parsed.spec.resource_flavors[0].node_labels == {}


def test_kueue_cluster_queue_defaults() -> None:
    spec = ClusterQueueSpec()
    assert spec.queueing_strategy == "BestEffortFIFO"
    assert spec.stop_policy == "None"
    assert spec.flavor_fungibility.when_can_borrow == "Borrow"
    assert spec.flavor_fungibility.when_can_preempt == "TryNextFlavor"
    assert spec.preemption.within_cluster_queue == "Never"
    assert spec.preemption.reclaim_within_cohort == "Never"
    assert spec.preemption.borrow_within_cohort is None
    assert spec.namespace_selector is None  # absent = no namespaces; {} = all
    assert spec.fair_sharing is None
    assert ClusterQueueSpec.model_validate({"fairSharing": {}}).fair_sharing.weight == "1"  # type: ignore[union-attr]


def test_numbers_in_quotas_are_quantities() -> None:
    spec = ClusterQueueSpec.model_validate({"resourceGroups": [group(["cpu", "memory"], ("f", [8, 1.5]))]})
    assert [r.nominal_quota for r in spec.resource_groups[0].flavors[0].resources] == ["8", "1.5"]


@pytest.mark.parametrize("key", ["cohort", "cohortName"])
def test_cohort_accepts_v1beta1_and_v1beta2_names(key: str) -> None:
    spec = ClusterQueueSpec.model_validate({key: "team"})
    assert spec.cohort == "team"
    assert spec.to_wire().get("cohort") == "team"
    assert "cohortName" not in spec.to_wire()


def test_kqc_status() -> None:
    parsed = parse_object(kqc({}, status={"status": "READY"}))
    assert isinstance(parsed, KaiwoQueueConfig) and parsed.status is not None
    assert parsed.status.status is QueueConfigPhase.READY
    assert (
        error_of(kqc({}, status={"status": "Ready"}))
        == 'status.status: must be one of "", "READY", "FAILED", "PENDING" (got "Ready")'
    )


def _many(n: int, make: Any) -> list[Any]:
    return [make(i) for i in range(n)]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"clusterQueues": [{"spec": {}}]}, "spec.clusterQueues[0].name: required"),
        (
            {"clusterQueues": _many(1001, lambda i: {"name": f"q{i}"})},
            "spec.clusterQueues: must have at most 1000 items (got 1001)",
        ),
        (
            {"resourceFlavors": _many(21, lambda i: {"name": f"f{i}"})},
            "spec.resourceFlavors: must have at most 20 items (got 21)",
        ),
        (
            {"workloadPriorityClasses": _many(21, lambda i: {"metadata": {"name": f"p{i}"}, "value": i})},
            "spec.workloadPriorityClasses: must have at most 20 items (got 21)",
        ),
        (
            {
                "topologies": _many(
                    11, lambda i: {"metadata": {"name": f"t{i}"}, "spec": {"levels": [{"nodeLabel": "a"}]}}
                )
            },
            "spec.topologies: must have at most 10 items (got 11)",
        ),
        (
            {"resourceFlavors": [{"name": "f", "nodeLabels": {str(i): "x" for i in range(11)}}]},
            "spec.resourceFlavors[0].nodeLabels: must have at most 10 entries (got 11)",
        ),
        (
            {
                "resourceFlavors": [
                    {"name": "f", "taints": _many(6, lambda i: {"key": f"k{i}", "effect": "NoSchedule"})}
                ]
            },
            "spec.resourceFlavors[0].taints: must have at most 5 items (got 6)",
        ),
        (
            {"resourceFlavors": [{"name": "f", "tolerations": _many(6, lambda i: {"key": f"k{i}"})}]},
            "spec.resourceFlavors[0].tolerations: must have at most 5 items (got 6)",
        ),
        (
            {"resourceFlavors": [{"name": "f", "taints": [{"key": "k", "effect": "Sometimes"}]}]},
            'spec.resourceFlavors[0].taints[0].effect: must be one of "NoSchedule", "PreferNoSchedule", "NoExecute" (got "Sometimes")',
        ),
        (
            {"workloadPriorityClasses": [{"metadata": {"name": "p"}}]},
            "spec.workloadPriorityClasses[0].value: required",
        ),
        (
            {"workloadPriorityClasses": [{"metadata": {"name": "p"}, "value": 2**31}]},
            "spec.workloadPriorityClasses[0].value: must be <= 2147483647 (got 2147483648)",
        ),
        (
            {"workloadPriorityClasses": [{"name": "p", "value": 1}]},
            "spec.workloadPriorityClasses[0].name: unknown field",
        ),
        (
            {"topologies": [{"metadata": {"name": "t"}, "spec": {"levels": []}}]},
            "spec.topologies[0].spec.levels: must have at least 1 item (got 0)",
        ),
        (
            {
                "topologies": [
                    {
                        "metadata": {"name": "t"},
                        "spec": {"levels": _many(9, lambda i: {"nodeLabel": f"l{i}"})},
                    }
                ]
            },
            "spec.topologies[0].spec.levels: must have at most 8 items (got 9)",
        ),
        (
            {
                "topologies": [
                    {"metadata": {"name": "t"}, "spec": {"levels": [{"nodeLabel": "a"}, {"nodeLabel": "a"}]}}
                ]
            },
            "spec.topologies[0].spec: levels must have unique nodeLabels",
        ),
        (
            {
                "topologies": [
                    {
                        "metadata": {"name": "t"},
                        "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "a"}]},
                    }
                ]
            },
            "spec.topologies[0].spec: kubernetes.io/hostname may only be the last level",
        ),
        (
            {"topologies": [{"metadata": {"name": "t"}, "spec": {"levels": [{"nodeLabel": ""}]}}]},
            "spec.topologies[0].spec.levels[0].nodeLabel: must be at least 1 characters long",
        ),
    ],
)
def test_kqc_limits_and_required_fields(spec: dict[str, Any], message: str) -> None:
    assert error_of(kqc(spec)) == message


@pytest.mark.parametrize(
    ("cq_spec", "message"),
    [
        (
            {"queueingStrategy": "FIFO"},
            'queueingStrategy: must be one of "StrictFIFO", "BestEffortFIFO" (got "FIFO")',
        ),
        ({"stopPolicy": "Stop"}, 'stopPolicy: must be one of "None", "Hold", "HoldAndDrain" (got "Stop")'),
        (
            {"preemption": {"withinClusterQueue": "Always"}},
            'preemption.withinClusterQueue: must be one of "Never", "LowerPriority", "LowerOrNewerEqualPriority" (got "Always")',
        ),
        (
            {
                "preemption": {
                    "reclaimWithinCohort": "Never",
                    "borrowWithinCohort": {"policy": "LowerPriority"},
                }
            },
            "preemption: reclaimWithinCohort=Never and borrowWithinCohort.policy!=Never cannot be combined",
        ),
        (
            {"flavorFungibility": {"whenCanBorrow": "Steal"}},
            'flavorFungibility.whenCanBorrow: must be one of "Borrow", "TryNextFlavor", "MayStopSearch" (got "Steal")',
        ),
        ({"cohort": "a", "cohortName": "b"}, 'cohort "a" and cohortName "b" disagree; set one'),
        (
            {"admissionChecks": ["a"], "admissionChecksStrategy": {"admissionChecks": [{"name": "a"}]}},
            "either admissionChecks or admissionChecksStrategy can be set, but not both",
        ),
        (
            {
                "resourceGroups": [
                    {
                        "coveredResources": [],
                        "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 1}]}],
                    }
                ]
            },
            "resourceGroups[0].coveredResources: must have at least 1 item (got 0)",
        ),
        (
            {"resourceGroups": [group(["cpu", "memory"], ("f", ["1"]))]},
            'resourceGroups[0]: flavor "f" has 1 resources but coveredResources lists 2; each flavor needs one quota per covered resource',
        ),
        (
            {"resourceGroups": [group(["cpu"], ("f", ["lots"]))]},
            'resourceGroups[0].flavors[0].resources[0].nominalQuota: invalid quantity "lots" (expected e.g. 2, 500m, 16Gi)',
        ),
        (
            {
                "resourceGroups": [
                    {"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu"}]}]}
                ]
            },
            "resourceGroups[0].flavors[0].resources[0].nominalQuota: required",
        ),
        (
            {"resourceGroups": _many(17, lambda i: group(["cpu"], (f"f{i}", ["1"])))},
            "resourceGroups: must have at most 16 items (got 17)",
        ),
    ],
)
def test_cluster_queue_spec_validation(cq_spec: dict[str, Any], message: str) -> None:
    text = error_of(kqc({"clusterQueues": [{"name": "q", "spec": cq_spec}]}))
    prefix = "spec.clusterQueues[0].spec"
    whole_spec = message.startswith(("cohort ", "either "))
    assert text == (f"{prefix}: {message}" if whole_spec else f"{prefix}.{message}")


def test_taints_and_tolerations_are_typed() -> None:
    spec = {
        "resourceFlavors": [
            {
                "name": "gpu",
                "taints": [{"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoSchedule"}],
                "tolerations": [
                    {"key": "kaiwo.silogen.ai/gpu", "operator": "Exists", "effect": "NoSchedule"}
                ],
            }
        ]
    }
    parsed = parse_object(kqc(spec))
    assert isinstance(parsed, KaiwoQueueConfig)
    assert parsed.spec.resource_flavors[0].tolerations[0].operator == "Exists"
    bad = {"resourceFlavors": [{"name": "f", "tolerations": [{"operator": "Maybe"}]}]}
    assert (
        error_of(kqc(bad))
        == 'spec.resourceFlavors[0].tolerations[0].operator: must be one of "Exists", "Equal" (got "Maybe")'
    )
