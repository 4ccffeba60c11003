"""The webhooks' certificate kept in the cluster (the I/O around kaiwo_ray/admission/certs.py): the Secret
that holds it, created or rotated when kaiwo_ray.admission.certs says so, and the `caBundle` of our two
webhook configurations kept equal to the Secret's `ca.crt`.

Order within one `ensure()`: Secret first, then the caBundle, and only then does the caller load the
new certificate into its server. The bundle trusts the previous CA as well, so while the new certificate
spreads (this server reloading, another replica still on the old one) every admission verifies.

Where cert-manager keeps the certificate instead (the cluster serves cert-manager.io and a Certificate
in our namespace writes our Secret: deploy/components/webhooks-cert-manager), `CertManagerSource` only
reads the Secret: cert-manager issues and renews it, its cainjector keeps the caBundle, and nothing here
writes either. `detect_source` decides which at start.

Several replicas may run this at once (a RayService upgrade runs two Ray clusters): the Secret is
written with its resourceVersion, and the loser of a race re-reads and serves the winner's certificate.
Only the configurations named `kaiwo-ray` (ours) are touched, and in them only the webhooks that call
our Service.
"""

from __future__ import annotations

import base64
import datetime
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kaiwo_ray.admission import certs
from kaiwo_ray.admission.registration import NAME
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.discovery import parse_group_list
from kaiwo_ray.kube.errors import Conflict, Forbidden, KubeError, NotFound
from kaiwo_ray.kube.resources import MUTATINGWEBHOOKCONFIGURATIONS, SECRETS, VALIDATINGWEBHOOKCONFIGURATIONS

log = logging.getLogger(__name__)

DEFAULT_SERVICE = "kaiwo-ray-webhooks"
DEFAULT_SECRET = "kaiwo-ray-webhook-cert"
DEFAULT_NAMESPACE = "kaiwo-system"


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True, slots=True)
class CertSettings:
    namespace: str = DEFAULT_NAMESPACE
    service: str = DEFAULT_SERVICE
    secret: str = DEFAULT_SECRET
    configuration: str = NAME
    validity: datetime.timedelta = certs.VALIDITY
    lookahead: datetime.timedelta = certs.LOOKAHEAD

    @property
    def names(self) -> list[str]:
        return certs.service_names(self.service, self.namespace)


def ours(webhook: dict[str, Any], settings: CertSettings) -> bool:
    """A webhook that calls our Service (by reference; a `url` one is left to whoever wrote it)."""
    service = (webhook.get("clientConfig") or {}).get("service") or {}
    return service.get("name") == settings.service and service.get("namespace") == settings.namespace


class CertKeeper:
    def __init__(self, client: KubeClient, settings: CertSettings,
                 clock: Callable[[], datetime.datetime] = _now) -> None:
        self.client = client
        self.settings = settings
        self.clock = clock

    async def _read(self) -> tuple[dict[str, Any] | None, certs.Bundle | None]:
        try:
            secret = await self.client.get(SECRETS, self.settings.secret, self.settings.namespace)
        except NotFound:
            return None, None
        return secret, certs.from_secret_data(secret.get("data"))

    async def _write(self, secret: dict[str, Any] | None, bundle: certs.Bundle) -> bool:
        """True when written; False when another writer got there first (re-read it)."""
        s = self.settings
        body: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": s.secret, "namespace": s.namespace,
                         "labels": {"app.kubernetes.io/name": "kaiwo-ray",
                                    "app.kubernetes.io/component": "webhooks"}},
            "data": bundle.secret_data()}
        try:
            if secret is None:
                await self.client.create(SECRETS, body, s.namespace)
            else:
                meta = secret.get("metadata") or {}
                body["metadata"] = {**meta, "labels": {**(meta.get("labels") or {}), **body["metadata"]["labels"]}}
                body["type"] = secret.get("type") or "kubernetes.io/tls"
                await self.client.replace(SECRETS, body)
        except Conflict:  # AlreadyExists is a Conflict too
            return False
        return True

    async def ensure(self, *, force: bool = False, serving: certs.Bundle | None = None) -> certs.Bundle:
        """The certificate to serve: the Secret's, replaced first when it must be (or `force`), with the
        caBundle of our configurations brought up to date before it is returned. `serving`: what the
        caller presents now, whose CA a new bundle keeps when the Secret has none (deleted by hand)."""
        for _ in range(3):
            secret, bundle = await self._read()
            reason = "rotation asked for" if force else certs.rotation_reason(
                bundle, self.settings.names, self.clock(), lookahead=self.settings.lookahead)
            if reason is None and bundle is not None:
                break
            fresh = certs.issue(self.settings.names, self.clock(), validity=self.settings.validity,
                                previous=bundle or serving)
            if await self._write(secret, fresh):
                log.info("webhook certificate in Secret %s/%s replaced: %s", self.settings.namespace,
                         self.settings.secret, reason)
                bundle = fresh
                break
            force = False  # someone else rotated meanwhile: serve theirs
        else:
            raise RuntimeError(f"Secret {self.settings.namespace}/{self.settings.secret}: kept changing "
                               "while the webhook certificate was written")
        assert bundle is not None
        await self.inject(bundle.ca_bundle())
        return bundle

    async def inject(self, ca_bundle: str) -> list[str]:
        """Our configurations' caBundle set to `ca_bundle` where it differs; the kinds updated. A missing
        configuration is skipped (the webhooks component not installed: nothing to keep current)."""
        updated: list[str] = []
        for res in (MUTATINGWEBHOOKCONFIGURATIONS, VALIDATINGWEBHOOKCONFIGURATIONS):
            for _ in range(3):
                try:
                    config = await self.client.get(res, self.settings.configuration)
                except NotFound:
                    break
                changed = False
                for webhook in config.get("webhooks") or []:
                    client_config = webhook.setdefault("clientConfig", {})
                    if ours(webhook, self.settings) and client_config.get("caBundle") != ca_bundle:
                        client_config["caBundle"] = ca_bundle
                        changed = True
                if not changed:
                    break
                try:
                    await self.client.replace(res, config)  # with its resourceVersion: never over a newer one
                except Conflict:
                    continue
                updated.append(res.kind)
                break
        return updated


