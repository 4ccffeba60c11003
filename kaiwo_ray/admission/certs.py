"""The webhooks' serving certificate (pure: no cluster I/O): a self-signed CA and a certificate it signs
for the webhook Service's names, what the Secret holds, and when to replace them.

The API server verifies the webhook against the configurations' `caBundle` with TLS server name
`<service>.<namespace>.svc` (cluster-mechanics 2.1), so the certificate names that. Each rotation mints a
new CA and a new certificate; the CA's key signs once and is dropped (nothing can issue a second
certificate from it). `ca.crt` holds the new CA and the one before it: the caBundle carries both, so a
server still presenting the previous certificate (another replica, or this one before it reloads) is
trusted while the new one spreads, and no admission is refused during a rotation.

Secret layout (type `kubernetes.io/tls`, as cert-manager writes it): `tls.crt`, `tls.key`, `ca.crt`.

`cryptography` is imported where used: it comes with the kubernetes client (google-auth) and the
sandbox extra, as for the metrics server's self-signed certificate.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Mapping
from dataclasses import dataclass

VALIDITY = datetime.timedelta(days=365)
LOOKAHEAD = datetime.timedelta(days=30)
"""Rotate once less than this is left: a month for a stopped operator to be noticed (doctor warns)."""
CLUSTER_DOMAIN = "cluster.local"
PEM_END = b"-----END CERTIFICATE-----"


@dataclass(frozen=True, slots=True)
class Bundle:
    """A serving certificate, its key and the CA bundle that verifies it (current CA first)."""

    cert_pem: bytes
    key_pem: bytes
    ca_pem: bytes

    def ca_bundle(self) -> str:
        """The configurations' `caBundle` (base64 of the PEM bundle)."""
        return base64.b64encode(self.ca_pem).decode()

    def secret_data(self) -> dict[str, str]:
        return {"tls.crt": _b64(self.cert_pem), "tls.key": _b64(self.key_pem), "ca.crt": _b64(self.ca_pem)}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def service_names(service: str, namespace: str) -> list[str]:
    """Every name the Service answers to; the API server uses `<service>.<namespace>.svc`."""
    return [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.{CLUSTER_DOMAIN}", f"{service}.{namespace}",
            service]


def split_pem(bundle: bytes) -> list[bytes]:
    """The certificates of a PEM bundle, each ending with its END line."""
    out: list[bytes] = []
    for part in bundle.split(PEM_END):
        start = part.find(b"-----BEGIN CERTIFICATE-----")
        if start >= 0:
            out.append(part[start:] + PEM_END + b"\n")
    return out


def from_secret_data(data: Mapping[str, str] | None) -> Bundle | None:
    """The Secret's bundle; None when a key is missing or not base64."""
    if not data or not all(data.get(k) for k in ("tls.crt", "tls.key", "ca.crt")):
        return None
    try:
        return Bundle(base64.b64decode(data["tls.crt"], validate=True), base64.b64decode(data["tls.key"], validate=True),
                      base64.b64decode(data["ca.crt"], validate=True))
    except ValueError:
        return None


def issue(names: list[str], now: datetime.datetime, *, validity: datetime.timedelta = VALIDITY,
          previous: Bundle | None = None) -> Bundle:
    """A new CA and a certificate it signs for `names`, valid from a few minutes before `now` (clock skew)
    for `validity`; `ca.crt` keeps the previous bundle's current CA after the new one."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    start, end = now - datetime.timedelta(minutes=5), now + validity
    ca_key = ec.generate_private_key(ec.SECP256R1())
    # A name of its own and key identifiers: the bundle holds two CAs, and OpenSSL picks an issuer by
    # name (then key id), so two CAs minted in the same second under one name would hide each other.
    serial = x509.random_serial_number()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"kaiwo-ray-webhook-ca-{serial:x}"[:64])])
    ca_key_id = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(serial).not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(ca_key_id, critical=False)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_key_id), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    kept = split_pem(previous.ca_pem)[:1] if previous is not None else []
    return Bundle(cert.public_bytes(serialization.Encoding.PEM),
                  key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()),
                  ca_pem + b"".join(kept))


@dataclass(frozen=True, slots=True)
class CertFacts:
    """What a check needs to know of a serving certificate."""

    not_after: datetime.datetime
    names: tuple[str, ...]
    signed_by_bundle: bool
    serial: int
    not_before: datetime.datetime | None = None


def facts(bundle: Bundle) -> CertFacts:
    """Parsed facts; ValueError when the certificate or the CA bundle cannot be read."""
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature

    cert = x509.load_pem_x509_certificate(bundle.cert_pem)
    try:
        names = tuple(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
                      .get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        names = ()
    signed = False
    for pem in split_pem(bundle.ca_pem):
        ca = x509.load_pem_x509_certificate(pem)
        if ca.subject != cert.issuer:
            continue
        try:
            cert.verify_directly_issued_by(ca)
            signed = True
        except (InvalidSignature, ValueError, TypeError):
            continue
    return CertFacts(cert.not_valid_after_utc, names, signed, cert.serial_number, cert.not_valid_before_utc)


def warning_window(found: CertFacts, by_cert_manager: bool) -> datetime.timedelta:
    """How close to expiry a certificate that is still served means its keeper has stopped: the
    operator rotates LOOKAHEAD ahead; cert-manager renews at its Certificate's renewBefore, by default a
    third of the lifetime, so a short-lived one is only late past that (never later than LOOKAHEAD)."""
    if not by_cert_manager or found.not_before is None:
        return LOOKAHEAD
    return min(LOOKAHEAD, (found.not_after - found.not_before) / 3)


def rotation_reason(bundle: Bundle | None, names: list[str], now: datetime.datetime, *,
                    lookahead: datetime.timedelta = LOOKAHEAD) -> str | None:
    """Why `bundle` must be replaced now; None when it can keep serving."""
    if bundle is None:
        return "no certificate yet"
    try:
        found = facts(bundle)
    except ValueError as err:
        return f"the stored certificate cannot be read ({err})"
    if names[0] not in found.names:
        return f"the certificate does not name {names[0]}"
    if not found.signed_by_bundle:
        return "the certificate is not signed by a CA in ca.crt"
    if found.not_after - now <= lookahead:
        return f"the certificate expires at {found.not_after.isoformat()} (rotated {lookahead.days} days ahead)"
    return None


CERT_MANAGER_GROUP = "cert-manager.io"
CERTIFICATE_NAME_ANNOTATION = "cert-manager.io/certificate-name"


def cert_manager_certificate(served_versions: tuple[str, ...], certificates: list[Mapping[str, object]],
                             secret: str) -> str | None:
    """Who keeps the webhooks' certificate: the name of the cert-manager Certificate that writes Secret
    `secret` (the cluster serves cert-manager.io/v1 and one in our namespace names that Secret), or None,
    when the operator keeps it itself. cert-manager installed without such a Certificate (an overlay
    without deploy/components/webhooks-cert-manager) leaves it to the operator."""
    if "v1" not in served_versions:
        return None
    for certificate in certificates:
        spec = certificate.get("spec")
        meta = certificate.get("metadata")
        if isinstance(spec, Mapping) and isinstance(meta, Mapping) and spec.get("secretName") == secret:
            return str(meta.get("name") or "")
    return None
