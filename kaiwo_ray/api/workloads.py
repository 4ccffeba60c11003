"""KaiwoJob and KaiwoService (`kaiwo.silogen.ai/v1alpha1`): spec, storage/download sources and status.

Field names, defaults and validation follow upstream Kaiwo's CRDs so existing manifests parse
unchanged (spec/workloads.md §1). Embedded `job`/`rayJob`/`deployment`/`rayService` objects are kept
whole as dicts: only their `.spec` is used, and we must not lose fields we do not model.
"""

from __future__ import annotations

import datetime
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, Field, WithJsonSchema

from kaiwo_ray.api._base import GoDuration, PreservedObject, QuantityString, Time, WireModel
from kaiwo_ray.api.durations import parse_go_duration
from kaiwo_ray.api.errors import NestedFieldError
from kaiwo_ray.api.meta import Condition, ObjectMeta
from kaiwo_ray.api.quantity import QUANTITY_PATTERN, check_quantity_text, parse_quantity

KAIWO_GROUP = "kaiwo.silogen.ai"
KAIWO_API_VERSION: Final = "kaiwo.silogen.ai/v1alpha1"


class WorkloadPhase(StrEnum):
    """`status.status` of KaiwoJob/KaiwoService (exact upstream strings).

    Current upstream never writes READY (services report RUNNING when healthy); older upstream
    versions did, so it is accepted when reading objects they left behind, and treated like RUNNING.
    """

    NEW = ""
    DOWNLOADING = "DOWNLOADING"
    PENDING = "PENDING"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    COMPLETE = "COMPLETE"
    ERROR = "ERROR"
    FAILED = "FAILED"
    TERMINATING = "TERMINATING"
    TERMINATED = "TERMINATED"
    READY = "READY"
    """Legacy: written only by upstream Kaiwo before 2025; never written by kaiwo-ray."""

    @property
    def is_terminal(self) -> bool:
        """Reconcile is a no-op once a workload reaches one of these."""
        return self in _TERMINAL

    @property
    def is_active(self) -> bool:
        """Child resources are ensured only in these phases (ERROR/TERMINATING are neither)."""
        return self in _ACTIVE


_TERMINAL = frozenset({WorkloadPhase.COMPLETE, WorkloadPhase.FAILED, WorkloadPhase.TERMINATED})
_ACTIVE = frozenset(
    {
        WorkloadPhase.NEW,
        WorkloadPhase.DOWNLOADING,
        WorkloadPhase.PENDING,
        WorkloadPhase.STARTING,
        WorkloadPhase.RUNNING,
        WorkloadPhase.READY,
    }
)


# --- storage and downloads -------------------------------------------------------------------------


class ValueReference(WireModel):
    """A value read from a Secret key; `file` is filled by the controller with the in-container path."""

    secret_name: str | None = None
    secret_key: str | None = None
    file: str | None = None


class FileItem(WireModel):
    """One object to download: `path` in the bucket, `targetPath` relative to the data mount."""

    path: str
    target_path: str


class FolderItem(WireModel):
    """A prefix to download, optionally filtered by a glob."""

    path: str
    target_path: str
    glob: str | None = None


class Bucket(WireModel):
    """A bucket (S3/GCS) or container (Azure Blob) and what to take from it."""

    name: str
    files: list[FileItem] = Field(default_factory=list)
    folders: list[FolderItem] = Field(default_factory=list)


class S3Download(WireModel):
    """Download from an S3-compatible endpoint."""

    endpoint_url: str
    access_key_id: ValueReference | None = None
    secret_key: ValueReference | None = None
    buckets: list[Bucket]


class GcsDownload(WireModel):
    """Download from Google Cloud Storage with a service-account JSON."""

    application_credentials: ValueReference | None = None
    """Unset: the namespace's AIMNamespaceConfig `credentials.gcs[0]` (an error without one)."""
    buckets: list[Bucket]


class AzureBlobDownload(WireModel):
    """Download from Azure Blob Storage."""

    connection_string: ValueReference | None = None
    """Unset: the namespace's AIMNamespaceConfig `credentials.azureBlob[0]` (an error without one)."""
    containers: list[Bucket]


class GitDownload(WireModel):
    """Clone a git repository (optionally a sub-path of it) into the data volume."""

    repository: str
    branch: str | None = None
    commit: str | None = None
    username: ValueReference | None = None
    token: ValueReference | None = None
    path: str | None = None
    """Sub-path inside the repository to copy."""
    target_path: str
    """Destination relative to the data mount path."""


