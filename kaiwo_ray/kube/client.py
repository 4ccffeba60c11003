"""An async client for every resource in `resources.py`, over the official `kubernetes.aio` package.

It uses the package's configuration, auth and aiohttp session, but sends and parses with orjson
into plain dicts instead of building the generated per-field model objects: that is the
controllers' hot path, and the objects are fed to pydantic models and the renderer as dicts anyway.
Every non-2xx answer raises a typed `KubeError` subclass.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import orjson
from yarl import URL

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.kube.errors import KubeError, NotLeader, TransportError, WatchIdle, error_from_response
from kaiwo_ray.kube.incluster import InClusterConfig
from kaiwo_ray.kube.lean_http import (
    DRAIN_ABOVE,
    IDEMPOTENT,
    NO_BODY_STATUSES,
    TRANSPORT_ERRORS,
    Disconnected,
    IdleCut,
    Pool,
    Response,
    read_body,
    read_chunks,
    read_head,
)
from kaiwo_ray.kube.projection import DecodeError, PageDecoder
from kaiwo_ray.kube.resources import Resource
from kaiwo_ray.kube.stats import RequestStats

log = logging.getLogger(__name__)

FIELD_MANAGER = "kaiwo-ray"
_AUTH_TTL_SECONDS = 60.0

PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}


class KubeClient:
    """Thin async verbs: get, list, create, replace, apply, patch, delete, watch."""

    def __init__(self, api_client: Any, *, request_timeout: float = 30.0, user_agent: str = "kaiwo-ray") -> None:
        self._api = api_client
        self._timeout = request_timeout
        self._user_agent = user_agent
        self._auth: str | None = None
        self._auth_expires = 0.0
        self._lean: Pool | None = None
        self._lean_checked = False
        self._prefix = ""
        self._host_header = ""
        # Asked immediately before every write (not GET/HEAD): False refuses it with NotLeader. The
        # controller host sets it to its elector's `may_write`, fencing a leader that lost its Lease.
        self.write_guard: Callable[[], bool] | None = None
        self.requests = RequestStats()  # rest_client_requests_total, read by the admin API's /metrics

    @property
    def server(self) -> str:
        """The API server's URL, as the kubeconfig or in-cluster settings gave it."""
        return str(self._api.configuration.host)

    @classmethod
    async def from_kubeconfig(cls, path: str | None = None, context: str | None = None) -> KubeClient:
        from kubernetes.aio import client as aio_client
        from kubernetes.aio import config as aio_config

        configuration = aio_client.Configuration()
        load: Any = aio_config.load_kube_config  # untyped upstream
        await load(config_file=path, context=context, client_configuration=configuration)
        return cls(aio_client.ApiClient(_without_netrc_lookup(configuration)))

    @classmethod
    def in_cluster(cls, config: InClusterConfig | None = None) -> KubeClient:
        """The pod's service account (kube/incluster.py). The token file is re-read whenever credentials
        are asked for (every minute, and at once after a 401), so a rotated token is picked up."""
        from kubernetes.aio import client as aio_client

        from kaiwo_ray.kube import incluster

        settings = config or incluster.load()
        configuration: Any = aio_client.Configuration()  # typed upstream with refresh_api_key_hook: None
        configuration.host = settings.host
        configuration.ssl_ca_cert = str(settings.ca_path)
        configuration.api_key_prefix["BearerToken"] = "Bearer"
        configuration.api_key["BearerToken"] = settings.token()

        def reread_token(conf: Any) -> None:
            try:
                conf.api_key["BearerToken"] = settings.token()
            except incluster.InClusterError as err:  # mid-rotation (the kubelet swaps a symlink): keep the last
                log.warning("%s; keeping the previous token", err)

        configuration.refresh_api_key_hook = reread_token
        return cls(aio_client.ApiClient(_without_netrc_lookup(configuration)))

    async def close(self) -> None:
        if self._lean is not None:
            self._lean.close()
        await self._api.close()

    # -- transport ---------------------------------------------------------------------------

    def _session(self) -> aiohttp.ClientSession:
        """The package's own aiohttp session (its TLS context, proxy and pool settings)."""
        rest = self._api.rest_client
        if rest.pool_manager is None:
            rest.pool_manager = rest._create_pool_manager()
        session: aiohttp.ClientSession = rest.pool_manager
        return session

    async def _authorization(self, *, refresh: bool = False) -> str | None:
        """The Authorization header from the package's configuration (which runs its token-refresh
        hooks), cached for a minute instead of being rebuilt on every request."""
        now = time.monotonic()
        if refresh or now >= self._auth_expires:
            settings = await self._api.configuration.auth_settings()
            bearer = settings.get("BearerToken")
            self._auth = bearer["value"] if bearer else None
            self._auth_expires = now + _AUTH_TTL_SECONDS
        return self._auth

    async def _send(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                    body: Any = None, content_type: str = "application/json",
                    timeout: float | None = None, headers: Sequence[tuple[str, str]] = ()) -> aiohttp.ClientResponse:
        """One request; returns the aiohttp response (status already checked).

        The generated client's request path (param_serialize, sanitize_for_serialization, stdlib
        json, its retry wrapper) would be ~45% of a reconcile's CPU: this sends orjson bytes on the same
        session instead. A 401 refreshes the token once (expired exec/OIDC credentials)."""
        configuration = self._api.configuration
        url = configuration.host + path + _query_suffix(query)
        data = None if body is None else orjson.dumps(body)
        extra: dict[str, Any] = {}
        if configuration.proxy:
            extra["proxy"] = configuration.proxy
        if configuration.tls_server_name:
            extra["server_hostname"] = configuration.tls_server_name
        client_timeout = aiohttp.ClientTimeout(total=timeout or self._timeout)
        for attempt in (0, 1):
            sent = [("Accept", "application/json"), ("Content-Type", content_type), ("User-Agent", self._user_agent)]
            auth = await self._authorization(refresh=attempt > 0)
            if auth:
                sent.append(("Authorization", auth))
            sent += headers
            try:
                response = await self._session().request(method, url, data=data, headers=sent,
                                                         timeout=client_timeout, **extra)
            except (TimeoutError, OSError, aiohttp.ClientError) as exc:
                self.requests.record("<error>", method)
                raise TransportError(0, "TransportError", f"{method} {path}: {exc}") from exc
            self.requests.record(response.status, method)
            if response.status == 401 and attempt == 0:
                response.release()
                continue
            if response.status >= 300:
                try:
                    payload = await response.read()
                except (TimeoutError, OSError, aiohttp.ClientError):
                    payload = b""
                raise error_from_response(response.status, payload, response.headers.get("Retry-After"))
            return response
        raise AssertionError("unreachable")

    def _lean_pool(self) -> Pool | None:
        """The lean transport's connection pool, or None where a proxy applies (the aiohttp
        session then carries every request, proxy support and all).

        Why not aiohttp: its per-request machinery (ClientRequest/ClientResponse objects, a writer
        task, timer and header multidicts, URL re-parsing) costs ~60% of a request's client CPU; this
        writes one buffer and reads the answer with asyncio streams over the same TLS context."""
        if not self._lean_checked:
            self._lean_checked = True
            configuration = self._api.configuration
            origin = URL(configuration.host)
            env_proxy = any(os.environ.get(name) for name in _PROXY_VARIABLES)
            if configuration.proxy or env_proxy or origin.scheme not in ("http", "https") or not origin.raw_host:
                return None
            rest = self._api.rest_client
            self._lean = Pool(origin.raw_host, origin.port or (443 if origin.scheme == "https" else 80),
                              rest.ssl_context if origin.scheme == "https" else None,
                              configuration.tls_server_name or None, rest.maxsize or 100)
            self._prefix = origin.raw_path.rstrip("/")
            self._host_header = origin.host_port_subcomponent or origin.raw_host
        return self._lean

    def _head(self, method: str, target: str, content_type: str, auth: str | None, body: bytes | None,
              headers: Sequence[tuple[str, str]] = ()) -> bytes:
        """The request line and headers: the ones aiohttp sent (Accept-Encoding included, so large
        lists still come compressed from a real apiserver)."""
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host_header}", "Accept: application/json",
                 "Accept-Encoding: gzip, deflate", f"Content-Type: {content_type}", f"User-Agent: {self._user_agent}"]
        if auth:
            lines.append(f"Authorization: {auth}")
        lines += [f"{key}: {value}" for key, value in headers]
        if body is not None or method not in ("GET", "HEAD", "OPTIONS", "TRACE"):
            lines.append(f"Content-Length: {len(body) if body is not None else 0}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _lean_send(self, pool: Pool, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                         body: Any = None, content_type: str = "application/json",
                         timeout: float | None = None, headers: Sequence[tuple[str, str]] = ()) -> Response:
        """One request on the lean transport; returns the answer with its body unread (status
        checked). Same contract as `_send`: 401 refreshes the token once, non-2xx raises a typed
        KubeError, no answer raises TransportError. The body must be read and `_finish`ed."""
        target = self._prefix + _encoded_path(path) + _query_suffix(query)
        data = None if body is None else orjson.dumps(body)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout or self._timeout)
        for attempt in (0, 1):
            head = self._head(method, target, content_type, await self._authorization(refresh=attempt > 0), data,
                              headers)
            try:
                response = await self._exchange(pool, method, path, head if data is None else head + data,
                                                deadline, large=data is not None and len(data) > DRAIN_ABOVE)
            except TransportError:
                self.requests.record("<error>", method)
                raise
            self.requests.record(response.status, method)
            if response.status == 401 and attempt == 0:
                await self._read_and_finish(pool, response)
                continue
            if response.status >= 300:
                payload = await self._read_and_finish(pool, response)
                raise error_from_response(response.status, payload, response.headers.get("retry-after"))
            return response
        raise AssertionError("unreachable")

    async def _exchange(self, pool: Pool, method: str, path: str, request: bytes, deadline: float, *,
                        large: bool) -> Response:
        """Send `request` and read the answer's head. A reused connection the server had closed
        meanwhile is retried once on a fresh one for idempotent methods, as aiohttp does."""
        loop = asyncio.get_running_loop()
        fresh = False
        while True:
            try:
                conn = await pool.acquire(deadline, fresh=fresh)
            except (TimeoutError, OSError) as exc:
                raise TransportError(0, "TransportError", f"{method} {path}: {exc or 'connect timed out'}") from exc
            # One timer per request that cuts the connection at the deadline (a pending read then
            # fails), instead of a timeout context per read.
            timer = loop.call_at(deadline, conn.abort)
            try:
                conn.writer.write(request)
                if large:
                    await conn.writer.drain()
                status, headers, keep_alive = await read_head(conn)
                response = Response(status, headers, conn, keep_alive)
                response.bodiless = method == "HEAD" or status in NO_BODY_STATUSES
            except Disconnected as exc:
                timer.cancel()
                pool.release(conn, reusable=False)
                if loop.time() >= deadline:  # our own timer cut it
                    raise _transport_error(method, path, exc, True) from exc
                if method in IDEMPOTENT and not fresh:
                    fresh = True
                    continue
                raise TransportError(0, "TransportError", f"{method} {path}: server disconnected") from None
            except BaseException as exc:
                timer.cancel()
                pool.release(conn, reusable=False)
                if isinstance(exc, TRANSPORT_ERRORS):
                    raise _transport_error(method, path, exc, loop.time() >= deadline) from exc
                raise
            response.timer = timer
            response.deadline = deadline
            return response

    @staticmethod
    def _finish(pool: Pool, response: Response, *, complete: bool = True) -> None:
        """Give the connection back: to the pool when its answer was read to the end, else closed."""
        if response.timer is not None:
            response.timer.cancel()
        pool.release(response.conn, reusable=complete and response.keep_alive)

    async def _read_and_finish(self, pool: Pool, response: Response) -> bytes:
        """The body of an answer that is not returned (an error's Status); the connection goes
        back to the pool when it was read to the end, else is closed (b"" then)."""
        complete = False
        try:
            payload = await read_body(response)
            complete = True
            return payload
        except TRANSPORT_ERRORS:
            return b""
        finally:
            self._finish(pool, response, complete=complete)

    async def _lean_request(self, pool: Pool, method: str, path: str, *, decode: PageDecoder | None = None,
                            **kwargs: Any) -> Any:
        response = await self._lean_send(pool, method, path, **kwargs)
        complete = False
        try:
            data = await read_body(response)
            complete = True
        except TRANSPORT_ERRORS as exc:  # the body can fail after the headers
            timed_out = asyncio.get_running_loop().time() >= response.deadline
            raise _transport_error(method, path, exc, timed_out) from exc
        finally:
            self._finish(pool, response, complete=complete)
        return _decoded(data, method, path, decode) if data else None

    async def _lean_watch(self, pool: Pool, res: Resource, namespace: str | None, query: Mapping[str, Any],
                          timeout: float, idle_timeout: float | None,
                          on_open: Callable[[], None] | None) -> AsyncGenerator[JsonObj, None]:
        try:  # a watch answers its head at once: a silent server here is as dead as one mid-stream
            async with asyncio.timeout(idle_timeout):
                response = await self._lean_send(pool, "GET", res.path(namespace), query=query, timeout=timeout)
        except TimeoutError as exc:
            raise _idle(res, idle_timeout) from exc
        if on_open is not None:
            on_open()
        complete = False
        chunks = read_chunks(response)
        buffer = b""
        idle = IdleCut(response.conn, idle_timeout) if idle_timeout is not None else None
        try:
            while True:
                if idle is not None:
                    idle.waiting()
                try:
                    chunk = await anext(chunks)
                except StopAsyncIteration:
                    complete = True
                    break
                except TRANSPORT_ERRORS as exc:
                    if idle is not None and idle.cut:
                        raise _idle(res, idle_timeout) from exc
                    raise TransportError(0, "TransportError", f"watch {res.plural}: {exc}") from exc
                if idle is not None:
                    idle.heard()
                buffer += chunk
                if b"\n" not in chunk:
                    continue
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    line = line.strip()
                    if line:
                        yield _json(line, "watch", res.plural)
            if buffer.strip():  # a last line without its newline, as aiohttp's readline returns it
                yield _json(buffer.strip(), "watch", res.plural)
        finally:
            if idle is not None:
                idle.stop()
            await chunks.aclose()
            self._finish(pool, response, complete=complete)

    async def request(self, method: str, path: str, *, decode: PageDecoder | None = None, **kwargs: Any) -> Any:
        """`decode`: how to decode a list answer (projection.page_decoder) instead of whole; `headers`
        (pairs, a name may repeat) are sent besides the client's own: impersonation, for one."""
        if self.write_guard is not None and method not in ("GET", "HEAD") and not self.write_guard():
            raise NotLeader(0, "NotLeader", f"{method} {path}: not the leader (lease not held or not renewed in time)")
        pool = self._lean_pool()
        if pool is not None:
            return await self._lean_request(pool, method, path, decode=decode, **kwargs)
        response = await self._send(method, path, **kwargs)
        try:
            data = await response.read()
        except (TimeoutError, OSError, aiohttp.ClientError) as exc:  # the body can fail after the headers
            raise TransportError(0, "TransportError", f"{method} {path}: {exc}") from exc
        return _decoded(data, method, path, decode) if data else None

    # -- verbs ---------------------------------------------------------------------------------

    async def get(self, res: Resource, name: str, namespace: str | None = None, *,
                  subresource: str | None = None) -> JsonObj:
        result: JsonObj = await self.request("GET", res.path(namespace, name, subresource))
        return result

    async def list(self, res: Resource, namespace: str | None = None, *, label_selector: str | None = None,
                   field_selector: str | None = None, limit: int | None = None,
                   continue_token: str | None = None, resource_version: str | None = None,
                   decode: PageDecoder | None = None) -> JsonObj:
        query = {"labelSelector": label_selector, "fieldSelector": field_selector, "limit": limit,
                 "continue": continue_token, "resourceVersion": resource_version}
        result: JsonObj = await self.request("GET", res.path(namespace), query=query, decode=decode)
        return result

    async def list_all(self, res: Resource, namespace: str | None = None, *, label_selector: str | None = None,
                       page_size: int = 500, each: Callable[[JsonObj], JsonObj] | None = None,
                       decode: PageDecoder | None = None) -> tuple[builtins.list[JsonObj], str]:
        """Every item, following continue tokens; returns (items, resourceVersion of the list).
        `each` maps every item as its page arrives (a page's full objects are garbage before the next
        one is read: mapped at the end, all of them were alive at once); `decode` decodes each page
        (a projection of its items, see `projection`)."""
        items: builtins.list[JsonObj] = []
        token: str | None = None
        while True:
            page = await self.list(res, namespace, label_selector=label_selector, limit=page_size,
                                   continue_token=token, decode=decode)
            got = page.get("items") or []
            items.extend(got if each is None else map(each, got))
            meta = page.get("metadata") or {}
            token = meta.get("continue") or None
            if not token:
                return items, str(meta.get("resourceVersion", ""))

    async def create(self, res: Resource, body: JsonObj, namespace: str | None = None, *,
                     field_manager: str = FIELD_MANAGER, answer: bool = True) -> JsonObj:
        """`answer` False: the created object is not decoded ({} is returned), for a writer that never
        reads it (an Event: two a workload, each answer as long as the Event)."""
        ns = namespace or (body.get("metadata") or {}).get("namespace")
        result: JsonObj = await self.request("POST", res.path(ns), body=body, query={"fieldManager": field_manager},
                                             decode=None if answer else _unread)
        return result

    async def replace(self, res: Resource, body: JsonObj, *, subresource: str | None = None,
                      field_manager: str = FIELD_MANAGER) -> JsonObj:
        meta = body.get("metadata") or {}
        path = res.path(meta.get("namespace"), meta["name"], subresource)
        result: JsonObj = await self.request("PUT", path, body=body, query={"fieldManager": field_manager})
        return result

    async def apply(self, res: Resource, body: JsonObj, *, field_manager: str = FIELD_MANAGER,
                    force: bool = True, subresource: str | None = None) -> JsonObj:
        """Server-side apply: send only the fields we own; `force` takes them over from others."""
        meta = body.get("metadata") or {}
        path = res.path(meta.get("namespace"), meta["name"], subresource)
        query = {"fieldManager": field_manager, "force": "true" if force else None}
        result: JsonObj = await self.request("PATCH", path, body=body, query=query,
                                             content_type=PATCH_TYPES["apply"])
        return result

    async def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None,
                    field_manager: str = FIELD_MANAGER) -> JsonObj:
        result: JsonObj = await self.request("PATCH", res.path(namespace, name, subresource), body=patch,
                                             query={"fieldManager": field_manager},
                                             content_type=PATCH_TYPES[patch_type])
        return result

    async def delete(self, res: Resource, name: str, namespace: str | None = None, *,
                     propagation_policy: str | None = "Background", uid: str | None = None) -> JsonObj | None:
        """Delete; `uid` adds a precondition so we never delete a same-named successor."""
        options: JsonObj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if uid:
            options["preconditions"] = {"uid": uid}
        result: JsonObj | None = await self.request("DELETE", res.path(namespace, name), body=options)
        return result

    async def stream(self, path: str, *, query: Mapping[str, Any] | None = None,
                     timeout: float = 3600.0) -> AsyncGenerator[bytes, None]:
        """A raw streaming GET (pod logs): body chunks as they arrive, until the server ends it."""
        response = await self._send("GET", path, query=query, timeout=timeout)
        try:
            async for chunk in response.content.iter_any():
                yield chunk
        except (TimeoutError, OSError, aiohttp.ClientError) as exc:
            raise TransportError(0, "TransportError", f"GET {path}: {exc}") from exc
        finally:
            response.release()

    async def watch(self, res: Resource, namespace: str | None = None, *, resource_version: str,
                    timeout_seconds: int = 300, allow_bookmarks: bool = True,
                    label_selector: str | None = None, idle_timeout: float | None = None,
                    on_open: Callable[[], None] | None = None) -> AsyncIterator[JsonObj]:
        """Yield watch events ({type, object}) until the server ends the stream.

        An ERROR event is yielded as is (the caller relists on code 410). With `idle_timeout`, a
        stream that sends nothing (bookmarks count) for that long raises WatchIdle. `on_open` is
        called once the server accepted the watch (its answer's head is a 200)."""
        query = {"watch": "1", "resourceVersion": resource_version, "timeoutSeconds": timeout_seconds,
                 "allowWatchBookmarks": "true" if allow_bookmarks else None, "labelSelector": label_selector}
        pool = self._lean_pool()
        if pool is not None:
            events = self._lean_watch(pool, res, namespace, query, timeout_seconds + 30, idle_timeout, on_open)
            try:
                async for event in events:
                    yield event
            finally:  # a caller that stops early frees the connection now, not when collected
                await events.aclose()
            return
        try:
            async with asyncio.timeout(idle_timeout):
                response = await self._send("GET", res.path(namespace), query=query, timeout=timeout_seconds + 30)
        except TimeoutError as exc:
            raise _idle(res, idle_timeout) from exc
        if on_open is not None:
            on_open()
        stream = response.content
        try:
            while True:
                try:
                    if idle_timeout is None:
                        line = await stream.readline()
                    else:
                        try:
                            async with asyncio.timeout(idle_timeout):
                                line = await stream.readline()
                        except TimeoutError as exc:
                            raise _idle(res, idle_timeout) from exc
                except (TimeoutError, OSError, aiohttp.ClientError) as exc:
                    raise TransportError(0, "TransportError", f"watch {res.plural}: {exc}") from exc
                if not line:
                    return
                line = line.strip()
                if line:
                    yield _json(line, "watch", res.plural)
        finally:
            response.release()


