"""Node discovery: from the cluster's Nodes to the default KaiwoQueueConfig (cluster.md §5).

Every schedulable node is classified by what its GPU-operator labels and capacity say
(vendor, GPU model, GPU count, 90 % of its CPU and memory); nodes with the same classification form
one pool, and each pool becomes a Kueue ResourceFlavor named after it
(`<vendor>-<model>-<count>gpu-<cores>core-<mem>gi`) with the summed quota in the default
ClusterQueue. The arithmetic copies upstream exactly (float64 products truncated per node, then
summed) because flavor names are user-visible and pods are pinned to them by label.

Upstream iterates Go maps, so its list orders change from one reconcile to the next; here every list
has a stable order: ResourceFlavors in the order their first node appears in the node list (the API
server lists nodes by name), ClusterQueue flavors by §5.3's rule (GPU-less first, then GPU count,
then cores, then name), coveredResources `cpu`, `memory`, then GPU resources sorted.

Everything here is pure: the reconciler applies `desired_node_labels_and_taints` itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeVar

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.meta import NameOnlyMeta
from kaiwo_ray.api.quantity import parse_quantity
from kaiwo_ray.api.queueconfig import (
    ClusterQueueEntry,
    ClusterQueueSpec,
    FlavorQuotas,
    KaiwoQueueConfigSpec,
    ResourceFlavorEntry,
    ResourceGroup,
    ResourceQuota,
    TopologyEntry,
    TopologyLevel,
    TopologySpec,
)

_Entry = TypeVar("_Entry")

# Labels written on nodes (cluster.md §1).
NODEPOOL_LABEL = "kaiwo/nodepool"
WORKER_LABEL = "kaiwo/worker"
GPU_MODEL_LABEL = "kaiwo/gpu-model"
TOPOLOGY_BLOCK_LABEL = "kaiwo/topology-block"
TOPOLOGY_RACK_LABEL = "kaiwo/topology-rack"
HOSTNAME_LABEL = "kubernetes.io/hostname"

# Labels read from nodes, as the AMD and NVIDIA GPU operators write them.
AMD_PRODUCT_LABEL = "amd.com/gpu.product-name"
AMD_COUNT_LABEL = "beta.amd.com/gpu.family.AI"
NVIDIA_PRODUCT_LABEL = "nvidia.com/gpu.product"
NVIDIA_COUNT_LABEL = "nvidia.com/gpu.count"
MASTER_ROLE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")

GPU_RESOURCE_BY_VENDOR = {"amd": "amd.com/gpu", "nvidia": "nvidia.com/gpu"}
DEFAULT_TOPOLOGY_NAME = "default-topology"
DEFAULT_TOPOLOGY_LEVELS = (TOPOLOGY_BLOCK_LABEL, TOPOLOGY_RACK_LABEL, HOSTNAME_LABEL)

MAX_FLAVORS_PER_RESOURCE_GROUP = 16  # Kueue's limit (and the KaiwoQueueConfig CRD's)
MAX_RESOURCE_FLAVORS = 20  # KaiwoQueueConfig CRD: spec.resourceFlavors maxItems
_DISCOUNT = 0.9  # Kueue quota is 90 % of a node's capacity, leaving room for system pods
_GI = 1 << 30
# Removed, in this order, from AMD product names: `AMD_Instinct_MI300X_OAM` -> `mi300x`.
_AMD_NAME_NOISE = ("instinct", "radeon", "_", "oam", "amd", "series", "gpu")


class NodeDiscoveryError(ValueError):
    """The nodes cannot be turned into a default queue: an unreadable capacity (only possible in
    hand-written node files) or more node pools than Kueue accepts in one ClusterQueue."""


@dataclass(frozen=True, slots=True)
class NodeShape:
    """What one node contributes to the queue: its pool identity and its 90 % quota."""

    vendor: str  # "amd", "nvidia" or "cpu"
    model: str  # "mi300x", "nvidiah10080gbhbm3", "only", ...
    gpus: int
    nominal_cpu: int
    nominal_memory: int  # bytes

    @property
    def flavor_name(self) -> str:
        return (
            f"{self.vendor}-{self.model}-{self.gpus}gpu-{self.nominal_cpu}core-{self.nominal_memory // _GI}gi"
        )

    @property
    def gpu_resource(self) -> str | None:
        """The extended resource the pool's GPUs are counted in; None when it counts none."""
        return GPU_RESOURCE_BY_VENDOR.get(self.vendor) if self.gpus > 0 else None


