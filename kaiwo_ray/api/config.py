"""KaiwoConfig (`config.kaiwo.silogen.ai/v1alpha1`, cluster singleton `kaiwo`): live operator settings.

`KaiwoConfigSpec()` carries every default of spec/cluster.md §2.1 (the code's defaults, which differ
from seed 003 in places: `storage` not `data` (still read, deprecated), `terminateUnderutilized` false). Upstream relies on the
API server to fill nested defaults, which it skips when `spec` itself is absent; building the model
always fills them.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, model_validator

from kaiwo_ray.api._base import DEFAULT_EMPTY_OBJECT, GoDuration, QuantityString, WireModel
from kaiwo_ray.api.meta import ObjectMeta

CONFIG_GROUP = "config.kaiwo.silogen.ai"
CONFIG_API_VERSION: Final = "config.kaiwo.silogen.ai/v1alpha1"
TERMINATE_AFTER_PATTERN = r"^([0-9]+(s|m|h))+$"


class RayConfig(WireModel):
    """Ray-specific settings."""

    default_ray_image: str = "ghcr.io/silogen/rocm-ray:6.4"
    """Image for Ray containers when the workload names none."""
    head_pod_memory: QuantityString = "16Gi"
    """Memory request and limit of the Ray head pod."""


class StorageConfig(WireModel):
    """Storage defaults. Upstream documents but never reads the mount paths (its CRD defaults them instead);
    kaiwo-ray uses them for a workload that leaves `data.mountPath` / `huggingFace.mountPath` unset."""

    default_storage_class: str = ""
    default_data_mount_path: str = "/workload"
    default_hf_mount_path: str = "/hf_cache"


class NodesConfig(WireModel):
    """Node handling: GPU resource key, GPU taints, master-node exclusion."""

    default_gpu_resource_key: str = "amd.com/gpu"
    """GPU resource key used when the workload's vendor is neither amd nor nvidia."""
    default_gpu_taint_key: str = "kaiwo.silogen.ai/gpu"
    exclude_master_nodes_from_node_pools: bool = False
    add_taints_to_gpu_nodes: bool = False
    """Taint GPU nodes and give GPU pods the matching toleration."""


class SchedulingConfig(WireModel):
    """Scheduler name and the pending threshold that triggers duration-based preemption."""

    kube_scheduler_name: str = "kaiwo-scheduler"
    pending_threshold_for_preemption: GoDuration = "5m"


class ResourceMonitoringConfig(WireModel):
    """GPU under-utilisation detection for KaiwoJobs/KaiwoServices."""

    low_utilization_threshold: Annotated[float, Field(ge=0)] = 1
    """Percent utilisation below which a workload counts as under-utilising."""
    target_namespaces: list[str] = Field(default_factory=list)
    """Namespaces to monitor; empty means all."""
    profile: Literal["gpu"] = "gpu"
    terminate_underutilized: bool = False
    terminate_underutilized_after: Annotated[str, Field(pattern=TERMINATE_AFTER_PATTERN)] = "24h"


class GpuPreemptionConfig(WireModel):
    """Cluster-wide defaults for idle-GPU preemption; unset means the operator's env/built-in fallback."""

    default_threshold: Annotated[float, Field(ge=0, le=100)] | None = None
    """Utilisation percent below which a GPU workload is idle; fractions (`2.5`) allowed, as upstream."""
    default_grace_period: GoDuration | None = None
    default_policy: Literal["OnPressure", "Always"] | None = None
    default_aggregation: Literal["Min", "Max", "Avg"] | None = None
    default_ttl: GoDuration | None = Field(default=None, alias="defaultTTL")
    """How long Preempted trackers are kept; `0` keeps them forever."""


class KaiwoConfigSpec(WireModel):
    """Operator configuration; every field has a default."""

    ray: RayConfig = Field(default_factory=RayConfig, json_schema_extra=DEFAULT_EMPTY_OBJECT)
    storage: StorageConfig = Field(default_factory=StorageConfig, json_schema_extra=DEFAULT_EMPTY_OBJECT)
    nodes: NodesConfig = Field(default_factory=NodesConfig, json_schema_extra=DEFAULT_EMPTY_OBJECT)
    scheduling: SchedulingConfig = Field(
        default_factory=SchedulingConfig, json_schema_extra=DEFAULT_EMPTY_OBJECT
    )
    resource_monitoring: ResourceMonitoringConfig = Field(
        default_factory=ResourceMonitoringConfig, json_schema_extra=DEFAULT_EMPTY_OBJECT
    )
    gpu_preemption: GpuPreemptionConfig = Field(
        default_factory=GpuPreemptionConfig, json_schema_extra=DEFAULT_EMPTY_OBJECT
    )
    default_cluster_queue_name: str = "kaiwo"
    """ClusterQueue (and LocalQueue) of workloads that name none."""
    default_cluster_queue_cohort_name: str = "kaiwo"
    dynamically_update_default_cluster_queue: bool = False
    """Rebuild the default KaiwoQueueConfig from the nodes on every reconcile."""
    default_topology_name: str = "default-topology"
    data: StorageConfig | None = None
    """Deprecated: the name seed 003 and upstream's Helm chart give `storage` (renamed upstream in #284).
    Read as `storage`, and its fields win over `storage`'s (which the API server always fills with
    defaults, so its presence says nothing); the KaiwoConfig controller records a Warning event."""

    @model_validator(mode="after")
    def _data_is_storage(self) -> KaiwoConfigSpec:
        if self.data is not None:
            self.storage = self.data
        return self


class KaiwoConfig(WireModel):
    """The operator's live configuration (singleton named `kaiwo`; no status)."""

    api_version: Literal["config.kaiwo.silogen.ai/v1alpha1"] = CONFIG_API_VERSION
    kind: Literal["KaiwoConfig"] = "KaiwoConfig"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: KaiwoConfigSpec = Field(default_factory=KaiwoConfigSpec, json_schema_extra=DEFAULT_EMPTY_OBJECT)
