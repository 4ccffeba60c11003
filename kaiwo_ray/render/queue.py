"""KaiwoQueueConfig -> the Kueue objects it stands for (cluster.md §4.4, Examples B-D).

Output order is creation order: Topologies (flavors reference them), ResourceFlavors (queues
reference them), ClusterQueues, LocalQueues (they point at queues), WorkloadPriorityClasses.
Generated objects carry no labels; the KaiwoQueueConfig owns them through a controller
ownerReference, except LocalQueues, which are owned by their ClusterQueue so they go when it goes.

Kueue's API version is a parameter: `v1beta2` (Kueue >= 0.15 serves it, >= 0.16 stores it) is the
default, `v1beta1` for older Kueue. The KaiwoQueueConfig itself stores v1beta1 field names, as
upstream does; `v1beta2` output renames them (reference/apis.md §2.1).

Pure functions over the API models; the reconciler adds the UIDs it learns from the API server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.queueconfig import (
    ClusterQueueEntry,
    KaiwoQueueConfig,
    ResourceFlavorEntry,
    TopologyEntry,
    WorkloadPriorityClassEntry,
)

KueueVersion = Literal["v1beta2", "v1beta1"]

KUEUE_GROUP = "kueue.x-k8s.io"
DEFAULT_KUEUE_VERSION: KueueVersion = "v1beta2"
KUEUE_VERSIONS: tuple[KueueVersion, ...] = ("v1beta2", "v1beta1")
# Kueue serves Topology as v1beta1 since 0.14 (the v1alpha1 that upstream Kaiwo writes is gone).
TOPOLOGY_API_VERSION = f"{KUEUE_GROUP}/v1beta1"
KAIWO_API_VERSION = "kaiwo.silogen.ai/v1alpha1"
WORKER_LABEL = "kaiwo/worker"
# v1beta2 merged the two "stop searching" values of FlavorFungibility into one.
_V1BETA2_FUNGIBILITY = {"Borrow": "MayStopSearch", "Preempt": "MayStopSearch"}


def kueue_api_version(version: KueueVersion) -> str:
    return f"{KUEUE_GROUP}/{version}"


def render_queue_config(
    queue_config: KaiwoQueueConfig,
    *,
    kueue_version: KueueVersion = DEFAULT_KUEUE_VERSION,
    topology_api_available: bool = True,
) -> list[JsonObj]:
    """Every Kueue object of `queue_config`, in creation order.

    `topology_api_available=False` is Kueue without the Topology kind: no Topologies are rendered
    and every flavor loses its `topologyName` (and so gets `kaiwo/worker`), as upstream does when
    listing Topologies fails with "no matches for kind".
    """
    owner = queue_config_owner_reference(queue_config)
    spec = queue_config.spec
    topologies = (
        [render_topology(entry, owner) for entry in spec.topologies if entry.metadata.name]
        if topology_api_available
        else []
    )
    flavors = [
        render_resource_flavor(
            entry, owner, kueue_version=kueue_version, topology_api_available=topology_api_available
        )
        for entry in spec.resource_flavors
    ]
    cluster_queues = [
        render_cluster_queue(entry, owner, kueue_version=kueue_version) for entry in spec.cluster_queues
    ]
    local_queues = [
        local_queue
        for entry in spec.cluster_queues
        for local_queue in render_local_queues(entry, kueue_version=kueue_version)
    ]
    priority_classes = [
        render_workload_priority_class(entry, owner, kueue_version=kueue_version)
        for entry in spec.workload_priority_classes
    ]
    return [*topologies, *flavors, *cluster_queues, *local_queues, *priority_classes]


def queue_config_owner_reference(queue_config: KaiwoQueueConfig) -> JsonObj:
    """Controller reference to the KaiwoQueueConfig; uid "" until it has one (e.g. when rendering a file)."""
    return controller_reference(
        api_version=KAIWO_API_VERSION,
        kind="KaiwoQueueConfig",
        name=queue_config.metadata.name or "",
        uid=queue_config.metadata.uid or "",
    )


def controller_reference(
    *, api_version: str, kind: str, name: str, uid: str, controller: bool = True
) -> JsonObj:
    reference: JsonObj = {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid}
    if controller:
        reference |= {"controller": True, "blockOwnerDeletion": True}
    return reference


def render_topology(entry: TopologyEntry, owner: JsonObj) -> JsonObj:
    return {
        "apiVersion": TOPOLOGY_API_VERSION,
        "kind": "Topology",
        "metadata": _metadata(entry.metadata.name or "", owner),
        "spec": {"levels": [{"nodeLabel": level.node_label} for level in entry.spec.levels]},
    }


def resource_flavor_spec(entry: ResourceFlavorEntry, *, topology_api_available: bool = True) -> JsonObj:
    """Kueue ResourceFlavor spec: labels copied; `kaiwo/worker: "true"` added unless the flavor
    uses a topology. Taints become Kueue's `nodeTaints` (a workload is admitted to the flavor only if
    it tolerates them) and tolerations Kueue's `tolerations` (added to the admitted pods), as the
    seeds document; upstream's code drops both.
    """
    topology = entry.topology_name if topology_api_available else None
    node_labels = dict(entry.node_labels)
    if not topology:
        node_labels[WORKER_LABEL] = "true"
    spec: JsonObj = {}
    if node_labels:
        spec["nodeLabels"] = node_labels
    if entry.taints:
        spec["nodeTaints"] = [taint.to_wire() for taint in entry.taints]
    if entry.tolerations:
        spec["tolerations"] = [toleration.to_wire() for toleration in entry.tolerations]
    if topology:
        spec["topologyName"] = topology
    return spec


def render_resource_flavor(
    entry: ResourceFlavorEntry,
    owner: JsonObj,
    *,
    kueue_version: KueueVersion = DEFAULT_KUEUE_VERSION,
    topology_api_available: bool = True,
) -> JsonObj:
    return {
        "apiVersion": kueue_api_version(kueue_version),
        "kind": "ResourceFlavor",
        "metadata": _metadata(entry.name, owner),
        "spec": resource_flavor_spec(entry, topology_api_available=topology_api_available),
    }


def cluster_queue_spec(
    entry: ClusterQueueEntry, *, kueue_version: KueueVersion = DEFAULT_KUEUE_VERSION
) -> JsonObj:
    """Kueue ClusterQueue spec with Kueue's defaults filled, each flavor's resources in
    `coveredResources` order (uncovered ones dropped), field names of `kueue_version`.

    Filling defaults and fixing the order makes the spec equal to what the API server stores, so
    a reconciler comparing desired against live sees no difference on a steady cluster.
    """
    spec: JsonObj = entry.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    spec.pop("cohortName", None)  # the model folds it into `cohort`
    for group in spec.get("resourceGroups", []):
        covered: list[str] = group["coveredResources"]
        for flavor in group["flavors"]:
            by_name = {resource["name"]: resource for resource in flavor["resources"]}
            flavor["resources"] = [by_name[name] for name in covered if name in by_name]
    return _to_v1beta2(spec) if kueue_version == "v1beta2" else spec


def render_cluster_queue(
    entry: ClusterQueueEntry, owner: JsonObj, *, kueue_version: KueueVersion = DEFAULT_KUEUE_VERSION
) -> JsonObj:
    return {
        "apiVersion": kueue_api_version(kueue_version),
        "kind": "ClusterQueue",
        "metadata": _metadata(entry.name, owner),
        "spec": cluster_queue_spec(entry, kueue_version=kueue_version),
    }


def render_local_queue(
    cluster_queue: str,
    namespace: str,
    *,
    cluster_queue_uid: str = "",
    controller: bool = True,
    kueue_version: KueueVersion = DEFAULT_KUEUE_VERSION,
) -> JsonObj:
    """LocalQueue named after its ClusterQueue (workloads address queues by that name), owned by it.

    The queue-config controller creates these with a controller reference; the workload
    reconcilers create them lazily with `controller=False` (workloads.md §5).
    """
    owner = controller_reference(
        api_version=kueue_api_version(kueue_version),
        kind="ClusterQueue",
        name=cluster_queue,
        uid=cluster_queue_uid,
        controller=controller,
    )
    return {
        "apiVersion": kueue_api_version(kueue_version),
        "kind": "LocalQueue",
        "metadata": {"name": cluster_queue, "namespace": namespace, "ownerReferences": [owner]},
        "spec": {"clusterQueue": cluster_queue},
    }


def render_local_queues(
    entry: ClusterQueueEntry,
    *,
    cluster_queue_uid: str = "",
    kueue_version: KueueVersion = DEFAULT_KUEUE_VERSION,
) -> list[JsonObj]:
    """One LocalQueue per listed namespace (duplicates collapsed, order kept)."""
    return [
        render_local_queue(
            entry.name, namespace, cluster_queue_uid=cluster_queue_uid, kueue_version=kueue_version
        )
        for namespace in dict.fromkeys(entry.namespaces)
    ]


def render_workload_priority_class(
    entry: WorkloadPriorityClassEntry, owner: JsonObj, *, kueue_version: KueueVersion = DEFAULT_KUEUE_VERSION
) -> JsonObj:
    priority_class: JsonObj = {
        "apiVersion": kueue_api_version(kueue_version),
        "kind": "WorkloadPriorityClass",
        "metadata": _metadata(entry.metadata.name or "", owner),
        "value": entry.value,
    }
    if entry.description is not None:
        priority_class["description"] = entry.description
    return priority_class


def names_in_spec(objects: Sequence[JsonObj], kind: str) -> list[str]:
    """Names of the rendered objects of one kind: what the reconciler keeps when it deletes by name."""
    return [obj["metadata"]["name"] for obj in objects if obj["kind"] == kind]


def _metadata(name: str, owner: JsonObj) -> JsonObj:
    return {"name": name, "ownerReferences": [dict(owner)]}


def _to_v1beta2(spec: JsonObj) -> JsonObj:
    """v1beta1 ClusterQueue spec -> v1beta2: `cohort` -> `cohortName`, `Borrow`/`Preempt` ->
    `MayStopSearch`, the removed `admissionChecks` list folded into `admissionChecksStrategy`."""
    converted: JsonObj = {}
    for key, value in spec.items():
        if key == "cohort":
            converted["cohortName"] = value
        elif key == "flavorFungibility":
            converted[key] = {
                field: _V1BETA2_FUNGIBILITY.get(policy, policy) for field, policy in value.items()
            }
        elif key == "admissionChecks":
            continue
        else:
            converted[key] = value
    checks: list[str] = spec.get("admissionChecks") or []
    if checks:
        # The model lets only one of the two be set (Kueue's CEL rule), so nothing is merged here.
        converted["admissionChecksStrategy"] = {
            "admissionChecks": [{"name": name, "onFlavors": []} for name in checks]
        }
    return converted
