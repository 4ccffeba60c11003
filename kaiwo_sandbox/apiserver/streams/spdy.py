"""`kubectl port-forward` against the sandbox: SPDY/3.1 tunnelled through a websocket.

kubectl 1.31+ opens `pods/NAME/portforward` as a websocket with the subprotocol
`SPDY/3.1+portforward.k8s.io` and speaks SPDY/3.1 inside it (the websocket's binary messages form
one byte stream). Per local connection it opens two SPDY streams carrying the headers `streamtype`
(`error` | `data`), `port` and `requestid`, waits for a SYN_REPLY on each, then copies bytes over
the data stream; the server reports a failure to reach the port on the error stream.

This module is the server half of that, enough for port-forward: frame parsing and writing (pure),
header blocks compressed with zlib and SPDY/3's fixed dictionary, replies to SYN_STREAM and PING,
and the simulated port behind each data stream (`pod_streams.answer`). Flow control
(WINDOW_UPDATE), SETTINGS, RST_STREAM and GOAWAY are read and ignored: the client does not need them.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

TUNNEL_PROTOCOL = "SPDY/3.1+portforward.k8s.io"
VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01

# The SPDY/3 header-compression dictionary (draft-mbelshe-httpbis-spdy-00, section 2.6.10.1): these
# words, each behind its 4-byte big-endian length, then the literal tail below.
_HEADER_WORDS = (
    "options head post put delete trace accept accept-charset accept-encoding accept-language accept-ranges age "
    "allow authorization cache-control connection content-base content-encoding content-language content-length "
    "content-location content-md5 content-range content-type date etag expect expires from host if-match "
    "if-modified-since if-none-match if-range if-unmodified-since last-modified location max-forwards pragma "
    "proxy-authenticate proxy-authorization range referer retry-after server te trailer transfer-encoding upgrade "
    "user-agent vary via warning www-authenticate method get status"
)
_WORDS = [*_HEADER_WORDS.split(), "200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie", "keep-alive", "origin"]
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
    "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
    "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _WORDS) + _TAIL.encode()


@dataclass(frozen=True, slots=True)
class Frame:
    control: bool
    kind: int  # control frame type; 0 for data
    flags: int
    stream_id: int  # data frames, SYN_STREAM, SYN_REPLY, RST_STREAM, HEADERS, WINDOW_UPDATE
    payload: bytes  # after the fixed fields (a header block for SYN_STREAM/SYN_REPLY/HEADERS)


class FrameReader:
    """Turns the tunnel's byte stream into frames (frames may span or share websocket messages)."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames = []
        while len(self._buffer) >= 8:
            first, flags_length = struct.unpack(">II", self._buffer[:8])
            length = flags_length & 0xFFFFFF
            if len(self._buffer) < 8 + length:
                break
            body, self._buffer = self._buffer[8:8 + length], self._buffer[8 + length:]
            flags = flags_length >> 24
            if first & 0x80000000:
                kind = first & 0xFFFF
                stream_id, payload = 0, body
                if kind == SYN_STREAM:
                    stream_id, payload = struct.unpack(">I", body[:4])[0] & 0x7FFFFFFF, body[10:]
                elif kind in (SYN_REPLY, RST_STREAM, HEADERS, WINDOW_UPDATE):
                    stream_id, payload = struct.unpack(">I", body[:4])[0] & 0x7FFFFFFF, body[4:]
                frames.append(Frame(True, kind, flags, stream_id, payload))
            else:
                frames.append(Frame(False, 0, flags, first & 0x7FFFFFFF, body))
        return frames