@dataclass(slots=True)
class NodePool:
    """Nodes sharing one flavor name, with their summed quota (resource -> amount)."""

    shape: NodeShape
    node_names: list[str] = field(default_factory=list)
    quota: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.shape.flavor_name

    def add(self, node_name: str, shape: NodeShape) -> None:
        self.node_names.append(node_name)
        self.quota["cpu"] = self.quota.get("cpu", 0) + shape.nominal_cpu
        self.quota["memory"] = self.quota.get("memory", 0) + shape.nominal_memory
        if shape.gpu_resource is not None:
            self.quota[shape.gpu_resource] = self.quota.get(shape.gpu_resource, 0) + shape.gpus


def clean_amd_model(product_name: str) -> str:
    model = product_name.lower()
    for noise in _AMD_NAME_NOISE:
        model = model.replace(noise, "")
    return model.strip()


def clean_nvidia_model(product: str) -> str:
    return product.lower().replace("-", "")


def node_shape(node: Mapping[str, Any]) -> NodeShape:
    """Classify one node (cluster.md §5.1). NVIDIA labels win over AMD ones when both are present."""
    labels = _labels(node)
    vendor, model, gpus = "cpu", "only", 0
    if AMD_PRODUCT_LABEL in labels:
        model = clean_amd_model(labels[AMD_PRODUCT_LABEL])
        if AMD_COUNT_LABEL in labels:
            gpus, vendor = _label_count(labels[AMD_COUNT_LABEL]), "amd"
    if NVIDIA_PRODUCT_LABEL in labels:
        model = clean_nvidia_model(labels[NVIDIA_PRODUCT_LABEL])
        if NVIDIA_COUNT_LABEL in labels:
            gpus, vendor = _label_count(labels[NVIDIA_COUNT_LABEL]), "nvidia"
    cores = math.ceil(_capacity(node, "cpu"))
    memory_gi = math.floor(_capacity(node, "memory") / _GI)
    return NodeShape(
        vendor=vendor,
        model=model,
        gpus=gpus,
        # float64 products truncated, exactly like upstream's int64(float64(x) * 0.9 ...)
        nominal_cpu=int(float(cores) * _DISCOUNT),
        nominal_memory=int(float(memory_gi) * _DISCOUNT * _GI),
    )


def is_pool_member(node: Mapping[str, Any], config: KaiwoConfigSpec) -> bool:
    """Cordoned nodes leave the pools; NotReady or tainted ones stay (upstream behaviour)."""
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    if config.nodes.exclude_master_nodes_from_node_pools:
        labels = _labels(node)
        return not any(role in labels for role in MASTER_ROLE_LABELS)
    return True


def flavor_name_for_node(node: Mapping[str, Any], config: KaiwoConfigSpec) -> str | None:
    """The pool a node belongs to, or None when it is left out of every pool."""
    return node_shape(node).flavor_name if is_pool_member(node, config) else None


def discover_node_pools(nodes: Iterable[Mapping[str, Any]], config: KaiwoConfigSpec) -> list[NodePool]:
    """Pools in the order their first node appears in `nodes`."""
    pools: dict[str, NodePool] = {}
    for node in nodes:
        if not is_pool_member(node, config):
            continue
        shape = node_shape(node)
        pool = pools.setdefault(shape.flavor_name, NodePool(shape=shape))
        pool.add(_node_name(node), shape)
    return list(pools.values())


def covered_resources(pools: Sequence[NodePool]) -> list[str]:
    gpu_resources = sorted({resource for pool in pools for resource in pool.quota} - {"cpu", "memory"})
    return ["cpu", "memory", *gpu_resources] if pools else []