class DownloadSpec(WireModel):
    """Object-storage and git downloads into the data PVC (honoured only when `data.storageSize` is set)."""

    s3: list[S3Download] = Field(default_factory=list)
    gcs: list[GcsDownload] = Field(default_factory=list)
    azure_blob: list[AzureBlobDownload] = Field(default_factory=list)
    git: list[GitDownload] = Field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not (self.s3 or self.gcs or self.azure_blob or self.git)


class DataStorageSpec(WireModel):
    """The data PVC `<name>-data`: exists when `storageSize` is set; download root."""

    mount_path: str | None = None
    """Unset: KaiwoConfig `storage.defaultDataMountPath` (itself `/workload` by default)."""
    storage_size: QuantityString | None = None
    download: DownloadSpec | None = None


class HfRepo(WireModel):
    """A Hugging Face repository to pre-download into the HF cache."""

    repo_id: str
    files: list[str] = Field(default_factory=list)


class HfStorageSpec(WireModel):
    """The Hugging Face cache PVC `<name>-hf`, mounted at `mountPath` which also becomes HF_HOME."""

    mount_path: str | None = None
    """Unset: KaiwoConfig `storage.defaultHfMountPath` (itself `/hf_cache` by default)."""
    storage_size: QuantityString | None = None
    pre_cache_repos: list[HfRepo] = Field(default_factory=list)


AccessMode = Literal["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"]


class StorageSpec(WireModel):
    """PVCs and the download job. Ignored entirely unless `storageEnabled` is true."""

    storage_enabled: bool = False
    storage_class_name: str | None = None
    """Copied verbatim into PVCs (an empty string disables dynamic provisioning)."""
    access_mode: AccessMode = "ReadWriteMany"
    data: DataStorageSpec | None = None
    hugging_face: HfStorageSpec | None = None


class SecretVolume(WireModel):
    """A Secret mounted into every container (the whole secret; `key` is accepted but unused upstream)."""

    name: str
    secret_name: str
    key: str | None = None
    sub_path: str | None = None
    mount_path: str


# --- spec ------------------------------------------------------------------------------------------


def _check_env(env: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for index, var in enumerate(env):
        name = var.get("name")
        if name is None:
            raise NestedFieldError((index, "name"), "required")
        if not isinstance(name, str) or not name:
            raise NestedFieldError((index, "name"), "must be a non-empty string")
    return env


def _check_name_refs(refs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for index, ref in enumerate(refs):
        if not isinstance(ref.get("name", ""), str):
            raise NestedFieldError((index, "name"), "must be a string")
    return refs


_RESOURCE_SECTIONS = ("limits", "requests")


def _check_resources(resources: dict[str, Any]) -> dict[str, Any]:
    """core/v1 ResourceRequirements: quantities are checked here so renderers can trust them."""
    for key, section in resources.items():
        if key == "claims":
            if not isinstance(section, list):
                raise NestedFieldError((key,), "must be a list")
            continue
        if key not in _RESOURCE_SECTIONS:
            raise NestedFieldError((key,), "unknown field (expected limits, requests or claims)")
        if not isinstance(section, dict):
            raise NestedFieldError((key,), "must be an object mapping resource names to quantities")
        for name, quantity in section.items():
            try:
                if isinstance(quantity, str):
                    check_quantity_text(quantity)
                else:
                    parse_quantity(quantity)
            except ValueError as exc:
                raise NestedFieldError((key, name), str(exc)) from None
    return resources


EnvVars = Annotated[
    list[dict[str, Any]],
    AfterValidator(_check_env),
    WithJsonSchema(
        {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}},
                "x-kubernetes-preserve-unknown-fields": True,
            },
        }
    ),
]
_QUANTITY_MAP_SCHEMA = {
    "type": "object",
    "additionalProperties": {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    },
}
ResourceRequirements = Annotated[
    dict[str, Any],
    AfterValidator(_check_resources),
    WithJsonSchema(
        {
            "type": "object",
            "properties": {
                "limits": _QUANTITY_MAP_SCHEMA,
                "requests": _QUANTITY_MAP_SCHEMA,
                "claims": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {"name": {"type": "string"}, "request": {"type": "string"}},
                    },
                },
            },
        }
    ),
]
"""core/v1 ResourceRequirements kept as a plain dict (`{"requests": {"cpu": "2"}}`), quantities validated."""
LocalObjectReferences = Annotated[
    list[dict[str, Any]],
    AfterValidator(_check_name_refs),
    WithJsonSchema(
        {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "x-kubernetes-map-type": "atomic",
            },
        }
    ),
]
NonNegativeInt = Annotated[int, Field(ge=0)]


