"""Storage children: the data and Hugging Face PVCs, the download ConfigMap and the download Job.

Created before the main object (the reconciler gates the main object on the download Job), all
owned by the CR. Differences from upstream (docs/compatibility.md): the HF PVC exists whenever
`huggingFace.storageSize` is set (upstream only with preCacheRepos, leaving pods Pending on a missing
claim); Hugging Face repositories to pre-cache without an HF volume are rejected (upstream creates a
PVC without a size, which the API server refuses); an unset `storageClassName` falls back to KaiwoConfig `storage.defaultStorageClass`, then to the
cluster's default class, instead of becoming `""` (which disables dynamic provisioning).

A source that names no credentials of its own takes its namespace's AIMNamespaceConfig ones (seed
004): an S3 source the entry for its endpoint, GCS and Azure Blob the first entry, the Hugging Face
pre-cache the token (as `HF_TOKEN`, unless the workload's env sets one). `borrowed_credentials` lists
what was taken, so that the reconciler can say which Secret and key a workload waits for.
"""

from __future__ import annotations

from dataclasses import dataclass

from kaiwo_ray.api.aim import AIMNamespaceConfigSpec, SecretValueReference
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.labels import LABEL_RUN_ID, LABEL_TYPE
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
from kaiwo_ray.render.context import RenderContext, Workload, object_meta
from kaiwo_ray.render.download_config import dump_download_config
from kaiwo_ray.render.errors import RenderError
from kaiwo_ray.render.names import is_dns1123_subdomain, name_with_postfix, volume_name_for
from kaiwo_ray.render.podspec import SECURITY_CONTEXT_UID, add_namespace_pull_secrets, copy_json
from kaiwo_ray.render.security import harden_pod_template

DOWNLOADER_IMAGE = "ghcr.io/silogen/kaiwo-python:0.6"
DOWNLOADER_COMMAND = ["python", "-m", "kaiwo.downloader", "--log-level=INFO", "/config/config.yaml"]
SECRETS_ROOT = "/app/secrets"
CONFIG_KEY = "config.yaml"
HF_TOKEN_ENV = "HF_TOKEN"
# Env names huggingface_hub reads a token from: a workload setting either brings its own.
_HF_TOKEN_NAMES = frozenset({HF_TOKEN_ENV, "HUGGING_FACE_HUB_TOKEN"})


@dataclass(frozen=True, slots=True)
class BorrowedCredential:
    """A Secret key a download takes from the namespace's AIMNamespaceConfig."""

    config_field: str
    """Where the AIMNamespaceConfig names it: `spec.credentials.s3[0].accessKeyId`."""
    secret_name: str
    secret_key: str


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
    ns = ctx.namespace_config
    if download is not None and download.s3:
        document["s3"] = [_s3(item, f"{base}.s3[{i}]", secrets, ns) for i, item in enumerate(download.s3)]
    if download is not None and download.gcs:
        document["gcs"] = [_gcs(item, f"{base}.gcs[{i}]", secrets, ns) for i, item in enumerate(download.gcs)]
    repos = hf_downloads(ctx.workload)
    if repos:
        document["hf"] = [{"repoId": repo.repo_id, "files": list(repo.files)} for repo in repos]
    if download is not None and download.azure_blob:
        document["azureBlob"] = [
            _azure(item, f"{base}.azureBlob[{i}]", secrets, ns) for i, item in enumerate(download.azure_blob)
        ]
    if download is not None and download.git:
        document["git"] = [_git(item, f"{base}.git[{i}]", secrets) for i, item in enumerate(download.git)]
    mounts = [SecretMount(name, tuple(keys)) for name, keys in secrets.items()]
    return document, mounts


def borrowed_credentials(ctx: RenderContext) -> list[BorrowedCredential]:
    """The namespace credentials this workload's downloads use (none without downloads or a config)."""
    ns = ctx.namespace_config
    if ns is None or ns.credentials is None or not has_downloads(ctx.workload):
        return []
    found: list[tuple[str, SecretValueReference | None]] = []
    download = object_downloads(ctx.workload)
    if download is not None:
        for item in download.s3:
            if item.access_key_id is None and item.secret_key is None:
                found.extend(_namespace_s3(ns, item.endpoint_url))
        if any(item.application_credentials is None for item in download.gcs):
            found.append(_namespace_first(ns, "gcs", "applicationCredentials"))
        if any(item.connection_string is None for item in download.azure_blob):
            found.append(_namespace_first(ns, "azureBlob", "connectionString"))
    if _namespace_hf_token(ctx) is not None:
        found.append(("spec.credentials.huggingFaceToken", ns.credentials.hugging_face_token))
    out: list[BorrowedCredential] = []
    for config_field, ref in found:
        if ref is not None and ref.secret_name and ref.secret_key:
            borrowed = BorrowedCredential(config_field, ref.secret_name, ref.secret_key)
            if borrowed not in out:
                out.append(borrowed)
    return out


