"""The sandbox's cert-manager through the official client: a selfSigned issuer making a CA, a CA issuer
signing a serving certificate into a kubernetes.io/tls Secret with cert-manager's annotations, the
Certificate's status, renewal before expiry, the webhook's refusal of a too-short duration, and the
cainjector filling caBundles from a Certificate's Secret (again after a renewal). Opt-in: without the
`cert-manager` controller the sandbox serves no cert-manager.io."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import kubernetes
import pytest

from kaiwo_sandbox.cluster.certmanager.x509 import facts

WaitFor = Callable[..., Any]
CM = ("cert-manager.io", "v1")
NS = "default"


def _custom(sandbox: Any) -> Any:
    return kubernetes.client.CustomObjectsApi(sandbox.api_client())


def _issuers_and_ca(custom: Any) -> None:
    """The usual bootstrap: selfSigned issuer -> CA Certificate -> CA issuer."""
    custom.create_namespaced_custom_object(*CM, NS, "issuers", {
        "apiVersion": "cert-manager.io/v1", "kind": "Issuer", "metadata": {"name": "selfsigned"},
        "spec": {"selfSigned": {}}})
    custom.create_namespaced_custom_object(*CM, NS, "certificates", {
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": {"name": "root"},
        "spec": {"isCA": True, "commonName": "sandbox-root", "secretName": "root-ca",
                 "privateKey": {"algorithm": "ECDSA"}, "issuerRef": {"name": "selfsigned"}}})
    custom.create_namespaced_custom_object(*CM, NS, "issuers", {
        "apiVersion": "cert-manager.io/v1", "kind": "Issuer", "metadata": {"name": "ca"},
        "spec": {"ca": {"secretName": "root-ca"}}})


def _serving(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": {"name": name},
            "spec": {"secretName": f"{name}-tls", "dnsNames": ["hooks.system.svc", "hooks.system.svc.cluster.local"],
                     "issuerRef": {"name": "ca", "kind": "Issuer"}, "privateKey": {"algorithm": "ECDSA"}, **spec}}


def _ready(obj: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), None)


def _secret(core: Any, name: str) -> Any:
    try:
        return core.read_namespaced_secret(name, NS)
    except kubernetes.client.ApiException:
        return None


def test_a_ca_issuer_signs_a_serving_certificate_into_a_tls_secret(
        sandbox_factory: Callable[..., Any], wait_for: WaitFor) -> None:
    from cryptography import x509

    sandbox = sandbox_factory(nodes=[], cluster=["cert-manager"])
    custom, core = _custom(sandbox), kubernetes.client.CoreV1Api(sandbox.api_client())
    _issuers_and_ca(custom)
    custom.create_namespaced_custom_object(*CM, NS, "certificates", _serving("hooks", duration="2160h"))

    cert = wait_for(lambda: (c := custom.get_namespaced_custom_object(*CM, NS, "certificates", "hooks"))
                    and (_ready(c) or {}).get("status") == "True" and c, message="Certificate hooks Ready")
    assert _ready(cert) is not None and _ready(cert)["reason"] == "Ready"  # type: ignore[index]
    assert _ready(cert)["message"] == "Certificate is up to date and has not expired"  # type: ignore[index]
    assert cert["status"]["revision"] == 1 and cert["status"]["notAfter"] and cert["status"]["renewalTime"]
    issuer = custom.get_namespaced_custom_object(*CM, NS, "issuers", "ca")
    assert (_ready(issuer) or {}).get("reason") == "KeyPairVerified"
    assert (_ready(issuer) or {}).get("message") == "Signing CA verified"

    secret = core.read_namespaced_secret("hooks-tls", NS)
    assert secret.type == "kubernetes.io/tls" and set(secret.data) == {"tls.crt", "tls.key", "ca.crt"}
    annotations = secret.metadata.annotations
    assert annotations["cert-manager.io/certificate-name"] == "hooks"
    assert annotations["cert-manager.io/issuer-name"] == "ca" and annotations["cert-manager.io/issuer-kind"] == "Issuer"
    assert annotations["cert-manager.io/alt-names"] == "hooks.system.svc,hooks.system.svc.cluster.local"
    leaf = x509.load_pem_x509_certificate(base64.b64decode(secret.data["tls.crt"]))
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret.data["ca.crt"]))
    root = core.read_namespaced_secret("root-ca", NS)
    assert base64.b64decode(secret.data["ca.crt"]) == base64.b64decode(root.data["tls.crt"])
    leaf.verify_directly_issued_by(ca)  # raises when the CA did not sign it
    seen = facts(base64.b64decode(secret.data["tls.crt"]))
    assert seen is not None and seen.dns_names == ("hooks.system.svc", "hooks.system.svc.cluster.local")
    assert round((seen.not_after - seen.not_before).total_seconds()) == 2160 * 3600


def test_a_certificate_is_renewed_before_expiry_and_the_bundle_reinjected(
        sandbox_factory: Callable[..., Any], wait_for: WaitFor) -> None:
    sandbox = sandbox_factory(nodes=[], cluster=["cert-manager"])
    custom, core = _custom(sandbox), kubernetes.client.CoreV1Api(sandbox.api_client())
    _issuers_and_ca(custom)
    # Due for renewal two seconds after each issuance (the shortest lifetime cert-manager's webhook allows).
    custom.create_namespaced_custom_object(*CM, NS, "certificates",
                                           _serving("short", duration="1h", renewBefore="59m58s"))
    admission = kubernetes.client.AdmissionregistrationV1Api(sandbox.api_client())
    admission.create_validating_webhook_configuration({
        "metadata": {"name": "hooks", "annotations": {"cert-manager.io/inject-ca-from": f"{NS}/short"}},
        "webhooks": [{"name": "v.hooks.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                      "clientConfig": {"service": {"namespace": "system", "name": "hooks"}},
                      "rules": [{"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"],
                                 "resources": ["widgets"]}]}]})

    first = wait_for(lambda: (s := _secret(core, "short-tls")) and s.data, message="the first issuance")
    wait_for(lambda: admission.read_validating_webhook_configuration("hooks").webhooks[0].client_config.ca_bundle
             == first["ca.crt"], message="the CA injected")
    renewed = wait_for(lambda: (s := _secret(core, "short-tls")) and s.data["tls.crt"] != first["tls.crt"] and s.data,
                       timeout=15, message="a renewal")
    assert renewed["tls.key"] != first["tls.key"]  # rotationPolicy Always: a new key each time
    assert renewed["ca.crt"] == first["ca.crt"]  # the CA issuer's CA is unchanged
    cert = custom.get_namespaced_custom_object(*CM, NS, "certificates", "short")
    assert cert["status"]["revision"] >= 2

    # A new CA (the root reissued) reaches the caBundle.
    core.delete_namespaced_secret("root-ca", NS)
    new_root = wait_for(lambda: (s := _secret(core, "root-ca")) and s.data and s.data["tls.crt"] != first["ca.crt"]
                        and s.data, timeout=15, message="the root reissued")
    wait_for(lambda: admission.read_validating_webhook_configuration("hooks").webhooks[0].client_config.ca_bundle
             == new_root["tls.crt"], timeout=15, message="the new CA injected after the next renewal")


def test_the_webhook_refuses_a_duration_under_an_hour_and_the_add_on_is_opt_in(
        sandbox_factory: Callable[..., Any]) -> None:
    sandbox = sandbox_factory(nodes=[], cluster=["cert-manager"])
    with pytest.raises(kubernetes.client.ApiException) as refused:
        _custom(sandbox).create_namespaced_custom_object(*CM, NS, "certificates", _serving("bad", duration="30m"))
    assert refused.value.status == 422
    assert "spec.duration" in refused.value.body and "certificate duration must be greater than 1h0m0s" in \
        refused.value.body

    plain = sandbox_factory(nodes=[], cluster=True)
    groups = [g.name for g in kubernetes.client.ApisApi(plain.api_client()).get_api_versions().groups]
    assert "cert-manager.io" not in groups and "ray.io" in groups


def test_go_durations_and_when_cert_manager_renews() -> None:
    import datetime

    from kaiwo_sandbox.cluster.certmanager.rules import parse_duration, renewal_time

    assert parse_duration("2160h") == datetime.timedelta(hours=2160)
    assert parse_duration("1h30m5.5s") == datetime.timedelta(hours=1, minutes=30, seconds=5.5)
    assert parse_duration("90d") is None and parse_duration("") is None
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    end = start + datetime.timedelta(hours=90)
    assert renewal_time(start, end, None) == start + datetime.timedelta(hours=60)  # two thirds in, by default
    assert renewal_time(start, end, datetime.timedelta(hours=10)) == end - datetime.timedelta(hours=10)
