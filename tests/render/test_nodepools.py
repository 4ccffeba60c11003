"""Node discovery and the default KaiwoQueueConfig (cluster.md §5, Example A)."""

from __future__ import annotations

import pytest

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.queueconfig import KaiwoQueueConfigSpec
from kaiwo_ray.render.nodepools import (
    NodeDiscoveryError,
    clean_amd_model,
    default_queue_config,
    desired_node_labels_and_taints,
    discover_node_pools,
    flavor_name_for_node,
    merge_default_queue_config,
    node_shape,
)

AMD = {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM", "beta.amd.com/gpu.family.AI": "8"}
NVIDIA = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}
CONTROL_PLANE = {"node-role.kubernetes.io/control-plane": ""}


def node(
    name: str,
    cpu: str,
    memory: str,
    labels: dict[str, str] | None = None,
    *,
    unschedulable: bool = False,
    taints: list[JsonObj] | None = None,
) -> JsonObj:
    spec: JsonObj = {}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
        "status": {"capacity": {"cpu": cpu, "memory": memory}},
    }


def example_a_nodes() -> list[JsonObj]:
    return [
        node("cp", "8", "32Gi", CONTROL_PLANE),
        node("c1", "32", "128Gi"),
        node("c2", "32", "128Gi"),
        node("m1", "128", "1024Gi", AMD),
        node("m2", "128", "1024Gi", AMD),
        node("h1", "96", "512Gi", NVIDIA),
        node("h2", "96", "512Gi", NVIDIA, unschedulable=True),
    ]


def dumped(spec: KaiwoQueueConfigSpec) -> JsonObj:
    result: JsonObj = spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    return result


def quotas(flavor: JsonObj) -> list[str]:
    return [resource["nominalQuota"] for resource in flavor["resources"]]