# Characters a request path may hold as is (RFC 3986 unreserved, sub-delims, ':', '@', '/'): a path
# made only of these (every Kubernetes path is) needs no encoding, so yarl can skip its own pass.
_PATH_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/")


_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def _without_netrc_lookup(configuration: Any) -> Any:
    """The package's aiohttp session trusts the environment, which makes aiohttp look ~/.netrc up on
    a worker thread before every request (our requests carry a bearer token, so it never applies):
    a thread hop per request, which on a busy machine costs more than the request. The environment
    is still trusted when it names a proxy, the one setting of it that matters to us."""
    if not any(os.environ.get(name) for name in _PROXY_VARIABLES):
        configuration.client_session_kwargs = {"trust_env": False}
    return configuration


def _json(data: bytes, method: str, path: str) -> Any:
    """A body or watch line, decoded; bytes that are not JSON (a cut stream, a proxy's error page)
    are a TransportError like any other broken answer, never a bare decode error."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TransportError(0, "TransportError", f"{method} {path}: malformed JSON in the answer: {exc}") from exc


def _unread(data: bytes) -> JsonObj:
    return {}


def _decoded(data: bytes, method: str, path: str, decode: PageDecoder | None) -> Any:
    """`data` decoded by `decode` (a list answer's projection) or whole; either way bytes that do not
    decode are a TransportError."""
    if decode is None:
        return _json(data, method, path)
    try:
        return decode(data)
    except DecodeError as exc:
        raise TransportError(0, "TransportError", f"{method} {path}: malformed list in the answer: {exc}") from exc


def _idle(res: Resource, idle_timeout: float | None) -> WatchIdle:
    return WatchIdle(0, "WatchIdle", f"watch {res.plural}: nothing received for {idle_timeout:.0f}s")


def _transport_error(method: str, path: str, exc: BaseException, timed_out: bool) -> TransportError:
    reason = "timed out" if timed_out else (str(exc) or type(exc).__name__)
    return TransportError(0, "TransportError", f"{method} {path}: {reason}")


_QUERY_STRINGS: dict[tuple[tuple[str, str], ...], str] = {}


def _query_suffix(query: Mapping[str, Any] | None) -> str:
    """"?k=v&..." for the query's non-None values ("" when there are none), for either transport."""
    if not query:
        return ""
    params = tuple((k, str(v)) for k, v in query.items() if v is not None)
    return "?" + _query_string(params) if params else ""


def _query_string(params: tuple[tuple[str, str], ...]) -> str:
    """`urlencode`, memoized: the hot queries repeat (fieldManager, force) and urlencode's quoting
    costs ~1% of the operator's CPU. Bounded by starting over (watch resourceVersions never repeat)."""
    encoded = _QUERY_STRINGS.get(params)
    if encoded is None:
        if len(_QUERY_STRINGS) >= 256:
            _QUERY_STRINGS.clear()
        encoded = _QUERY_STRINGS[params] = urlencode(params)
    return encoded


def _encoded_path(path: str) -> str:
    return path if _PATH_SAFE.issuperset(path) else quote(path, safe="/:@!$&'()*+,;=-._~")


__all__ = ["FIELD_MANAGER", "KubeClient", "KubeError"]