def cluster_queue_flavor_order(pools: Sequence[NodePool]) -> list[NodePool]:
    """GPU-less pools first, then by GPU count, then by cores, then by name (cluster.md §5.3)."""
    return sorted(
        pools, key=lambda pool: (pool.shape.gpus > 0, pool.shape.gpus, pool.shape.nominal_cpu, pool.name)
    )


def default_resource_flavors(pools: Sequence[NodePool], config: KaiwoConfigSpec) -> list[ResourceFlavorEntry]:
    topology = config.default_topology_name or None  # empty: no topology, so Kueue gets `kaiwo/worker`
    return [
        ResourceFlavorEntry(name=pool.name, node_labels={NODEPOOL_LABEL: pool.name}, topology_name=topology)
        for pool in pools
    ]


def default_cluster_queue(pools: Sequence[NodePool], config: KaiwoConfigSpec) -> ClusterQueueEntry:
    if len(pools) > MAX_FLAVORS_PER_RESOURCE_GROUP:
        # Upstream writes the queue anyway and Kueue rejects it; nodes whose memory differs by a
        # few GiB already make separate pools, so say what happened and what to do instead.
        raise NodeDiscoveryError(
            f"the nodes form {len(pools)} node pools, more than the {MAX_FLAVORS_PER_RESOURCE_GROUP} flavors "
            "Kueue allows in one ClusterQueue resource group; write the KaiwoQueueConfig `kaiwo` yourself "
            "(flavors selecting several pools by label) and keep dynamicallyUpdateDefaultClusterQueue off"
        )
    covered = covered_resources(pools)
    groups = (
        [
            ResourceGroup(
                covered_resources=covered,
                flavors=[
                    FlavorQuotas(
                        name=pool.name,
                        # Memory stays raw bytes: the quota is the exact sum the names were built from.
                        resources=[
                            ResourceQuota(name=resource, nominal_quota=str(pool.quota.get(resource, 0)))
                            for resource in covered
                        ],
                    )
                    for pool in cluster_queue_flavor_order(pools)
                ],
            )
        ]
        if pools
        else []  # Kueue rejects a resource group without flavors; a queue with no quota is valid
    )
    return ClusterQueueEntry(
        name=config.default_cluster_queue_name,
        namespaces=[],
        spec=ClusterQueueSpec(
            cohort=config.default_cluster_queue_cohort_name,
            namespace_selector={},
            resource_groups=groups,
        ),
    )


def default_topology(config: KaiwoConfigSpec) -> TopologyEntry:
    return TopologyEntry(
        metadata=NameOnlyMeta(name=config.default_topology_name or DEFAULT_TOPOLOGY_NAME),
        spec=TopologySpec(levels=[TopologyLevel(node_label=label) for label in DEFAULT_TOPOLOGY_LEVELS]),
    )


def default_queue_config(nodes: Iterable[Mapping[str, Any]], config: KaiwoConfigSpec) -> KaiwoQueueConfigSpec:
    """The KaiwoQueueConfig spec Kaiwo writes when none exists (cluster.md §5.3, Example A)."""
    pools = discover_node_pools(nodes, config)
    return KaiwoQueueConfigSpec(
        cluster_queues=[default_cluster_queue(pools, config)],
        resource_flavors=default_resource_flavors(pools, config),
        topologies=[default_topology(config)],
    )