class TestExampleA:
    """The worked example of cluster.md §5, checked field by field."""

    def test_resource_flavors_names_labels_and_topology(self) -> None:
        spec = dumped(default_queue_config(example_a_nodes(), KaiwoConfigSpec()))
        assert spec["resourceFlavors"] == [
            {
                "name": name,
                "nodeLabels": {"kaiwo/nodepool": name},
                "taints": [],
                "tolerations": [],
                "topologyName": "default-topology",
            }
            for name in [
                "cpu-only-0gpu-7core-28gi",
                "cpu-only-0gpu-28core-115gi",
                "amd-mi300x-8gpu-115core-921gi",
                "nvidia-nvidiah10080gbhbm3-8gpu-86core-460gi",
            ]
        ]

    def test_cluster_queue_quotas_are_exact_and_ordered(self) -> None:
        spec = dumped(default_queue_config(example_a_nodes(), KaiwoConfigSpec()))
        (queue,) = spec["clusterQueues"]
        assert queue["name"] == "kaiwo"
        assert queue["namespaces"] == []
        assert queue["spec"]["cohort"] == "kaiwo"
        assert queue["spec"]["namespaceSelector"] == {}
        (group,) = queue["spec"]["resourceGroups"]
        assert group["coveredResources"] == ["cpu", "memory", "amd.com/gpu", "nvidia.com/gpu"]
        for flavor in group["flavors"]:
            assert [resource["name"] for resource in flavor["resources"]] == group["coveredResources"]
        assert [(flavor["name"], quotas(flavor)) for flavor in group["flavors"]] == [
            ("cpu-only-0gpu-7core-28gi", ["7", "30923764531", "0", "0"]),
            ("cpu-only-0gpu-28core-115gi", ["56", "247390116248", "0", "0"]),
            ("nvidia-nvidiah10080gbhbm3-8gpu-86core-460gi", ["86", "494780232499", "0", "8"]),
            ("amd-mi300x-8gpu-115core-921gi", ["230", "1979120929996", "16", "0"]),
        ]

    def test_default_topology(self) -> None:
        spec = dumped(default_queue_config(example_a_nodes(), KaiwoConfigSpec()))
        assert spec["topologies"] == [
            {
                "metadata": {"name": "default-topology"},
                "spec": {
                    "levels": [
                        {"nodeLabel": "kaiwo/topology-block"},
                        {"nodeLabel": "kaiwo/topology-rack"},
                        {"nodeLabel": "kubernetes.io/hostname"},
                    ]
                },
            }
        ]
        assert spec["workloadPriorityClasses"] == []

    def test_excluding_masters_removes_the_control_plane_flavor(self) -> None:
        config = KaiwoConfigSpec.model_validate({"nodes": {"excludeMasterNodesFromNodePools": True}})
        spec = dumped(default_queue_config(example_a_nodes(), config))
        names = [flavor["name"] for flavor in spec["resourceFlavors"]]
        assert "cpu-only-0gpu-7core-28gi" not in names
        assert len(names) == 3

    def test_node_labels(self) -> None:
        config = KaiwoConfigSpec()
        written = {}
        for each in example_a_nodes():
            flavor = flavor_name_for_node(each, config)
            if flavor is not None:
                written[each["metadata"]["name"]] = desired_node_labels_and_taints(each, flavor, config)
        assert set(written) == {"cp", "c1", "c2", "m1", "m2", "h1"}  # h2 is cordoned: untouched
        assert written["c1"] == ({"kaiwo/worker": "true", "kaiwo/nodepool": "cpu-only-0gpu-28core-115gi"}, [])
        assert written["m1"][0]["kaiwo/gpu-model"] == "mi300x"
        assert written["h1"][0]["kaiwo/gpu-model"] == "nvidiah10080gbhbm3"
        assert all(taints == [] for _, taints in written.values())

    def test_taints_only_on_gpu_nodes_when_enabled(self) -> None:
        config = KaiwoConfigSpec.model_validate({"nodes": {"addTaintsToGpuNodes": True}})
        tainted = set()
        for each in example_a_nodes():
            flavor = flavor_name_for_node(each, config)
            if flavor is not None and desired_node_labels_and_taints(each, flavor, config)[1]:
                tainted.add(each["metadata"]["name"])
        assert tainted == {"m1", "m2", "h1"}

    def test_kind_e2e_nodes(self) -> None:
        kind_node = node(
            "w1", "16", "14Gi", {"nvidia.com/gpu.product": "Tesla-K80", "nvidia.com/gpu.count": "8"}
        )
        (pool,) = discover_node_pools([kind_node], KaiwoConfigSpec())
        assert pool.name == "nvidia-teslak80-8gpu-14core-12gi"
        assert pool.quota["memory"] == 13529146982


