"""The streaming pod subresources: `pods/log` (follow, tailLines, container), `pods/exec` and
`pods/portforward` over the websocket protocols kubectl 1.30+ and the `kubernetes` client speak.

exec: `v5.channel.k8s.io` (stdin close signal), `v4.channel.k8s.io` (Status on the error channel),
plain `channel.k8s.io`; each binary frame is [channel][data]: 0 stdin, 1 stdout, 2 stderr, 3 error
(a Status), 4 resize, 255 close (v5). The command runs in the simulated container's shell
(`streams/shell.py`): stdin, when asked for, is read until the client closes it. After the Status
the server closes the websocket normally (1000), as the API server's stream translator does.

attach: the same channels, to a running container: a simulated container prints nothing new (its
entrypoint's output is in its log), so the stream stays open until the container stops or the
client leaves, then ends with the Success Status.

portforward: `v4.channel.k8s.io` / `channel.k8s.io` as the kubelet's websocket port-forward: per
port a data channel 2i and an error channel 2i+1, each opened by the server with the port
(uint16, little endian). A port a container declares answers as a tiny HTTP server describing the
pod (or echoes non-HTTP bytes); any other port is refused on the error channel, as a real pod
with nothing listening would be. kubectl's own port-forward tunnels SPDY/3.1 inside the websocket
(`SPDY/3.1+portforward.k8s.io`): `streams/spdy.py` serves that. A plain SPDY/3.1 upgrade (older
kubectl) reaches the same code through `streams/upgrade.py`, which makes SPDY look like a websocket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING

from aiohttp import WSMsgType, web

from kaiwo_sandbox.apiserver.streams import realpods as real_streams
from kaiwo_sandbox.apiserver.streams import shell, upgrade
from kaiwo_sandbox.apiserver.streams import spdy as spdy_tunnel
from kaiwo_sandbox.apiserver.streams.params import client_frames, drain, finish, forwarded_ports, tail_lines
from kaiwo_sandbox.contracts import PODS, ApiError, JsonObj
from kaiwo_sandbox.runtime.processes import LocalPod, LocalRuntime

if TYPE_CHECKING:
    from kaiwo_sandbox.storage.store import ObjectStore

SUBRESOURCES = frozenset({"log", "exec", "attach", "portforward"})
EXEC_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io", "channel.k8s.io")
PORTFORWARD_PROTOCOLS = ("v4.channel.k8s.io", "channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
FOLLOW_POLL_SECONDS = 0.2  # how often a followed log looks at its container again


async def serve(store: ObjectStore, request: web.Request, namespace: str, name: str, sub: str,
                local_runtime: LocalRuntime | None = None) -> web.StreamResponse:
    answer = await _serve(store, request, namespace, name, sub, local_runtime)
    return upgrade.response_of(answer)  # a SPDY stream's is its 101 response


async def _serve(store: ObjectStore, request: web.Request, namespace: str, name: str, sub: str,
                 local_runtime: LocalRuntime | None) -> upgrade.Answer:
    pod = store.get_ref(PODS, namespace, name)
    local = local_runtime.pod(str((pod.get("metadata") or {}).get("uid", ""))) if local_runtime else None
    if local is not None and local_runtime is not None:
        return await _serve_real(store, request, pod, sub, local_runtime, local)
    if sub == "log":
        return await _log(store, request, pod)
    if not (pod.get("spec") or {}).get("nodeName"):  # the API server's check, before it asks any kubelet
        raise ApiError.bad_request(f"pod {(pod.get('metadata') or {}).get('name', '')} does not have a host assigned")
    if request.headers.get("Upgrade", "").lower() != "websocket" and not upgrade.wants_spdy(request):
        raise ApiError.bad_request(f"pods/{sub} in the sandbox needs a websocket upgrade "
                                   f"(protocols: {', '.join(EXEC_PROTOCOLS)}) or a SPDY/3.1 one")
    if sub == "exec":
        return await _exec(request, pod)
    if sub == "attach":
        return await _attach(store, request, pod)
    return await _portforward(request, pod)


async def _serve_real(store: ObjectStore, request: web.Request, pod: JsonObj, sub: str, runtime: LocalRuntime,
                      local: LocalPod) -> upgrade.Answer:
    """A pod whose containers are real processes: the same checks and protocols, the real streams."""
    query = request.query
    if sub == "log":
        container = _container_choice(pod, query.get("container"))
        uid = str((pod.get("metadata") or {}).get("uid", ""))
        if query.get("previous") not in ("true", "1") and runtime.log_file(uid, container) is None:
            pod_log(pod, container)  # never started: the kubelet's waiting error (a crashed one has its last log)  # the kubelet's errors for a container that has not started
        return await real_streams.log(store, request, pod, runtime, container)
    if request.headers.get("Upgrade", "").lower() != "websocket" and not upgrade.wants_spdy(request):
        raise ApiError.bad_request(f"pods/{sub} in the sandbox needs a websocket upgrade "
                                   f"(protocols: {', '.join(EXEC_PROTOCOLS)}) or a SPDY/3.1 one")
    if sub == "exec":
        argv = query.getall("command", [])
        if not argv:
            raise ApiError.bad_request("you must specify at least 1 command")
        container = _container_choice(pod, query.get("container"))
        return await real_streams.exec_(request, pod, runtime, container, list(argv), EXEC_PROTOCOLS)
    if sub == "attach":
        container = _container_choice(pod, query.get("container"))
        return await real_streams.attach(request, pod, runtime, container, EXEC_PROTOCOLS)
    if (pod.get("status") or {}).get("phase") != "Running":
        raise ApiError.bad_request(f"unable to upgrade connection: pod {pod['metadata']['name']} is not running")
    offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")]
    if spdy_tunnel.TUNNEL_PROTOCOL in offered or upgrade.wants_spdy(request):
        return await real_streams.portforward_tunnel(request, pod, local)
    return await real_streams.portforward(request, pod, local, forwarded_ports(request), PORTFORWARD_PROTOCOLS)


# ------------------------------------------------------------------------------------------ logs
def _container_choice(pod: JsonObj, container: str | None) -> str:
    name = (pod.get("metadata") or {}).get("name", "")
    containers = [c.get("name", "") for c in shell._containers(pod)]
    main = [c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []]
    if container is None:
        if len(main) != 1:
            raise ApiError.bad_request(f"a container name must be specified for pod {name}, choose one of: "
                                       f"[{' '.join(main)}]")
        return str(main[0])
    if container not in containers:
        raise ApiError.bad_request(f"container {container} is not valid for pod {name}")
    return container


def pod_log(pod: JsonObj, container: str | None) -> str:
    """GET pods/log: no process runs in the sandbox, so the log says what was simulated — but the
    errors for a missing container choice or a container not started yet are the kubelet's."""
    meta = pod.get("metadata") or {}
    name = meta.get("name", "")
    containers = [c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []]
    if container is None:
        if len(containers) != 1:
            raise ApiError.bad_request(f"a container name must be specified for pod {name}, choose one of: "
                                       f"[{' '.join(containers)}]")
        container = containers[0]
    if container not in containers:
        raise ApiError.bad_request(f"container {container} is not valid for pod {name}")
    statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("containerStatuses") or []}
    state = (statuses.get(container) or {}).get("state") or {}
    if not statuses.get(container) or "waiting" in state:
        reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
        raise ApiError.bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
    spec = next(c for c in pod["spec"]["containers"] if c.get("name") == container)
    command = " ".join(str(part) for part in [*(spec.get("command") or []), *(spec.get("args") or [])])
    lines = [f"[kaiwo-ray sandbox] simulated container {container!r} (image {spec.get('image', '')})"]
    if command:
        lines.append(f"[kaiwo-ray sandbox] command: {command}")
    for phase in ("running", "terminated"):
        if phase in state:
            detail = state[phase]
            lines.append(f"[kaiwo-ray sandbox] {phase} since {detail.get('startedAt', '')}"
                         + (f", exit code {detail.get('exitCode')}" if phase == "terminated" else ""))
    return "\n".join(lines) + "\n"


