"""Properties of node discovery over arbitrary node sets (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.queueconfig import KaiwoQueueConfigSpec
from kaiwo_ray.render.nodepools import (
    MAX_FLAVORS_PER_RESOURCE_GROUP,
    MAX_RESOURCE_FLAVORS,
    NodeDiscoveryError,
    default_queue_config,
    discover_node_pools,
    merge_default_queue_config,
    node_shape,
)

gpu_labels = st.sampled_from(
    [
        {},
        {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM", "beta.amd.com/gpu.family.AI": "8"},
        {"amd.com/gpu.product-name": "AMD_Instinct_MI250X", "beta.amd.com/gpu.family.AI": "4"},
        {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"},
        {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"},
        {"nvidia.com/gpu.product": "Tesla-K80", "nvidia.com/gpu.count": "2"},
    ]
)
cpus = st.sampled_from(["4", "8", "16", "32", "64", "96", "128", "3500m"])
memories = st.sampled_from(["16Gi", "32Gi", "64Gi", "128Gi", "512Gi", "1Ti", "263842284Ki"])


@st.composite
def node_sets(draw: st.DrawFn) -> list[JsonObj]:
    count = draw(st.integers(min_value=0, max_value=12))
    nodes = []
    for index in range(count):
        labels = dict(draw(gpu_labels))
        if draw(st.booleans()) and index == 0:
            labels["node-role.kubernetes.io/control-plane"] = ""
        spec = {"unschedulable": True} if draw(st.integers(0, 5)) == 0 else {}
        nodes.append(
            {
                "metadata": {"name": f"node-{index:02d}", "labels": labels},
                "spec": spec,
                "status": {"capacity": {"cpu": draw(cpus), "memory": draw(memories)}},
            }
        )
    return nodes


configs = st.builds(
    lambda exclude: KaiwoConfigSpec.model_validate({"nodes": {"excludeMasterNodesFromNodePools": exclude}}),
    st.booleans(),
)


def dumped(spec: KaiwoQueueConfigSpec) -> JsonObj:
    result: JsonObj = spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    return result


@given(node_sets(), configs)
def test_default_queue_is_valid_and_sums_the_pool_members(
    nodes: list[JsonObj], config: KaiwoConfigSpec
) -> None:
    spec = dumped(default_queue_config(nodes, config))
    KaiwoQueueConfigSpec.model_validate(spec)  # CRD limits and Kueue's one-quota-per-resource rule hold

    members = [node for pool in discover_node_pools(nodes, config) for node in pool.node_names]
    shapes = {node["metadata"]["name"]: node_shape(node) for node in nodes}
    (queue,) = spec["clusterQueues"]
    groups = queue["spec"]["resourceGroups"]
    if not members:
        assert groups == [] and spec["resourceFlavors"] == []
        return
    (group,) = groups
    totals: dict[str, int] = {}
    for flavor in group["flavors"]:
        assert [resource["name"] for resource in flavor["resources"]] == group["coveredResources"]
        for resource in flavor["resources"]:
            totals[resource["name"]] = totals.get(resource["name"], 0) + int(resource["nominalQuota"])
    assert totals["cpu"] == sum(shapes[name].nominal_cpu for name in members)
    assert totals["memory"] == sum(shapes[name].nominal_memory for name in members)
    for resource in ("amd.com/gpu", "nvidia.com/gpu"):
        expected = sum(shapes[name].gpus for name in members if shapes[name].gpu_resource == resource)
        assert totals.get(resource, 0) == expected


@given(node_sets(), configs)
def test_flavors_match_pools_and_names_parse(nodes: list[JsonObj], config: KaiwoConfigSpec) -> None:
    spec = dumped(default_queue_config(nodes, config))
    names = [flavor["name"] for flavor in spec["resourceFlavors"]]
    assert len(names) == len(set(names))
    queue_flavors = [
        f["name"] for group in spec["clusterQueues"][0]["spec"]["resourceGroups"] for f in group["flavors"]
    ]
    assert sorted(queue_flavors) == sorted(names)
    for name in names:
        # The workload side reads `<vendor>-<model>-<N>gpu-<C>core-<M>gi` back (workloads.md §3).
        vendor, _model, gpus, cores, memory = name.split("-")
        assert vendor in {"cpu", "amd", "nvidia"}
        assert gpus.endswith("gpu") and int(gpus[:-3]) >= 0
        assert cores.endswith("core") and int(cores[:-4]) >= 0
        assert memory.endswith("gi") and int(memory[:-2]) >= 0


@given(node_sets().flatmap(lambda nodes: st.tuples(st.just(nodes), st.permutations(nodes))), configs)
def test_cluster_queue_does_not_depend_on_node_order(
    pair: tuple[list[JsonObj], list[JsonObj]], config: KaiwoConfigSpec
) -> None:
    nodes, shuffled = pair
    assert (
        dumped(default_queue_config(nodes, config))["clusterQueues"]
        == dumped(default_queue_config(shuffled, config))["clusterQueues"]
    )


@given(node_sets(), node_sets(), configs)
def test_merge_is_idempotent_and_keeps_every_discovered_flavor(
    before: list[JsonObj], after: list[JsonObj], config: KaiwoConfigSpec
) -> None:
    existing = default_queue_config(before, config)
    discovered = default_queue_config(after, config)
    union = {flavor.name for flavor in [*existing.resource_flavors, *discovered.resource_flavors]}
    if len(union) > MAX_RESOURCE_FLAVORS:
        with pytest.raises(NodeDiscoveryError, match="remove the stale flavors"):
            merge_default_queue_config(existing, discovered, config)
        return
    once = merge_default_queue_config(existing, discovered, config)
    KaiwoQueueConfigSpec.model_validate(dumped(once))
    assert dumped(merge_default_queue_config(once, discovered, config)) == dumped(once)
    merged_names = [flavor.name for flavor in once.resource_flavors]
    assert {flavor.name for flavor in discovered.resource_flavors} <= set(merged_names)
    assert {flavor.name for flavor in existing.resource_flavors} <= set(merged_names)  # stale ones stay
    assert dumped(once)["clusterQueues"] == dumped(discovered)["clusterQueues"]


def test_too_many_pools_is_a_clear_error() -> None:
    nodes = [
        {
            "metadata": {"name": f"n{index}"},
            "status": {"capacity": {"cpu": str(10 * (index + 1)), "memory": "64Gi"}},
        }
        for index in range(MAX_FLAVORS_PER_RESOURCE_GROUP + 1)
    ]
    with pytest.raises(NodeDiscoveryError, match=r"^the nodes form 17 node pools, more than the 16 flavors"):
        default_queue_config(nodes, KaiwoConfigSpec())
    assert len(default_queue_config(nodes[:-1], KaiwoConfigSpec()).resource_flavors) == 16


def test_merge_beyond_the_flavor_limit_is_a_clear_error() -> None:
    def cpu_nodes(first: int, count: int) -> list[JsonObj]:
        return [
            {"metadata": {"name": f"n{i}"}, "status": {"capacity": {"cpu": str(10 * i), "memory": "64Gi"}}}
            for i in range(first, first + count)
        ]

    config = KaiwoConfigSpec()
    existing = default_queue_config(cpu_nodes(1, 12), config)
    discovered = default_queue_config(cpu_nodes(13, 9), config)
    with pytest.raises(
        NodeDiscoveryError, match=r"gives 21 resource flavors \(12 of them for nodes that are gone\)"
    ):
        merge_default_queue_config(existing, discovered, config)
    assert (
        len(
            merge_default_queue_config(
                existing, default_queue_config(cpu_nodes(13, 8), config), config
            ).resource_flavors
        )
        == 20
    )
