"""What cert-manager's issuers sign (pure: no store): a key pair per issuance, a certificate for a
Certificate's spec signed by itself (`selfSigned`) or by a CA key pair (`ca`), and the facts read back
from a Secret. Validity runs from the moment of issuance for `spec.duration`, as cert-manager's own
templates (pki.GenerateTemplate) do.

`cryptography` is imported where used (the sandbox's TLS certificate needs it too).
"""

from __future__ import annotations

import base64
import datetime
from dataclasses import dataclass
from typing import Any

from kaiwo_sandbox.contracts import JsonObj

DEFAULT_DURATION = datetime.timedelta(hours=2160)  # cert-manager's default: 90 days
PEM_END = b"-----END CERTIFICATE-----"


@dataclass(frozen=True, slots=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes


@dataclass(frozen=True, slots=True)
class Facts:
    """What a stored certificate says: its validity, names, whether it is a CA, and its issuer's name."""

    not_before: datetime.datetime
    not_after: datetime.datetime
    dns_names: tuple[str, ...]
    is_ca: bool
    issuer: str
    subject: str


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(value: object) -> bytes | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        return None


def first_pem(bundle: bytes) -> bytes:
    """The first certificate of a PEM bundle (the leaf of tls.crt)."""
    end = bundle.find(PEM_END)
    return bundle[: end + len(PEM_END)] + b"\n" if end >= 0 else bundle


def facts(cert_pem: bytes) -> Facts | None:
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(first_pem(cert_pem))
    except ValueError:
        return None
    try:
        names = tuple(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
                      .get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        names = ()
    try:
        is_ca = bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        is_ca = False
    return Facts(cert.not_valid_before_utc, cert.not_valid_after_utc, names, is_ca, cert.issuer.rfc4514_string(),
                 cert.subject.rfc4514_string())


def _private_key(spec: JsonObj) -> Any:
    """`spec.privateKey`: RSA (default, 2048 bits), ECDSA (P-256 default, 384, 521) or Ed25519."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    wanted = spec.get("privateKey") or {}
    algorithm = str(wanted.get("algorithm") or "RSA")
    size = wanted.get("size")
    if algorithm == "ECDSA":
        curve = {384: ec.SECP384R1(), 521: ec.SECP521R1()}.get(size if isinstance(size, int) else 256, ec.SECP256R1())
        return ec.generate_private_key(curve)
    if algorithm == "Ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    return rsa.generate_private_key(public_exponent=65537, key_size=size if isinstance(size, int) else 2048)


def _key_pem(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    pem: bytes = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption())
    return pem


def load_key_pair(pair: KeyPair) -> tuple[Any, Any] | None:
    """(certificate, private key) of a CA Secret's tls.crt/tls.key; None when unreadable or they do not match."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    try:
        cert = x509.load_pem_x509_certificate(first_pem(pair.cert_pem))
        key = serialization.load_pem_private_key(pair.key_pem, password=None)
    except (ValueError, TypeError):
        return None
    if cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) != \
            key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo):
        return None
    return cert, key


def _signing_hash(key: Any) -> Any:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ed25519

    return None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()


def issue(spec: JsonObj, duration: datetime.timedelta, now: datetime.datetime,
          signer: KeyPair | None) -> tuple[KeyPair, bytes] | None:
    """A new key and certificate for a Certificate's `spec`, and the ca.crt to store beside them:
    self-signed when `signer` is None (ca.crt is the certificate itself, as cert-manager's selfSigned
    issuer writes it), else signed by the CA pair (ca.crt is the CA's certificate). None when the
    signer's pair is unusable."""
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = _private_key(spec)
    common_name = str(spec.get("commonName") or "")
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)] if common_name else [])
    is_ca = bool(spec.get("isCA"))
    if signer is None:
        issuer_name, signing_key, issuer_ski = subject, key, None
    else:
        loaded = load_key_pair(signer)
        if loaded is None:
            return None
        ca_cert, signing_key = loaded
        issuer_name = ca_cert.subject
        issuer_ski = x509.SubjectKeyIdentifier.from_public_key(ca_cert.public_key())
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer_name).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + duration)
               .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
    names = [str(n) for n in spec.get("dnsNames") or []]
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
    if issuer_ski is not None:
        builder = builder.add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(issuer_ski),
                                        critical=False)
    # cert-manager's default usages: digital signature and key encipherment (+ cert sign for a CA), and
    # serverAuth where none are given.
    builder = builder.add_extension(x509.KeyUsage(
        digital_signature=True, key_encipherment=True, key_cert_sign=is_ca, crl_sign=False,
        content_commitment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
        decipher_only=False), critical=True)
    if not is_ca:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    from cryptography.hazmat.primitives import serialization

    cert = builder.sign(signing_key, _signing_hash(signing_key))
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    ca_pem = cert_pem if signer is None else first_pem(signer.cert_pem)
    return KeyPair(cert_pem, _key_pem(key)), ca_pem
