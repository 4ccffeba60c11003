"""Storage children: the data and Hugging Face PVCs, the download ConfigMap and the download Job.

Created before the main object (the reconciler gates the main object on the download Job), all
owned by the CR. Differences from upstream (docs/compatibility.md): the HF PVC exists whenever
`huggingFace.storageSize` is set (upstream only with preCacheRepos, leaving pods Pending on a missing
claim); Hugging Face repositories to pre-cache without an HF volume are rejected (upstream creates a
PVC without a size, which the API server refuses); an unset `storageClassName` falls back to KaiwoConfig `storage.defaultStorageClass`, then to the
cluster's default class, instead of becoming `""` (which disables dynamic provisioning).
"""

from __future__ import annotations

from dataclasses import dataclass

from kaiwo_ray.api.workloads import (
    AzureBlobDownload,
    Bucket,
    DownloadSpec,
    GcsDownload,
    GitDownload,
    HfRepo,
    S3Download,
    StorageSpec,
    ValueReference,
)
from kaiwo_ray.render.context import LABEL_RUN_ID, LABEL_TYPE, JsonObj, RenderContext, Workload, object_meta
from kaiwo_ray.render.download_config import dump_download_config
from kaiwo_ray.render.errors import RenderError
from kaiwo_ray.render.names import is_dns1123_subdomain, name_with_postfix, volume_name_for
from kaiwo_ray.render.podspec import SECURITY_CONTEXT_UID, copy_json
from kaiwo_ray.render.security import harden_pod_template

DOWNLOADER_IMAGE = "ghcr.io/silogen/kaiwo-python:0.6"
DOWNLOADER_COMMAND = ["python", "-m", "kaiwo.downloader", "--log-level=INFO", "/config/config.yaml"]
SECRETS_ROOT = "/app/secrets"
CONFIG_KEY = "config.yaml"


@dataclass(frozen=True, slots=True)
class SecretMount:
    """A secret the downloader reads: mounted at `/app/secrets/<secret>` with one file per key."""

    secret_name: str
    keys: tuple[str, ...]


def validate_storage(storage: StorageSpec | None) -> None:
    """Reject storage blocks that would yield a PVC the API server refuses.

    Object downloads without `data.storageSize` stay valid and are ignored, like upstream (spec §1.3).
    """
    if storage is None or not storage.storage_enabled:
        return
    hf = storage.hugging_face
    if hf is not None and hf.pre_cache_repos and not hf.storage_size:
        raise RenderError(
            "spec.storage.huggingFace.storageSize",
            "required when preCacheRepos is set (the cache needs a volume)",
        )


def object_downloads(workload: Workload) -> DownloadSpec | None:
    """The s3/gcs/azureBlob/git sources, when there are any and a data volume to hold them."""
    storage = workload.spec.storage
    if storage is None or not storage.storage_enabled or storage.data is None:
        return None
    download = storage.data.download
    if not storage.data.storage_size or download is None or download.is_empty:
        return None
    return download


def hf_downloads(workload: Workload) -> list[HfRepo]:
    """Hugging Face repositories to pre-cache (empty when storage is off)."""
    storage = workload.spec.storage
    if storage is None or not storage.storage_enabled or storage.hugging_face is None:
        return []
    return storage.hugging_face.pre_cache_repos


def has_downloads(workload: Workload) -> bool:
    """Whether a download ConfigMap and Job exist (the reconciler waits for the Job before the main object)."""
    return object_downloads(workload) is not None or bool(hf_downloads(workload))


def render_storage(ctx: RenderContext) -> list[JsonObj]:
    """PVCs, then the download ConfigMap and Job, in creation order ([] when storage is off)."""
    plan = ctx.storage
    storage = ctx.workload.spec.storage
    if plan is None or storage is None:
        return []
    children: list[JsonObj] = []
    if plan.data_claim and plan.storage_size_data:
        children.append(_pvc(ctx, storage, plan.data_claim, plan.storage_size_data))
    if plan.hf_claim and plan.storage_size_hf:
        children.append(_pvc(ctx, storage, plan.hf_claim, plan.storage_size_hf))
    if has_downloads(ctx.workload):
        document, secrets = download_document(ctx)
        name = name_with_postfix(ctx.name, "download")
        children.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": object_meta(ctx, name, _run_id(ctx)),
                "data": {CONFIG_KEY: dump_download_config(document)},
            }
        )
        children.append(_download_job(ctx, name, secrets))
    return children


