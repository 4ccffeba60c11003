"""The sandbox's proxy as a backend sees it: a real TLS server registered by an APIService with a
caBundle (verified for `<service>.<namespace>.svc`), which records what arrives. The caller's identity
comes as X-Remote-* headers over the front-proxy client certificate; its credentials, impersonation
headers and forged X-Remote-* headers do not arrive."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kaiwo_sandbox.apiserver.aggregation.certs import front_proxy
from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox

NAMESPACE, SERVICE = "aggr-test", "echo"
GROUP, VERSION = "echo.example.com", "v1"
SEEN: list[dict[str, Any]] = []


def _certificate(tmp: Path, dns: str) -> tuple[Path, Path, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(dns)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp / "tls.crt").write_bytes(pem)
    (tmp / "tls.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()))
    return tmp / "tls.crt", tmp / "tls.key", pem


async def _record(request: web.Request) -> web.Response:
    peer = request.transport.get_extra_info("peercert") if request.transport else None
    common_name = next((v for rdn in (peer or {}).get("subject", ()) for k, v in rdn if k == "commonName"), None)
    SEEN.append({"path": request.path, "query": request.query_string, "cn": common_name,
                 "headers": [(k, v) for k, v in request.headers.items()]})
    return web.json_response({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{GROUP}/{VERSION}",
                              "resources": []})


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, bytes]]:
    """The recording server on a free port: (port, its certificate), trusting front-proxy certificates."""
    cert, key, pem = _certificate(tmp_path_factory.mktemp("echo"), f"{SERVICE}.{NAMESPACE}.svc")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    context.load_verify_locations(cadata=front_proxy().ca_pem.decode())
    context.verify_mode = ssl.CERT_OPTIONAL
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", _record)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield port, pem
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def _register(sb: RunningSandbox, port: int, ca_pem: bytes, name: str = f"{VERSION}.{GROUP}") -> None:
    for plural, obj in (
            ("services", {"metadata": {"name": SERVICE}, "spec": {"ports": [{"name": "https", "port": 443}]}}),
            ("endpoints", {"metadata": {"name": SERVICE}, "subsets": [
                {"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": port}]}]})):
        code, _, body = sb.http("POST", f"/api/v1/namespaces/{NAMESPACE}/{plural}", obj)
        assert code in (201, 409), body
    code, _, body = sb.http("POST", "/apis/apiregistration.k8s.io/v1/apiservices", {
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": name},
        "spec": {"group": name.split(".", 1)[1], "version": name.split(".", 1)[0], "groupPriorityMinimum": 100,
                 "versionPriority": 100, "caBundle": base64.b64encode(ca_pem).decode(),
                 "service": {"namespace": NAMESPACE, "name": SERVICE}}})
    assert code == 201, body


def _condition(sb: RunningSandbox, name: str) -> dict[str, Any] | None:
    body = json.loads(sb.http("GET", f"/apis/apiregistration.k8s.io/v1/apiservices/{name}")[2])
    return next((c for c in (body.get("status") or {}).get("conditions") or [] if c["type"] == "Available"), None)


@pytest.fixture(scope="module")
def sandbox(backend: tuple[int, bytes]) -> Iterator[RunningSandbox]:
    with start_sandbox(nodes=[]) as sb:
        assert sb.http("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})[0] == 201
        _register(sb, backend[0], backend[1])
        eventually(lambda: (_condition(sb, f"{VERSION}.{GROUP}") or {}).get("status") == "True", 30, "Available")
        yield sb


def test_the_health_check_comes_as_the_aggregator_over_the_front_proxy_certificate(sandbox: RunningSandbox) -> None:
    check = next(s for s in SEEN if s["path"] == f"/apis/{GROUP}/{VERSION}")
    headers = check["headers"]
    assert check["cn"] == "front-proxy-client"
    assert ("X-Remote-User", "system:kube-aggregator") in headers and ("X-Remote-Group", "system:masters") in headers
    host = next(v for k, v in headers if k == "Host")
    assert host.startswith(f"{SERVICE}.{NAMESPACE}.svc:")  # the name the certificate was verified for


def test_a_request_arrives_as_the_impersonated_user_and_nothing_else(sandbox: RunningSandbox) -> None:
    SEEN.clear()
    code, _, body = sandbox.http(
        "GET", f"/apis/{GROUP}/{VERSION}/namespaces/x/things?b=2&a=1",
        headers={"Impersonate-User": "alice", "Impersonate-Group": "devs", "Impersonate-Extra-Scopes": "s1",
                 "X-Remote-User": "mallory", "X-Remote-Group": "system:masters", "X-Remote-Extra-Team": "evil"})
    assert code == 200, body
    seen = next(s for s in SEEN if s["path"] == f"/apis/{GROUP}/{VERSION}/namespaces/x/things")
    remote = [(k, v) for k, v in seen["headers"] if k.lower().startswith(("x-remote-", "impersonate-", "authorization"))]
    assert remote == [("X-Remote-User", "alice"), ("X-Remote-Group", "devs"),
                      ("X-Remote-Group", "system:authenticated"), ("X-Remote-Extra-scopes", "s1")]
    assert seen["cn"] == "front-proxy-client" and seen["query"] == "a=1&b=2"
    audited = [r for r in sandbox.audit.records(user="alice") if r.resource == "things"]
    assert [(r.verb, r.namespace, r.code) for r in audited] == [("list", "x", 200)]


def test_a_backend_the_ca_bundle_does_not_vouch_for_fails_its_check(sandbox: RunningSandbox,
                                                                     backend: tuple[int, bytes], tmp_path: Path) -> None:
    _, _, other = _certificate(tmp_path, f"{SERVICE}.{NAMESPACE}.svc")
    _register(sandbox, backend[0], other, name=f"v2.{GROUP}")
    condition = eventually(lambda: _condition(sandbox, f"v2.{GROUP}"), 30, "a condition")
    assert (condition["status"], condition["reason"]) == ("False", "FailedDiscoveryCheck")
    assert "x509: certificate signed by unknown authority" in condition["message"], condition
    assert sandbox.http("GET", f"/apis/{GROUP}/v2/things")[0] == 503
