"""AIMNamespaceConfig (`config.kaiwo.silogen.ai/v1alpha1`, namespaced; seed 004, cluster.md §13).

A historical upstream CRD that no controller ever read. We accept and serve it so existing manifests
apply; its meaning (declarative per-namespace AIM defaults) is left to whoever consumes it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kaiwo_ray.api._base import WireModel
from kaiwo_ray.api.config import CONFIG_API_VERSION
from kaiwo_ray.api.meta import ObjectMeta


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


class AIMNamespaceConfig(WireModel):
    """Per-namespace AIM settings (gateway, credentials, image pull secrets)."""

    api_version: Literal["config.kaiwo.silogen.ai/v1alpha1"] = CONFIG_API_VERSION
    kind: Literal["AIMNamespaceConfig"] = "AIMNamespaceConfig"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: AIMNamespaceConfigSpec = Field(default_factory=AIMNamespaceConfigSpec)
