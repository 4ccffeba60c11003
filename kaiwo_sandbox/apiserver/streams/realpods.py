"""log, exec and port-forward for pods whose containers are real processes (`--local-image`): the log
is the container's output file, exec runs the command inside the container's namespaces with its
environment, and port-forward relays bytes to the pod's real IP and port. Same protocols and errors
as the simulated pods' streams (`pods.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import struct
from pathlib import Path
from typing import IO, TYPE_CHECKING

from aiohttp import WSMsgType, web

from kaiwo_sandbox.apiserver.streams import spdy as spdy_tunnel
from kaiwo_sandbox.apiserver.streams import upgrade
from kaiwo_sandbox.apiserver.streams.params import (
    client_frames,
    drain,
    exec_start_failure,
    finish,
    tail_lines,
)
from kaiwo_sandbox.contracts import PODS, ApiError, JsonObj
from kaiwo_sandbox.runtime.processes import LocalPod, LocalRuntime

if TYPE_CHECKING:
    from kaiwo_sandbox.storage.store import ObjectStore

STDIN, STDOUT, STDERR, ERROR, CLOSE = 0, 1, 2, 3, 255
FOLLOW_POLL_SECONDS = 0.2
CHUNK = 32 * 1024


def _uid(pod: JsonObj) -> str:
    return str((pod.get("metadata") or {}).get("uid", ""))


def _terminated(pod: JsonObj, container: str) -> bool:
    statuses = [*((pod.get("status") or {}).get("containerStatuses") or []),
                *((pod.get("status") or {}).get("initContainerStatuses") or [])]
    for status in statuses:
        if status.get("name") == container:
            return "terminated" in (status.get("state") or {})
    return False


# ------------------------------------------------------------------------------------------ logs
async def log(store: ObjectStore, request: web.Request, pod: JsonObj, runtime: LocalRuntime,
              container: str) -> web.StreamResponse:
    query = request.query
    previous = query.get("previous") in ("true", "1")
    name = (pod.get("metadata") or {}).get("name", "")
    path = runtime.log_file(_uid(pod), container, previous=previous)
    if path is None:
        if previous:
            raise ApiError.bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
        raise ApiError.bad_request(f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating')
    data = await asyncio.to_thread(_read, path)
    count = tail_lines(request)
    if count is not None:
        lines = data.splitlines(keepends=True)
        data = b"".join(lines[-count:]) if count > 0 else b""
    limit = query.get("limitBytes")
    if limit is not None and limit.isdigit():
        data = data[: int(limit)]
    follow = query.get("follow") in ("true", "1") and not previous
    if not follow or _terminated(pod, container):
        return web.Response(body=data, content_type="text/plain")
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(request)
    await response.write(data)
    offset = path.stat().st_size if path.exists() else 0
    meta = pod.get("metadata") or {}
    while True:  # follow: until the container terminates or the pod is gone
        await asyncio.sleep(FOLLOW_POLL_SECONDS)
        chunk = await asyncio.to_thread(_read, path, offset)
        if chunk:
            offset += len(chunk)
            await response.write(chunk)
        current = store.find_ref(PODS, meta.get("namespace"), str(meta.get("name", "")))
        if current is None or _uid(current) != _uid(pod) or _terminated(current, container):
            chunk = await asyncio.to_thread(_read, path, offset)
            if chunk:
                await response.write(chunk)
            break
    await response.write_eof()
    return response


def _read(path: Path, offset: int = 0) -> bytes:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read()
    except OSError:
        return b""


# ------------------------------------------------------------------------------------------ exec
async def exec_(request: web.Request, pod: JsonObj, runtime: LocalRuntime, container: str, argv: list[str],
                protocols: tuple[str, ...]) -> upgrade.Answer:
    resolved = runtime.exec_command(_uid(pod), container, argv)
    if resolved is None:
        raise ApiError.bad_request(f"unable to upgrade connection: container not found (\"{container}\")")
    command, env, _cwd = resolved
    query = request.query
    wants_stdin = query.get("stdin") in ("true", "1")
    ws = upgrade.open_channels(request, protocols)
    await ws.prepare(request)
    protocol = ws.ws_protocol or ""
    if not _startable(argv[0], env.get("PATH", "")):
        await ws.send_bytes(bytes([ERROR]) + json.dumps(exec_start_failure(argv[0])).encode())
        await ws.close()
        return ws
    try:
        process = await asyncio.create_subprocess_exec(
            *command, env=env, stdin=asyncio.subprocess.PIPE if wants_stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    except OSError as err:
        await ws.send_bytes(bytes([ERROR]) + json.dumps(
            {"metadata": {}, "status": "Failure", "message": str(err), "reason": "InternalError"}).encode())
        await ws.close()
        return ws

    async def pump(stream: asyncio.StreamReader | None, channel: int) -> None:
        if stream is None:
            return
        while chunk := await stream.read(CHUNK):
            if not ws.closed:
                await ws.send_bytes(bytes([channel]) + chunk)

    async def feed() -> None:
        assert process.stdin is not None
        async for channel, data in client_frames(ws):
            if channel == STDIN and data:
                if protocol != "v5.channel.k8s.io" and b"\x04" in data:
                    process.stdin.write(data.split(b"\x04", 1)[0])
                    break
                process.stdin.write(data)
                await process.stdin.drain()
            elif channel == CLOSE and data[:1] == bytes([STDIN]):
                break
        with contextlib.suppress(OSError):
            process.stdin.close()

    feeder = asyncio.ensure_future(feed()) if wants_stdin else None
    await asyncio.gather(pump(process.stdout, STDOUT), pump(process.stderr, STDERR))
    code = await process.wait()
    if feeder is not None:
        feeder.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await feeder
    await finish(ws, code, argv)
    return ws


def _startable(program: str, path: str) -> bool:
    """Whether the container could exec `program`: found on its PATH, or an existing path. The container
    sees this machine's files except its own /tmp and /run, which are taken on trust."""
    if program.startswith(("/tmp/", "/run/")) or ("/" in program and not program.startswith("/")):
        return True
    if program.startswith("/"):
        return os.access(program, os.X_OK)
    return shutil.which(program, path=path) is not None


