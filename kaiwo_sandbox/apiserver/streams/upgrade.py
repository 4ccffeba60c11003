"""The plain SPDY/3.1 upgrade of exec, attach and port-forward, as kubectl before 1.30 (and kubectl with
`KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false` / `KUBECTL_PORT_FORWARD_WEBSOCKETS=false`) and client-go's SPDY
executor speak it: `Upgrade: SPDY/3.1` with the stream protocols offered in `X-Stream-Protocol-Version`;
the server answers 101 with the one it chose and the connection carries SPDY/3.1 frames.

The streams' code is written against a websocket (`WebSocketResponse`); this module gives them objects
that look like one, so each behaviour exists once:
- `SpdyChannels` (exec, attach): each SPDY stream the client opens names its `streamType` (error, stdin,
  stdout, stderr, resize); a channel frame `[channel][data]` written here goes to that stream, the stdin
  stream's data comes back as channel-0 frames and its end as v5's close signal `[255, 0]`, and closing
  ends every stream and the connection, as the kubelet does once the Status is on the error stream.
- `RawTunnel` (port-forward): the SPDY bytes themselves, in and out, for `spdy.PortForwardSession` and
  the real pods' tunnel, which already speak SPDY inside a websocket.

aiohttp takes a connection over only for a websocket or `tcp` upgrade, so the lean front hands a SPDY
upgrade to aiohttp as `Upgrade: tcp`, keeping the original in `X-Sandbox-Upgrade` (`fastpath.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from aiohttp import WSMessage, WSMsgType, web

from kaiwo_sandbox.apiserver.streams import spdy
from kaiwo_sandbox.contracts import ApiError

SPDY_UPGRADE = "SPDY/3.1"
ORIGINAL_UPGRADE_HEADER = "X-Sandbox-Upgrade"  # what the lean front saw in `Upgrade` before it wrote `tcp`
EXEC_SPDY_PROTOCOLS = ("v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io")
PORTFORWARD_SPDY_PROTOCOLS = ("portforward.k8s.io",)
STREAM_WAIT_SECONDS = 30.0  # how long the server waits for the client's streams (the kubelet: 30 s)
_CHANNELS = {"stdin": 0, "stdout": 1, "stderr": 2, "error": 3, "resize": 4}
_CLOSED = WSMessage(WSMsgType.CLOSED, None, None)


def wants_spdy(request: web.Request) -> bool:
    upgrade = request.headers.get(ORIGINAL_UPGRADE_HEADER) or request.headers.get("Upgrade") or ""
    return upgrade.lower() == SPDY_UPGRADE.lower()


def negotiate(offered: list[str], supported: tuple[str, ...]) -> str:
    """The first of the client's protocols the server speaks; 403 with the kubelet's words otherwise."""
    for protocol in offered:
        if protocol.strip() in supported:
            return protocol.strip()
    raise ApiError(403, "Forbidden", f"unable to upgrade: unable to negotiate protocol: client supports "
                                     f"{offered}, server supports {list(supported)}")


class _Feed:
    """What aiohttp feeds an upgraded connection's bytes to (its payload-parser interface)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if data:
            self.queue.put_nowait(bytes(data))
        return False, b""

    def feed_eof(self) -> None:
        self.queue.put_nowait(b"")


class RawTunnel:
    """The upgraded connection as a websocket-like byte pipe: every read is one BINARY message."""

    def __init__(self, supported: tuple[str, ...]) -> None:
        self.supported = supported
        self.ws_protocol: str | None = None
        self.closed = False
        self._request: web.Request | None = None
        self._response: web.StreamResponse | None = None
        self._feed = _Feed()

    async def prepare(self, request: web.Request) -> None:
        chosen = negotiate(request.headers.getall("X-Stream-Protocol-Version", []), self.supported)
        response = web.StreamResponse(status=101, reason="Switching Protocols", headers={
            "Connection": "Upgrade", "Upgrade": SPDY_UPGRADE, "X-Stream-Protocol-Version": chosen})
        response._length_check = False  # as aiohttp's WebSocketResponse: no body framing after a 101
        await response.prepare(request)
        request.protocol.set_parser(self._feed)  # type: ignore[arg-type]  # aiohttp types it for websockets only
        self._request, self._response, self.ws_protocol = request, response, chosen

    async def send_bytes(self, data: bytes) -> None:
        if self.closed or self._response is None:
            return
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self._response.write(data)

    async def receive(self) -> bytes:
        """The next bytes from the client; b"" once it is gone."""
        return b"" if self.closed else await self._feed.queue.get()

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        transport = self._request.transport if self._request is not None else None
        if transport is not None:
            transport.close()

    @property
    def response(self) -> web.StreamResponse:
        assert self._response is not None, "prepare() first"
        return self._response

    def __aiter__(self) -> AsyncIterator[WSMessage]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[WSMessage]:
        while data := await self.receive():
            yield WSMessage(WSMsgType.BINARY, data, None)
        yield _CLOSED


