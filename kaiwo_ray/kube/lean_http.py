"""The lean HTTP/1.1 transport under `KubeClient`: a keep-alive connection pool over asyncio streams,
request heads written by hand, answers read by Content-Length or chunks (gzip and deflate decoded).
It speaks only what the Kubernetes API server answers; `KubeClient` falls back to aiohttp where it
cannot be used (a proxy in the environment) and maps its failures to Kubernetes errors."""

from __future__ import annotations

import asyncio
import ssl
import time
import zlib
from collections.abc import AsyncGenerator
from typing import Any

IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
READ_LIMIT = 2**21  # the package session's read_bufsize: one watch event (a line) can be large
IDLE_SECONDS = 60.0  # older idle connections are dropped, not reused: below aiohttp servers' 75 s keep-alive
# (the sandbox), under client-go's 90 s: a quiet minute costs no new TLS handshake
DRAIN_ABOVE = 2**16  # bodies larger than this wait for the socket buffer (flow control)
NO_BODY_STATUSES = frozenset({204, 304})


class Disconnected(Exception):
    """A reused connection was found closed before any answer came (safe to resend idempotently)."""


class Connection:
    """One keep-alive connection: asyncio streams plus when it was last given back."""

    __slots__ = ("idle_since", "reader", "reused", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reused = False
        self.idle_since = 0.0

    def usable(self, now: float) -> bool:
        return (not self.writer.transport.is_closing() and not self.reader.at_eof()
                and now - self.idle_since < IDLE_SECONDS)

    def abort(self) -> None:
        self.writer.transport.abort()


class Response:
    """Status, headers (lower-case names) and the connection its body is still to be read from."""

    __slots__ = ("bodiless", "conn", "deadline", "decoder", "headers", "keep_alive", "status", "timer")

    def __init__(self, status: int, headers: dict[str, str], conn: Connection, keep_alive: bool) -> None:
        self.status = status
        self.headers = headers
        self.conn = conn
        self.keep_alive = keep_alive
        self.timer: asyncio.TimerHandle | None = None
        self.deadline = 0.0
        self.bodiless = False  # a HEAD's answer, a 204 or a 304: no body whatever the headers say
        encoding = headers.get("content-encoding", "identity").strip().lower()
        self.decoder: Any = None
        if encoding in ("gzip", "x-gzip"):
            self.decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self.decoder = zlib.decompressobj()
        elif encoding != "identity":
            raise ValueError(f"unsupported Content-Encoding {encoding!r}")

    def decode(self, data: bytes) -> bytes:
        return self.decoder.decompress(data) if self.decoder is not None and data else data


class Pool:
    """Keep-alive HTTP/1.1 connections to the apiserver, at most `limit` open at once (watches
    included), like the package's aiohttp connector; the last given back is reused first."""

    def __init__(self, host: str, port: int, ssl_context: ssl.SSLContext | None, server_hostname: str | None,
                 limit: int) -> None:
        self._host = host
        self._port = port
        self._ssl = ssl_context
        self._server_hostname = server_hostname if ssl_context is not None else None
        self._slots = asyncio.Semaphore(limit)
        self._idle: list[Connection] = []
        self._open: set[Connection] = set()  # idle and in use, closed with the pool
        self.opened = 0  # connections opened so far (a TLS handshake each)

    async def acquire(self, deadline: float, *, fresh: bool = False) -> Connection:
        await self._slots.acquire()
        try:
            now = time.monotonic()
            while self._idle and not fresh:
                conn = self._idle.pop()
                if conn.usable(now):
                    conn.reused = True
                    return conn
                self._drop(conn)
            async with asyncio.timeout_at(deadline):
                reader, writer = await asyncio.open_connection(
                    self._host, self._port, ssl=self._ssl, server_hostname=self._server_hostname,
                    limit=READ_LIMIT)
            self.opened += 1
            conn = Connection(reader, writer)
            self._open.add(conn)
            return conn
        except BaseException:
            self._slots.release()
            raise

    def release(self, conn: Connection, *, reusable: bool) -> None:
        if reusable and not conn.writer.transport.is_closing():
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            self._drop(conn)
        self._slots.release()

    def _drop(self, conn: Connection) -> None:
        self._open.discard(conn)
        conn.abort()

    def close(self) -> None:
        """Close every connection, in use ones (watches) included, as closing the aiohttp session did."""
        self._idle.clear()
        while self._open:
            self._open.pop().abort()


async def read_head(conn: Connection) -> tuple[int, dict[str, str], bool]:
    """Status, headers and keep-alive of the next final (non-1xx) answer on `conn`."""
    while True:
        try:
            head = await conn.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if conn.reused and not exc.partial:
                raise Disconnected from exc
            raise
        lines = head.split(b"\r\n")
        version, status_text = lines[0].split(b" ", 2)[:2]
        status = int(status_text)
        if 100 <= status < 200 and status != 101:  # an interim answer: the real one follows
            continue
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(b":")
                key = name.strip().lower().decode("latin-1")
                text = value.strip().decode("latin-1")
                headers[key] = f"{headers[key]}, {text}" if key in headers else text
        connection = headers.get("connection", "").lower()
        keep_alive = "keep-alive" in connection if version == b"HTTP/1.0" else "close" not in connection
        return status, headers, keep_alive


class IdleCut:
    """Cuts a watch's connection once one wait for its next piece lasted `seconds` (the pending read
    then fails and `cut` says why); time the consumer spends on an event never counts. One timer for
    the stream, pushed back lazily when it fires, instead of a timeout scope per chunk, which would cost 4%
    of the operator at 100 workloads a second."""

    __slots__ = ("_conn", "_handle", "_loop", "_seconds", "_since", "_waiting", "cut")

    def __init__(self, conn: Connection, seconds: float) -> None:
        self._conn = conn
        self._seconds = seconds
        self._loop = asyncio.get_running_loop()
        self._since = self._loop.time()  # when the current wait began
        self._waiting = False
        self.cut = False
        self._handle = self._loop.call_at(self._since + seconds, self._check)

    def waiting(self) -> None:
        self._since = self._loop.time()
        self._waiting = True

    def heard(self) -> None:
        self._waiting = False

    def _check(self) -> None:
        now = self._loop.time()
        due = self._since + self._seconds
        if not self._waiting:  # the consumer holds an event: look again a whole timeout later
            self._handle = self._loop.call_at(now + self._seconds, self._check)
            return
        if now < due:  # data came since the timer was set: the wait now running is younger
            self._handle = self._loop.call_at(due, self._check)
            return
        self.cut = True
        self._conn.abort()

    def stop(self) -> None:
        self._handle.cancel()


async def read_chunks(response: Response) -> AsyncGenerator[bytes, None]:
    """The body's pieces as they arrive (decoded); the connection is left at the body's end."""
    reader = response.conn.reader
    transfer = response.headers.get("transfer-encoding", "").lower()
    if response.bodiless:
        return
    if "chunked" in transfer:
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, unused
                    pass
                break
            chunk = await reader.readexactly(size + 2)
            if chunk[-2:] != b"\r\n":
                raise ValueError("malformed chunked body")
            yield response.decode(chunk[:-2])
    elif "content-length" in response.headers:
        remaining = int(response.headers["content-length"])
        while remaining > 0:
            chunk = await reader.read(min(remaining, READ_LIMIT))
            if not chunk:
                raise asyncio.IncompleteReadError(b"", remaining)
            remaining -= len(chunk)
            yield response.decode(chunk)
    else:  # delimited by the end of the connection
        response.keep_alive = False
        while chunk := await reader.read(READ_LIMIT):
            yield response.decode(chunk)
    if response.decoder is not None and (tail := response.decoder.flush()):
        yield tail


async def read_body(response: Response) -> bytes:
    length = response.headers.get("content-length")
    if response.bodiless:
        return b""
    if length is not None and response.decoder is None and "transfer-encoding" not in response.headers:
        return await response.conn.reader.readexactly(int(length))  # the common case: one read
    return b"".join([chunk async for chunk in read_chunks(response)])


TRANSPORT_ERRORS = (TimeoutError, OSError, EOFError, asyncio.LimitOverrunError, ValueError, zlib.error)
"""What a broken, closed, timed-out or garbled connection raises (IncompleteReadError is an EOFError)."""
