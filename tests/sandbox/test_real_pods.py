"""Pods of a `--local-image` run as real processes, seeing what a container sees, through kubectl: env
with the downward API and Secret references, the service account's files and the API server they
reach, Service names resolving to the pods behind them, logs (`-f`, `--previous`), exec, port-forward
to the real port, probes, restarts with back-off, a missing Secret as CreateContainerConfigError, and
deletion as SIGTERM then SIGKILL after the grace period. Needs root (network namespaces)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox

IMAGE = "local/tools"
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a", "labels": {"kubernetes.io/hostname": "node-a"}},
        "status": {"capacity": {"cpu": "8", "memory": "16Gi", "pods": "20"}}}

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("kubectl") is None,
                                reason="real pods run in network namespaces: needs root, ip and kubectl")

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[RunningSandbox]:
    with start_sandbox(nodes=[NODE], cluster=True, time_factor=1.0, local_images=[IMAGE]) as running:
        yield running


@pytest.fixture(scope="module")
def kubectl(sandbox: RunningSandbox) -> Kubectl:
    binary = shutil.which("kubectl")
    assert binary is not None

    def run(*args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([binary, "--kubeconfig", str(sandbox.kubeconfig_path), *args], capture_output=True,
                                text=True, timeout=60, input=stdin)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {result.stderr}")
        return result
    return run


def pod(name: str, script: str, **container: Any) -> str:
    spec = {"name": "main", "image": f"{IMAGE}:1.0", "command": ["sh", "-c", script], **container}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
                       "spec": {"containers": [spec], "terminationGracePeriodSeconds": 3}})


def status(kubectl: Kubectl, name: str) -> dict[str, Any]:
    return dict(json.loads(kubectl("get", "pod", name, "-o", "json").stdout).get("status") or {})


def ready(kubectl: Kubectl, name: str) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in status(kubectl, name).get("conditions") or [])


def test_a_container_sees_its_env_service_account_and_cluster_dns(kubectl: Kubectl) -> None:
    kubectl("create", "secret", "generic", "creds", "--from-literal=token=sekret")
    kubectl("create", "serviceaccount", "web")
    script = ("echo node=$NODE ip=$POD_IP token=$TOKEN cpu=$CPU; cat /run/secrets/kubernetes.io/serviceaccount/namespace;"
              " echo; exec python3 -m http.server 8080")
    manifest = json.loads(pod("web", script, ports=[{"name": "http", "containerPort": 8080}],
                              readinessProbe={"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
                              resources={"limits": {"cpu": "2"}},
                              env=[{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                                   {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                                   {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                                   {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}}]))
    manifest["spec"]["serviceAccountName"] = "web"
    kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    kubectl("create", "service", "clusterip", "websvc", "--tcp=8080:8080")
    kubectl("patch", "service", "websvc", "-p", json.dumps({"spec": {"selector": {"app": "web"}}}))
    eventually(lambda: ready(kubectl, "web"), timeout=30, interval=0.2, message="ready by its HTTP probe")
    ip = status(kubectl, "web")["podIP"]
    logs = kubectl("logs", "web").stdout
    assert f"node=node-a ip={ip} token=sekret cpu=2" in logs and "\ndefault\n" in logs
    probe = ("import os, ssl, urllib.request;"
             "d = '/run/secrets/kubernetes.io/serviceaccount/';"
             "c = ssl.create_default_context(cafile=d + 'ca.crt');"
             "r = urllib.request.Request('https://%s:%s/api/v1/namespaces/default/pods' % ("
             "os.environ['KUBERNETES_SERVICE_HOST'], os.environ['KUBERNETES_SERVICE_PORT']),"
             " headers={'Authorization': 'Bearer ' + open(d + 'token').read()});"
             "print(urllib.request.urlopen(r, context=c).status)")
    out = kubectl("exec", "web", "--", "python3", "-c", probe).stdout
    assert out.strip() == "200"  # the API server, verified with the projected CA, as the ServiceAccount
    fetched = kubectl("exec", "web", "--", "python3", "-c",
                      "import urllib.request; print(urllib.request.urlopen('http://websvc.default.svc.cluster.local:8080/').status)")
    assert fetched.stdout.strip() == "200"
    assert kubectl("exec", "web", "--", "hostname").stdout.strip() == "web"


def test_exec_exit_code_and_port_forward_reach_the_real_process(kubectl: Kubectl, sandbox: RunningSandbox) -> None:
    eventually(lambda: ready(kubectl, "web"), timeout=30, interval=0.2, message="web ready")
    failed = kubectl("exec", "web", "--", "sh", "-c", "echo out; echo err >&2; exit 7", check=False)
    assert failed.returncode == 7 and failed.stdout == "out\n" and "err" in failed.stderr
    binary = shutil.which("kubectl")
    assert binary is not None
    forward = subprocess.Popen([binary, "--kubeconfig", str(sandbox.kubeconfig_path), "port-forward", "pod/web",
                                ":8080"], stdout=subprocess.PIPE, text=True)
    try:
        assert forward.stdout is not None
        line = forward.stdout.readline()
        port = line.split("127.0.0.1:", 1)[1].split(" ", 1)[0]
        answer = httpx.get(f"http://127.0.0.1:{port}/", timeout=10)
        assert answer.status_code == 200 and "Directory listing" in answer.text
    finally:
        forward.terminate()
        forward.wait(timeout=10)


def test_a_crashing_container_restarts_with_back_off_and_keeps_its_previous_log(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=pod("crash", "echo run $(date +%s%N); exit 3"))

    def restarted() -> dict[str, Any] | None:
        statuses = status(kubectl, "crash").get("containerStatuses") or [{}]
        return statuses[0] if statuses[0].get("restartCount", 0) >= 1 else None
    container = eventually(restarted, timeout=40, interval=0.5, message="restarted after the first back-off")
    assert container["lastState"]["terminated"]["exitCode"] == 3
    previous = kubectl("logs", "crash", "--previous").stdout
    assert previous.startswith("run ")


def test_a_missing_secret_is_a_container_config_error_until_it_exists(kubectl: Kubectl) -> None:
    manifest = pod("needs-secret", "echo $KEY; sleep 3600",
                   env=[{"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "later", "key": "k"}}}])
    kubectl("apply", "-f", "-", stdin=manifest)

    def waiting() -> dict[str, Any] | None:
        state = ((status(kubectl, "needs-secret").get("containerStatuses") or [{}])[0].get("state") or {})
        found = state.get("waiting") or {}
        return found if found.get("reason") == "CreateContainerConfigError" else None
    found = eventually(waiting, timeout=20, interval=0.2, message="CreateContainerConfigError")
    assert found["message"] == 'secret "later" not found'
    kubectl("create", "secret", "generic", "later", "--from-literal=k=now")
    eventually(lambda: status(kubectl, "needs-secret").get("phase") == "Running", timeout=20, interval=0.2,
               message="starts once the Secret exists")
    eventually(lambda: "now" in kubectl("logs", "needs-secret").stdout, timeout=10, interval=0.2, message="its log")


def test_a_failing_liveness_probe_restarts_the_container(kubectl: Kubectl) -> None:
    manifest = pod("unhealthy", "touch /tmp/healthy; sleep 2; rm /tmp/healthy; sleep 3600",
                   livenessProbe={"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 1,
                                  "failureThreshold": 1})
    kubectl("apply", "-f", "-", stdin=manifest)
    eventually(lambda: ((status(kubectl, "unhealthy").get("containerStatuses") or [{}])[0].get("restartCount")
                        or 0) >= 1, timeout=40, interval=0.5, message="restarted by its liveness probe")
    events = kubectl("get", "events", "--field-selector", "involvedObject.name=unhealthy").stdout
    assert "Liveness probe failed" in events


def test_deletion_sends_sigterm_then_sigkill_after_the_grace_period(kubectl: Kubectl, sandbox: RunningSandbox) -> None:
    # outside /tmp, which is the pod's own
    marker = Path(tempfile.mkdtemp(prefix="kaiwo-real-pod-", dir="/var/tmp")) / "terms"
    marker.touch()
    script = f"trap 'echo TERM >> {marker}' TERM; while true; do sleep 0.1; done"
    kubectl("apply", "-f", "-", stdin=pod("stubborn", script))
    eventually(lambda: status(kubectl, "stubborn").get("phase") == "Running", timeout=20, interval=0.2,
               message="running")
    runtime = sandbox.sandbox.local_runtime
    assert runtime is not None
    uid = json.loads(kubectl("get", "pod", "stubborn", "-o", "json").stdout)["metadata"]["uid"]
    local = runtime.pod(uid)
    assert local is not None
    process = local.processes["main"]
    began = time.monotonic()
    kubectl("delete", "pod", "stubborn", "--wait=false")
    eventually(lambda: process.popen.poll() is not None, timeout=15, interval=0.1,
               message="killed after the grace period")
    assert "TERM" in marker.read_text()  # asked first
    assert time.monotonic() - began >= 2.5  # and only killed once the 3 s grace period was spent
    assert process.popen.poll() == -9


def test_a_container_has_a_private_tmp_and_the_whole_image(kubectl: Kubectl) -> None:
    """/tmp is the pod's own, wherever the sandbox's Python environment lives (a checkout under /tmp
    included: its directories are shown again inside the pod's /tmp, as an image carries its files)."""
    marker = f"kaiwo-private-{os.getpid()}"
    kubectl("apply", "-f", "-", stdin=pod("private-tmp", f"echo mine > /tmp/{marker}; "
                                                         "python3 -c 'import ray, kaiwo_sandbox; print(\"image whole\")'; "
                                                         f"cat /tmp/{marker}; sleep 3600"))
    eventually(lambda: "mine" in kubectl("logs", "private-tmp", check=False).stdout, 60,
               "the pod wrote and read its /tmp", interval=0.2)
    assert "image whole" in kubectl("logs", "private-tmp").stdout
    assert not Path(f"/tmp/{marker}").exists()
    kubectl("delete", "pod", "private-tmp", "--wait=false")


def test_a_service_selecting_real_pods_gets_its_endpoints(kubectl: Kubectl) -> None:
    """The endpoints controller: the real pod behind a Service, its named targetPort resolved through the
    container's ports, under `addresses` once Ready (what an APIService's availability check reads)."""
    manifest = json.loads(pod("ep", "exec python3 -m http.server 8081", ports=[{"name": "web", "containerPort": 8081}],
                              readinessProbe={"tcpSocket": {"port": "web"}, "periodSeconds": 1}))
    manifest["metadata"]["labels"] = {"app": "ep"}
    kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "ep"},
        "spec": {"selector": {"app": "ep"}, "ports": [{"name": "https", "port": 443, "targetPort": "web"}]}}))

    def ready_subsets() -> list[dict[str, Any]] | None:
        shown = kubectl("get", "endpoints", "ep", "-o", "json", check=False)
        subsets = json.loads(shown.stdout).get("subsets") if shown.returncode == 0 else None
        return subsets if subsets and subsets[0].get("addresses") else None
    subsets = eventually(ready_subsets, 60, "the Service's Endpoints list the ready pod", interval=0.2)
    ip = status(kubectl, "ep")["podIP"]
    assert subsets == [{"ports": [{"name": "https", "port": 8081, "protocol": "TCP"}],
                        "addresses": [{"ip": ip, "nodeName": "node-a",
                                       "targetRef": subsets[0]["addresses"][0]["targetRef"]}]}]
    assert subsets[0]["addresses"][0]["targetRef"]["name"] == "ep"
    kubectl("delete", "pod", "ep", "--wait=false")
