"""Small admission webhook servers for the sandbox's webhook tests: aiohttp over TLS on 127.0.0.1, with
a certificate for the Service names the API server verifies (signed by a throwaway CA whose PEM is the
configuration's caBundle). Each server answers with a test's handler and records every review it got.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import ipaddress
import ssl
import tempfile
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kaiwo_ray.api.jsonobj import JsonObj

Handler = Callable[[JsonObj], Awaitable[JsonObj]]


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_ca() -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(_name("webhook-test-ca")).issuer_name(_name("webhook-test-ca"))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def make_leaf(ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate], names: list[str]) -> tuple[bytes, bytes]:
    ca_key, ca_cert = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    alt: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    alt.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (x509.CertificateBuilder().subject_name(_name(names[0])).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def ca_bundle(ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate]) -> str:
    return base64.b64encode(ca[1].public_bytes(serialization.Encoding.PEM)).decode()


def patch(ops: list[JsonObj]) -> JsonObj:
    """A mutating response body: the JSON Patch, base64 as the API carries it."""
    return {"allowed": True, "patchType": "JSONPatch", "patch": base64.b64encode(orjson.dumps(ops)).decode()}


class WebhookServer:
    """One HTTPS server; every path answers with `handler(review["request"])` merged into a response
    carrying the request's uid (unless the handler returns a whole AdmissionReview under "raw")."""

    def __init__(self, handler: Handler, names: list[str] | None = None) -> None:
        self.handler = handler
        self.ca = make_ca()
        self.names = names or ["hook.default.svc"]
        self.reviews: list[JsonObj] = []
        self.paths: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._runner: web.AppRunner | None = None
        self.port = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)

    @property
    def ca_bundle(self) -> str:
        return ca_bundle(self.ca)

    def _context(self) -> ssl.SSLContext:
        cert, key = make_leaf(self.ca, self.names)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "c").write_bytes(cert)
            (Path(tmp) / "k").write_bytes(key)
            context.load_cert_chain(Path(tmp) / "c", Path(tmp) / "k")
        return context

    async def _serve(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviews.append(review)
        self.paths.append(request.path_qs)
        answer = await self.handler(review["request"])
        if "raw" in answer:
            return web.Response(body=orjson.dumps(answer["raw"]), content_type="application/json")
        response = {"uid": review["request"]["uid"], **answer}
        return web.json_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                  "response": response})

    async def _start(self) -> int:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._serve)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._context())
        await site.start()
        server = site._server
        assert server is not None
        return int(server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
            self._runner = None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


async def allow(_request: JsonObj) -> JsonObj:
    return {"allowed": True}


class AsgiServer:
    """An ASGI app (the product's webhook app) under uvicorn over TLS on 127.0.0.1, in its own thread;
    its certificate names 127.0.0.1, so configurations reach it by `url` with `ca_bundle`."""

    def __init__(self, app: Any) -> None:
        import socket

        import uvicorn

        self.ca = make_ca()
        cert, key = make_leaf(self.ca, ["localhost"])
        self._dir = tempfile.TemporaryDirectory()
        cert_file, key_file = Path(self._dir.name) / "tls.crt", Path(self._dir.name) / "tls.key"
        cert_file.write_bytes(cert)
        key_file.write_bytes(key)
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY set
        self._socket.bind(("127.0.0.1", 0))
        self.port = int(self._socket.getsockname()[1])
        config = uvicorn.Config(app, ssl_certfile=str(cert_file), ssl_keyfile=str(key_file), log_level="warning",
                                lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_bundle(self) -> str:
        return ca_bundle(self.ca)

    @property
    def started(self) -> bool:
        return bool(self._server.started)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._socket.close()
        self._dir.cleanup()