def _pvc(ctx: RenderContext, storage: StorageSpec, claim: str, size: str) -> JsonObj:
    spec: JsonObj = {"accessModes": [storage.access_mode]}
    if storage.storage_class_name is not None:
        spec["storageClassName"] = storage.storage_class_name
    elif ctx.config.storage.default_storage_class:
        spec["storageClassName"] = ctx.config.storage.default_storage_class
    spec["resources"] = {"requests": {"storage": size}}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": object_meta(ctx, claim, _run_id(ctx)),
        "spec": spec,
    }


def download_document(ctx: RenderContext) -> tuple[JsonObj, list[SecretMount]]:
    """The downloader's `config.yaml` content (camelCase, upstream key order) and the secrets it reads."""
    plan = ctx.storage
    assert plan is not None  # only called when storage is enabled
    secrets: dict[str, list[str]] = {}
    document: JsonObj = {
        "downloadRoot": plan.data_mount_path if plan.data_claim else "",
        "hfHome": plan.hf_mount_path if plan.hf_claim else "",
    }
    base = "spec.storage.data.download"
    download = object_downloads(ctx.workload)
    if download is not None and download.s3:
        document["s3"] = [_s3(item, f"{base}.s3[{i}]", secrets) for i, item in enumerate(download.s3)]
    if download is not None and download.gcs:
        document["gcs"] = [_gcs(item, f"{base}.gcs[{i}]", secrets) for i, item in enumerate(download.gcs)]
    repos = hf_downloads(ctx.workload)
    if repos:
        document["hf"] = [{"repoId": repo.repo_id, "files": list(repo.files)} for repo in repos]
    if download is not None and download.azure_blob:
        document["azureBlob"] = [
            _azure(item, f"{base}.azureBlob[{i}]", secrets) for i, item in enumerate(download.azure_blob)
        ]
    if download is not None and download.git:
        document["git"] = [_git(item, f"{base}.git[{i}]", secrets) for i, item in enumerate(download.git)]
    mounts = [SecretMount(name, tuple(keys)) for name, keys in secrets.items()]
    return document, mounts


def _ref(ref: ValueReference, field: str, secrets: dict[str, list[str]]) -> JsonObj:
    """A value reference with `file` pointing at where the downloader finds the secret key."""
    out: JsonObj = {}
    file = ref.file
    if ref.secret_name:
        if not ref.secret_key:
            raise RenderError(f"{field}.secretKey", "required with secretName")
        if not is_dns1123_subdomain(ref.secret_name):
            raise RenderError(f"{field}.secretName", f"{ref.secret_name!r} is not a valid Secret name")
        keys = secrets.setdefault(ref.secret_name, [])
        if ref.secret_key not in keys:
            keys.append(ref.secret_key)
        file = file or f"{SECRETS_ROOT}/{ref.secret_name}/{ref.secret_key}"
    if file:
        out["file"] = file
    if ref.secret_name:
        out["secretName"] = ref.secret_name
    if ref.secret_key:
        out["secretKey"] = ref.secret_key
    return out


def _bucket(bucket: Bucket) -> JsonObj:
    folders: list[JsonObj] = []
    for folder in bucket.folders:
        item: JsonObj = {"path": folder.path, "targetPath": folder.target_path}
        if folder.glob:
            item["glob"] = folder.glob
        folders.append(item)
    return {
        "name": bucket.name,
        "files": [{"path": f.path, "targetPath": f.target_path} for f in bucket.files],
        "folders": folders,
    }


def _s3(item: S3Download, field: str, secrets: dict[str, list[str]]) -> JsonObj:
    out: JsonObj = {"endpointUrl": item.endpoint_url}
    if item.access_key_id is not None:
        out["accessKeyId"] = _ref(item.access_key_id, f"{field}.accessKeyId", secrets)
    if item.secret_key is not None:
        out["secretKey"] = _ref(item.secret_key, f"{field}.secretKey", secrets)
    out["buckets"] = [_bucket(bucket) for bucket in item.buckets]
    return out