def merge_default_queue_config(
    existing: KaiwoQueueConfigSpec, discovered: KaiwoQueueConfigSpec, config: KaiwoConfigSpec
) -> KaiwoQueueConfigSpec:
    """Fold a fresh discovery into an existing spec (cluster.md §5.4).

    Flavors and topologies are merged by name with the discovered entry winning (stale flavors of
    nodes that left stay); the default ClusterQueue entry is replaced wholesale, so edits to it,
    including its `namespaces`, are lost; every other entry is kept. Replaced entries keep their
    position and new ones are appended, so a steady cluster yields an identical spec (no update).
    """
    default_queue_name = config.default_cluster_queue_name
    discovered_queues = [queue for queue in discovered.cluster_queues if queue.name == default_queue_name]
    existing_topologies = [topology for topology in existing.topologies if topology.metadata.name]
    flavors = _merge_by_name(existing.resource_flavors, discovered.resource_flavors, _flavor_name)
    if len(flavors) > MAX_RESOURCE_FLAVORS:
        # Stale flavors are never dropped (§5.4), so node churn can outgrow the CRD's limit; the
        # API server would reject the update with a less helpful message.
        stale = len(flavors) - len(discovered.resource_flavors)
        raise NodeDiscoveryError(
            f"merging the discovered node pools gives {len(flavors)} resource flavors ({stale} of them "
            f"for nodes that are gone), more than the {MAX_RESOURCE_FLAVORS} a KaiwoQueueConfig holds; "
            "remove the stale flavors from the KaiwoQueueConfig `kaiwo`"
        )
    return existing.model_copy(
        update={
            "resource_flavors": flavors,
            "cluster_queues": _merge_by_name(existing.cluster_queues, discovered_queues, _queue_name),
            "topologies": _merge_by_name(existing_topologies, discovered.topologies, _topology_name),
        }
    )


def desired_node_labels_and_taints(
    node: Mapping[str, Any], flavor_name: str, config: KaiwoConfigSpec
) -> tuple[dict[str, str], list[JsonObj]]:
    """What the queue-config controller must still add to `node` (cluster.md §5.2).

    Returns only the labels whose value differs and the taints missing (same key and effect), so
    an empty answer means "no write". Nothing is ever removed: disabling taints leaves old ones.
    """
    desired = {WORKER_LABEL: "true", NODEPOOL_LABEL: flavor_name}
    if "cpu-only" not in flavor_name:
        desired[GPU_MODEL_LABEL] = flavor_name.split("-")[1] if "-" in flavor_name else flavor_name
    labels = _labels(node)
    labels_to_add = {key: value for key, value in desired.items() if labels.get(key) != value}

    taints_to_add: list[JsonObj] = []
    if config.nodes.add_taints_to_gpu_nodes and not flavor_name.startswith("cpu-only"):
        key = config.nodes.default_gpu_taint_key
        existing = (node.get("spec") or {}).get("taints") or []
        if not any(taint.get("key") == key and taint.get("effect") == "NoSchedule" for taint in existing):
            taints_to_add.append({"key": key, "value": "true", "effect": "NoSchedule"})
    return labels_to_add, taints_to_add


def _merge_by_name(
    existing: Sequence[_Entry], updates: Sequence[_Entry], name_of: Callable[[_Entry], str]
) -> list[_Entry]:
    replacements = {name_of(entry): entry for entry in updates}
    merged = [replacements.pop(name_of(entry), entry) for entry in existing]
    merged.extend(entry for entry in updates if name_of(entry) in replacements)
    return merged


def _flavor_name(entry: ResourceFlavorEntry) -> str:
    return entry.name


def _queue_name(entry: ClusterQueueEntry) -> str:
    return entry.name


def _topology_name(entry: TopologyEntry) -> str:
    return entry.metadata.name or ""


def _labels(node: Mapping[str, Any]) -> dict[str, str]:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return {str(key): str(value) for key, value in labels.items()}


def _node_name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


def _label_count(value: str) -> int:
    """GPU count from a label; non-numbers count as 0, as Go's ignored Atoi error gives."""
    try:
        return int(value.strip())
    except ValueError:
        return 0


def _capacity(node: Mapping[str, Any], resource: str) -> Decimal:
    capacity = (node.get("status") or {}).get("capacity") or {}
    raw = capacity.get(resource)
    if raw is None:
        return Decimal(0)  # a node that reports no capacity contributes nothing (Go's zero Quantity)
    try:
        return parse_quantity(raw)
    except ValueError as exc:
        raise NodeDiscoveryError(f'node "{_node_name(node)}": status.capacity.{resource}: {exc}') from None
