"""GPU and replica arithmetic (`ResourceConfig`) and the GPU part of the Schedulable condition.

Capacity comes from the `kaiwo/nodepool` label the queue-config controller writes on every node
(`<vendor>-<model>-<N>gpu-<C>core-<M>gi`) plus the node's allocatable `<vendor>.com/gpu`. The
vendor match is case-sensitive, like upstream: `gpuVendor: AMD` finds no `amd-...` node.

Two deliberate differences from upstream keep "the pods together get at least what was asked for"
true (see docs/compatibility.md): the per-replica share is rounded up (9 GPUs on 8-GPU nodes is
2 x 5, not 2 x 4), and an explicit `replicas` x `gpusPerReplica` smaller than `gpus` no longer wins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kaiwo_ray.api.quantity import parse_quantity

NODEPOOL_LABEL = "kaiwo/nodepool"
# Upstream's "no node matched" sentinel for the per-node minima (max int32).
NO_NODE = 2**31 - 1

_KNOWN_GPU_KEYS = {"NVIDIA": "nvidia.com/gpu", "AMD": "amd.com/gpu"}


@dataclass(frozen=True, slots=True)
class GpuStats:
    """What the cluster offers for one vendor. Minima are `NO_NODE` when no node matched."""

    vendor: str
    total_gpus: int
    min_gpus_per_node: int
    total_allocatable: int
    min_allocatable_per_node: int


@dataclass(frozen=True, slots=True)
class ResourceConfig:
    """The numbers every renderer and the Schedulable check share.

    `total_gpus` is what the user asked for (NUM_GPUS); `replicas` x `gpus_per_replica` is what the
    pods request (at least `total_gpus` when the cluster can host it).
    """

    total_gpus: int
    replicas: int
    gpus_per_replica: int
    vendor: str
    resource_key: str


@dataclass(frozen=True, slots=True)
class GpuCheck:
    """The GPU part of the `Schedulable` condition: status True/False with reason and message."""

    schedulable: bool
    reason: str
    message: str


def gpu_resource_key(vendor: str, default_key: str) -> str:
    """Extended-resource name for the vendor (case-insensitive here, unlike the capacity lookup)."""
    return _KNOWN_GPU_KEYS.get(vendor.upper(), default_key)


# The last answer per vendor for a tuple of nodes (kept with the tuple, so the identity check is
# sound): a controller passes its node cache's `snapshot()`, the same tuple until a node changes, and
# every reconcile asks twice; on a 1,000-node cluster a walk per ask would be most of a reconcile.
_LAST_STATS: dict[str, tuple[tuple[Mapping[str, Any], ...], GpuStats]] = {}


def gpu_stats(nodes: Sequence[Mapping[str, Any]], vendor: str) -> GpuStats:
    """Sum and minimum of GPUs per node over the nodes whose nodepool label starts with `vendor-`.

    Nodes with an unreadable label or allocatable are skipped rather than failing the workload, and
    nodes labelled with 0 GPUs do not count towards the minimum (upstream would divide by zero).
    A tuple of nodes is taken as immutable, objects included (a cache replaces an object that
    changes, it never edits one): the answer for the same tuple is remembered.
    """
    last = _LAST_STATS.get(vendor)
    if last is not None and last[0] is nodes:
        return last[1]
    stats = _count_gpus(nodes, vendor)
    if isinstance(nodes, tuple):
        _LAST_STATS[vendor] = (nodes, stats)
    return stats


def _count_gpus(nodes: Sequence[Mapping[str, Any]], vendor: str) -> GpuStats:
    total = total_allocatable = 0
    min_per_node = min_allocatable = NO_NODE
    allocatable_key = f"{vendor}.com/gpu"
    prefix = f"{vendor}-"
    for node in nodes:
        try:
            pool = node["metadata"]["labels"][NODEPOOL_LABEL]
        except (KeyError, TypeError):
            continue
        if not isinstance(pool, str) or not pool.startswith(prefix):
            continue
        parts = pool.split("-", 3)
        if len(parts) < 3 or parts[0] != vendor:
            continue
        count = parts[2].removesuffix("gpu")
        if not count.isdigit():  # upstream would fail the whole reconcile on a malformed label
            continue
        gpus = int(count)
        total += gpus
        if 0 < gpus < min_per_node:
            min_per_node = gpus
        try:
            value = node["status"]["allocatable"][allocatable_key]
        except (KeyError, TypeError):
            continue
        allocatable = int(value) if type(value) is str and value.isdigit() else _quantity_count(value)
        if allocatable > 0:
            total_allocatable += allocatable
            min_allocatable = min(min_allocatable, allocatable)
    return GpuStats(vendor, total, min_per_node, total_allocatable, min_allocatable)


def _quantity_count(value: Any) -> int:
    """Whole units of an allocatable quantity written unusually (`8.0`, `1e1`); 0 when unreadable."""
    try:
        return int(parse_quantity(value))
    except (ValueError, ArithmeticError):
        return 0


def compute_resource_config(
    *,
    gpus: int,
    replicas: int | None,
    gpus_per_replica: int,
    stats: GpuStats,
    default_gpu_resource_key: str,
) -> ResourceConfig:
    """Replicas and GPUs per replica: fill the smallest node, so each replica fits on any matching node.

    An explicit `replicas` x `gpusPerReplica` is kept when it covers `gpus` and fits the cluster.
    Otherwise replicas = ceil(total / smallest node) and each replica gets ceil(total / replicas),
    which never exceeds the smallest node. "Smallest node" counts allocatable GPUs when the cluster
    has enough of them, else the nodepool label. With no matching node it degenerates to one
    replica holding everything (the Schedulable check then fails).
    """
    key = gpu_resource_key(stats.vendor, default_gpu_resource_key)
    requested_replicas = replicas or 0
    user_request = requested_replicas * gpus_per_replica
    total = max(user_request, gpus)
    if total <= 0:
        return ResourceConfig(0, requested_replicas or 1, 0, stats.vendor, key)
    if requested_replicas > 0 and gpus_per_replica > 0 and user_request >= gpus and total <= stats.total_gpus:
        return ResourceConfig(total, requested_replicas, gpus_per_replica, stats.vendor, key)
    per_node = stats.min_gpus_per_node
    if stats.total_allocatable >= total:
        per_node = stats.min_allocatable_per_node
    replica_count = -(-total // per_node)
    per_replica = -(-total // replica_count)
    return ResourceConfig(total, replica_count, per_replica, stats.vendor, key)


def gpu_schedulability(config: ResourceConfig, stats: GpuStats, *, single_pod: bool = False) -> GpuCheck:
    """The GPU verdict of the `Schedulable` condition, with upstream's reasons and messages.

    `single_pod=True` is for batch Jobs, which run exactly one pod (upstream quirk kept): asking for
    more GPUs than one replica holds is then reported instead of silently running a smaller pod.
    """
    vendor = stats.vendor
    if config.total_gpus <= 0:
        return GpuCheck(True, "Schedulable", "Workload does not require GPU resources")
    if stats.total_gpus == 0:
        return GpuCheck(False, "NoGPUs", f"Cluster has 0 GPUs (vendor: {vendor})")
    if config.total_gpus > stats.total_gpus:
        return GpuCheck(
            False,
            "InsufficientGPUs",
            f"Cluster has {stats.total_gpus} GPUs, but requested for {config.total_gpus} GPUs (vendor: {vendor})",
        )
    if single_pod and config.replicas > 1:
        return GpuCheck(
            False,
            "InsufficientGPUsPerPod",
            f"A batch Job runs a single pod, but {config.total_gpus} GPUs need {config.replicas} pods of "
            f"{config.gpus_per_replica} GPUs on this cluster (vendor: {vendor}); request fewer GPUs or set ray: true",
        )
    return GpuCheck(True, "Schedulable", "Cluster has sufficient GPU resources")