class CommonSpec(WireModel):
    """Fields shared by KaiwoJob and KaiwoService (workloads.md §1.1)."""

    user: str | None = None
    """Becomes label `kaiwo.silogen.ai/user` (RFC 1123-sanitised)."""
    pod_template_spec_labels: dict[str, str] | None = None
    gpus: NonNegativeInt = 0
    """Total GPUs wanted."""
    gpu_vendor: str = "amd"
    """Selects the GPU resource key and which nodes count as capacity (case-sensitive: `amd`, `nvidia`)."""
    gpu_models: list[str] | None = None
    version: str | None = None
    replicas: NonNegativeInt | None = 1
    gpus_per_replica: NonNegativeInt = 0
    duration: GoDuration | None = None
    """Maximum runtime (Go duration, e.g. `1h30m`) before the workload becomes preemptible."""
    preferred_topology_label: str | None = None
    required_topology_label: str | None = None
    resources: ResourceRequirements | None = None
    """core/v1 ResourceRequirements: default requests/limits of main containers."""
    image: str | None = None
    image_pull_secrets: LocalObjectReferences = Field(default_factory=list)
    env: EnvVars = Field(default_factory=list)
    """core/v1 EnvVar list appended to every container."""
    secret_volumes: list[SecretVolume] = Field(default_factory=list)
    ray: bool = False
    storage: StorageSpec | None = None
    dangerous: bool = False
    """Drops the pod securityContext of Kaiwo's default templates and the Pod Security fields added to generated pods."""
    cluster_queue: str | None = None
    priority_class: str | None = None
    """Kueue WorkloadPriorityClass name (label `kueue.x-k8s.io/priority-class`)."""

    @property
    def duration_timedelta(self) -> datetime.timedelta | None:
        return None if self.duration is None else parse_go_duration(self.duration)

    @property
    def storage_enabled(self) -> bool:
        return self.storage is not None and self.storage.storage_enabled


class KaiwoJobSpec(CommonSpec):
    """KaiwoJob spec: a batch Job or, with `ray: true` / `rayJob`, a RayJob."""

    entrypoint: str | None = None
    job: PreservedObject | None = None
    """A full batch/v1 Job; only its `.spec` is used."""
    ray_job: PreservedObject | None = None
    """A full ray.io/v1 RayJob; only its `.spec` is used. Its presence selects Ray."""

    @property
    def effective_uses_ray(self) -> bool:
        return self.ray or self.ray_job is not None


class KaiwoServiceSpec(CommonSpec):
    """KaiwoService spec: a Deployment or, with `ray: true` / `rayService`, a RayService."""

    entrypoint: str | None = None
    serve_config_v2: str | None = None
    """Ray Serve config (YAML text); overrides `rayService.spec.serveConfigV2` when non-empty."""
    deployment: PreservedObject | None = None
    ray_service: PreservedObject | None = None

    @property
    def effective_uses_ray(self) -> bool:
        return self.ray or self.ray_service is not None


# --- status and kinds ------------------------------------------------------------------------------


class WorkloadStatus(WireModel):
    """Observed state of a KaiwoJob/KaiwoService."""

    status: WorkloadPhase = Field(default=WorkloadPhase.NEW, strict=False)
    conditions: list[Condition] = Field(default_factory=list)
    start_time: Time | None = None
    completion_time: Time | None = None
    """KaiwoJob only (never set upstream)."""
    duration: int | None = None
    """Seconds since startTime, recomputed on status transitions."""
    observed_generation: int | None = None


class KaiwoJob(WireModel):
    """A batch or Ray job queued through Kueue."""

    api_version: Literal["kaiwo.silogen.ai/v1alpha1"] = KAIWO_API_VERSION
    kind: Literal["KaiwoJob"] = "KaiwoJob"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: KaiwoJobSpec = Field(default_factory=KaiwoJobSpec)
    status: WorkloadStatus | None = None


class KaiwoService(WireModel):
    """A long-running Deployment or Ray Serve application queued through Kueue."""

    api_version: Literal["kaiwo.silogen.ai/v1alpha1"] = KAIWO_API_VERSION
    kind: Literal["KaiwoService"] = "KaiwoService"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: KaiwoServiceSpec = Field(default_factory=KaiwoServiceSpec)
    status: WorkloadStatus | None = None
