"""The aggregator's I/O: proxying `/apis/<group>/<version>/...` to the Service an APIService names, and
the availability checks that write its `Available` condition (kube-aggregator's handler_proxy.go and
remote_available_controller.go, v1.32).

The sandbox has no cluster network: a Service's address is the one its Endpoints object lists (the
backend runs on this machine), and the Service's DNS name `<service>.<namespace>.svc` is the TLS server
name the backend's certificate is verified for, as kube-apiserver dials it. Every call presents the
front-proxy client certificate (certs.py) and says who asks in X-Remote-User/-Group/-Extra-*, after
dropping whatever the client sent under those names and its own credentials.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
from aiohttp import web

from kaiwo_sandbox.apiserver.aggregation import registrations
from kaiwo_sandbox.apiserver.aggregation.certs import FrontProxy
from kaiwo_sandbox.apiserver.aggregation.discovery import DiscoveryManager
from kaiwo_sandbox.apiserver.aggregation.registrations import KUBE_AGGREGATOR_USER, MASTERS, Backend
from kaiwo_sandbox.apiserver.aggregation.upstream import Upstream
from kaiwo_sandbox.apiserver.auth.authn import UserInfo
from kaiwo_sandbox.contracts import GVR, SERVICES, ApiError, JsonObj, rfc3339
from kaiwo_sandbox.storage.store import ObjectStore, clone

log = logging.getLogger(__name__)

APISERVICES = GVR("apiregistration.k8s.io", "v1", "apiservices")
ENDPOINTS = GVR("", "v1", "endpoints")
CHECK_TIMEOUT = 5.0  # the availability controller's discovery GET
PROXY_TIMEOUT = 60.0  # kube-apiserver's --request-timeout, for a request that is not a watch
# Never passed on, either way: hop-by-hop headers, and what identifies the caller to *this* server.
_DROPPED_REQUEST = frozenset({"host", "connection", "keep-alive", "transfer-encoding", "content-length",
                              "authorization", "upgrade", "proxy-authorization", "te", "trailer",
                              "accept-encoding"})
_DROPPED_RESPONSE = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding",
                               "date", "server"})


def identity_headers(user: UserInfo) -> list[tuple[str, str]]:
    """X-Remote-User, one X-Remote-Group per group, X-Remote-Extra-<key> per value (key %-escaped)."""
    headers = [("X-Remote-User", user.name)]
    headers += [("X-Remote-Group", group) for group in user.groups]
    for key, values in user.extra:
        headers += [(f"X-Remote-Extra-{quote(key, safe='')}", value) for value in values]
    return headers


def forwarded_headers(incoming: Iterable[tuple[str, str]], user: UserInfo) -> list[tuple[str, str]]:
    kept = [(k, v) for k, v in incoming if k.lower() not in _DROPPED_REQUEST
            and not k.lower().startswith(("x-remote-", "impersonate-"))]
    return kept + identity_headers(user)


def unavailable(message: str = "service unavailable") -> web.Response:
    """Go's http.Error: the message, a newline, text/plain, as kube-aggregator answers a backend it
    cannot use (client-go shows it as `the server is currently unable to handle the request`)."""
    return web.Response(text=message + "\n", status=503, content_type="text/plain", charset="utf-8",
                        headers={"X-Content-Type-Options": "nosniff"})


def _dial_error(exc: BaseException, host: str, port: int) -> str:
    if isinstance(exc, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return "context deadline exceeded"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    if isinstance(exc, aiohttp.ClientConnectorError):
        reason = "connection refused" if isinstance(exc.os_error, ConnectionRefusedError) else str(exc.os_error)
        return f"dial tcp {host}:{port}: connect: {reason.lower()}"
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError):
        return "EOF"
    return str(exc) or type(exc).__name__


def _lean_error(exc: BaseException, host: str, port: int) -> str:
    """Go's error text for what the lean client raised."""
    if isinstance(exc, TimeoutError):
        return "context deadline exceeded"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    if isinstance(exc, ConnectionRefusedError):
        return f"dial tcp {host}:{port}: connect: connection refused"
    if isinstance(exc, ConnectionResetError):
        return str(exc) or "EOF"
    return str(exc) or type(exc).__name__


