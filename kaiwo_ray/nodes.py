"""Node sets: the sandbox's default cluster, node files, and the labels Kaiwo writes on nodes.

The default cluster is small but shaped like a real mixed one, so rendering and the simulated
cluster exercise every path of node discovery: two AMD MI300X nodes (one pool of 16 GPUs), one
NVIDIA H100 node and one CPU-only node, labelled the way the AMD GPU operator's node labeller and
NVIDIA's GPU feature discovery label real nodes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.manifests import ManifestReadError, parse_located, read_source
from kaiwo_ray.render.nodepools import desired_node_labels_and_taints, flavor_name_for_node

_KUBELET_VERSION = "v1.32.5"
_CONTAINER_RUNTIME = "containerd://1.7.27"
_OS_IMAGE = "Ubuntu 22.04.5 LTS"
_KERNEL = "5.15.0-139-generic"


def default_nodes() -> list[JsonObj]:
    """The sandbox's nodes, in the order the API server lists them (by name). Fresh copies each call."""
    return [
        cpu_node("cpu-epyc-01", "10.0.3.11", uid_suffix="c1"),
        _amd_mi300x_node("gpu-amd-mi300x-01", "10.0.1.11", block="block-a", rack="rack-a", uid_suffix="a1"),
        _amd_mi300x_node("gpu-amd-mi300x-02", "10.0.1.12", block="block-a", rack="rack-b", uid_suffix="a2"),
        _nvidia_h100_node("gpu-nvidia-h100-01", "10.0.2.11", uid_suffix="n1"),
    ]