# ------------------------------------------------------------------------------------------ attach
async def attach(request: web.Request, pod: JsonObj, runtime: LocalRuntime, container: str,
                 protocols: tuple[str, ...]) -> upgrade.Answer:
    """Attach to the running container: what it writes from now on comes on stdout (the runtime keeps
    stdout and stderr in one log file), until it exits or the client leaves; then the Success
    Status. With `stdin=true`, what the client sends goes to the container's stdin when its spec has
    `stdin: true` (else it is dropped, as nothing reads it); the client closing stdin (v5's close
    signal, or leaving) closes it for good under `stdinOnce`."""
    local = runtime.pod(_uid(pod))
    process = local.processes.get(container) if local else None
    if process is None or process.poll() is not None:
        raise ApiError.bad_request(f"unable to upgrade connection: container not found (\"{container}\")")
    ws = upgrade.open_channels(request, protocols)
    await ws.prepare(request)
    path = process.log_path
    offset = path.stat().st_size if path.exists() else 0
    pipe = process.popen.stdin if request.query.get("stdin") in ("true", "1") else None
    client = asyncio.ensure_future(_feed(ws, pipe, process.stdin_once) if pipe is not None else drain(ws))
    wants_stdout = request.query.get("stdout", "true") in ("true", "1")
    while True:
        exited = process.poll() is not None
        chunk = await asyncio.to_thread(_read, path, offset)
        if chunk:
            offset += len(chunk)
            if wants_stdout and not ws.closed:
                await ws.send_bytes(bytes([STDOUT]) + chunk)
        if exited or client.done():
            break
        await asyncio.wait([client], timeout=FOLLOW_POLL_SECONDS)
    client.cancel()
    await finish(ws, 0, [])
    return ws


async def _feed(ws: upgrade.Channels, pipe: IO[bytes], once: bool) -> None:
    """Copy the client's stdin frames into the container's stdin pipe until the client closes stdin
    (under stdinOnce that closes the pipe: the container sees end of file), then read on until the
    client leaves: the attach goes on for the container's output."""
    async for channel, data in client_frames(ws):
        if channel == STDIN and data:
            with contextlib.suppress(OSError, ValueError):  # the container closed its stdin, or exited
                await asyncio.to_thread(_write, pipe, data)
        elif channel == CLOSE and data[:1] == bytes([STDIN]):
            break
    if once:
        with contextlib.suppress(OSError):
            pipe.close()
    await drain(ws)


def _write(pipe: IO[bytes], data: bytes) -> None:
    pipe.write(data)
    pipe.flush()


# ------------------------------------------------------------------------------------------ port-forward
def _refused(pod: JsonObj, local: LocalPod, port: int) -> str:
    return (f"error forwarding port {port} to pod {(pod.get('metadata') or {}).get('name', '')}, uid {_uid(pod)}: "
            f"dial tcp4 {local.ip}:{port}: connect: connection refused")