class Aggregator:
    """Routes, proxies and checks. `interval`: seconds between availability passes (the real
    controller re-checks every 30 s and on every change; the sandbox checks often instead)."""

    def __init__(self, store: ObjectStore, front: FrontProxy, *, interval: float = 1.0) -> None:
        self.store = store
        self.front = front
        self.interval = interval
        self._session: aiohttp.ClientSession | None = None
        self._contexts: dict[tuple[str | None, bool], ssl.SSLContext] = {}
        self._task: asyncio.Task[None] | None = None
        self._upstream = Upstream()
        self.discovery = DiscoveryManager(self._discovery_get)

    # ------------------------------------------------------------------ routing
    def apiservices(self) -> list[JsonObj]:
        return self.store.refs(APISERVICES)

    def backend(self, group: str, version: str) -> Backend | None:
        for obj in self.store.refs(APISERVICES):
            spec = obj.get("spec") or {}
            if spec.get("group") == group and spec.get("version") == version:
                return registrations.backend(obj)
        return None

    def aggregated_groups(self, local: set[str]) -> list[JsonObj]:
        return registrations.aggregated_groups(self.apiservices(), local)

    def discovery_groups(self, local: set[str]) -> list[JsonObj]:
        """The aggregated groups' items of the aggregated discovery document (discovery.py)."""
        return self.discovery.groups(self.apiservices(), local)

    def group(self, group: str) -> JsonObj | None:
        mine = [o for o in self.apiservices() if (o.get("spec") or {}).get("group") == group]
        return registrations.group_entry(group, mine) if mine else None

    def _address(self, target: Backend) -> tuple[str, int] | None:
        service = self.store.find_ref(SERVICES, target.namespace, target.service)
        endpoints = self.store.find_ref(ENDPOINTS, target.namespace, target.service)
        first, second = registrations.endpoint(target, service, endpoints)
        return (first, second) if isinstance(second, int) else None

    def _context(self, target: Backend) -> ssl.SSLContext:
        key = (target.ca_bundle, target.insecure)
        context = self._contexts.get(key)
        if context is None:
            context = self._contexts[key] = self.front.client_context(target.ca_bundle, target.insecure)
        return context

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(auto_decompress=True, connector=aiohttp.TCPConnector(limit=256))
        return self._session

    # ------------------------------------------------------------------ proxy
    async def forward(self, request: web.Request, target: Backend, user: UserInfo, *, stream: bool) -> web.StreamResponse:
        if not target.available:
            return unavailable()
        address = self._address(target)
        if address is None:
            return unavailable()
        host, port = address
        query = urlencode(sorted(request.query.items()))
        raw_path = getattr(request, "raw_path", None)  # aiohttp's, still %-escaped (the lean front's has none)
        path = (raw_path.split("?", 1)[0] if raw_path else request.path) + (f"?{query}" if query else "")
        body = await request.read() if request.body_exists else None
        headers = forwarded_headers(request.headers.items(), user)
        headers.append(("Host", f"{host}:{port}" if target.insecure else f"{target.server_name}:{port}"))
        if not stream:
            return await self._forward_plain(request, target, host, port, path, body, headers)
        url = f"https://{host}:{port}{path}"
        timeout = aiohttp.ClientTimeout(total=None, connect=CHECK_TIMEOUT)
        try:
            upstream = await self._client().request(
                request.method, url, data=body, headers=headers, ssl=self._context(target), timeout=timeout,
                server_hostname=None if target.insecure else target.server_name, allow_redirects=False)
        except (TimeoutError, aiohttp.ClientError) as exc:
            return unavailable(f"Error trying to reach service: '{_dial_error(exc, host, port)}'")
        async with upstream:
            passed = [(k, v) for k, v in upstream.headers.items() if k.lower() not in _DROPPED_RESPONSE]
            streamed = web.StreamResponse(status=upstream.status)
            for key, value in passed:
                streamed.headers.add(key, value)
            await streamed.prepare(request)
            with contextlib.suppress(ConnectionResetError, aiohttp.ClientError, asyncio.TimeoutError):
                async for chunk in upstream.content.iter_any():
                    await streamed.write(chunk)
            with contextlib.suppress(ConnectionResetError, RuntimeError):
                await streamed.write_eof()
            return streamed

    async def _forward_plain(self, request: web.Request, target: Backend, host: str, port: int, path: str,
                             body: bytes | None, headers: list[tuple[str, str]]) -> web.Response:
        """A request that is not a watch, on the lean client (upstream.py)."""
        try:
            status, received, raw = await self._upstream.request(
                host, port, self._context(target), None if target.insecure else target.server_name,
                request.method, path, headers, body, PROXY_TIMEOUT)
        except (TimeoutError, OSError, ssl.SSLError) as exc:
            return unavailable(f"Error trying to reach service: '{_lean_error(exc, host, port)}'")
        response = web.Response(body=raw, status=status)
        for key, value in received:
            if key.lower() not in _DROPPED_RESPONSE:
                response.headers.add(key, value)
        return response

    async def _discovery_get(self, target: Backend, path: str,
                             headers: list[tuple[str, str]]) -> tuple[int, str, str, bytes]:
        """A discovery GET to the backend as `system:kube-aggregator` (discovery.py's Fetch)."""
        address = self._address(target)
        if address is None:
            raise ConnectionError("no endpoint")
        host, port = address
        sent = [*headers, ("X-Remote-User", KUBE_AGGREGATOR_USER), ("X-Remote-Group", MASTERS),
                ("Host", f"{host}:{port}" if target.insecure else f"{target.server_name}:{port}")]
        status, received, body = await self._upstream.request(
            host, port, self._context(target), None if target.insecure else target.server_name, "GET", path, sent,
            None, CHECK_TIMEOUT)
        lowered = {k.lower(): v for k, v in received}
        return status, lowered.get("content-type", ""), lowered.get("etag", ""), body

    # ------------------------------------------------------------------ availability
    async def check(self, target: Backend) -> tuple[str, str, str]:
        """(status, reason, message) of the Available condition, as remote_available_controller.go says it."""
        service = self.store.find_ref(SERVICES, target.namespace, target.service)
        endpoints = self.store.find_ref(ENDPOINTS, target.namespace, target.service)
        first, second = registrations.endpoint(target, service, endpoints)
        if not isinstance(second, int):
            return ("False", first, second)
        host, port = first, second
        url = f"https://{host}:{port}/apis/{target.group}/{target.version}"
        headers = [("X-Remote-User", KUBE_AGGREGATOR_USER), ("X-Remote-Group", MASTERS), ("Accept", "application/json")]
        if not target.insecure:
            headers.append(("Host", f"{target.server_name}:{port}"))
        failing = f"failing or missing response from {url}"
        try:
            async with self._client().get(url, headers=headers, ssl=self._context(target),
                                          server_hostname=None if target.insecure else target.server_name,
                                          timeout=aiohttp.ClientTimeout(total=CHECK_TIMEOUT),
                                          allow_redirects=False) as response:
                await response.read()
                code = response.status
        except (TimeoutError, aiohttp.ClientError, ssl.SSLError) as exc:
            return ("False", "FailedDiscoveryCheck", f'{failing}: Get "{url}": {_dial_error(exc, host, port)}')
        if 200 <= code < 400:
            return ("True", "Passed", "all checks passed")
        return ("False", "FailedDiscoveryCheck", f"{failing}: bad status from {url}: {code}")

    async def check_all(self) -> None:
        """One pass over every APIService: write the Available condition where it changed."""
        for obj in self.apiservices():
            target = registrations.backend(obj)
            if target is None:
                status, reason, message = "True", "Local", "Local APIServices are always available"
            else:
                status, reason, message = await self.check(target)
            self._write(obj["metadata"]["name"], status, reason, message)

    def _write(self, name: str, status: str, reason: str, message: str) -> None:
        current = self.store.find_ref(APISERVICES, None, name)
        if current is None:
            return
        previous = registrations.available_condition(current)
        if previous is not None and (previous.get("status"), previous.get("reason"), previous.get("message")) == (
                status, reason, message):
            return
        updated = clone(current)
        now = rfc3339(self.store.clock.now())
        conditions = [c for c in (updated.get("status") or {}).get("conditions") or [] if c.get("type") != "Available"]
        conditions.append(registrations.condition(status, reason, message, now, previous))
        updated["status"] = {**(updated.get("status") or {}), "conditions": conditions}
        try:
            self.store.update_owned(APISERVICES, updated, subresource="status", managed=False, admit=False,
                                    user=KUBE_AGGREGATOR_USER)
        except ApiError as err:  # changed or deleted meanwhile: the next pass sees the new one
            log.debug("sandbox aggregator: %s status not written: %s", name, err.message)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="sandbox-aggregator")

    async def _run(self) -> None:
        while True:
            try:
                await self.check_all()
                await self.discovery.sync(self.apiservices())
            except Exception:  # a bug in one pass must not stop the next
                log.exception("sandbox aggregator: availability pass failed")
            await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        self._upstream.close()


def extension_apiserver_authentication(front: FrontProxy, client_ca_pem: bytes | None) -> JsonObj:
    """kube-system/extension-apiserver-authentication as kube-apiserver writes it (cluster-mechanics 3.4)."""
    import orjson

    def strings(values: list[str]) -> str:
        return orjson.dumps(values).decode()

    data = {"requestheader-client-ca-file": front.ca_pem.decode(),
            "requestheader-allowed-names": strings(list(front.allowed_names)),
            "requestheader-username-headers": strings(["X-Remote-User"]),
            "requestheader-uid-headers": strings([]),
            "requestheader-group-headers": strings(["X-Remote-Group"]),
            "requestheader-extra-headers-prefix": strings(["X-Remote-Extra-"])}
    if client_ca_pem:
        data["client-ca-file"] = client_ca_pem.decode()
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"}, "data": data}


__all__: list[Any] = ["Aggregator", "extension_apiserver_authentication", "identity_headers", "unavailable"]