def load_nodes(source: str) -> list[JsonObj]:
    """Nodes from a file (or `-`): a NodeList, a YAML/JSON list, or multi-document Nodes.

    Raises ManifestReadError (one line) when the file is unreadable or holds something other than
    Nodes, so a typo'd `--nodes` file is reported instead of silently yielding an empty cluster.
    """
    located = parse_located(read_source(source))
    for entry in located:
        where = f"{entry.where}: " if entry.where else ""
        kind = entry.obj.get("kind", "Node")
        if kind != "Node":
            raise ManifestReadError(f'{where}kind: expected Node, got "{kind}"')
        name = (entry.obj.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            raise ManifestReadError(f"{where}metadata.name: required")
    return [entry.obj for entry in located]


def with_pool_labels(nodes: Iterable[Mapping[str, Any]], config: KaiwoConfigSpec) -> list[JsonObj]:
    """Copies of `nodes` carrying what the queue-config controller writes on them
    (`kaiwo/nodepool`, `kaiwo/worker`, `kaiwo/gpu-model` and, if configured, the GPU taint).

    Workload rendering reads GPU capacity from `kaiwo/nodepool` (workloads.md §3); applying the
    controller's decision here lets it run on raw nodes exactly as on a reconciled cluster.
    """
    labelled: list[JsonObj] = []
    for node in nodes:
        result = copy.deepcopy(dict(node))
        flavor = flavor_name_for_node(result, config)
        if flavor is not None:
            labels_to_add, taints_to_add = desired_node_labels_and_taints(result, flavor, config)
            metadata = result.setdefault("metadata", {})
            metadata["labels"] = {**(metadata.get("labels") or {}), **labels_to_add}
            if taints_to_add:
                spec = result.setdefault("spec", {})
                spec["taints"] = [*(spec.get("taints") or []), *taints_to_add]
        labelled.append(result)
    return labelled


def _amd_mi300x_node(name: str, ip: str, *, block: str, rack: str, uid_suffix: str) -> JsonObj:
    # Shaped like a Supermicro AS-8125GS-TNMR2: 2x EPYC 9654 (192 cores / 384 threads), 2.25 TiB,
    # 8x MI300X OAM. Labels as the AMD GPU operator's node labeller writes them.
    labels = {
        **_base_labels(name, "amd64", "as-8125gs-tnmr2"),
        "amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM",
        "amd.com/gpu.family": "AI",
        "amd.com/gpu.device-id": "74a1",
        "amd.com/gpu.vram": "192G",
        "amd.com/gpu.cu-count": "304",
        "amd.com/gpu.simd-count": "1216",
        "amd.com/gpu.driver-version": "6.10.5",
        "amd.com/gpu.count": "8",
        "beta.amd.com/gpu.family.AI": "8",
        "beta.amd.com/gpu.device-id.74a1": "8",
        "beta.amd.com/gpu.vram.192G": "8",
        "feature.node.kubernetes.io/amd-gpu": "true",
        "kaiwo/topology-block": block,
        "kaiwo/topology-rack": rack,
    }
    return _node(
        name,
        ip,
        labels,
        capacity={
            "cpu": "384",
            "memory": "2375862488Ki",
            "amd.com/gpu": "8",
            "ephemeral-storage": "3750157312Ki",
        },
        allocatable={
            "cpu": "383",
            "memory": "2375145688Ki",
            "amd.com/gpu": "8",
            "ephemeral-storage": "3456094561785",
        },
        machine_id=f"4f2c9d1e8b7a4c3d9e0f1a2b3c4d5e{uid_suffix}",
    )


def _nvidia_h100_node(name: str, ip: str, *, uid_suffix: str) -> JsonObj:
    # Shaped like a DGX H100: 2x Xeon 8480C (112 cores / 224 threads), 2 TiB, 8x H100 SXM5 80GB.
    # Labels as NVIDIA GPU feature discovery writes them.
    labels = {
        **_base_labels(name, "amd64", "dgx-h100"),
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/gpu.machine": "DGXH100",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.compute.major": "9",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/cuda.driver.major": "550",
        "nvidia.com/cuda.driver.minor": "127",
        "nvidia.com/cuda.runtime.major": "12",
        "nvidia.com/cuda.runtime.minor": "4",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/gpu.deploy.device-plugin": "true",
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "kaiwo/topology-block": "block-b",
        "kaiwo/topology-rack": "rack-c",
    }
    return _node(
        name,
        ip,
        labels,
        capacity={
            "cpu": "224",
            "memory": "2113531784Ki",
            "nvidia.com/gpu": "8",
            "ephemeral-storage": "1843260812Ki",
        },
        allocatable={
            "cpu": "223",
            "memory": "2112814984Ki",
            "nvidia.com/gpu": "8",
            "ephemeral-storage": "1698741591025",
        },
        machine_id=f"9a8b7c6d5e4f40312a1b2c3d4e5f60{uid_suffix}",
    )


def cpu_node(name: str, ip: str, *, uid_suffix: str) -> JsonObj:
    """One more CPU node shaped as the default cluster's (`uid_suffix`: two hex digits of its machine
    id), for a cluster sized to a load (benchmarks/_objects.sized_nodes)."""
    # A general-purpose node for CPU jobs and services: 1x EPYC 9354 (32 cores / 64 threads), 256 GiB.
    labels = {
        **_base_labels(name, "amd64", "epyc-9354-256g"),
        "kaiwo/topology-block": "block-b",
        "kaiwo/topology-rack": "rack-d",
    }
    return _node(
        name,
        ip,
        labels,
        capacity={"cpu": "64", "memory": "264039152Ki", "ephemeral-storage": "937475072Ki"},
        allocatable={"cpu": "63", "memory": "263322352Ki", "ephemeral-storage": "863966500484"},
        machine_id=f"1b2c3d4e5f60718293a4b5c6d7e8f9{uid_suffix}",
    )


def _base_labels(name: str, arch: str, instance_type: str) -> dict[str, str]:
    return {
        "beta.kubernetes.io/arch": arch,
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": arch,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": instance_type,
    }


def _node(
    name: str,
    ip: str,
    labels: dict[str, str],
    *,
    capacity: dict[str, str],
    allocatable: dict[str, str],
    machine_id: str,
) -> JsonObj:
    heartbeat = "2026-01-01T00:00:00Z"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"podCIDR": _pod_cidr(ip), "podCIDRs": [_pod_cidr(ip)]},
        "status": {
            "capacity": {**capacity, "hugepages-1Gi": "0", "hugepages-2Mi": "0", "pods": "110"},
            "allocatable": {**allocatable, "hugepages-1Gi": "0", "hugepages-2Mi": "0", "pods": "110"},
            "conditions": [
                _condition(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                    heartbeat,
                ),
                _condition(
                    "DiskPressure",
                    "False",
                    "KubeletHasNoDiskPressure",
                    "kubelet has no disk pressure",
                    heartbeat,
                ),
                _condition(
                    "PIDPressure",
                    "False",
                    "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available",
                    heartbeat,
                ),
                _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", heartbeat),
            ],
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": machine_id,
                "systemUUID": f"{machine_id[:8]}-{machine_id[8:12]}-{machine_id[12:16]}-{machine_id[16:20]}-{machine_id[20:32]}",
                "bootID": f"{machine_id[16:24]}-0000-4000-8000-{machine_id[:12]}",
                "kernelVersion": _KERNEL,
                "osImage": _OS_IMAGE,
                "containerRuntimeVersion": _CONTAINER_RUNTIME,
                "kubeletVersion": _KUBELET_VERSION,
                "kubeProxyVersion": _KUBELET_VERSION,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def _pod_cidr(ip: str) -> str:
    third, fourth = ip.split(".")[2:4]
    return f"10.244.{int(third) * 16 + int(fourth) % 16}.0/24"


def _condition(kind: str, status: str, reason: str, message: str, time: str) -> JsonObj:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": time,
        "lastTransitionTime": time,
    }
