"""A self-signed serving certificate for the sandbox.

Why TLS on loopback: kubectl (client-go) uses a kubeconfig's user credentials only when the
transport is TLS, so a plain-HTTP server with bearer-token auth would be unusable from kubectl.
The certificate is its own CA; the kubeconfig carries it as `certificate-authority-data`, so
clients verify the server properly instead of skipping verification. An EC P-256 key keeps
generation around a millisecond; one certificate per process is reused by every sandbox it starts.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class ServingCert:
    cert_pem: bytes
    key_pem: bytes

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory(prefix="kaiwo-sandbox-tls-") as tmp:
            cert = Path(tmp) / "tls.crt"
            key = Path(tmp) / "tls.key"
            cert.write_bytes(self.cert_pem)
            key.write_bytes(self.key_pem)
            context.load_cert_chain(cert, key)
        return context


_process_cert: ServingCert | None = None


def generate(host: str = "127.0.0.1", extra_ips: tuple[str, ...] = ()) -> ServingCert:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kaiwo-ray-sandbox")])
    now = datetime.datetime.now(datetime.UTC)
    alt_names: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(host))]
    if host != "127.0.0.1":
        alt_names.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in extra_ips if ip != host]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return ServingCert(
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption()),
    )


def serving_cert(state_dir: Path | None = None, host: str = "127.0.0.1") -> ServingCert:
    """The certificate to serve: kept in `state_dir` when given (so an exported kubeconfig stays
    valid across restarts), else one per process."""
    global _process_cert
    if state_dir is not None:
        cert_path, key_path = state_dir / "tls.crt", state_dir / "tls.key"
        if cert_path.exists() and key_path.exists():
            return ServingCert(cert_path.read_bytes(), key_path.read_bytes())
        from kaiwo_sandbox.storage.persistence import write_private

        made = generate(host)
        write_private(key_path, made.key_pem)  # the key first: a cert without its key is regenerated
        write_private(cert_path, made.cert_pem)
        return made
    if _process_cert is None:
        _process_cert = generate(host)
    return _process_cert