def log_lines(pod: JsonObj, container: str) -> tuple[list[str], bool]:
    """(lines, finished): the kubelet-simulation header, what the entrypoint's builtins printed,
    then how the container ended; finished once it terminated."""
    text = pod_log(pod, container)  # raises the kubelet's errors for containers not started
    lines = text.splitlines()
    state_lines = [line for line in lines if line.startswith(("[kaiwo-ray sandbox] running since",
                                                              "[kaiwo-ray sandbox] terminated since"))]
    head = [line for line in lines if line not in state_lines]
    spec = next(c for c in shell._containers(pod) if c.get("name") == container)
    printed = shell.entrypoint_output(spec, shell.Context.of(pod, container)).splitlines()
    statuses = {s.get("name"): s for s in [*((pod.get("status") or {}).get("containerStatuses") or []),
                                           *((pod.get("status") or {}).get("initContainerStatuses") or [])]}
    finished = "terminated" in ((statuses.get(container) or {}).get("state") or {})
    return [*head, *printed, *state_lines], finished


POD_DELETED_LINE = "[kaiwo-ray sandbox] pod deleted\n"


async def _log(store: ObjectStore, request: web.Request, pod: JsonObj) -> web.StreamResponse:
    query = request.query
    container = _container_choice(pod, query.get("container"))
    lines, finished = log_lines(pod, container)
    count = tail_lines(request)
    if count is not None:
        lines = lines[-count:] if count > 0 else []
    follow = query.get("follow") in ("true", "1")
    if not follow or finished:
        return web.Response(text="".join(f"{line}\n" for line in lines), content_type="text/plain")
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(request)
    running = [line for line in lines if "terminated since" not in line]
    await response.write("".join(f"{line}\n" for line in running).encode())
    meta = pod.get("metadata") or {}
    uid = meta.get("uid")
    while True:  # follow: until the container terminates or the pod is gone
        await asyncio.sleep(FOLLOW_POLL_SECONDS)
        try:
            current = store.get_ref(PODS, meta.get("namespace"), meta.get("name", ""))
        except ApiError:
            current = None
        if current is None or (current.get("metadata") or {}).get("uid") != uid:
            await response.write(POD_DELETED_LINE.encode())  # say why the stream ends
            break
        try:
            now_lines, finished = log_lines(current, container)
        except ApiError:
            continue
        if finished:
            await response.write("".join(f"{line}\n" for line in now_lines if "terminated since" in line).encode())
            break
    await response.write_eof()
    return response