@dataclass
class HeaderCodec:
    """One zlib context per direction for the whole connection, as SPDY requires."""

    inflate: zlib._Decompress = field(default_factory=lambda: zlib.decompressobj(zdict=DICTIONARY))
    deflate: zlib._Compress = field(default_factory=lambda: zlib.compressobj(9, zdict=DICTIONARY))

    def decode(self, block: bytes) -> dict[str, str]:
        raw = self.inflate.decompress(block)
        (count,) = struct.unpack(">I", raw[:4])
        offset, headers = 4, {}
        for _ in range(count):
            (size,) = struct.unpack(">I", raw[offset:offset + 4])
            name = raw[offset + 4:offset + 4 + size].decode().lower()
            offset += 4 + size
            (size,) = struct.unpack(">I", raw[offset:offset + 4])
            headers[name] = raw[offset + 4:offset + 4 + size].decode()
            offset += 4 + size
        return headers

    def encode(self, headers: dict[str, str]) -> bytes:
        raw = struct.pack(">I", len(headers))
        for name, value in headers.items():
            raw += struct.pack(">I", len(name)) + name.lower().encode() + struct.pack(">I", len(value)) + value.encode()
        return self.deflate.compress(raw) + self.deflate.flush(zlib.Z_SYNC_FLUSH)


def control_frame(kind: int, flags: int, body: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(body)) + body


def data_frame(stream_id: int, data: bytes, *, fin: bool = False) -> bytes:
    return struct.pack(">II", stream_id & 0x7FFFFFFF, ((FLAG_FIN if fin else 0) << 24) | len(data)) + data


def syn_reply(stream_id: int, codec: HeaderCodec) -> bytes:
    return control_frame(SYN_REPLY, 0, struct.pack(">I", stream_id) + codec.encode({}))


@dataclass
class _Request:
    port: int
    error_stream: int = 0
    data_stream: int = 0
    buffer: bytes = b""


class PortForwardSession:
    """The server side of one tunnelled connection (pure: frames in, bytes out).

    `answer(port, data)` returns what the simulated server on `port` sends back, or None when
    nothing listens there (the error stream then says so, as the kubelet's would)."""

    def __init__(self, answer: Callable[[int, bytes], bytes | None], refused: Callable[[int], str]) -> None:
        self.answer = answer
        self.refused = refused
        self.reader = FrameReader()
        self.codec = HeaderCodec()
        self.requests: dict[str, _Request] = {}
        self.by_stream: dict[int, _Request] = {}

    def receive(self, data: bytes) -> bytes:
        out = b""
        for frame in self.reader.feed(data):
            out += self._handle(frame)
        return out

    def _handle(self, frame: Frame) -> bytes:
        if frame.control and frame.kind == SYN_STREAM:
            headers = self.codec.decode(frame.payload)
            reply = syn_reply(frame.stream_id, self.codec)
            try:
                port = int(headers.get("port", ""))
            except ValueError:
                return reply + control_frame(RST_STREAM, 0, struct.pack(">II", frame.stream_id, 1))
            request = self.requests.setdefault(headers.get("requestid", ""), _Request(port))
            self.by_stream[frame.stream_id] = request
            if headers.get("streamtype") == "error":
                request.error_stream = frame.stream_id
            else:
                request.data_stream = frame.stream_id
            if request.error_stream and request.data_stream and self.answer(request.port, b"") is None:
                # nothing listens: say so on the error stream and end both, as the kubelet does
                return (reply + data_frame(request.error_stream, self.refused(request.port).encode(), fin=True)
                        + data_frame(request.data_stream, b"", fin=True))
            return reply
        if frame.control and frame.kind == PING:
            return control_frame(PING, 0, frame.payload)
        if frame.control:
            return b""  # SETTINGS, WINDOW_UPDATE, RST_STREAM, GOAWAY, HEADERS: nothing to do
        return self._data(frame)

    def _data(self, frame: Frame) -> bytes:
        request = self.by_stream.get(frame.stream_id)
        if request is None or frame.stream_id != request.data_stream:
            return b""
        out = b""
        if frame.payload:
            request.buffer += frame.payload
            is_http = request.buffer[:8].split(b" ")[0].isupper() and b" HTTP/1." in request.buffer.split(b"\r\n")[0]
            if not is_http or b"\r\n\r\n" in request.buffer:
                reply = self.answer(request.port, request.buffer) or b""
                request.buffer = b""
                out += data_frame(frame.stream_id, reply)
        if frame.flags & FLAG_FIN:
            out += data_frame(frame.stream_id, b"", fin=True)
            if request.error_stream:
                out += data_frame(request.error_stream, b"", fin=True)
        return out
