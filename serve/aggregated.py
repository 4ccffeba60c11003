"""The admin API as an aggregated API server: a second listener of the same app, over TLS, that the
Kubernetes API server's aggregation layer proxies `/apis/admin.kaiwo.silogen.ai/...` to.

Why a listener of its own: the aggregator authenticates with a client certificate (the front-proxy
certificate), and only a request that presented one signed by the requestheader CA may say who the
user is in X-Remote-* headers. The TLS layer verifies the certificate (CERT_OPTIONAL: a client without
one is a bearer-token client, as on the plain port); `_PeerCertProtocol` hands the verified CN to the
app in the ASGI TLS extension, where front_proxy.py reads it. The listener runs on the app's own event
loop (started by its lifespan), so both listeners share one cache: in a Serve replica too.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from kaiwo_ray.kube.errors import KubeError
from serve.front_proxy import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE, RequestHeaderConfig, from_configmap
from serve.metrics_server import CERT_NAME, KEY_NAME, parse_bind_address, self_signed
from serve.state import AdminState


def tls_extension(ssl_object: ssl.SSLObject | None) -> dict[str, Any] | None:
    """The ASGI TLS extension's client fields for a verified peer certificate (None without one)."""
    if ssl_object is None:
        return None
    peer = ssl_object.getpeercert()
    if not peer:  # None: no certificate; {}: not verified (cannot happen with CERT_OPTIONAL)
        return None
    subject: Any = peer.get("subject", ())  # ((("commonName", "front-proxy-client"),), ...)
    common_name = next((str(pair[1]) for rdn in subject for pair in rdn if pair[0] == "commonName"), "")
    return {"client_cert_common_name": common_name, "client_cert_name": f"CN={common_name}"}


class _PeerCertProtocol(HttpToolsProtocol):
    _tls: dict[str, Any] | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._tls = tls_extension(transport.get_extra_info("ssl_object"))

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._tls is not None:
            self.scope["extensions"] = {"tls": self._tls}  # type: ignore[dict-item]  # ASGI's TLS extension


class _Listener(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the process that hosts the app (uvicorn, a Serve replica) owns its signals


@dataclass(slots=True)
class AggregatedListener:
    server: uvicorn.Server
    task: asyncio.Task[None]
    port: int
    tmp: tempfile.TemporaryDirectory[str] | None

    async def stop(self) -> None:
        self.server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        if self.tmp is not None:
            self.tmp.cleanup()


async def requestheader_config(state: AdminState) -> RequestHeaderConfig | None:
    """kube-system/extension-apiserver-authentication, read with the admin API's own identity (the
    `extension-apiserver-authentication-reader` Role); None where the cluster publishes none."""
    try:
        cm = await state.client.request("GET", f"/api/v1/namespaces/{CONFIGMAP_NAMESPACE}/configmaps/{CONFIGMAP_NAME}")
    except KubeError as err:
        if err.code == 404:
            return None
        raise
    return from_configmap((cm or {}).get("data") or {})


def server_context(cert: Path, key: Path, requestheader: RequestHeaderConfig | None) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    if requestheader is not None:
        context.load_verify_locations(cadata=requestheader.ca_pem)
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


async def start_listener(app: Any, state: AdminState, bind: str, cert_dir: str | None) -> AggregatedListener:
    where = parse_bind_address(bind)
    if where is None:
        raise ValueError(f"aggregated API bind address {bind!r}: 0 is not an address to serve on")
    host, port = where
    state.front_proxy = await requestheader_config(state)
    tmp = None
    if cert_dir:
        cert, key = Path(cert_dir) / CERT_NAME, Path(cert_dir) / KEY_NAME
    else:
        tmp = tempfile.TemporaryDirectory(prefix="kaiwo-aggregated-cert-")
        cert, key = self_signed(Path(tmp.name))
    context = server_context(cert, key, state.front_proxy)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(256)
    sock.setblocking(False)
    config = uvicorn.Config(app, lifespan="off", http=_PeerCertProtocol, log_level="warning", access_log=False,
                            ssl_context_factory=lambda _config, _default: context, timeout_keep_alive=75)
    server = _Listener(config)
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]), name="kaiwo-aggregated-api")
    return AggregatedListener(server, task, int(sock.getsockname()[1]), tmp)