async def portforward(request: web.Request, pod: JsonObj, local: LocalPod, ports: list[int],
                      protocols: tuple[str, ...]) -> web.StreamResponse:
    """The websocket port-forward (`v4.channel.k8s.io`): channel 2i carries port i's bytes, 2i+1 its errors."""
    ws = web.WebSocketResponse(protocols=protocols)
    await ws.prepare(request)
    writers: dict[int, asyncio.StreamWriter] = {}
    readers: list[asyncio.Task[None]] = []
    open_ports: set[int] = set()  # the ports whose pod side has not closed yet
    for index, port in enumerate(ports):
        opening = port.to_bytes(2, "little")
        await ws.send_bytes(bytes([2 * index]) + opening)
        await ws.send_bytes(bytes([2 * index + 1]) + opening)
        try:
            reader, writer = await asyncio.open_connection(local.ip, port)
        except OSError:
            await ws.send_bytes(bytes([2 * index + 1]) + _refused(pod, local, port).encode())
            continue
        writers[index] = writer

        async def copy(reader: asyncio.StreamReader = reader, index: int = index) -> None:
            while chunk := await reader.read(CHUNK):
                if ws.closed:
                    return
                await ws.send_bytes(bytes([2 * index]) + chunk)
            open_ports.discard(index)
            if not open_ports:  # as the kubelet: the connection ends once every port's stream ended
                await ws.close()

        open_ports.add(index)
        readers.append(asyncio.ensure_future(copy()))
    if not open_ports:  # every port refused: the errors are sent, nothing is left to forward
        await ws.close()
        return ws
    try:
        async for channel, data in client_frames(ws):
            target = writers.get(channel // 2)
            if channel % 2 == 0 and target is not None and data:
                target.write(data)
                await target.drain()
    finally:
        for task in readers:
            task.cancel()
        for writer in writers.values():
            writer.close()
    return ws


async def portforward_tunnel(request: web.Request, pod: JsonObj, local: LocalPod) -> upgrade.Answer:
    """kubectl's port-forward (SPDY/3.1 in a websocket): one TCP connection to the pod per request id."""
    codec = spdy_tunnel.HeaderCodec()
    frames = spdy_tunnel.FrameReader()
    ws = upgrade.open_tunnel(request)
    await ws.prepare(request)
    send_lock = asyncio.Lock()
    pending: dict[str, dict[str, int]] = {}  # requestid -> {"port", "error", "data"}
    writers: dict[int, asyncio.StreamWriter] = {}  # data stream id -> connection
    early: dict[int, bytearray] = {}  # bytes the client sent before its connection was made
    tasks: list[asyncio.Task[None]] = []

    async def send(data: bytes) -> None:
        async with send_lock:
            if not ws.closed:
                await ws.send_bytes(data)

    async def connect(request_id: str) -> None:
        entry = pending[request_id]
        port, error_stream, data_stream = entry["port"], entry["error"], entry["data"]
        try:
            reader, writer = await asyncio.open_connection(local.ip, port)
        except OSError:
            await send(spdy_tunnel.data_frame(error_stream, _refused(pod, local, port).encode(), fin=True)
                       + spdy_tunnel.data_frame(data_stream, b"", fin=True))
            return
        writers[data_stream] = writer
        if data_stream in early:
            writer.write(bytes(early.pop(data_stream)))
        while chunk := await reader.read(CHUNK):
            await send(spdy_tunnel.data_frame(data_stream, chunk))
        writers.pop(data_stream, None)
        await send(spdy_tunnel.data_frame(data_stream, b"", fin=True)
                   + spdy_tunnel.data_frame(error_stream, b"", fin=True))

    try:
        async for message in ws:
            if message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                break
            if message.type != WSMsgType.BINARY:
                continue
            for frame in frames.feed(message.data):
                if frame.control and frame.kind == spdy_tunnel.SYN_STREAM:
                    headers = codec.decode(frame.payload)
                    await send(spdy_tunnel.syn_reply(frame.stream_id, codec))
                    try:
                        port = int(headers.get("port", ""))
                    except ValueError:
                        await send(spdy_tunnel.control_frame(spdy_tunnel.RST_STREAM, 0,
                                                             struct.pack(">II", frame.stream_id, 1)))
                        continue
                    entry = pending.setdefault(headers.get("requestid", ""), {"port": port, "error": 0, "data": 0})
                    entry["error" if headers.get("streamtype") == "error" else "data"] = frame.stream_id
                    if entry["error"] and entry["data"]:
                        tasks.append(asyncio.ensure_future(connect(headers.get("requestid", ""))))
                elif frame.control and frame.kind == spdy_tunnel.PING:
                    await send(spdy_tunnel.control_frame(spdy_tunnel.PING, 0, frame.payload))
                elif not frame.control:
                    target = writers.get(frame.stream_id)
                    if target is None and frame.payload:
                        early.setdefault(frame.stream_id, bytearray()).extend(frame.payload)
                    if target is not None and frame.payload:
                        target.write(frame.payload)
                        await target.drain()
                    if target is not None and frame.flags & spdy_tunnel.FLAG_FIN and target.can_write_eof():
                        target.write_eof()
    finally:
        for task in tasks:
            task.cancel()
        for writer in writers.values():
            writer.close()
    return ws
