"""Names, entrypoint parsing and GPU arithmetic: the pure building blocks (spec/workloads.md §3, §5, §6.0)."""

from __future__ import annotations

from typing import Any

import pytest
from render_fixtures import gpu_nodes, job, main, node

from kaiwo_ray.kube.cache import ObjectCache
from kaiwo_ray.render import (
    RenderError,
    compute_resource_config,
    gpu_resource_key,
    gpu_schedulability,
    gpu_stats,
    name_with_postfix,
    sanitize_rfc1123,
)
from kaiwo_ray.render.entrypoint import apply_entrypoint, ray_entrypoint, shell_command
from kaiwo_ray.render.gpus import NO_NODE, GpuStats


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("Jane.Doe@example.com", "jane.doe-example.com"),
        ("test@amd.com", "test-amd.com"),
        ("--a__b--", "a-b"),
        ("a..b.-c", "a-b-c"),
        (".x.", "x"),
        ("", ""),
        ("ÄÖ user", "user"),
    ],
)
def test_sanitize_rfc1123(raw: str, clean: str) -> None:
    assert sanitize_rfc1123(raw) == clean


def test_sanitize_cuts_to_63_and_trims_a_dash_left_by_the_cut() -> None:
    assert sanitize_rfc1123("a" * 70) == "a" * 63
    assert sanitize_rfc1123("a" * 62 + "-bbb") == "a" * 62


def test_name_with_postfix() -> None:
    assert name_with_postfix("Train", "data") == "train-data"
    assert name_with_postfix("x" * 70, "hf") == "x" * 63


def test_env_bash_shebang_is_split_into_argv_words() -> None:
    assert shell_command("#!/usr/bin/env bash\necho hi") == ["/usr/bin/env", "bash", "-c", "echo hi"]
    assert shell_command("#!/bin/bash -e\nfalse") == ["/bin/bash", "-e", "-c", "false"]


def test_continuation_folding_keeps_other_newlines() -> None:
    assert ray_entrypoint("  a \\\n b\nc  ") == "a   b\nc"
    assert shell_command("a \\  \n b") == ["/bin/sh", "-c", "a   b"]


def test_entrypoint_sets_only_the_first_containers_command() -> None:
    pod = {"containers": [{"name": "a", "args": ["x"]}, {"name": "b"}]}
    apply_entrypoint(pod, "run", "t")
    assert pod == {
        "containers": [{"name": "a", "args": ["x"], "command": ["/bin/sh", "-c", "run"]}, {"name": "b"}]
    }


def test_empty_entrypoint_changes_nothing() -> None:
    pod = {"containers": [{"name": "a", "command": ["keep"]}]}
    apply_entrypoint(pod, "", "t")
    apply_entrypoint(pod, None, "t")
    assert pod == {"containers": [{"name": "a", "command": ["keep"]}]}


def test_whitespace_only_entrypoint_is_an_empty_script_like_upstream() -> None:
    pod = {"containers": [{"name": "a", "command": ["keep"]}]}
    apply_entrypoint(pod, "  \n", "t")
    assert pod == {"containers": [{"name": "a", "command": ["/bin/sh", "-c", ""]}]}
    assert main(job({"image": "i", "ray": True, "entrypoint": " \n"}))["spec"]["entrypoint"] == ""


def test_entrypoint_without_containers_is_a_render_error() -> None:
    with pytest.raises(RenderError, match=r"^tmpl.containers: must list at least one container"):
        apply_entrypoint({"containers": []}, "run", "tmpl")


def test_gpu_resource_key_per_vendor() -> None:
    assert gpu_resource_key("nvidia", "x/gpu") == "nvidia.com/gpu"
    assert gpu_resource_key("NVIDIA", "x/gpu") == "nvidia.com/gpu"
    assert gpu_resource_key("amd", "x/gpu") == "amd.com/gpu"
    assert gpu_resource_key("intel", "x/gpu") == "x/gpu"


def test_gpu_stats_reads_nodepool_labels_and_allocatable_for_the_vendor_only() -> None:
    nodes = [
        node("amd-mi300x-8gpu-115core-1843gi", {"amd.com/gpu": "8"}),
        node("amd-mi250-4gpu-64core-512gi", {"amd.com/gpu": "3"}),
        node("nvidia-a100-8gpu-64core-512gi", {"nvidia.com/gpu": "8"}),
        node("cpu-only-0gpu-8core-32gi"),
        node(None, {"amd.com/gpu": "8"}),
        node("amd-broken-xgpu-1core-1gi", {"amd.com/gpu": "8"}),
        node("amd-short"),
    ]
    assert gpu_stats(nodes, "amd") == GpuStats("amd", 12, 4, 11, 3)
    assert gpu_stats(nodes, "AMD") == GpuStats("AMD", 0, NO_NODE, 0, NO_NODE)


