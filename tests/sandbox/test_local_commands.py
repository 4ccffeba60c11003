"""`--local-commands`: pods whose commands can run on this machine (sh, python3, busybox-style echo)
run as real processes whatever their image, and real clients see what a cluster would show: the
`kubernetes` client's exec (multi-line output, exit codes, stdin with the v5 close signal) in the pod's
environment and working directory, its attach, its port-forward carrying HTTP to the pod's server,
real logs, probes and exit codes, a private /tmp. Pods whose command cannot run here stay simulated.
Needs root (network namespaces)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes.stream import portforward, stream

from kaiwo_sandbox.runtime.processes import environment_dirs_under_tmp
from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a", "labels": {"kubernetes.io/hostname": "node-a"}},
        "status": {"capacity": {"cpu": "8", "memory": "16Gi", "pods": "20"}}}

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                                reason="real pods run in network namespaces: needs root and ip")


@pytest.fixture(scope="module")
def sandbox() -> Iterator[RunningSandbox]:
    with start_sandbox(nodes=[NODE], cluster=True, time_factor=1.0, local_commands=True) as running:
        yield running


@pytest.fixture(scope="module")
def core(sandbox: RunningSandbox) -> Any:
    return kubernetes.client.CoreV1Api(sandbox.api_client())


def create(core: Any, name: str, image: str, command: list[str], **spec: Any) -> None:
    container = {"name": "main", "image": image, "command": command, **spec.pop("container", {})}
    core.create_namespaced_pod("default", {"metadata": {"name": name}, "spec": {
        "containers": [container], "terminationGracePeriodSeconds": 2, **spec}})


def phase(core: Any, name: str) -> str:
    return str(core.read_namespaced_pod(name, "default").status.phase)


def ready(core: Any, name: str) -> bool:
    conditions = core.read_namespaced_pod(name, "default").status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def test_a_busybox_pod_that_echoes_runs_for_real_with_its_exit_code(core: Any) -> None:
    create(core, "echoer", "busybox:1.36", ["sh", "-c", "echo hello from $HOSTNAME; pwd; ls -A /tmp; touch /tmp/mine;"
                                                        " echo $GREETING; exit 3"],
           restartPolicy="Never", container={"env": [{"name": "GREETING", "value": "hi there"}]})
    create(core, "applet", "busybox", ["busybox", "echo", "one", "two"], restartPolicy="Never")
    eventually(lambda: phase(core, "echoer") == "Failed" and phase(core, "applet") == "Succeeded", timeout=30,
               message="both pods finished")
    terminated = core.read_namespaced_pod("echoer", "default").status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (3, "Error")
    # its own working directory and a private /tmp holding nothing but what the image carries there: the
    # sandbox's own environment where that lives under /tmp (a checkout there), shown at its own path
    image_dirs = "".join(f"{Path(d).name}\n" for d in environment_dirs_under_tmp())
    assert core.read_namespaced_pod_log("echoer", "default") == (
        f"hello from echoer\n/run/kaiwo-ray/work\n{image_dirs}hi there\n")
    assert core.read_namespaced_pod_log("applet", "default") == "one two\n"


def test_exec_port_forward_and_probes_reach_a_python_http_server(core: Any) -> None:
    create(core, "web", "python:3.12-slim", ["python3", "-m", "http.server", "8080"], container={
        "ports": [{"containerPort": 8080}], "env": [{"name": "ROLE", "value": "server"}],
        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1}})
    eventually(lambda: ready(core, "web"), timeout=30, interval=0.2, message="ready by its real HTTP probe")
    out = stream(core.connect_get_namespaced_pod_exec, "web", "default", stdout=True, stderr=True, stdin=False,
                 tty=False, command=["sh", "-c", "echo one; echo two; echo role=$ROLE; hostname; pwd"])
    assert out == "one\ntwo\nrole=server\nweb\n/run/kaiwo-ray/work\n"
    resp = stream(core.connect_get_namespaced_pod_exec, "web", "default", stdout=True, stderr=True, stdin=True,
                  tty=False, command=["sh", "-c", "cat > page.txt; echo saved >&2; exit 5"], _preload_content=False)
    resp.write_stdin("written through exec\n")
    resp.close_channel(0)  # v5: the end of stdin, the connection stays open for the rest
    resp.run_forever(timeout=20)
    assert not resp.is_open() and resp.returncode == 5 and resp.read_stderr() == "saved\n"
    missing = stream(core.connect_get_namespaced_pod_exec, "web", "default", stdout=True, stderr=True, stdin=False,
                     tty=False, command=["no-such-program"], _preload_content=False)
    missing.run_forever(timeout=10)
    status = json.loads(missing.read_channel(3))  # what a containerd node answers: the exec cannot start
    assert (status["status"], status["reason"], status["code"]) == ("Failure", "InternalError", 500)
    assert 'exec: "no-such-program": executable file not found in $PATH' in status["message"]

    forward = portforward(core.connect_get_namespaced_pod_portforward, "web", "default", ports="8080")
    sock = forward.socket(8080)
    sock.settimeout(10)
    sock.sendall(b"GET /page.txt HTTP/1.0\r\nHost: web\r\n\r\n")
    reply = b""
    while chunk := sock.recv(4096):
        reply += chunk
    assert reply.startswith(b"HTTP/1.0 200 OK") and reply.endswith(b"\r\n\r\nwritten through exec\n")
    assert forward.error(8080) is None
    forward.close()
    refused = portforward(core.connect_get_namespaced_pod_portforward, "web", "default", ports="9999")
    error = eventually(lambda: refused.error(9999), timeout=10, message="the refusal on the error channel")
    assert error.startswith("error forwarding port 9999 to pod web") and error.endswith("connection refused")
    refused.close()
    assert "GET /page.txt HTTP/1.0" in core.read_namespaced_pod_log("web", "default")  # the server's own log


def test_attach_streams_what_the_container_writes_until_it_exits(core: Any) -> None:
    create(core, "ticker", "busybox", ["sh", "-c", "sleep 1; echo tick; sleep 1; echo tock"], restartPolicy="Never")
    eventually(lambda: phase(core, "ticker") == "Running", timeout=30, interval=0.1, message="running")
    resp = stream(core.connect_get_namespaced_pod_attach, "ticker", "default", stdout=True, stderr=True,
                  stdin=False, tty=False, _preload_content=False)
    resp.run_forever(timeout=20)
    assert not resp.is_open() and resp.returncode == 0
    assert resp.read_stdout().endswith("tock\n")
    eventually(lambda: phase(core, "ticker") == "Succeeded", timeout=10, message="succeeded")


def test_attach_writes_to_the_stdin_of_a_container_that_asks_for_it(core: Any) -> None:
    script = "import sys\nfor line in sys.stdin: print('got', line.strip(), flush=True)\nprint('eof', flush=True)"
    create(core, "reader", "python:3.12", ["python3", "-c", script], restartPolicy="Never",
           container={"stdin": True, "stdinOnce": True})
    eventually(lambda: phase(core, "reader") == "Running", timeout=30, interval=0.1, message="running")
    resp = stream(core.connect_get_namespaced_pod_attach, "reader", "default", stdout=True, stderr=True,
                  stdin=True, tty=False, _preload_content=False)
    resp.write_stdin("a\nb\n")
    resp.close_channel(0)  # stdinOnce: the container's stdin closes with the first attach's
    resp.run_forever(timeout=20)
    assert not resp.is_open() and resp.returncode == 0
    assert resp.read_stdout() == "got a\ngot b\neof\n"
    eventually(lambda: phase(core, "reader") == "Succeeded", timeout=10, message="exited at end of file")


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed (make tools)")
def test_kubectl_run_interactive_pipes_stdin_through_attach(sandbox: RunningSandbox) -> None:
    kubectl = shutil.which("kubectl")
    assert kubectl is not None
    done = subprocess.run([kubectl, "--kubeconfig", str(sandbox.kubeconfig_path), "run", "-i", "--rm", "shout",
                           "--image=busybox", "--restart=Never", "--", "sh", "-c", "read x; echo got $x"],
                          capture_output=True, text=True, input="hello\n", timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("got hello\n") and 'pod "shout" deleted' in done.stdout


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed (make tools)")
def test_kubectl_exec_and_port_forward_over_a_plain_spdy_upgrade(sandbox: RunningSandbox, core: Any) -> None:
    kubectl = shutil.which("kubectl")
    assert kubectl is not None
    env = {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig_path), "KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false",
           "KUBECTL_PORT_FORWARD_WEBSOCKETS": "false"}  # as kubectl before 1.30 speaks
    create(core, "spdy-web", "python:3.12", ["python3", "-m", "http.server", "8081"])
    eventually(lambda: phase(core, "spdy-web") == "Running", timeout=30, interval=0.1, message="running")
    done = subprocess.run([kubectl, "exec", "-i", "spdy-web", "--", "sh", "-c", "cat > hello.txt; pwd; exit 4"],
                          env=env, capture_output=True, text=True, input="over spdy\n", timeout=60)
    assert done.returncode == 4 and done.stdout == "/run/kaiwo-ray/work\n", done.stderr
    forward = subprocess.Popen([kubectl, "port-forward", "pod/spdy-web", ":8081"], env=env, stdout=subprocess.PIPE,
                               text=True)
    try:
        assert forward.stdout is not None
        port = forward.stdout.readline().split("127.0.0.1:", 1)[1].split(" ", 1)[0]
        body = eventually(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/hello.txt", timeout=10).read(),
                          timeout=20, message="the file through the forwarded port")
        assert body == b"over spdy\n"
    finally:
        forward.terminate()
        forward.wait(timeout=10)


def test_a_pod_whose_command_cannot_run_here_stays_simulated(core: Any) -> None:
    create(core, "server", "nginx:1.27", ["nginx", "-g", "daemon off;"])
    eventually(lambda: phase(core, "server") == "Running", timeout=30, message="running")
    assert "[kaiwo-ray sandbox] simulated container 'main'" in core.read_namespaced_pod_log("server", "default")


def test_secret_and_config_map_volumes_under_run_and_tmp_are_the_objects_files(core: Any) -> None:
    """As the kubelet mounts them: each key a file (items rename, defaultMode applies), /var/run leading to
    the pod's own /run. A mount path elsewhere would touch this machine's file system: not mounted."""
    core.create_namespaced_secret("default", {"metadata": {"name": "creds"}, "stringData": {"token": "s3cr3t"}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "conf"}, "data": {"a": "1", "b": "2"}})
    create(core, "mounts", "busybox", ["sh", "-c", "cat /var/run/secrets/creds/token; echo; stat -c %a "
                                                   "/var/run/secrets/creds/token; ls /tmp/conf; cat /tmp/conf/renamed; "
                                                   "echo; ls /opt/elsewhere 2>&1 | head -c 0; echo done"],
           restartPolicy="Never", volumes=[
               {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400}},
               {"name": "conf", "configMap": {"name": "conf", "items": [{"key": "b", "path": "renamed"}]}},
               {"name": "skipped", "configMap": {"name": "conf"}}],
           container={"volumeMounts": [{"name": "creds", "mountPath": "/var/run/secrets/creds", "readOnly": True},
                                       {"name": "conf", "mountPath": "/tmp/conf"},
                                       {"name": "skipped", "mountPath": "/opt/elsewhere"}]})
    eventually(lambda: phase(core, "mounts") == "Succeeded", timeout=30, message="the pod finished")
    assert core.read_namespaced_pod_log("mounts", "default") == "s3cr3t\n400\nrenamed\n2\ndone\n"
    assert not Path("/opt/elsewhere").exists()