class CertificateNotIssued(RuntimeError):
    """cert-manager has not (yet) written a complete certificate into our Secret."""


class CertManagerSource:
    """The certificate cert-manager keeps in our Secret (Certificate `certificate`): read, never written."""

    def __init__(self, client: KubeClient, settings: CertSettings, certificate: str) -> None:
        self.client = client
        self.settings = settings
        self.certificate = certificate

    async def ensure(self, *, force: bool = False, serving: certs.Bundle | None = None) -> certs.Bundle:
        if force:
            raise RuntimeError(f"cert-manager keeps this certificate (Certificate {self.settings.namespace}/"
                               f"{self.certificate}): renew it there, e.g. cmctl renew -n {self.settings.namespace} "
                               f"{self.certificate}")
        try:
            secret = await self.client.get(SECRETS, self.settings.secret, self.settings.namespace)
        except NotFound:
            raise CertificateNotIssued(f"Secret {self.settings.namespace}/{self.settings.secret} not written yet by "
                                       f"Certificate {self.certificate}") from None
        bundle = certs.from_secret_data(secret.get("data"))
        if bundle is None:
            raise CertificateNotIssued(f"Secret {self.settings.namespace}/{self.settings.secret} lacks tls.crt, "
                                       "tls.key or ca.crt")
        return bundle

    async def trusted(self, bundle: certs.Bundle) -> bool:
        """Do our configurations' webhooks all trust `bundle`'s CA (has the cainjector injected it)?"""
        wanted = set(certs.split_pem(bundle.ca_pem))
        for res in (MUTATINGWEBHOOKCONFIGURATIONS, VALIDATINGWEBHOOKCONFIGURATIONS):
            try:
                config = await self.client.get(res, self.settings.configuration)
            except NotFound:
                continue
            for webhook in config.get("webhooks") or []:
                if not ours(webhook, self.settings):
                    continue
                encoded = str((webhook.get("clientConfig") or {}).get("caBundle") or "")
                try:
                    present = set(certs.split_pem(base64.b64decode(encoded)))
                except ValueError:
                    return False
                if not wanted & present:
                    return False
        return True


_told_forbidden: set[str] = set()


async def detect_source(client: KubeClient, settings: CertSettings) -> str | None:
    """The Certificate cert-manager keeps our Secret with (None: the operator keeps it). Decided by
    discovery and a list of Certificates in our namespace; a list we may not read counts as none."""
    try:
        groups = parse_group_list(await client.request("GET", "/apis") or {})
        served = groups.get(certs.CERT_MANAGER_GROUP, ())
        if "v1" not in served:
            return None
        listing = await client.request(
            "GET", f"/apis/{certs.CERT_MANAGER_GROUP}/v1/namespaces/{settings.namespace}/certificates") or {}
    except Forbidden:
        if settings.namespace not in _told_forbidden:  # once: this is asked at every check
            _told_forbidden.add(settings.namespace)
            log.warning("cert-manager.io is served but Certificates in %s cannot be listed (no "
                        "deploy/components/webhooks-cert-manager): the operator keeps the webhook certificate",
                        settings.namespace)
        return None
    except (NotFound, KubeError):
        return None
    return certs.cert_manager_certificate(served, list(listing.get("items") or []), settings.secret)
