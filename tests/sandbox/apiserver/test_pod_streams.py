"""The sandbox's streaming pod subresources with real clients: `kubectl logs` (tail, follow),
`kubectl exec` (stdin, exit codes, the vendor GPU tools), the `kubernetes` client's port-forward,
and the shell that interprets the commands (pure)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from kubernetes.stream import portforward

from kaiwo_sandbox.apiserver.streams import shell
from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox

KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed (make tools)")


@pytest.fixture(scope="module")
def sandbox() -> Iterator[RunningSandbox]:
    with start_sandbox(cluster=True, time_factor=0.05) as sb:
        yield sb


@pytest.fixture(scope="module")
def core(sandbox: RunningSandbox) -> Any:
    return kubernetes.client.CoreV1Api(sandbox.api_client())


def make_pod(core: Any, name: str, command: list[str], *, gpus: dict[str, str] | None = None,
             ports: list[int] = ()) -> None:  # type: ignore[assignment]
    core.create_namespaced_pod("default", {"metadata": {"name": name, "annotations": {
        "sandbox.kaiwo-ray.dev/gpu-utilization": "40"}}, "spec": {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "busybox", "command": command, "env": [{"name": "GREETING", "value": "hi"}],
            "ports": [{"containerPort": p} for p in ports], "resources": {"limits": gpus or {}}}]}})
    eventually(lambda: core.read_namespaced_pod(name, "default").status.phase in ("Running", "Succeeded"), 30)


def kubectl_env(sandbox: RunningSandbox, env: dict[str, str], *argv: str,
                stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run([KUBECTL, *argv], env={**os.environ, "KUBECONFIG": str(sandbox.kubeconfig_path), **env},
                          capture_output=True, text=True, input=stdin, timeout=60)


def kubectl(sandbox: RunningSandbox, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run([KUBECTL, *argv], env={**os.environ, "KUBECONFIG": str(sandbox.kubeconfig_path)},
                          capture_output=True, text=True, input=stdin, timeout=60)


@needs_kubectl
def test_kubectl_logs_show_what_the_entrypoint_printed(sandbox: RunningSandbox, core: Any) -> None:
    make_pod(core, "printer", ["sh", "-c", "echo $GREETING from the pod; echo line two; sleep infinity"])
    done = kubectl(sandbox, "logs", "printer")
    assert done.returncode == 0, done.stderr
    assert "hi from the pod\nline two\n" in done.stdout
    tail = kubectl(sandbox, "logs", "printer", "--tail=2")
    assert tail.stdout.splitlines()[0] == "line two" and len(tail.stdout.splitlines()) == 2


@needs_kubectl
def test_kubectl_exec_and_attach_over_a_plain_spdy_upgrade(sandbox: RunningSandbox, core: Any) -> None:
    """kubectl before 1.30 (here: with its websockets switched off) upgrades to SPDY/3.1 itself."""
    make_pod(core, "spdy", ["sh", "-c", "sleep 60"])  # 3 s of real time
    spdy = {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"}
    done = kubectl_env(sandbox, spdy, "exec", "spdy", "-v=6", "--", "sh", "-c", "echo one; echo two; exit 3")
    assert "101 Switching Protocols" in done.stderr  # the upgrade, not a websocket
    assert done.returncode == 3 and done.stdout == "one\ntwo\n"
    piped = kubectl_env(sandbox, spdy, "exec", "-i", "spdy", "--", "sh", "-c", "cat | wc -l", stdin="a\nb\nc\n")
    assert piped.returncode == 0 and piped.stdout.strip() == "3"
    attached = kubectl_env(sandbox, spdy, "attach", "spdy")  # until the container stops
    assert attached.returncode == 0, attached.stderr


@needs_kubectl
def test_kubectl_logs_follow_ends_with_the_container(sandbox: RunningSandbox, core: Any) -> None:
    make_pod(core, "short", ["sh", "-c", "echo working; sleep 40"])  # 2 s of real time
    done = kubectl(sandbox, "logs", "-f", "short")
    assert done.returncode == 0, done.stderr
    assert "working" in done.stdout and "exit code 0" in done.stdout.splitlines()[-1]


@needs_kubectl
def test_kubectl_exec_stdin_and_exit_codes(sandbox: RunningSandbox, core: Any) -> None:
    make_pod(core, "target", ["sleep", "infinity"], gpus={"nvidia.com/gpu": "2"})
    done = kubectl(sandbox, "exec", "target", "--", "sh", "-c", "echo $HOSTNAME says $GREETING; exit 7")
    assert done.returncode == 7 and done.stdout == "target says hi\n"
    piped = kubectl(sandbox, "exec", "-i", "target", "--", "sh", "-c", "cat | grep -c x; wc -l", stdin="x\ny\nx\n")
    assert piped.returncode == 0
    smi = kubectl(sandbox, "exec", "target", "--", "nvidia-smi")
    assert smi.returncode == 0 and smi.stdout.count("NVIDIA H100") == 2 and " 40%" in smi.stdout
    missing = kubectl(sandbox, "exec", "target", "--", "rocm-smi")
    assert missing.returncode == 127 and "rocm-smi: not found" in missing.stderr


def test_exec_into_a_finished_container_is_refused(sandbox: RunningSandbox, core: Any) -> None:
    from kubernetes.client.exceptions import ApiException
    from kubernetes.stream import stream

    make_pod(core, "done", ["true"])
    eventually(lambda: core.read_namespaced_pod("done", "default").status.phase == "Succeeded", 30)
    with pytest.raises(ApiException) as raised:  # kubectl refuses on its own before asking
        stream(core.connect_get_namespaced_pod_exec, "done", "default", command=["ls"], stdout=True,
               stderr=True, stdin=False, tty=False)
    assert "container not found" in str(raised.value)


def test_client_port_forward_to_a_declared_port(sandbox: RunningSandbox, core: Any) -> None:
    make_pod(core, "web", ["sleep", "infinity"], ports=[8080])
    forward = portforward(core.connect_get_namespaced_pod_portforward, "web", "default", ports="8080,9000")
    sock = forward.socket(8080)
    sock.settimeout(10)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: web\r\n\r\n")
    reply = b""
    while b'"simulated": true}' not in reply:
        chunk = sock.recv(4096)
        assert chunk, reply
        reply += chunk
    assert reply.startswith(b"HTTP/1.1 200 OK") and b'"path": "/health"' in reply
    other = forward.socket(9000)
    other.sendall(b"ping")
    eventually(lambda: forward.error(9000), 10)
    assert "connection refused" in str(forward.error(9000))
    forward.close()


@pytest.mark.parametrize("protocol", ["v5.channel.k8s.io", "v4.channel.k8s.io"])
def test_client_stream_exec_returns_multi_line_output_and_closes_cleanly(sandbox: RunningSandbox, core: Any,
                                                                          protocol: str) -> None:
    from kubernetes.stream import stream

    pod = f"lines-{protocol[:2]}"
    make_pod(core, pod, ["sleep", "infinity"])
    out = stream(core.connect_get_namespaced_pod_exec, pod, "default", stdout=True, stderr=True, stdin=False,
                 tty=False, command=["sh", "-c", "echo one; echo two; printf 'three\\n'"],
                 _headers={"sec-websocket-protocol": protocol})
    assert out == "one\ntwo\nthree\n"
    resp = stream(core.connect_get_namespaced_pod_exec, pod, "default", stdout=True, stderr=True, stdin=False,
                  tty=False, command=["sh", "-c", "echo out; missing-tool; exit 4"], _preload_content=False,
                  _headers={"sec-websocket-protocol": protocol})
    resp.run_forever(timeout=10)
    assert resp.subprotocol == protocol
    assert not resp.is_open() and resp.returncode == 4  # the Status on the error channel, then the close
    assert resp.read_stdout() == "out\n" and "missing-tool: not found" in resp.read_stderr()


def test_exec_stdin_ends_with_the_v5_close_signal(sandbox: RunningSandbox, core: Any) -> None:
    from kubernetes.stream import stream

    make_pod(core, "reader", ["sleep", "infinity"])
    resp = stream(core.connect_get_namespaced_pod_exec, "reader", "default", stdout=True, stderr=True, stdin=True,
                  tty=False, command=["sh", "-c", "cat | wc -l"], _preload_content=False)
    assert resp.subprotocol == "v5.channel.k8s.io"
    resp.write_stdin("a\nb\nc\n")
    resp.close_channel(0)  # v5: stdin is done, without closing the connection
    resp.run_forever(timeout=10)
    assert resp.read_stdout().strip() == "3" and resp.returncode == 0


def test_websocket_exec_ends_with_a_success_status_and_a_normal_close(sandbox: RunningSandbox, core: Any) -> None:
    import asyncio
    import json
    import ssl

    import aiohttp

    make_pod(core, "closer", ["sleep", "infinity"])

    async def run() -> tuple[list[bytes], int | None]:
        context = ssl.create_default_context(cafile=str(sandbox.ca_cert_path))
        url = (sandbox.url.replace("https", "wss") + "/api/v1/namespaces/default/pods/closer/exec"
               "?command=echo&command=hi&stdout=true&stderr=true")
        frames: list[bytes] = []
        async with aiohttp.ClientSession() as session, session.ws_connect(
                url, protocols=("v5.channel.k8s.io",), ssl=context,
                headers={"Authorization": f"Bearer {sandbox.token}"}) as ws:
            async for message in ws:
                frames.append(message.data)
            return frames, ws.close_code

    frames, code = asyncio.run(run())
    assert frames[0] == b"\x01hi\n" and frames[-1][:1] == b"\x03"
    assert json.loads(frames[-1][1:]) == {"metadata": {}, "status": "Success"} and code == 1000


def test_client_attach_stays_until_the_container_stops(sandbox: RunningSandbox, core: Any) -> None:
    from kubernetes.client.exceptions import ApiException
    from kubernetes.stream import stream

    make_pod(core, "attached", ["sh", "-c", "sleep 60"])  # 3 s of real time
    resp = stream(core.connect_get_namespaced_pod_attach, "attached", "default", stdout=True, stderr=True,
                  stdin=False, tty=False, _preload_content=False)
    resp.update(timeout=0.5)
    assert resp.is_open()  # attached while the container runs
    resp.run_forever(timeout=20)
    assert not resp.is_open() and resp.returncode == 0
    eventually(lambda: core.read_namespaced_pod("attached", "default").status.phase == "Succeeded", 10)
    with pytest.raises(ApiException) as refused:
        stream(core.connect_get_namespaced_pod_attach, "attached", "default", stdout=True, stdin=False, tty=False)
    assert "container not found" in str(refused.value)


def test_streams_to_a_pod_without_a_node_are_refused_as_the_api_server_does(sandbox: RunningSandbox,
                                                                            core: Any) -> None:
    from kubernetes.client.exceptions import ApiException
    from kubernetes.stream import stream

    core.create_namespaced_pod("default", {"metadata": {"name": "nowhere"}, "spec": {
        "nodeSelector": {"no-such-node": "x"}, "containers": [{"name": "main", "image": "busybox"}]}})
    for connect, extra in ((core.connect_get_namespaced_pod_exec, {"command": ["ls"]}),
                           (core.connect_get_namespaced_pod_attach, {})):
        with pytest.raises(ApiException) as refused:
            stream(connect, "nowhere", "default", stdout=True, stdin=False, tty=False, **extra)
        assert "pod nowhere does not have a host assigned" in str(refused.value)  # the 400 Status, as the client wraps it


def test_a_spdy_upgrade_without_a_common_protocol_is_refused(sandbox: RunningSandbox, core: Any) -> None:
    make_pod(core, "picky", ["sleep", "infinity"])
    status, _, body = sandbox.http("POST", "/api/v1/namespaces/default/pods/picky/exec?command=ls&stdout=true",
                                   headers={"Connection": "Upgrade", "Upgrade": "SPDY/3.1",
                                            "X-Stream-Protocol-Version": "v9.channel.k8s.io"})
    assert status == 403 and b"unable to upgrade: unable to negotiate protocol" in body


def test_a_non_websocket_exec_names_the_protocols(sandbox: RunningSandbox, core: Any) -> None:
    make_pod(core, "plain", ["sleep", "infinity"])
    status, _, body = sandbox.http("POST", "/api/v1/namespaces/default/pods/plain/exec?command=ls")
    assert status == 400 and b"v5.channel.k8s.io" in body


# ------------------------------------------------------------------------------------------ the shell (pure)
POD = {"metadata": {"name": "p", "namespace": "ns"},
       "spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "1"}],
                                "resources": {"limits": {"amd.com/gpu": "4"}}}]}}


@pytest.mark.parametrize(("argv", "stdout", "code"), [
    (["sh", "-c", "echo $A && false || echo fallback"], "1\nfallback\n", 0),
    (["sh", "-c", "echo 'a;b' ; exit 4"], "a;b\n", 4),
    (["bash", "-lc", "printf '%s-%s\\n' x y | cat"], "x-y\n", 0),
    (["env", "printenv", "A"], "1\n", 0),
    (["sh", "-c", "cat /etc/hostname"], "p\n", 0),
    (["sh", "-c", "which amd-smi nvidia-smi"], "/usr/bin/amd-smi\n", 1),
    (["python", "train.py"], "", 127),
])
def test_shell_interprets(argv: list[str], stdout: str, code: int) -> None:
    result = shell.run(argv, shell.Context.of(POD, "c"))
    assert (result.stdout, result.exit_code) == (stdout, code)


def test_amd_tools_count_the_pods_gpus() -> None:
    assert shell.run(["rocm-smi"], shell.Context.of(POD, "c")).stdout.count("2100Mhz") == 4
    assert shell.run(["amd-smi", "monitor"], shell.Context.of(POD, "c")).stdout.count(" W ") == 4


@needs_kubectl
@pytest.mark.parametrize("websockets", ["true", "false"])  # SPDY inside a websocket, or a plain SPDY/3.1 upgrade
def test_kubectl_port_forward_through_the_spdy_tunnel(sandbox: RunningSandbox, core: Any, websockets: str) -> None:
    import re
    import urllib.request

    make_pod(core, f"site-{websockets}", ["sleep", "infinity"], ports=[8080])
    assert KUBECTL is not None
    forward = subprocess.Popen([KUBECTL, "port-forward", f"pod/site-{websockets}", ":8080", ":9000", "--address",
                                "127.0.0.1"],
                               env={**os.environ, "KUBECONFIG": str(sandbox.kubeconfig_path),
                                    "KUBECTL_PORT_FORWARD_WEBSOCKETS": websockets},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert forward.stdout is not None
        lines = [forward.stdout.readline(), forward.stdout.readline()]
        ports = {int(m.group(2)): int(m.group(1)) for line in lines
                 if (m := re.search(r"127\.0\.0\.1:(\d+) -> (\d+)", line))}
        assert set(ports) == {8080, 9000}, lines
        for path in ("/one", "/two"):  # a new pair of SPDY streams per connection
            body = urllib.request.urlopen(f"http://127.0.0.1:{ports[8080]}{path}", timeout=20).read()
            assert f'"path": "{path}"'.encode() in body and f'"pod": "site-{websockets}"'.encode() in body
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{ports[9000]}/", timeout=20).read()
    finally:
        forward.terminate()
        _, err = forward.communicate(timeout=30)
    assert "connect: connection refused" in err


def test_spdy_dictionary_is_the_specs_and_header_blocks_round_trip() -> None:
    import hashlib

    from kaiwo_sandbox.apiserver.streams import spdy as spdy_tunnel

    assert len(spdy_tunnel.DICTIONARY) == 1423
    assert hashlib.sha256(spdy_tunnel.DICTIONARY).hexdigest().startswith("51d27341373f923f")
    sender, receiver = spdy_tunnel.HeaderCodec(), spdy_tunnel.HeaderCodec()
    for headers in ({"streamtype": "data", "port": "8080", "requestid": "0"}, {}, {"port": "1"}):
        block = sender.encode(headers)
        assert receiver.inflate.decompress(block)  # one zlib context across blocks, as SPDY keeps it
    session = spdy_tunnel.PortForwardSession(lambda port, data: data if port == 1 else None, lambda p: "refused")
    syn = spdy_tunnel.control_frame(spdy_tunnel.SYN_STREAM, 0, b"\x00\x00\x00\x01" + b"\x00" * 6 + spdy_tunnel.HeaderCodec().encode(
        {"streamtype": "data", "port": "1", "requestid": "0"}))
    replies = spdy_tunnel.FrameReader().feed(session.receive(syn + spdy_tunnel.data_frame(1, b"ping", fin=True)))
    assert [(f.kind, f.stream_id, f.payload if not f.control else b"") for f in replies][:2] == [
        (spdy_tunnel.SYN_REPLY, 1, b""), (0, 1, b"ping")]
    assert replies[-1].flags & spdy_tunnel.FLAG_FIN