# ------------------------------------------------------------------------------------------ exec
async def _exec(request: web.Request, pod: JsonObj) -> upgrade.Answer:
    query = request.query
    argv = query.getall("command", [])
    if not argv:
        raise ApiError.bad_request("you must specify at least 1 command")
    container = _container_choice(pod, query.get("container"))
    statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("containerStatuses") or []}
    if "running" not in ((statuses.get(container) or {}).get("state") or {}):
        raise ApiError.bad_request(f"unable to upgrade connection: container not found (\"{container}\")")
    ws = upgrade.open_channels(request, EXEC_PROTOCOLS)
    await ws.prepare(request)
    protocol = ws.ws_protocol or ""
    wants_stdin = query.get("stdin") in ("true", "1")
    stdin = b""
    if wants_stdin:
        async for channel, data in client_frames(ws):
            if channel == STDIN:
                stdin += data
                if protocol != "v5.channel.k8s.io" and b"\x04" in data:  # Ctrl-D on a TTY without v5
                    stdin = stdin.split(b"\x04", 1)[0]
                    break
            elif channel == CLOSE and data[:1] == bytes([STDIN]):
                break
    result = shell.run(list(argv), shell.Context.of(pod, container), stdin.decode(errors="replace"))
    tty = query.get("tty") in ("true", "1")
    if not ws.closed:
        if result.stdout and query.get("stdout", "true") in ("true", "1"):
            await ws.send_bytes(bytes([STDOUT]) + result.stdout.replace("\n", "\r\n" if tty else "\n").encode())
        if result.stderr and query.get("stderr", "true") in ("true", "1") and not tty:
            await ws.send_bytes(bytes([STDERR]) + result.stderr.encode())
        elif result.stderr and tty:
            await ws.send_bytes(bytes([STDOUT]) + result.stderr.replace("\n", "\r\n").encode())
    await finish(ws, result.exit_code, list(argv))
    return ws


# ------------------------------------------------------------------------------------------ attach
def _running(pod: JsonObj | None, container: str, uid: str) -> bool:
    if pod is None or (pod.get("metadata") or {}).get("uid") != uid or (pod.get("metadata") or {}).get(
            "deletionTimestamp"):
        return False
    statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("containerStatuses") or []}
    return "running" in ((statuses.get(container) or {}).get("state") or {})