class TestClassification:
    def test_amd_product_name_cleaning(self) -> None:
        assert clean_amd_model("AMD_Instinct_MI300X_OAM") == "mi300x"
        assert clean_amd_model("AMD Instinct MI250X") == "mi250x"  # inner spaces stay, outer trimmed
        assert clean_amd_model("AMD_Radeon_PRO_W7900_Series") == "prow7900"

    def test_amd_product_without_family_label_is_a_gpu_less_pool(self) -> None:
        shape = node_shape(node("x", "64", "256Gi", {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"}))
        assert shape.flavor_name == "cpu-mi300x-0gpu-57core-230gi"
        assert shape.gpu_resource is None

    def test_nvidia_labels_override_amd_labels(self) -> None:
        shape = node_shape(node("x", "8", "16Gi", {**AMD, **NVIDIA}))
        assert (shape.vendor, shape.model, shape.gpus) == ("nvidia", "nvidiah10080gbhbm3", 8)

    def test_fractional_cpu_rounds_up_and_kubelet_memory_units(self) -> None:
        shape = node_shape(node("x", "3500m", "16303856Ki"))  # 15.55 GiB -> 15 GiB
        assert shape.nominal_cpu == 3  # ceil(3.5) = 4, * 0.9 = 3.6 -> 3
        assert shape.nominal_memory == int(15 * 0.9 * 2**30)

    def test_unparsable_gpu_count_counts_zero(self) -> None:
        shape = node_shape(node("x", "8", "16Gi", {**NVIDIA, "nvidia.com/gpu.count": "eight"}))
        assert shape.gpus == 0

    def test_node_without_capacity_counts_zero(self) -> None:
        bare = {"metadata": {"name": "bare"}}
        assert node_shape(bare).flavor_name == "cpu-only-0gpu-0core-0gi"

    def test_invalid_capacity_names_node_and_field(self) -> None:
        with pytest.raises(NodeDiscoveryError, match=r'node "bad": status.capacity.memory: invalid quantity'):
            node_shape(node("bad", "8", "lots"))

    def test_cq_flavor_order_ignores_input_order(self) -> None:
        config = KaiwoConfigSpec()
        forward = dumped(default_queue_config(example_a_nodes(), config))["clusterQueues"]
        backward = dumped(default_queue_config(list(reversed(example_a_nodes())), config))["clusterQueues"]
        assert forward == backward

    def test_no_nodes_gives_a_queue_without_resource_groups(self) -> None:
        spec = dumped(default_queue_config([], KaiwoConfigSpec()))
        assert spec["resourceFlavors"] == []
        assert spec["clusterQueues"][0]["spec"]["resourceGroups"] == []

    def test_config_names_are_used(self) -> None:
        config = KaiwoConfigSpec.model_validate(
            {
                "defaultClusterQueueName": "main",
                "defaultClusterQueueCohortName": "team",
                "defaultTopologyName": "",
            }
        )
        spec = dumped(default_queue_config([node("c1", "32", "128Gi")], config))
        assert spec["clusterQueues"][0]["name"] == "main"
        assert spec["clusterQueues"][0]["spec"]["cohort"] == "team"
        assert "topologyName" not in spec["resourceFlavors"][0]  # no topology -> Kueue RF gets kaiwo/worker
        assert spec["topologies"][0]["metadata"]["name"] == "default-topology"


class TestNodeSideEffects:
    def test_already_labelled_node_needs_nothing(self) -> None:
        config = KaiwoConfigSpec.model_validate({"nodes": {"addTaintsToGpuNodes": True}})
        labelled = node(
            "m1",
            "128",
            "1024Gi",
            {
                **AMD,
                "kaiwo/worker": "true",
                "kaiwo/nodepool": "amd-mi300x-8gpu-115core-921gi",
                "kaiwo/gpu-model": "mi300x",
            },
            taints=[{"key": "kaiwo.silogen.ai/gpu", "value": "other", "effect": "NoSchedule"}],
        )
        assert desired_node_labels_and_taints(labelled, "amd-mi300x-8gpu-115core-921gi", config) == ({}, [])

    def test_changed_pool_relabels_and_taints_with_configured_key(self) -> None:
        config = KaiwoConfigSpec.model_validate(
            {"nodes": {"addTaintsToGpuNodes": True, "defaultGpuTaintKey": "example.com/gpu"}}
        )
        stale = node("m1", "128", "1024Gi", {**AMD, "kaiwo/worker": "true", "kaiwo/nodepool": "old"})
        labels, taints = desired_node_labels_and_taints(stale, "amd-mi300x-8gpu-115core-921gi", config)
        assert labels == {"kaiwo/nodepool": "amd-mi300x-8gpu-115core-921gi", "kaiwo/gpu-model": "mi300x"}
        assert taints == [{"key": "example.com/gpu", "value": "true", "effect": "NoSchedule"}]

    def test_taint_with_same_key_but_other_effect_does_not_count(self) -> None:
        config = KaiwoConfigSpec.model_validate({"nodes": {"addTaintsToGpuNodes": True}})
        gpu = node(
            "h1", "96", "512Gi", NVIDIA, taints=[{"key": "kaiwo.silogen.ai/gpu", "effect": "NoExecute"}]
        )
        _, taints = desired_node_labels_and_taints(gpu, "nvidia-x-8gpu-86core-460gi", config)
        assert len(taints) == 1


class TestMerge:
    """§5.4: what dynamic mode does to an existing KaiwoQueueConfig."""

    def existing(self) -> KaiwoQueueConfigSpec:
        return KaiwoQueueConfigSpec.model_validate(
            {
                "resourceFlavors": [
                    {"name": "stale-pool", "nodeLabels": {"kaiwo/nodepool": "stale-pool"}},
                    {"name": "cpu-only-0gpu-28core-115gi", "nodeLabels": {"edited": "by-admin"}},
                    {"name": "custom", "nodeLabels": {"team": "a"}},
                ],
                "clusterQueues": [
                    {"name": "research", "namespaces": ["r"], "spec": {"namespaceSelector": {}}},
                    {"name": "kaiwo", "namespaces": ["kept?"], "spec": {"cohort": "edited"}},
                ],
                "workloadPriorityClasses": [{"metadata": {"name": "high"}, "value": 100}],
                "topologies": [
                    {"metadata": {"name": ""}, "spec": {"levels": [{"nodeLabel": "a"}]}},
                    {"metadata": {"name": "custom-topo"}, "spec": {"levels": [{"nodeLabel": "b"}]}},
                    {"metadata": {"name": "default-topology"}, "spec": {"levels": [{"nodeLabel": "c"}]}},
                ],
            }
        )

    def merged(self) -> JsonObj:
        config = KaiwoConfigSpec()
        discovered = default_queue_config(example_a_nodes(), config)
        return dumped(merge_default_queue_config(self.existing(), discovered, config))

    def test_flavors_union_with_discovered_winning_in_place(self) -> None:
        flavors = self.merged()["resourceFlavors"]
        assert [flavor["name"] for flavor in flavors] == [
            "stale-pool",
            "cpu-only-0gpu-28core-115gi",
            "custom",
            "cpu-only-0gpu-7core-28gi",
            "amd-mi300x-8gpu-115core-921gi",
            "nvidia-nvidiah10080gbhbm3-8gpu-86core-460gi",
        ]
        assert flavors[1]["nodeLabels"] == {"kaiwo/nodepool": "cpu-only-0gpu-28core-115gi"}

    def test_default_queue_replaced_wholesale_others_kept(self) -> None:
        queues = self.merged()["clusterQueues"]
        assert [queue["name"] for queue in queues] == ["research", "kaiwo"]
        assert queues[0]["namespaces"] == ["r"]
        assert queues[1]["namespaces"] == []  # the admin's list is lost, as upstream
        assert queues[1]["spec"]["cohort"] == "kaiwo"
        assert len(queues[1]["spec"]["resourceGroups"][0]["flavors"]) == 4

    def test_topologies_drop_empty_names_and_default_wins(self) -> None:
        topologies = self.merged()["topologies"]
        assert [topology["metadata"]["name"] for topology in topologies] == [
            "custom-topo",
            "default-topology",
        ]
        assert topologies[1]["spec"]["levels"][0] == {"nodeLabel": "kaiwo/topology-block"}

    def test_priority_classes_untouched(self) -> None:
        assert self.merged()["workloadPriorityClasses"] == [{"metadata": {"name": "high"}, "value": 100}]

    def test_missing_default_queue_is_appended(self) -> None:
        config = KaiwoConfigSpec()
        existing = KaiwoQueueConfigSpec.model_validate({"clusterQueues": [{"name": "research"}]})
        merged = merge_default_queue_config(existing, default_queue_config(example_a_nodes(), config), config)
        assert [queue.name for queue in merged.cluster_queues] == ["research", "kaiwo"]

    def test_merge_is_idempotent(self) -> None:
        config = KaiwoConfigSpec()
        discovered = default_queue_config(example_a_nodes(), config)
        once = merge_default_queue_config(self.existing(), discovered, config)
        twice = merge_default_queue_config(once, discovered, config)
        assert dumped(once) == dumped(twice)