def _gcs(item: GcsDownload, field: str, secrets: dict[str, list[str]]) -> JsonObj:
    return {
        "applicationCredentials": _ref(
            item.application_credentials, f"{field}.applicationCredentials", secrets
        ),
        "buckets": [_bucket(bucket) for bucket in item.buckets],
    }


def _azure(item: AzureBlobDownload, field: str, secrets: dict[str, list[str]]) -> JsonObj:
    return {
        "connectionString": _ref(item.connection_string, f"{field}.connectionString", secrets),
        "containers": [_bucket(container) for container in item.containers],
    }


def _git(item: GitDownload, field: str, secrets: dict[str, list[str]]) -> JsonObj:
    out: JsonObj = {"repository": item.repository}
    if item.branch:
        out["branch"] = item.branch
    if item.commit:
        out["commit"] = item.commit
    if item.username is not None:
        out["username"] = _ref(item.username, f"{field}.username", secrets)
    if item.token is not None:
        out["token"] = _ref(item.token, f"{field}.token", secrets)
    if item.path:
        out["path"] = item.path
    out["targetPath"] = item.target_path
    return out


def _run_id(ctx: RenderContext) -> dict[str, str]:
    """PVCs and the download ConfigMap carry only the run-id label (upstream: none): the operator's
    child watches select on it, as on every other child."""
    return {LABEL_RUN_ID: ctx.system_labels[LABEL_RUN_ID]}


def _download_job(ctx: RenderContext, name: str, secrets: list[SecretMount]) -> JsonObj:
    """The downloader Job: not Kueue-managed, never suspended, always non-root, no pull secrets."""
    plan = ctx.storage
    assert plan is not None
    volumes: list[JsonObj] = [{"name": "config", "configMap": {"name": name}}]
    mounts: list[JsonObj] = [{"name": "config", "mountPath": "/config"}]
    env: list[JsonObj] = []
    if object_downloads(ctx.workload) is not None and plan.data_claim:
        volumes.append({"name": "data", "persistentVolumeClaim": {"claimName": plan.data_claim}})
        mounts.append({"name": "data", "mountPath": plan.data_mount_path})
    taken = {"config", "data", "hf"}
    for secret in secrets:
        # A Secret may be named `s3.creds`; a volume may not: the volume gets a name of its own.
        volume_name = volume_name_for("secret", secret.secret_name, taken)
        volumes.append(
            {
                "name": volume_name,
                "secret": {
                    "secretName": secret.secret_name,
                    "items": [{"key": key, "path": key} for key in secret.keys],
                },
            }
        )
        mounts.append({"name": volume_name, "mountPath": f"{SECRETS_ROOT}/{secret.secret_name}"})
    if hf_downloads(ctx.workload) and plan.hf_claim:
        volumes.append({"name": "hf", "persistentVolumeClaim": {"claimName": plan.hf_claim}})
        mounts.append({"name": "hf", "mountPath": plan.hf_mount_path})
        env.append({"name": "HF_HOME", "value": plan.hf_mount_path})
    env.extend(copy_json(ctx.workload.spec.env))
    container: JsonObj = {
        "name": "data-downloader",
        "image": DOWNLOADER_IMAGE,
        "imagePullPolicy": "Always",
        "command": list(DOWNLOADER_COMMAND),
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
        "volumeMounts": mounts,
    }
    if env:
        container["env"] = env
    template: JsonObj = {
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {
                "runAsUser": SECURITY_CONTEXT_UID,
                "runAsGroup": SECURITY_CONTEXT_UID,
                "fsGroup": SECURITY_CONTEXT_UID,
            },
            "containers": [container],
            "volumes": volumes,
        }
    }
    # Our own image and command: restricted whatever `dangerous` says (upstream, too, always runs the
    # downloader non-root).
    harden_pod_template(template, "download.spec.template")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": object_meta(ctx, name, {**ctx.system_labels, LABEL_TYPE: "downloader"}),
        "spec": {"backoffLimit": 0, "template": template},
    }