def test_gpu_stats_of_a_cache_snapshot_follow_the_nodes() -> None:
    """The answer is remembered for a tuple (a cache snapshot), never across a change of the nodes."""
    cache = ObjectCache()
    first = node("amd-mi300x-8gpu-115core-1843gi", {"amd.com/gpu": "8"}, name="n1")
    cache.upsert(first)
    assert gpu_stats(cache.snapshot(), "amd") == GpuStats("amd", 8, 8, 8, 8)
    assert gpu_stats(cache.snapshot(), "nvidia") == GpuStats("nvidia", 0, NO_NODE, 0, NO_NODE)
    second = node("amd-mi250-4gpu-64core-512gi", {"amd.com/gpu": "4"}, name="n2")
    cache.upsert(second)
    assert gpu_stats(cache.snapshot(), "amd") == GpuStats("amd", 12, 4, 12, 4)
    cache.remove(first)
    assert gpu_stats(cache.snapshot(), "amd") == GpuStats("amd", 4, 4, 4, 4)
    nodes = [second]  # a list may be edited in place: never remembered
    assert gpu_stats(nodes, "amd") == GpuStats("amd", 4, 4, 4, 4)
    nodes.append(first)
    assert gpu_stats(nodes, "amd") == GpuStats("amd", 12, 4, 12, 4)


def _numbers(
    gpus: int, replicas: int | None = 1, per_replica: int = 0, nodes: list[dict[str, Any]] | None = None
) -> tuple[int, int, int]:
    stats = gpu_stats(nodes if nodes is not None else gpu_nodes("amd", 4, 8), "amd")
    rc = compute_resource_config(
        gpus=gpus,
        replicas=replicas,
        gpus_per_replica=per_replica,
        stats=stats,
        default_gpu_resource_key="amd.com/gpu",
    )
    return rc.total_gpus, rc.replicas, rc.gpus_per_replica


@pytest.mark.parametrize(
    ("gpus", "replicas", "per_replica", "expected"),
    [
        (0, 1, 0, (0, 1, 0)),
        (0, 3, 0, (0, 3, 0)),
        (0, None, 0, (0, 1, 0)),
        (8, 1, 0, (8, 1, 8)),
        (4, 5, 0, (4, 1, 4)),  # replicas is ignored when gpusPerReplica is 0
        (14, 1, 0, (14, 2, 7)),
        (10, 1, 0, (10, 2, 5)),
        (16, 1, 0, (16, 2, 8)),
        (0, 2, 4, (8, 2, 4)),  # explicit replicas x gpusPerReplica that fits the cluster
        (6, 2, 4, (8, 2, 4)),
        (40, 1, 0, (40, 5, 8)),  # more than the cluster: still split by node size
    ],
)
def test_replica_arithmetic(
    gpus: int, replicas: int | None, per_replica: int, expected: tuple[int, int, int]
) -> None:
    assert _numbers(gpus, replicas, per_replica) == expected


def test_uneven_split_rounds_the_share_up_so_the_request_is_covered() -> None:
    # upstream: 9 -> 2 x 4 = 8 GPUs for a 9-GPU request; kaiwo-ray: 2 x 5
    assert _numbers(9) == (9, 2, 5)


def test_explicit_split_smaller_than_gpus_is_recomputed() -> None:
    # upstream would keep 2 x 3 = 6 GPUs with NUM_GPUS=10
    assert _numbers(10, 2, 3) == (10, 2, 5)


def test_explicit_split_larger_than_the_cluster_falls_back_to_node_size() -> None:
    assert _numbers(0, 5, 8, gpu_nodes("amd", 2, 8)) == (40, 5, 8)


def test_allocatable_minimum_is_used_when_the_cluster_has_enough_allocatable() -> None:
    nodes = gpu_nodes("amd", 4, 8, allocatable=4)
    assert _numbers(8, nodes=nodes) == (8, 2, 4)
    assert _numbers(24, nodes=nodes) == (24, 3, 8)  # 16 allocatable < 24: label size


def test_no_matching_nodes_gives_one_replica_with_everything() -> None:
    assert _numbers(12, nodes=[]) == (12, 1, 12)


def test_schedulability_messages() -> None:
    stats = gpu_stats(gpu_nodes("nvidia", 2, 8), "nvidia")

    def check(gpus: int, stats: GpuStats = stats, single_pod: bool = False) -> tuple[bool, str, str]:
        rc = compute_resource_config(
            gpus=gpus, replicas=1, gpus_per_replica=0, stats=stats, default_gpu_resource_key="amd.com/gpu"
        )
        result = gpu_schedulability(rc, stats, single_pod=single_pod)
        return result.schedulable, result.reason, result.message

    assert check(0) == (True, "Schedulable", "Workload does not require GPU resources")
    assert check(16) == (True, "Schedulable", "Cluster has sufficient GPU resources")
    assert check(17) == (
        False,
        "InsufficientGPUs",
        "Cluster has 16 GPUs, but requested for 17 GPUs (vendor: nvidia)",
    )
    none = gpu_stats([], "nvidia")
    assert check(1, none) == (False, "NoGPUs", "Cluster has 0 GPUs (vendor: nvidia)")
    assert check(0, none)[0] is True
    assert check(8, single_pod=True)[0] is True
    schedulable, reason, message = check(16, single_pod=True)
    assert (schedulable, reason) == (False, "InsufficientGPUsPerPod")
    assert "16 GPUs need 2 pods of 8 GPUs" in message
