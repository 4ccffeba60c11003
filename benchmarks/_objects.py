"""What the benchmarks' clusters hold: a KaiwoJob manifest (`kaiwojob`), the sandbox's nodes sized
to a load (`sized_nodes`), the namespaces and Kueue queue objects a KaiwoJob's Job needs
(`setup_cluster_objects`), and the unrelated objects of a busy cluster that no operator here owns
(`unrelated_objects`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _runtime import api_client, k8s

GROUP, VERSION = "kaiwo.silogen.ai", "v1alpha1"


def kaiwojob(name: str, namespace: str, entrypoint: str = "sleep 600", **spec: Any) -> dict[str, Any]:
    """A KaiwoJob; `spec` adds fields (storage=..., ...)."""
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "KaiwoJob",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"user": "bench@example.com", "image": "busybox", "entrypoint": entrypoint, **spec}}


def sized_nodes(cpu_nodes: int = 1) -> list[dict[str, Any]]:
    """The sandbox's default nodes with `cpu_nodes` CPU nodes in all: copies of the first, renamed,
    each with its own address, pod CIDR and machine id. A node holds 110 pods, so a load that keeps
    many pods running (services) needs more than the one CPU node the default cluster has."""
    from kaiwo_ray.nodes import cpu_node, default_nodes

    nodes = default_nodes()
    for n in range(2, cpu_nodes + 1):
        node = cpu_node(f"cpu-epyc-{n:02d}", f"10.0.4.{n}", uid_suffix=f"{n:02x}")
        # the default pod CIDRs come from the address and repeat every 16 nodes: one range each
        node["spec"] = {"podCIDR": f"10.245.{n}.0/24", "podCIDRs": [f"10.245.{n}.0/24"]}
        node["status"]["nodeInfo"]["bootID"] = f"00000000-0000-4000-8000-{n:012d}"
        nodes.append(node)
    return nodes


def setup_cluster_objects(kubeconfig: Path, namespaces: list[str], cpu_nodes: int = 1) -> None:
    """Namespaces, plus the Kueue objects of the default queue config for the sandbox's nodes and a
    LocalQueue `kaiwo` in each namespace: what a KaiwoJob's Job needs (the KaiwoQueueConfig
    controller is not what is measured, so its output is created directly)."""
    from kaiwo_ray.api.config import KaiwoConfigSpec
    from kaiwo_ray.api.queueconfig import KaiwoQueueConfig
    from kaiwo_ray.nodes import with_pool_labels
    from kaiwo_ray.render.nodepools import default_queue_config
    from kaiwo_ray.render.queue import render_queue_config

    kubernetes = k8s()
    client = api_client(kubeconfig)
    core = kubernetes.client.CoreV1Api(client)
    custom = kubernetes.client.CustomObjectsApi(client)
    for namespace in namespaces:
        core.create_namespace({"metadata": {"name": namespace}})
    config = KaiwoConfigSpec()
    spec = default_queue_config(with_pool_labels(sized_nodes(cpu_nodes), config), config)
    kqc = KaiwoQueueConfig.model_validate({"metadata": {"name": "kaiwo", "uid": "bench"},
                                           "spec": spec.model_dump(by_alias=True, exclude_none=True)})
    plurals = {"Topology": "topologies", "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues",
               "LocalQueue": "localqueues", "WorkloadPriorityClass": "workloadpriorityclasses"}
    queue = ""
    for obj in render_queue_config(kqc):
        obj["metadata"].pop("ownerReferences", None)
        group, version = obj["apiVersion"].split("/")
        if obj["kind"] == "ClusterQueue":
            queue = obj["metadata"]["name"]
        if obj["kind"] == "LocalQueue":
            continue
        custom.create_cluster_custom_object(group, version, plurals[obj["kind"]], obj)
    for namespace in namespaces:
        custom.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", namespace, "localqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": queue, "namespace": namespace}, "spec": {"clusterQueue": queue}})


# what `unrelated_objects` makes, round robin; Pods and Jobs only where no simulated cluster would run them
UNRELATED_KINDS = ("configmaps", "secrets", "pods", "jobs")
UNRELATED_NAMESPACES = 10


def unrelated_objects(count: int, kinds: tuple[str, ...] = UNRELATED_KINDS, first: int = 0,
                      namespaces: int = UNRELATED_NAMESPACES) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """`count` objects no operator here owns (numbered from `first`), round robin over `kinds`, in the
    namespaces other-0..9 (created along with the first batch), labelled as an ordinary app, never for
    kaiwo: the rest of a busy cluster, which an operator's label-selected watches and lists must skip at
    the API server's cost, not its own."""
    for n in range(namespaces if first == 0 else 0):
        yield "", "v1", "namespaces", {"metadata": {"name": f"other-{n}"}}
    labels = {"app.kubernetes.io/name": "unrelated", "tier": "backend"}
    container = {"name": "app", "image": "registry.example.com/app:1.2.3", "command": ["/bin/app", "--serve"],
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}
    for i in range(first, first + count):
        kind = kinds[i % len(kinds)]
        meta = {"name": f"unrelated-{i}", "namespace": f"other-{i % namespaces}", "labels": dict(labels)}
        if kind == "configmaps":
            yield "", "v1", kind, {"metadata": meta, "data": {"config.yaml": f"replicas: {i}\nlevel: info\n" * 4}}
        elif kind == "secrets":
            yield "", "v1", kind, {"metadata": meta, "type": "Opaque", "data": {"token": "c2VjcmV0LXZhbHVl" * 4}}
        elif kind == "pods":
            yield "", "v1", kind, {"metadata": meta, "spec": {"containers": [dict(container)],
                                                             "restartPolicy": "Always"}}
        else:
            yield "batch", "v1", kind, {"metadata": meta, "spec": {"suspend": True, "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {"containers": [dict(container)], "restartPolicy": "Never"}}}}
