"""The front-proxy identity: a CA of its own (kube-apiserver's `--requestheader-client-ca-file`) and
the client certificate the aggregator presents to every backend (`--proxy-client-cert-file`, kubeadm's
CN `front-proxy-client`), and the TLS contexts the proxy dials with. One CA and certificate per
process, like the serving certificate (tls.py); EC P-256 keeps minting them around a millisecond.
"""

from __future__ import annotations

import base64
import datetime
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

FRONT_PROXY_CN = "front-proxy-client"


@dataclass(frozen=True, slots=True)
class FrontProxy:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    allowed_names: tuple[str, ...] = (FRONT_PROXY_CN,)

    def client_context(self, ca_bundle_b64: str | None, insecure: bool) -> ssl.SSLContext:
        """What the proxy dials a backend with: roots from `caBundle` (or none checked, for
        `insecureSkipTLSVerify`), and the front-proxy client certificate."""
        if insecure:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif ca_bundle_b64:
            context = ssl.create_default_context(cadata=base64.b64decode(ca_bundle_b64).decode())
        else:
            context = ssl.create_default_context()
        with tempfile.TemporaryDirectory(prefix="kaiwo-sandbox-front-proxy-") as tmp:
            cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert.write_bytes(self.cert_pem)
            key.write_bytes(self.key_pem)
            context.load_cert_chain(cert, key)
        return context


def _pem(cert: object, key: object) -> tuple[bytes, bytes]:
    from cryptography.hazmat.primitives import serialization

    return (cert.public_bytes(serialization.Encoding.PEM),  # type: ignore[attr-defined]
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,  # type: ignore[attr-defined]
                              serialization.NoEncryption()))


def generate(common_name: str = FRONT_PROXY_CN) -> FrontProxy:
    """A fresh CA and a client certificate it signed for `common_name` (client-auth usage only)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "front-proxy-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=3650))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_pem, _ = _pem(ca, ca_key)
    cert_pem, key_pem = _pem(leaf, key)
    return FrontProxy(ca_pem, cert_pem, key_pem)


_process_front_proxy: FrontProxy | None = None


def front_proxy() -> FrontProxy:
    """The process's front-proxy identity (made on first use)."""
    global _process_front_proxy
    if _process_front_proxy is None:
        _process_front_proxy = generate()
    return _process_front_proxy