async def _attach(store: ObjectStore, request: web.Request, pod: JsonObj) -> upgrade.Answer:
    container = _container_choice(pod, request.query.get("container"))
    meta = pod.get("metadata") or {}
    uid = str(meta.get("uid", ""))
    if not _running(pod, container, uid):
        raise ApiError.bad_request(f"unable to upgrade connection: container not found (\"{container}\")")
    ws = upgrade.open_channels(request, EXEC_PROTOCOLS)
    await ws.prepare(request)
    client = asyncio.ensure_future(drain(ws))  # stdin goes nowhere: no process reads it
    while not client.done():
        current = store.find_ref(PODS, meta.get("namespace"), str(meta.get("name", "")))
        if not _running(current, container, uid):
            break
        await asyncio.wait([client], timeout=FOLLOW_POLL_SECONDS)
    client.cancel()
    await finish(ws, 0, [])
    return ws


# ------------------------------------------------------------------------------------------ port-forward
def declared_ports(pod: JsonObj) -> dict[int, str]:
    """containerPort -> container name, for every port a container declares."""
    ports: dict[int, str] = {}
    for container in shell._containers(pod):
        for port in container.get("ports") or []:
            with contextlib.suppress(TypeError, ValueError):  # a malformed port declares nothing
                ports.setdefault(int(port.get("containerPort")), str(container.get("name", "")))
    return ports


def answer(pod: JsonObj, port: int, container: str, data: bytes) -> bytes:
    """What the simulated server on `port` replies to `data`: HTTP gets a JSON description of the
    pod; anything else is echoed."""
    first = data.split(b"\r\n", 1)[0].split(b" ")
    if len(first) == 3 and first[2].startswith(b"HTTP/"):
        meta = pod.get("metadata") or {}
        body = json.dumps({"pod": meta.get("name"), "namespace": meta.get("namespace"), "container": container,
                           "port": port, "method": first[0].decode(errors="replace"),
                           "path": first[1].decode(errors="replace"), "simulated": True}).encode()
        return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nServer: kaiwo-ray-sandbox\r\n"
                + f"Content-Length: {len(body)}\r\n".encode() + b"\r\n" + body)
    return data


async def _portforward(request: web.Request, pod: JsonObj) -> upgrade.Answer:
    offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")]
    if spdy_tunnel.TUNNEL_PROTOCOL in offered or upgrade.wants_spdy(request):
        return await _portforward_tunnel(request, pod)
    ports = forwarded_ports(request)
    if (pod.get("status") or {}).get("phase") != "Running":
        raise ApiError.bad_request(f"unable to upgrade connection: pod {pod['metadata']['name']} is not running")
    ws = web.WebSocketResponse(protocols=PORTFORWARD_PROTOCOLS)
    await ws.prepare(request)
    listening = declared_ports(pod)
    for index, port in enumerate(ports):
        opening = port.to_bytes(2, "little")
        await ws.send_bytes(bytes([2 * index]) + opening)
        await ws.send_bytes(bytes([2 * index + 1]) + opening)
    uid = (pod.get("metadata") or {}).get("uid", "")
    async for channel, data in client_frames(ws):
        if channel % 2 or channel // 2 >= len(ports) or not data:
            continue
        port = ports[channel // 2]
        if port not in listening:
            await ws.send_bytes(bytes([channel + 1]) + (
                f"error forwarding port {port} to pod {pod['metadata']['name']}, uid {uid}: dial tcp4 "
                f"127.0.0.1:{port}: connect: connection refused").encode())
            continue
        await ws.send_bytes(bytes([channel]) + answer(pod, port, listening[port], data))
    return ws




async def _portforward_tunnel(request: web.Request, pod: JsonObj) -> upgrade.Answer:
    """kubectl's port-forward: SPDY/3.1 inside the websocket (`streams/spdy.py`); the ports come in
    each stream's headers, not in the query."""
    if (pod.get("status") or {}).get("phase") != "Running":
        raise ApiError.bad_request(f"unable to upgrade connection: pod {pod['metadata']['name']} is not running")
    listening = declared_ports(pod)
    name, uid = pod["metadata"]["name"], (pod.get("metadata") or {}).get("uid", "")

    def serve(port: int, data: bytes) -> bytes | None:
        return answer(pod, port, listening[port], data) if port in listening else None

    def refused(port: int) -> str:
        return (f"error forwarding port {port} to pod {name}, uid {uid}: dial tcp4 127.0.0.1:{port}: "
                "connect: connection refused")

    session = spdy_tunnel.PortForwardSession(serve, refused)
    ws = upgrade.open_tunnel(request)
    await ws.prepare(request)
    async for message in ws:
        if message.type == WSMsgType.BINARY:
            out = session.receive(message.data)
            if out:
                await ws.send_bytes(out)
        elif message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
            break
    return ws