def _namespace_s3(ns: AIMNamespaceConfigSpec | None, endpoint: str) -> list[tuple[str, SecretValueReference | None]]:
    """The namespace's S3 entry for `endpoint` (trailing `/` and case ignored), else one without an
    endpoint; its (field, reference) pairs, accessKeyId first. [] when there is none."""
    entries = ns.credentials.s3 if ns is not None and ns.credentials is not None else []
    wanted = endpoint.rstrip("/").lower()
    index = next((i for i, e in enumerate(entries) if (e.endpoint_url or "").rstrip("/").lower() == wanted), None)
    if index is None:
        index = next((i for i, e in enumerate(entries) if not e.endpoint_url), None)
    if index is None:
        return []
    entry = entries[index]
    return [(f"spec.credentials.s3[{index}].accessKeyId", entry.access_key_id),
            (f"spec.credentials.s3[{index}].secretAccessKey", entry.secret_access_key)]


def _namespace_first(ns: AIMNamespaceConfigSpec | None, provider: str,
                     key: str) -> tuple[str, SecretValueReference | None]:
    """The first GCS (`applicationCredentials`) or Azure Blob (`connectionString`) entry's reference."""
    credentials = ns.credentials if ns is not None else None
    if credentials is None:
        return (f"spec.credentials.{provider}[0].{key}", None)
    if provider == "gcs":
        return (f"spec.credentials.gcs[0].{key}",
                credentials.gcs[0].application_credentials if credentials.gcs else None)
    return (f"spec.credentials.azureBlob[0].{key}",
            credentials.azure_blob[0].connection_string if credentials.azure_blob else None)


def _namespace_hf_token(ctx: RenderContext) -> SecretValueReference | None:
    """The namespace's Hugging Face token, where the pre-cache needs one and the workload sets none."""
    ns = ctx.namespace_config
    token = ns.credentials.hugging_face_token if ns is not None and ns.credentials is not None else None
    if token is None or not token.secret_name or not token.secret_key or not hf_downloads(ctx.workload):
        return None
    if any(var.get("name") in _HF_TOKEN_NAMES for var in ctx.workload.spec.env if isinstance(var, dict)):
        return None
    return token


def _borrowed_ref(ref: SecretValueReference | None) -> ValueReference | None:
    if ref is None or not ref.secret_name:
        return None
    return ValueReference(secret_name=ref.secret_name, secret_key=ref.secret_key)


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


def _s3(item: S3Download, field: str, secrets: dict[str, list[str]], ns: AIMNamespaceConfigSpec | None) -> JsonObj:
    out: JsonObj = {"endpointUrl": item.endpoint_url}
    access_key_id, secret_key = item.access_key_id, item.secret_key
    if access_key_id is None and secret_key is None:
        borrowed = _namespace_s3(ns, item.endpoint_url)
        if borrowed:
            access_key_id, secret_key = _borrowed_ref(borrowed[0][1]), _borrowed_ref(borrowed[1][1])
    if access_key_id is not None:
        out["accessKeyId"] = _ref(access_key_id, f"{field}.accessKeyId", secrets)
    if secret_key is not None:
        out["secretKey"] = _ref(secret_key, f"{field}.secretKey", secrets)
    out["buckets"] = [_bucket(bucket) for bucket in item.buckets]
    return out


def _required(ref: ValueReference | None, ns: AIMNamespaceConfigSpec | None, provider: str, key: str,
              field: str) -> ValueReference:
    """The source's own reference, else the namespace's first `provider` entry's; neither is an error."""
    if ref is not None:
        return ref
    borrowed = _borrowed_ref(_namespace_first(ns, provider, key)[1])
    if borrowed is None:
        raise RenderError(f"{field}.{key}", f"required: the namespace's AIMNamespaceConfig has no {provider} "
                                            f"credentials to use instead")
    return borrowed


def _gcs(item: GcsDownload, field: str, secrets: dict[str, list[str]], ns: AIMNamespaceConfigSpec | None) -> JsonObj:
    ref = _required(item.application_credentials, ns, "gcs", "applicationCredentials", field)
    return {
        "applicationCredentials": _ref(ref, f"{field}.applicationCredentials", secrets),
        "buckets": [_bucket(bucket) for bucket in item.buckets],
    }


def _azure(item: AzureBlobDownload, field: str, secrets: dict[str, list[str]],
           ns: AIMNamespaceConfigSpec | None) -> JsonObj:
    ref = _required(item.connection_string, ns, "azureBlob", "connectionString", field)
    return {
        "connectionString": _ref(ref, f"{field}.connectionString", secrets),
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
    """The downloader Job: not Kueue-managed, never suspended, always non-root; the only pull secrets are
    the namespace's (AIMNamespaceConfig `images`)."""
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
    token = _namespace_hf_token(ctx)
    if token is not None:
        env.append({"name": HF_TOKEN_ENV, "valueFrom": {"secretKeyRef": {"name": token.secret_name,
                                                                         "key": token.secret_key}}})
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
    add_namespace_pull_secrets(template["spec"], ctx)
    # Our own image and command: restricted whatever `dangerous` says (upstream, too, always runs the
    # downloader non-root).
    harden_pod_template(template, "download.spec.template")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": object_meta(ctx, name, {**ctx.system_labels, LABEL_TYPE: "downloader"}),
        "spec": {"backoffLimit": 0, "template": template},
    }
