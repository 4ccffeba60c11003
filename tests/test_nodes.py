"""The default node set, node files, and the labels the queue-config controller writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.quantity import parse_quantity
from kaiwo_ray.manifests import ManifestReadError
from kaiwo_ray.nodes import default_nodes, load_nodes, with_pool_labels
from kaiwo_ray.render.gpus import gpu_stats
from kaiwo_ray.render.nodepools import discover_node_pools

EXAMPLE_NODES = Path(__file__).resolve().parents[1] / "docs" / "nodes.yaml"
NODE = "apiVersion: v1\nkind: Node\nmetadata: {name: %s}\nstatus: {capacity: {cpu: '4', memory: 8Gi}}\n"


class TestDefaultNodes:
    def test_two_amd_one_nvidia_one_cpu_listed_by_name(self) -> None:
        nodes = default_nodes()
        names = [node["metadata"]["name"] for node in nodes]
        assert names == sorted(names)
        labels = [node["metadata"]["labels"] for node in nodes]
        assert (
            sum(label.get("amd.com/gpu.product-name") == "AMD_Instinct_MI300X_OAM" for label in labels) == 2
        )
        assert sum(label.get("nvidia.com/gpu.product") == "NVIDIA-H100-80GB-HBM3" for label in labels) == 1
        assert (
            sum(
                "amd.com/gpu.product-name" not in label and "nvidia.com/gpu.product" not in label
                for label in labels
            )
            == 1
        )
        for label in labels:
            if "amd.com/gpu.product-name" in label:
                assert label["beta.amd.com/gpu.family.AI"] == label["amd.com/gpu.count"] == "8"
            if "nvidia.com/gpu.product" in label:
                assert label["nvidia.com/gpu.count"] == "8"

    def test_nodes_look_like_kubelet_reports(self) -> None:
        nodes = default_nodes()
        assert nodes
        for node in nodes:
            labels = node["metadata"]["labels"]
            assert labels["kubernetes.io/hostname"] == node["metadata"]["name"]
            assert {"kubernetes.io/os", "kubernetes.io/arch", "node.kubernetes.io/instance-type"} <= set(
                labels
            )
            status = node["status"]
            for resource in ("cpu", "memory", "pods", "ephemeral-storage"):
                assert parse_quantity(status["allocatable"][resource]) <= parse_quantity(
                    status["capacity"][resource]
                )
            gpu_keys = {key for key in status["capacity"] if key.endswith(".com/gpu")}
            assert all(status["allocatable"][key] == status["capacity"][key] == "8" for key in gpu_keys)
            ready = [c for c in status["conditions"] if c["type"] == "Ready"]
            assert ready and ready[0]["status"] == "True"
            assert status["nodeInfo"]["kubeletVersion"].startswith("v1.")

    def test_three_pools(self) -> None:
        pools = discover_node_pools(default_nodes(), KaiwoConfigSpec())
        assert [(pool.name, len(pool.node_names)) for pool in pools] == [
            ("cpu-only-0gpu-57core-225gi", 1),
            ("amd-mi300x-8gpu-345core-2038gi", 2),
            ("nvidia-nvidiah10080gbhbm3-8gpu-201core-1813gi", 1),
        ]

    def test_every_call_returns_fresh_objects(self) -> None:
        first = default_nodes()
        first[0]["metadata"]["labels"]["mutated"] = "yes"
        assert "mutated" not in default_nodes()[0]["metadata"]["labels"]


class TestLoadNodes:
    def test_node_list(self) -> None:
        nodes = load_nodes(str(EXAMPLE_NODES))
        assert [node["metadata"]["name"] for node in nodes] == ["control-plane-0", "mi300x-0", "h100-0"]

    def test_plain_list_and_multiple_documents(self, tmp_path: Path) -> None:
        as_list = tmp_path / "list.yaml"
        as_list.write_text(
            "- " + (NODE % "a").replace("\n", "\n  ") + "\n- " + (NODE % "b").replace("\n", "\n  ")
        )
        documents = tmp_path / "docs.yaml"
        documents.write_text(NODE % "a" + "---\n" + NODE % "b")
        for path in (as_list, documents):
            assert [node["metadata"]["name"] for node in load_nodes(str(path))] == ["a", "b"]

    def test_other_kinds_are_rejected_with_their_location(self, tmp_path: Path) -> None:
        path = tmp_path / "mixed.yaml"
        path.write_text(NODE % "a" + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
        with pytest.raises(ManifestReadError, match=r'^document 2: kind: expected Node, got "Pod"$'):
            load_nodes(str(path))

    def test_nameless_node_is_rejected(self, tmp_path: Path) -> None:
        path = tmp_path / "nameless.yaml"
        path.write_text("kind: Node\nmetadata: {}\n")
        with pytest.raises(ManifestReadError, match=r"^metadata.name: required$"):
            load_nodes(str(path))


class TestWithPoolLabels:
    def test_labels_written_and_input_untouched(self) -> None:
        raw = default_nodes()
        labelled = with_pool_labels(raw, KaiwoConfigSpec())
        assert all("kaiwo/nodepool" not in node["metadata"]["labels"] for node in raw)
        by_name = {node["metadata"]["name"]: node["metadata"]["labels"] for node in labelled}
        assert by_name["gpu-amd-mi300x-01"]["kaiwo/nodepool"] == "amd-mi300x-8gpu-345core-2038gi"
        assert by_name["gpu-amd-mi300x-01"]["kaiwo/gpu-model"] == "mi300x"
        assert by_name["cpu-epyc-01"]["kaiwo/worker"] == "true"
        assert "kaiwo/gpu-model" not in by_name["cpu-epyc-01"]

    def test_workload_gpu_arithmetic_sees_the_pools(self) -> None:
        labelled = with_pool_labels(default_nodes(), KaiwoConfigSpec())
        amd, nvidia = gpu_stats(labelled, "amd"), gpu_stats(labelled, "nvidia")
        assert (amd.total_gpus, amd.min_gpus_per_node, amd.total_allocatable) == (16, 8, 16)
        assert (nvidia.total_gpus, nvidia.min_gpus_per_node) == (8, 8)
        assert gpu_stats(default_nodes(), "amd").total_gpus == 0  # raw nodes carry no pool label

    def test_cordoned_node_is_left_alone(self) -> None:
        raw = default_nodes()
        raw[1]["spec"]["unschedulable"] = True
        labelled = with_pool_labels(raw, KaiwoConfigSpec())
        assert labelled[1]["metadata"]["labels"] == raw[1]["metadata"]["labels"]

    def test_gpu_taints_when_configured(self) -> None:
        config = KaiwoConfigSpec.model_validate({"nodes": {"addTaintsToGpuNodes": True}})
        labelled = with_pool_labels(default_nodes(), config)
        tainted = {node["metadata"]["name"] for node in labelled if node.get("spec", {}).get("taints")}
        assert tainted == {"gpu-amd-mi300x-01", "gpu-amd-mi300x-02", "gpu-nvidia-h100-01"}
        assert labelled[1]["spec"]["taints"] == [
            {"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoSchedule"}
        ]
