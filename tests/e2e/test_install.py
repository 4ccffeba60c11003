"""The install as a cluster runs it: `kubectl apply -k deploy/` against a sandbox that runs the
`kaiwo-ray` image's pods as real processes (`--local-image kaiwo-ray`), RBAC enforced. KubeRay's pods
become a real multi-node Ray cluster, the RayService's Serve applications (the controllers, the admin
API) are submitted to its dashboard as KubeRay does, and the operator works with its service account's
token and nothing else. docs/install.md, "Try the real install locally", walks the same steps.

Needs root (each pod runs in a network namespace of its own), as CI has it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kaiwo_ray.api.crd import all_crds
from kaiwo_ray.nodes import default_nodes
from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox

ROOT = Path(__file__).resolve().parents[2]
SA_USER = "system:serviceaccount:kaiwo-system:kaiwo-ray"
INSTALL_SECONDS = 180  # apply -> RayService Ready; docs/install.md gives the measured figure

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("kubectl") is None,
                                reason="the real install runs pods in network namespaces: needs root, ip, kubectl")

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[RunningSandbox]:
    with start_sandbox(nodes=default_nodes(), cluster=True, time_factor=1.0, authorization="RBAC",
                       extra_crds=list(all_crds()), local_images=["kaiwo-ray"]) as running:
        yield running


@pytest.fixture(scope="module")
def kubectl(sandbox: RunningSandbox, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    cache = tmp_path_factory.mktemp("kubectl-cache")
    binary = shutil.which("kubectl")
    assert binary is not None

    def run(*args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([binary, "--kubeconfig", str(sandbox.kubeconfig_path), "--cache-dir", str(cache),
                                 *args], capture_output=True, text=True, timeout=120, input=stdin, cwd=ROOT)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {result.stderr}")
        return result
    return run


def _json(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def _rayservice_ready(kubectl: Kubectl) -> dict[str, Any] | None:
    service = _json(kubectl, "rayservice", "-n", "kaiwo-system", "kaiwo-ray")
    return service if _condition(service, "Ready").get("status") == "True" else None


def _all_pods_ready(kubectl: Kubectl) -> list[dict[str, Any]] | None:
    pods = _json(kubectl, "pods", "-n", "kaiwo-system")["items"]
    ready = [p for p in pods if p["status"].get("phase") == "Running" and _condition(p, "Ready").get("status") == "True"]
    return pods if pods and len(ready) == len(pods) else None


@pytest.fixture(scope="module")
def installed(kubectl: Kubectl) -> dict[str, Any]:
    """Step 1: the documented install, as written."""
    kubectl("apply", "-k", "deploy/")
    kubectl("apply", "-k", "deploy/monitoring")
    service = eventually(lambda: _rayservice_ready(kubectl), timeout=INSTALL_SECONDS,
                         message="the RayService is Ready", interval=1.0,
                         ignoring=lambda err: isinstance(err, (AssertionError, KeyError)))
    eventually(lambda: _all_pods_ready(kubectl), timeout=120, message="every kaiwo-system pod Running and Ready",
               interval=1.0)
    return service


def test_rayservice_serves_the_operator_and_admin_api_from_a_real_ray_cluster(installed: dict[str, Any],
                                                                             kubectl: Kubectl) -> None:
    apps = installed["status"]["activeServiceStatus"]["applicationStatuses"]
    assert {name: app["status"] for name, app in apps.items()} == {"operator": "RUNNING", "admin": "RUNNING"}
    head = _json(kubectl, "pods", "-n", "kaiwo-system", "-l", "ray.io/node-type=head")["items"][0]
    # the head is a real Ray node: `ray status` inside it sees the gpu-telemetry worker join
    def nodes_joined() -> str | None:
        out = kubectl("exec", "-n", "kaiwo-system", head["metadata"]["name"], "--", "ray", "status", check=False).stdout
        return out if "kaiwo_gpu_telemetry" in out else None
    eventually(nodes_joined, timeout=60, interval=2.0, message="the telemetry worker joined the head's Ray cluster")
    logs = kubectl("logs", "-n", "kaiwo-system", head["metadata"]["name"]).stdout
    assert "Ray runtime started" in logs


def test_the_operator_runs_as_its_service_account_with_no_forbidden_request(installed: dict[str, Any],
                                                                             sandbox: RunningSandbox,
                                                                             kubectl: Kubectl) -> None:
    def leases() -> list[dict[str, Any]] | None:
        items = _json(kubectl, "leases", "-n", "kaiwo-system")["items"]
        held = [lease for lease in items if (lease.get("spec") or {}).get("holderIdentity")]
        return held or None
    held = eventually(lambda: leases(), timeout=60, interval=1.0, message="the controllers hold Leases in kaiwo-system")
    assert held
    records = sandbox.audit.records(user=SA_USER)
    assert records, "nothing was requested with the kaiwo-ray service account's token"
    forbidden = [(r.verb, r.resource, r.namespace, r.name) for r in records if r.code == 403]
    assert forbidden == []


def test_a_kaiwojob_runs_under_the_installed_operator(installed: dict[str, Any], kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "examples/cpu-job.yaml")
    jobs = _json(kubectl, "kaiwojobs", "-A")["items"]
    assert jobs
    job = jobs[0]
    ns, name = job["metadata"]["namespace"], job["metadata"]["name"]

    def running() -> str | None:
        status = (_json(kubectl, "kaiwojob", "-n", ns, name).get("status") or {}).get("status")
        return status if status in ("RUNNING", "COMPLETE") else None
    eventually(running, timeout=90, interval=1.0, message=f"KaiwoJob {ns}/{name} runs")
    children = _json(kubectl, "jobs", "-n", ns, "-l", f"kaiwo.silogen.ai/name={name}")["items"]
    assert len(children) == 1


def test_head_pod_deleted_comes_back_and_the_operator_resumes_without_duplicates(installed: dict[str, Any],
                                                                                kubectl: Kubectl) -> None:
    head = _json(kubectl, "pods", "-n", "kaiwo-system", "-l", "ray.io/node-type=head")["items"][0]
    kubectl("delete", "pod", "-n", "kaiwo-system", head["metadata"]["name"], "--wait=false")

    def new_head_serving() -> dict[str, Any] | None:
        heads = _json(kubectl, "pods", "-n", "kaiwo-system", "-l", "ray.io/node-type=head")["items"]
        fresh = [p for p in heads if p["metadata"]["uid"] != head["metadata"]["uid"]
                 and _condition(p, "Ready").get("status") == "True"]
        if not fresh:
            return None
        service = _rayservice_ready(kubectl)
        apps = ((service or {}).get("status") or {}).get("activeServiceStatus", {}).get("applicationStatuses") or {}
        return service if apps and all(a["status"] == "RUNNING" for a in apps.values()) else None
    eventually(new_head_serving, timeout=INSTALL_SECONDS, interval=2.0,
               message="a new head serves the operator and the admin API again")
    # the operator resumed: a KaiwoJob submitted now runs
    manifest = (ROOT / "examples/cpu-job.yaml").read_text().replace("name: cpu-job", "name: after-failover")
    kubectl("apply", "-f", "-", stdin=manifest)

    def resumed() -> str | None:
        status = (_json(kubectl, "kaiwojob", "-n", "default", "after-failover").get("status") or {}).get("status")
        return status if status in ("RUNNING", "COMPLETE") else None
    eventually(resumed, timeout=90, interval=1.0, message="a KaiwoJob submitted after the failover runs")
    for job in _json(kubectl, "kaiwojobs", "-A")["items"]:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        children = _json(kubectl, "jobs", "-n", ns, "-l", f"kaiwo.silogen.ai/name={name}")["items"]
        assert len(children) == 1, f"{ns}/{name} has {len(children)} Jobs"


def test_a_serve_application_that_fails_to_import_leaves_the_rayservice_not_ready_with_its_error(
        installed: dict[str, Any], kubectl: Kubectl) -> None:
    """Bad input: KubeRay submits the config, Ray reports DEPLOY_FAILED with the import error, and the
    RayService stays not Ready with that message; the installed one is untouched."""
    service = _json(kubectl, "rayservice", "-n", "kaiwo-system", "kaiwo-ray")
    broken = {"apiVersion": "ray.io/v1", "kind": "RayService",
              "metadata": {"name": "broken", "namespace": "default"},
              "spec": {"serveConfigV2": "applications:\n  - name: app\n    import_path: no_such_module:app\n"
                                        "    route_prefix: /\n",
                       "rayClusterConfig": {"rayVersion": service["spec"]["rayClusterConfig"]["rayVersion"],
                                            "headGroupSpec": {"rayStartParams": {"num-cpus": "1"}, "template": {
                                                "spec": {"containers": [{"name": "ray-head", "image": "kaiwo-ray:test",
                                                                         "ports": [{"name": "dashboard",
                                                                                    "containerPort": 8265},
                                                                                   {"name": "serve",
                                                                                    "containerPort": 8000}]}]}}}}}}
    kubectl("apply", "-f", "-", stdin=json.dumps(broken))

    def failed() -> dict[str, Any] | None:
        status = _json(kubectl, "rayservice", "-n", "default", "broken").get("status") or {}
        apps = (status.get("pendingServiceStatus") or status.get("activeServiceStatus") or {}).get(
            "applicationStatuses") or {}
        app = apps.get("app") or {}
        return app if app.get("status") == "DEPLOY_FAILED" else None
    app = eventually(failed, timeout=120, interval=2.0, message="Ray reports the application DEPLOY_FAILED")
    assert "no_such_module" in app["message"]
    status = _json(kubectl, "rayservice", "-n", "default", "broken")
    assert _condition(status, "Ready").get("status") != "True"
    kubectl("delete", "rayservice", "-n", "default", "broken", "--wait=false")
    assert _rayservice_ready(kubectl) is not None


def test_a_local_pod_that_exits_non_zero_shows_its_exit_code_logs_and_backs_off(installed: dict[str, Any],
                                                                               kubectl: Kubectl) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "crasher", "namespace": "default"},
           "spec": {"containers": [{"name": "main", "image": "kaiwo-ray:test",
                                    "command": ["sh", "-c", "echo about to fail; exit 3"]}]}}
    kubectl("apply", "-f", "-", stdin=json.dumps(pod))

    def backing_off() -> dict[str, Any] | None:
        status = _json(kubectl, "pod", "-n", "default", "crasher")["status"]
        container = ((status.get("containerStatuses") or [{}])[0])
        waiting = (container.get("state") or {}).get("waiting") or {}
        return container if waiting.get("reason") == "CrashLoopBackOff" else None
    container = eventually(backing_off, timeout=60, interval=0.5, message="the container backs off")
    assert container["lastState"]["terminated"]["exitCode"] == 3
    assert container["lastState"]["terminated"]["reason"] == "Error"
    assert "about to fail" in kubectl("logs", "-n", "default", "crasher").stdout
    kubectl("delete", "pod", "-n", "default", "crasher", "--wait=false")
