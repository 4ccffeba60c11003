"""A lean HTTP/1.1 front for the API server's plain requests; every other request is aiohttp's.

Why: on these machines the API server runs on one core beside the operator, and each request an
operator makes costs it the HTTP framework's share on top of the store's work. aiohttp's application
costs 260-350 us of CPU per request over TLS, where a bare asyncio protocol costs about 50
(`benchmarks/sandbox_http.py`); a KaiwoJob costs the sandbox six requests, the floor operator's two.
Plain requests (a get, a list, a create, a patch, a delete: nearly all of them) need none of what
aiohttp adds beyond parsing and framing, so this protocol parses them itself, hands them to the same
`ApiServer.handle`, and writes its `web.Response` in one piece.

Which requests stay here: GET, POST, PUT, PATCH and DELETE of an `/api`, `/apis` or `/openapi` path
or of /version and the health checks, without percent escapes, not a watch and not a pod stream (log, exec, attach, portforward), HTTP/1.1 or 1.0,
with no body or a Content-Length one within the server's limit, and none of Transfer-Encoding,
Expect, Upgrade or Content-Encoding. The first request on a connection that is anything else (a
watch, kubectl exec's upgrade, the sandbox's control API, a malformed request) hands the connection
to aiohttp for good, with the bytes read so far: aiohttp answers it exactly as before, errors
included. A watch usually has a connection of its own, so a client's pooled connections stay lean.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import deque
from collections.abc import Callable
from functools import lru_cache
from typing import Any, cast
from urllib.parse import parse_qsl

from aiohttp import web
from aiohttp.helpers import parse_content_type, rfc822_formatted_time
from multidict import CIMultiDict, CIMultiDictProxy, MultiDict, MultiDictProxy

from kaiwo_sandbox.apiserver.server import PUBLIC_PATHS, query_flag
from kaiwo_sandbox.apiserver.streams import pods as pod_streams

log = logging.getLogger(__name__)

LEAN_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
# Headers that ask for what only aiohttp does: chunked or compressed bodies, 100-continue, upgrades.
_HANDED_OFF_HEADERS = frozenset({"transfer-encoding", "expect", "upgrade", "content-encoding"})
MAX_HEAD_BYTES = 64 * 1024
_API_PREFIXES = ("/api/", "/apis/", "/openapi/")
# The API roots, and what `ApiServer.handle` answers without auth (a client's first request is often
# GET /version: served here, it keeps that pooled connection lean for the requests after it).
_PLAIN_PATHS = frozenset({"/api", "/apis", *PUBLIC_PATHS})  # a head not complete by then is aiohttp's to refuse


class LeanRequest:
    """What `ApiServer.handle` reads of an aiohttp `web.Request`, for a request parsed here. Nothing
    else is offered: a handler that reads more fails loudly (a 500 from `handle`), and the suite runs
    every API test through this path."""

    __slots__ = ("_body", "_query", "_query_string", "_state", "headers", "method", "path")

    def __init__(self, method: str, path: str, query_string: str, headers: CIMultiDictProxy[str], body: bytes) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self._query_string = query_string
        self._query: MultiDictProxy[str] | None = None
        self._body = body
        self._state: dict[Any, Any] = {}

    @property
    def query(self) -> MultiDictProxy[str]:
        if self._query is None:
            self._query = MultiDictProxy(MultiDict(parse_qsl(self._query_string, keep_blank_values=True)))
        return self._query

    @property
    def body_exists(self) -> bool:
        return bool(self._body)

    @property
    def content_length(self) -> int | None:
        raw = self.headers.get("Content-Length")
        return int(raw) if raw is not None else None

    @property
    def content_type(self) -> str:
        raw = self.headers.get("Content-Type")
        return "application/octet-stream" if raw is None else _content_type(raw)

    async def read(self) -> bytes:
        return self._body

    def get(self, key: Any, default: Any = None) -> Any:
        return self._state.get(key, default)

    def __getitem__(self, key: Any) -> Any:
        return self._state[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._state[key] = value


@lru_cache(maxsize=64)
def _content_type(raw: str) -> str:
    return parse_content_type(raw)[0]  # aiohttp's own parsing: the same answer for odd values too


def _head(method: str, target: str, headers: list[tuple[str, str]]) -> tuple[str, str, int] | None:
    """(path, query string, body length) of a request this path serves, else None (aiohttp's)."""
    if method not in LEAN_METHODS:
        return None
    path, _, query = target.partition("?")
    if not (path.startswith(_API_PREFIXES) or path in _PLAIN_PATHS) or "%" in path or "/." in path:
        return None  # escapes and dot segments: aiohttp normalises those paths
    length = 0
    for name, value in headers:
        lower = name.lower()
        if lower in _HANDED_OFF_HEADERS:
            return None
        if lower == "content-length":
            if not (value.isascii() and value.isdigit()) or length:
                return None  # malformed or repeated: aiohttp answers it
            length = int(value)
    if "watch" in query:  # the first value, as `ApiServer.handle` reads it (aiohttp's query.get)
        watch = next((value for key, value in parse_qsl(query, keep_blank_values=True) if key == "watch"), None)
        if query_flag(watch):
            return None
    if "/watch/" in path:
        return None  # the legacy watch paths
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if last in pod_streams.SUBRESOURCES or last == "attach" or last == "proxy":
        return None
    return path, query, length


class LeanFront:
    """The server's lean connections (closed at its stop), how many requests it served and handed off,
    and when the latest connections were made (a TLS handshake each: what a client's pool growing costs)."""

    def __init__(self) -> None:
        self.live: set[LeanHttp] = set()
        self.served = 0
        self.handed_off = 0  # connections given to aiohttp
        self.made_at: deque[float] = deque(maxlen=4096)  # wall times, the newest last

    def close(self) -> None:
        for connection in list(self.live):
            connection.close()


class LeanHttp(asyncio.Protocol):
    """One connection: requests are parsed and answered one at a time, in order (HTTP/1.1 keep-alive;
    a pipelined request waits in the buffer for the one before it)."""

    def __init__(self, handle: Callable[[web.Request], Any], fallback: Callable[[], asyncio.Protocol],
                 max_body: int, front: LeanFront) -> None:
        self._handle = handle
        self._fallback = fallback
        self._max_body = max_body
        self._front = front
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        self._front.live.add(self)
        self._front.made_at.append(time.time())

    @property
    def busy(self) -> bool:
        """A request of this connection is being answered."""
        return self._task is not None

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._task is None:
            self._next()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._front.live.discard(self)
        if self._task is not None:
            self._task.cancel()  # as aiohttp's handler_cancellation does when the client goes away

    def _next(self) -> None:
        """Start the next buffered request when it is whole; hand the connection off when it is not ours."""
        transport = self._transport
        if transport is None:
            return
        buffer = self._buffer
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(buffer) > MAX_HEAD_BYTES:
                self._hand_off()
            return
        try:
            text = bytes(buffer[:end]).decode()
            if "\n" in text.replace("\r\n", "") or "\x00" in text:
                raise ValueError("a bare line feed or a NUL")
            lines = text.split("\r\n")
            method, target, version = lines[0].split(" ")
            headers = [_header(line) for line in lines[1:]]
        except ValueError:  # UnicodeDecodeError included
            self._hand_off()
            return
        served = _head(method, target, headers) if version in ("HTTP/1.1", "HTTP/1.0") else None
        if served is None or served[2] > self._max_body:
            self._hand_off()
            return
        path, query, length = served
        if len(buffer) < end + 4 + length:
            return  # the body is still on its way
        body = bytes(buffer[end + 4:end + 4 + length])
        del buffer[:end + 4 + length]
        header_map = CIMultiDictProxy(CIMultiDict(headers))
        connection = (header_map.get("Connection") or "").lower()
        keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
        request = LeanRequest(method, path, query, header_map, body)
        self._front.served += 1
        self._task = asyncio.get_running_loop().create_task(self._serve(request, keep_alive))

    async def _serve(self, request: LeanRequest, keep_alive: bool) -> None:
        try:
            response = await self._handle(cast(web.Request, request))
            answer = _encode(response, keep_alive)
        except asyncio.CancelledError:
            raise
        except Exception:  # `handle` answers its own errors; this is a response it built wrong
            log.exception("sandbox: %s %s: the response could not be written", request.method, request.path)
            answer, keep_alive = _INTERNAL_ERROR, False
        finally:
            self._task = None
        transport = self._transport
        if transport is None:
            return
        transport.write(answer)
        if not keep_alive:
            transport.close()
            self._transport = None
            return
        if self._buffer:
            self._next()

    def _hand_off(self) -> None:
        """From now on this connection is aiohttp's, starting with the bytes not yet served."""
        transport = self._transport
        if transport is None:
            return
        self._transport = None
        self._front.live.discard(self)
        self._front.handed_off += 1
        protocol = self._fallback()
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        if self._buffer:
            protocol.data_received(_spdy_as_tcp(bytes(self._buffer)))
            self._buffer.clear()


_SPDY_UPGRADE = re.compile(rb"\r\nupgrade:[ \t]*spdy/3\.1[ \t]*\r\n", re.IGNORECASE)


def _spdy_as_tcp(data: bytes) -> bytes:
    """aiohttp takes a connection over only for a websocket or `tcp` upgrade: a pod stream's SPDY/3.1
    upgrade (kubectl's exec, attach and port-forward before websockets) is handed to it as `tcp`, the
    original kept in a header of its own (`streams/upgrade.py`)."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return data
    head, rest = data[:end + 2], data[end + 2:]
    rewritten = _SPDY_UPGRADE.sub(b"\r\nUpgrade: tcp\r\nX-Sandbox-Upgrade: SPDY/3.1\r\n", head, count=1)
    return rewritten + rest


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def _header(line: str) -> tuple[str, str]:
    name, colon, value = line.partition(":")
    if not colon or not _TOKEN.fullmatch(name):
        raise ValueError(line)  # no colon, or a name that is not a token (a folded line, spaces)
    return name, value.strip(" \t")


_INTERNAL_ERROR = (b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: 21\r\n"
                   b"Connection: close\r\n\r\nInternal Server Error")


def _encode(response: web.StreamResponse, keep_alive: bool) -> bytes:
    """A whole `web.Response` as one write: status line, headers, Date, Content-Length, body."""
    if type(response) is not web.Response:
        raise TypeError(f"a lean request cannot answer with a {type(response).__name__}")
    body = response.body
    if body is not None and not isinstance(body, bytes | bytearray):
        raise TypeError(f"a lean response's body must be bytes, not {type(body).__name__}")
    payload = body or b""
    lines = [f"HTTP/1.1 {response.status} {response.reason}"]
    lines.extend(f"{name}: {value}" for name, value in response.headers.items()
                 if name.lower() not in ("content-length", "connection", "date"))
    lines.append(f"Content-Length: {len(payload)}")
    if not keep_alive:
        lines.append("Connection: close")
    lines.append(f"Date: {rfc822_formatted_time()}")  # aiohttp's own, formatted once a second
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


__all__ = ["LeanFront", "LeanHttp", "LeanRequest"]
