"""Everything the renderers derive from a workload once: names, labels, queue, GPU numbers, storage plan.

Built by `render_context` at the start of a render and only read afterwards; each renderer copies
what it puts into a child, so no two children share a mutable dict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kaiwo_ray.api.aim import AIMNamespaceConfigSpec
from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.labels import (
    ANNOTATION_PREFERRED_TOPOLOGY,
    ANNOTATION_REQUIRED_TOPOLOGY,
    LABEL_MANAGED,
    LABEL_PRIORITY,
    LABEL_QUEUE,
    LABEL_RUN_ID,
    LABEL_TYPE,
    LABEL_USER,
)
from kaiwo_ray.api.labels import LABEL_NAME as LABEL_NAME  # handed on: the admin API's cache reads it here
from kaiwo_ray.api.workloads import KaiwoJob, KaiwoService
from kaiwo_ray.render.gpus import (
    GpuCheck,
    ResourceConfig,
    compute_resource_config,
    gpu_schedulability,
    gpu_stats,
)
from kaiwo_ray.render.names import name_with_postfix, sanitize_rfc1123

Workload = KaiwoJob | KaiwoService



@dataclass(frozen=True, slots=True)
class StoragePlan:
    """Which PVCs exist and where pods mount them (only built when `storage.storageEnabled`)."""

    data_claim: str | None
    data_mount_path: str
    hf_claim: str | None
    hf_mount_path: str
    storage_size_data: str | None
    storage_size_hf: str | None


@dataclass(frozen=True, slots=True)
class PriorityClasses:
    """Which kinds of class `spec.priorityClass` names on the cluster: a Kubernetes PriorityClass (the
    pods get `priorityClassName`, as seed 001 says), a Kueue WorkloadPriorityClass (the Workload gets
    Kueue's label, as upstream's code does), both, or neither."""

    pod: bool = False
    workload: bool = False


@dataclass(frozen=True, slots=True)
class RenderContext:
    """Read-only facts about one workload render."""

    workload: Workload
    config: KaiwoConfigSpec
    resources: ResourceConfig
    name: str
    namespace: str | None
    queue: str
    system_labels: Mapping[str, str]
    cr_labels: Mapping[str, str]
    """CR labels minus the queue-name label, copied without overwriting."""
    pod_annotations: Mapping[str, str]
    """All CR annotations (kubectl's last-applied copy included, like upstream) plus the topology one."""
    owner_reference: Mapping[str, Any]
    storage: StoragePlan | None
    priority_classes: PriorityClasses | None = None
    """What the cluster has of `spec.priorityClass`; None where nobody looked (an offline render): the
    Kueue label alone, as upstream."""
    namespace_config: AIMNamespaceConfigSpec | None = None
    """The spec of the AIMNamespaceConfig that counts in the workload's namespace (None: none, or an
    offline render): credentials for downloads that name none, image pull secrets, the gateway."""

    @property
    def namespace_pull_secrets(self) -> list[JsonObj]:
        """The namespace's `images.imagePullSecrets` as LocalObjectReferences (a fresh list)."""
        images = self.namespace_config.images if self.namespace_config is not None else None
        return [{"name": name} for name in images.image_pull_secrets] if images is not None else []

    @property
    def kueue_labels(self) -> dict[str, str]:
        """`queue-name` and, when set, `priority-class` (a fresh dict)."""
        labels = {LABEL_QUEUE: self.queue}
        priority = self.workload.spec.priority_class
        if priority and (self.priority_classes is None or self.priority_classes.workload):
            labels[LABEL_PRIORITY] = priority
        return labels

    @property
    def pod_priority_class_name(self) -> str | None:
        """`spec.priorityClass` where the cluster has a PriorityClass of that name."""
        priority = self.workload.spec.priority_class
        return priority if priority and self.priority_classes is not None and self.priority_classes.pod else None


def effective_queue(workload: Workload, config: KaiwoConfigSpec) -> str:
    """`spec.clusterQueue`, or KaiwoConfig `defaultClusterQueueName` when empty."""
    return workload.spec.cluster_queue or config.default_cluster_queue_name


def workload_type(workload: Workload) -> str:
    """Value of `kaiwo.silogen.ai/type`: `job` or `service`."""
    return "job" if isinstance(workload, KaiwoJob) else "service"


def resource_config(
    workload: Workload, config: KaiwoConfigSpec, nodes: Sequence[Mapping[str, Any]]
) -> ResourceConfig:
    """§3 numbers for this workload on this cluster."""
    spec = workload.spec
    return compute_resource_config(
        gpus=spec.gpus,
        replicas=spec.replicas,
        gpus_per_replica=spec.gpus_per_replica,
        stats=gpu_stats(nodes, spec.gpu_vendor),
        default_gpu_resource_key=config.nodes.default_gpu_resource_key,
    )


def workload_gpu_check(
    workload: Workload, config: KaiwoConfigSpec, nodes: Sequence[Mapping[str, Any]]
) -> GpuCheck:
    """GPU part of the Schedulable condition; batch Jobs (one pod) must fit in one replica."""
    stats = gpu_stats(nodes, workload.spec.gpu_vendor)
    numbers = compute_resource_config(
        gpus=workload.spec.gpus,
        replicas=workload.spec.replicas,
        gpus_per_replica=workload.spec.gpus_per_replica,
        stats=stats,
        default_gpu_resource_key=config.nodes.default_gpu_resource_key,
    )
    single_pod = isinstance(workload, KaiwoJob) and not workload.spec.effective_uses_ray
    return gpu_schedulability(numbers, stats, single_pod=single_pod)


def system_labels(workload: Workload, type_value: str | None = None) -> dict[str, str]:
    """Kaiwo's own labels (they overwrite user values); `managed` only if the CR carries it."""
    meta = workload.metadata
    labels = {
        LABEL_USER: sanitize_rfc1123(workload.spec.user or ""),
        LABEL_NAME: meta.name or "",
        LABEL_TYPE: type_value or workload_type(workload),
        LABEL_RUN_ID: meta.uid or "",
    }
    managed = meta.labels.get(LABEL_MANAGED)
    if managed is not None:
        labels[LABEL_MANAGED] = managed
    return labels


def owner_reference(workload: Workload) -> dict[str, Any]:
    """Controller reference to the CR (uid "" when the manifest has none, e.g. `kaiwo-ray render`)."""
    return {
        "apiVersion": workload.api_version,
        "kind": workload.kind,
        "name": workload.metadata.name or "",
        "uid": workload.metadata.uid or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def storage_plan(workload: Workload, config: KaiwoConfigSpec | None = None) -> StoragePlan | None:
    """PVC names and mount paths, or None when storage is off (then `spec.storage` is ignored entirely).
    A mount path the workload leaves unset is KaiwoConfig's `storage.defaultDataMountPath`/`defaultHfMountPath`."""
    storage = workload.spec.storage
    if storage is None or not storage.storage_enabled:
        return None
    defaults = (config or KaiwoConfigSpec()).storage
    name = workload.metadata.name or ""
    data, hf = storage.data, storage.hugging_face
    data_size = data.storage_size if data is not None and data.storage_size else None
    hf_size = hf.storage_size if hf is not None and hf.storage_size else None
    return StoragePlan(
        data_claim=name_with_postfix(name, "data") if data_size else None,
        data_mount_path=(data.mount_path if data is not None else None) or defaults.default_data_mount_path,
        hf_claim=name_with_postfix(name, "hf") if hf_size else None,
        hf_mount_path=(hf.mount_path if hf is not None else None) or defaults.default_hf_mount_path,
        storage_size_data=data_size,
        storage_size_hf=hf_size,
    )


def render_context(
    workload: Workload,
    config: KaiwoConfigSpec,
    nodes: Sequence[Mapping[str, Any]],
    *,
    numbers: ResourceConfig | None = None,
    priority_classes: PriorityClasses | None = None,
    namespace_config: AIMNamespaceConfigSpec | None = None,
) -> RenderContext:
    """Derive the shared facts; `numbers` skips the node scan when the caller already has them."""
    meta = workload.metadata
    spec = workload.spec
    annotations = dict(meta.annotations)
    if spec.required_topology_label:
        annotations[ANNOTATION_REQUIRED_TOPOLOGY] = spec.required_topology_label
    elif spec.preferred_topology_label:
        annotations[ANNOTATION_PREFERRED_TOPOLOGY] = spec.preferred_topology_label
    return RenderContext(
        workload=workload,
        config=config,
        resources=numbers if numbers is not None else resource_config(workload, config, nodes),
        name=meta.name or "",
        namespace=meta.namespace,
        queue=effective_queue(workload, config),
        system_labels=system_labels(workload),
        cr_labels={key: value for key, value in meta.labels.items() if key != LABEL_QUEUE},
        pod_annotations=annotations,
        owner_reference=owner_reference(workload),
        storage=storage_plan(workload, config),
        priority_classes=priority_classes,
        namespace_config=namespace_config,
    )


def object_meta(ctx: RenderContext, name: str, labels: Mapping[str, str] | None = None) -> JsonObj:
    """Child metadata: name, namespace (when known), labels (when any), controller ownerReference."""
    meta: JsonObj = {"name": name}
    if ctx.namespace:
        meta["namespace"] = ctx.namespace
    if labels:
        meta["labels"] = dict(labels)
    meta["ownerReferences"] = [dict(ctx.owner_reference)]
    return meta
