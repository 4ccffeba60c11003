"""AIMNamespaceConfig (`config.kaiwo.silogen.ai/v1alpha1`, namespaced; seed 004, cluster.md §13).

A tenant admin's per-namespace defaults, which no upstream controller ever read. kaiwo-ray puts them to
work (controllers/aimnamespace.py, render/): its credentials feed the downloads of workloads that name
none of their own, its image pull secrets go into every pod kaiwo-ray creates in the namespace, and
its gateway gets an HTTPRoute per KaiwoService. The status, which the seed leaves undefined, says
whether the Secrets and the gateway it references exist; only the oldest config of a namespace counts.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kaiwo_ray.api._base import WireModel
from kaiwo_ray.api.config import CONFIG_API_VERSION
from kaiwo_ray.api.meta import Condition, ObjectMeta


class SecretValueReference(WireModel):
    """A key in a Secret of the same namespace."""

    secret_name: str | None = None
    secret_key: str | None = None


class GatewayRef(WireModel):
    """The KGateway instance used for exposure and routing."""

    name: str | None = None
    namespace: str | None = None


class AIMS3Credential(WireModel):
    endpoint_url: str | None = None
    access_key_id: SecretValueReference | None = None
    secret_access_key: SecretValueReference | None = None


class AIMGCSCredential(WireModel):
    application_credentials: SecretValueReference | None = None
    """Secret key holding the service-account JSON."""


class AIMAzureBlobCredential(WireModel):
    connection_string: SecretValueReference | None = None


class AIMNamespaceCredentials(WireModel):
    """Credentials for model discovery and caching; any subset of providers."""

    hugging_face_token: SecretValueReference | None = None
    s3: list[AIMS3Credential] = Field(default_factory=list)
    gcs: list[AIMGCSCredential] = Field(default_factory=list)
    azure_blob: list[AIMAzureBlobCredential] = Field(default_factory=list)


class AIMNamespaceImageConfig(WireModel):
    image_pull_secrets: list[str] = Field(default_factory=list)
    """Secret names (plain strings, not LocalObjectReferences)."""


class AIMNamespaceConfigSpec(WireModel):
    gateway: GatewayRef | None = None
    credentials: AIMNamespaceCredentials | None = None
    images: AIMNamespaceImageConfig | None = None


class MissingSecretReference(WireModel):
    """A Secret key the config references that the namespace lacks."""

    field: str
    """Where the config references it, e.g. `spec.credentials.s3[0].accessKeyId`."""
    secret_name: str
    secret_key: str
    reason: Literal["SecretNotFound", "SecretKeyNotFound", "SecretReferenceIncomplete"]


class AIMNamespaceConfigStatus(WireModel):
    """Written by kaiwo-ray (not part of the seed): whether what the spec references exists."""

    conditions: list[Condition] = Field(default_factory=list)
    missing_secrets: list[MissingSecretReference] = Field(default_factory=list)
    observed_generation: int | None = None


class AIMNamespaceConfig(WireModel):
    """Per-namespace AIM settings (gateway, credentials, image pull secrets)."""

    api_version: Literal["config.kaiwo.silogen.ai/v1alpha1"] = CONFIG_API_VERSION
    kind: Literal["AIMNamespaceConfig"] = "AIMNamespaceConfig"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: AIMNamespaceConfigSpec = Field(default_factory=AIMNamespaceConfigSpec)
    status: AIMNamespaceConfigStatus | None = None
