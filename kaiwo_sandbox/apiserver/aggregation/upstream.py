"""The proxy's lean HTTP/1.1 client for requests that are not watches: keep-alive TLS connections per
backend over asyncio streams, the head written by hand, the answer read by Content-Length or chunks.

Why not aiohttp's client here: its per-request machinery costs more CPU than the rest of a proxied
request together, and on the machines the sandbox runs on CPU is latency (benchmarks/admin_api.py
measures what the aggregator adds). Watches, which stream, still go through aiohttp (proxy.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time

IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
IDLE_SECONDS = 30.0  # an idle connection older than this is closed rather than reused
READ_LIMIT = 2**22
Address = tuple[str, int, str | None, int]  # host, port, TLS server name, id() of the TLS context
Headers = list[tuple[str, str]]


class Reset(Exception):
    """A reused connection closed before any answer came: resending an idempotent request is safe."""


class _Conn:
    __slots__ = ("idle_since", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.idle_since = reader, writer, 0.0

    def close(self) -> None:
        self.writer.transport.abort()


class Upstream:
    def __init__(self) -> None:
        self._idle: dict[Address, list[_Conn]] = {}

    async def request(self, host: str, port: int, context: ssl.SSLContext, server_name: str | None, method: str,
                      target: str, headers: Headers, body: bytes | None, timeout: float) -> tuple[int, Headers, bytes]:
        """(status, headers, body). OSError, ssl.SSLError or TimeoutError when no answer could be had."""
        address = (host, port, server_name, id(context))
        async with asyncio.timeout(timeout):
            conn = self._take(address)
            if conn is not None:
                try:
                    return await self._exchange(address, conn, method, target, headers, body)
                except Reset:
                    if method not in IDEMPOTENT:
                        raise ConnectionResetError("connection reset by peer") from None
            reader, writer = await asyncio.open_connection(host, port, ssl=context, server_hostname=server_name or "",
                                                           limit=READ_LIMIT)
            try:
                return await self._exchange(address, _Conn(reader, writer), method, target, headers, body)
            except Reset:
                raise ConnectionResetError("EOF") from None

    def _take(self, address: Address) -> _Conn | None:
        pool = self._idle.get(address)
        now = time.monotonic()
        while pool:
            conn = pool.pop()
            if not conn.writer.transport.is_closing() and not conn.reader.at_eof() and now - conn.idle_since < IDLE_SECONDS:
                return conn
            conn.close()
        return None

    async def _exchange(self, address: Address, conn: _Conn, method: str, target: str, headers: Headers,
                        body: bytes | None) -> tuple[int, Headers, bytes]:
        lines = [f"{method} {target} HTTP/1.1", *(f"{k}: {v}" for k, v in headers)]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        conn.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))
        try:
            head = await conn.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            conn.close()
            if isinstance(exc, asyncio.IncompleteReadError) and not exc.partial:
                raise Reset from None
            raise ConnectionResetError("EOF") from None
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        received = [(k.strip(), v.strip()) for k, _, v in (h.partition(":") for h in header_lines if h)]
        lowered = {k.lower(): v for k, v in received}
        keep_alive = lowered.get("connection", "").lower() != "close"
        try:
            if method == "HEAD" or status in (204, 304):
                data = b""
            elif "content-length" in lowered:
                data = await conn.reader.readexactly(int(lowered["content-length"]))
            elif lowered.get("transfer-encoding", "").lower() == "chunked":
                data = await _chunked(conn.reader)
            else:
                data, keep_alive = await conn.reader.read(), False
        except (asyncio.IncompleteReadError, ConnectionError):
            conn.close()
            raise ConnectionResetError("unexpected EOF") from None
        if keep_alive:
            conn.idle_since = time.monotonic()
            self._idle.setdefault(address, []).append(conn)
        else:
            conn.close()
        return status, received, data

    def close(self) -> None:
        for pool in self._idle.values():
            for conn in pool:
                with contextlib.suppress(Exception):
                    conn.close()
        self._idle.clear()


async def _chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0].strip(), 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers, then the blank line
                pass
            return b"".join(parts)
        parts.append((await reader.readexactly(size + 2))[:-2])