class SpdyChannels:
    """exec and attach over SPDY, shaped as the websocket channel protocol the streams code speaks."""

    def __init__(self, request: web.Request) -> None:
        query = request.query
        tty = query.get("tty") in ("true", "1")
        wanted = {"error"}
        wanted |= {name for name in ("stdin", "stdout") if query.get(name) in ("true", "1")}
        if query.get("stderr") in ("true", "1") and not tty:
            wanted.add("stderr")
        if tty:
            wanted.add("resize")
        self._wanted = wanted
        self._tunnel = RawTunnel(EXEC_SPDY_PROTOCOLS)
        self._frames = spdy.FrameReader()
        self._codec = spdy.HeaderCodec()
        self._streams: dict[str, int] = {}  # streamType -> SPDY stream id
        self._inbox: asyncio.Queue[WSMessage] = asyncio.Queue()
        self._ready = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    @property
    def ws_protocol(self) -> str:
        # v4 carries the Status, as a websocket's v4/v5 do; SPDY ends stdin on its own (no Ctrl-D), as v5.
        return "v5.channel.k8s.io" if self._tunnel.ws_protocol == "v4.channel.k8s.io" else "channel.k8s.io"

    @property
    def closed(self) -> bool:
        return self._tunnel.closed

    @property
    def response(self) -> web.StreamResponse:
        return self._tunnel.response

    async def prepare(self, request: web.Request) -> None:
        await self._tunnel.prepare(request)
        self._reader = asyncio.ensure_future(self._read())
        try:
            async with asyncio.timeout(STREAM_WAIT_SECONDS):
                await self._ready.wait()
        except TimeoutError:
            await self.close()

    async def _write(self, data: bytes) -> None:
        async with self._lock:
            await self._tunnel.send_bytes(data)

    async def _read(self) -> None:
        """Answer the client's streams and frames; stdin becomes channel-0 messages."""
        stdin_done = False
        while data := await self._tunnel.receive():
            for frame in self._frames.feed(data):
                if frame.control and frame.kind == spdy.SYN_STREAM:
                    headers = self._codec.decode(frame.payload)
                    self._streams[headers.get("streamtype", "")] = frame.stream_id
                    await self._write(spdy.syn_reply(frame.stream_id, self._codec))
                    if self._wanted <= self._streams.keys():
                        self._ready.set()
                elif frame.control and frame.kind == spdy.PING:
                    await self._write(spdy.control_frame(spdy.PING, 0, frame.payload))
                elif not frame.control and frame.stream_id == self._streams.get("stdin") and not stdin_done:
                    if frame.payload:
                        self._inbox.put_nowait(WSMessage(WSMsgType.BINARY, b"\x00" + frame.payload, None))
                    if frame.flags & spdy.FLAG_FIN:
                        stdin_done = True
                        self._inbox.put_nowait(WSMessage(WSMsgType.BINARY, b"\xff\x00", None))
        self._inbox.put_nowait(_CLOSED)

    async def send_bytes(self, data: bytes) -> None:
        if not data:
            return
        kind = next((name for name, channel in _CHANNELS.items() if channel == data[0]), None)
        stream = self._streams.get(kind or "")
        if stream is not None:
            await self._write(spdy.data_frame(stream, data[1:]))

    async def close(self) -> None:
        """End every stream, then the connection (what the client reads as the end of the exec)."""
        if self._tunnel.closed:
            return
        for stream in self._streams.values():
            await self._write(spdy.data_frame(stream, b"", fin=True))
        await self._write(spdy.control_frame(spdy.GOAWAY, 0, b"\x00\x00\x00\x00\x00\x00\x00\x00"))
        await self._tunnel.close()
        if self._reader is not None:
            self._reader.cancel()
        self._inbox.put_nowait(_CLOSED)  # whoever still reads stdin learns the connection is gone

    def __aiter__(self) -> AsyncIterator[WSMessage]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[WSMessage]:
        while True:
            message = await self._inbox.get()
            yield message
            if message.type == WSMsgType.CLOSED:
                return


Channels = web.WebSocketResponse | SpdyChannels  # what exec and attach write to
Tunnel = web.WebSocketResponse | RawTunnel  # what a port-forward's SPDY session runs over
Answer = web.StreamResponse | SpdyChannels | RawTunnel  # what a stream handler ends with


def response_of(answer: Answer) -> web.StreamResponse:
    """The aiohttp response a stream handler returns: a SPDY upgrade's is its prepared 101."""
    return answer.response if isinstance(answer, (RawTunnel, SpdyChannels)) else answer


def open_channels(request: web.Request, protocols: tuple[str, ...]) -> Channels:
    """What exec and attach write their channels to: a websocket, or SPDY streams made to look like one."""
    return SpdyChannels(request) if wants_spdy(request) else web.WebSocketResponse(protocols=protocols)


def open_tunnel(request: web.Request) -> Tunnel:
    """What port-forward's SPDY session runs over: inside a websocket, or straight on the connection."""
    if wants_spdy(request):
        return RawTunnel(PORTFORWARD_SPDY_PROTOCOLS)
    return web.WebSocketResponse(protocols=(spdy.TUNNEL_PROTOCOL,))
