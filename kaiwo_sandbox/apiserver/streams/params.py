"""What the pod streams of simulated and real pods share: their query parameters, read as the kubelet
reads them, the Status an exec's error channel carries, and how an exec or attach stream ends."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from aiohttp import WSMessage, WSMsgType, web

from kaiwo_sandbox.apiserver.streams.upgrade import Channels
from kaiwo_sandbox.contracts import ApiError, JsonObj

ERROR_CHANNEL = 3  # the exec/attach channel that carries the final Status


def tail_lines(request: web.Request) -> int | None:
    """`tailLines`, or None when absent; 400 with the API server's message when not a number."""
    raw = request.query.get("tailLines")
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ApiError.bad_request(f"tailLines: Invalid value: {raw!r}") from None


def forwarded_ports(request: web.Request) -> list[int]:
    """The `ports` of a websocket port-forward (repeated or comma-separated), each 1-65535."""
    raw_ports = [p for value in request.query.getall("ports", []) for p in value.split(",") if p]
    try:
        ports = [int(p) for p in raw_ports]
    except ValueError:
        raise ApiError.bad_request(f"invalid port in {raw_ports}") from None
    if not ports or any(not 0 < p < 65536 for p in ports):
        raise ApiError.bad_request("query parameter \"ports\" is required and must hold ports 1-65535")
    return ports


def exec_status(exit_code: int, argv: list[str]) -> JsonObj:
    """The Status on an exec's error channel (v4/v5): Success, or the command's non-zero exit code."""
    if exit_code == 0:
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: error executing command {json.dumps(argv)}, "
                       f"exit code {exit_code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(exit_code)}]}}


def frame_bytes(message: WSMessage) -> bytes | None:
    """A client's channel frame ([channel][data]), binary or text (the API server reads both alike: the
    `kubernetes` client sends str data as text frames); None for anything else or an empty frame."""
    if message.type == WSMsgType.BINARY and message.data:
        return bytes(message.data)
    if message.type == WSMsgType.TEXT and message.data:
        return str(message.data).encode()
    return None


async def client_frames(ws: Channels) -> AsyncIterator[tuple[int, bytes]]:
    """The client's channel frames as (channel, data), until it closes the connection or it breaks;
    anything that is not a frame (a ping, an empty message) is passed over."""
    async for message in ws:
        frame = frame_bytes(message)
        if frame is None:
            if message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                return
            continue
        yield frame[0], frame[1:]


def exec_start_failure(program: str) -> JsonObj:
    """The Status a containerd node's exec answers when the command cannot start (a program not on the
    container's PATH): an InternalError, which kubectl prints as `error: Internal error occurred: ...`."""
    cause = ("error executing command in container: failed to exec in container: failed to start exec: OCI "
             f"runtime exec failed: exec failed: unable to start container process: exec: {json.dumps(program)}: "
             "executable file not found in $PATH: unknown")
    return {"metadata": {}, "status": "Failure", "message": f"Internal error occurred: {cause}",
            "reason": "InternalError", "details": {"causes": [{"message": cause}]}, "code": 500}


async def drain(ws: Channels) -> None:
    """Read the client's messages until it closes (what attach does with stdin it cannot deliver)."""
    async for message in ws:
        if message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
            break


async def finish(ws: Channels, exit_code: int, argv: list[str]) -> None:
    """End an exec or attach stream as the API server does: the Status on the error channel (v4/v5;
    older protocols only report a failure, as text), then a normal close."""
    if ws.closed:
        return
    protocol = ws.ws_protocol or ""
    if protocol in ("v4.channel.k8s.io", "v5.channel.k8s.io"):
        await ws.send_bytes(bytes([ERROR_CHANNEL]) + json.dumps(exec_status(exit_code, argv)).encode())
    elif exit_code != 0:
        await ws.send_bytes(bytes([ERROR_CHANNEL]) + f"command terminated with exit code {exit_code}".encode())
    await ws.close()
