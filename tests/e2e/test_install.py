"""The install as a cluster runs it: `kubectl apply -k deploy/` against a sandbox that runs the
`kaiwo-ray` image's pods as real processes (`--local-image kaiwo-ray`), RBAC enforced. KubeRay's pods
become a real multi-node Ray cluster, the RayService's Serve applications (the controllers, the admin
API) are submitted to its dashboard as KubeRay does, and the operator works with its service account's
token and nothing else. docs/install.md, "Try the real install locally", walks the same steps.

Needs root (each pod runs in a network namespace of its own), as CI has it.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from real_install import INSTALL_SECONDS, ROOT, SA_USER, Kubectl, get_json, needs_real_pods

from kaiwo_ray.reconcile.gpupreemption import PREFIX
from kaiwo_sandbox.cluster.nodes.gpusim import ANNOTATION as GPU_UTILIZATION
from kaiwo_sandbox.testing import RunningSandbox, eventually

pytestmark = needs_real_pods


def _unreachable(err: Exception) -> bool:
    """kubectl could not reach the API server this once (a 2-core machine running two Ray clusters)."""
    return isinstance(err, AssertionError) and ("Unable to connect" in str(err) or "handshake timeout" in str(err))



def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def _rayservice_ready(kubectl: Kubectl) -> dict[str, Any] | None:
    service = get_json(kubectl, "rayservice", "-n", "kaiwo-system", "kaiwo-ray")
    return service if _condition(service, "Ready").get("status") == "True" else None


def _all_pods_ready(kubectl: Kubectl) -> list[dict[str, Any]] | None:
    pods = get_json(kubectl, "pods", "-n", "kaiwo-system")["items"]
    ready = [p for p in pods if p["status"].get("phase") == "Running" and _condition(p, "Ready").get("status") == "True"]
    return pods if pods and len(ready) == len(pods) else None


@pytest.fixture(scope="module")
def installed(kubectl: Kubectl) -> dict[str, Any]:
    """Step 1: the documented install, as written (docs/install.md, "Try the real install locally")."""
    kubectl("apply", "-k", "deploy/sandbox/")
    kubectl("apply", "-k", "deploy/monitoring/")
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
    head = get_json(kubectl, "pods", "-n", "kaiwo-system", "-l", "ray.io/node-type=head")["items"][0]
    # both applications and every controller run on the head (whose environment holds their settings)
    nodes = {n["node_id"]: n["node_ip"] for n in _ray_json(kubectl, "ray", "list", "nodes", "--format", "json")}
    actors = _ray_json(kubectl, "ray", "list", "actors", "--format", "json", "--filter", "state=ALIVE")
    on_head = [a["class_name"] for a in actors if nodes.get(a["node_id"]) == head["status"]["podIP"]]
    elsewhere = [a["class_name"] for a in actors if nodes.get(a["node_id"]) != head["status"]["podIP"]]
    assert {"ServeReplica:operator:kaiwo-operator", "ServeReplica:admin:AdminAPI", "ControllerActor"} <= set(on_head)
    assert set(elsewhere) == {"TelemetryActor"}
    # the head is a real Ray node: `ray status` inside it sees the gpu-telemetry worker join
    def nodes_joined() -> str | None:
        out = kubectl("exec", "-n", "kaiwo-system", head["metadata"]["name"], "--", "ray", "status", check=False).stdout
        return out if "kaiwo_gpu_telemetry" in out else None
    eventually(nodes_joined, timeout=60, interval=2.0, message="the telemetry worker joined the head's Ray cluster")
    logs = kubectl("logs", "-n", "kaiwo-system", head["metadata"]["name"]).stdout
    assert "Ray runtime started" in logs


def test_the_operator_runs_as_its_service_account_with_no_forbidden_request(installed: dict[str, Any],
                                                                             real_pods: RunningSandbox,
                                                                             kubectl: Kubectl) -> None:
    def leases() -> list[dict[str, Any]] | None:
        items = get_json(kubectl, "leases", "-n", "kaiwo-system")["items"]
        held = [lease for lease in items if (lease.get("spec") or {}).get("holderIdentity")]
        return held or None
    held = eventually(lambda: leases(), timeout=60, interval=1.0, message="the controllers hold Leases in kaiwo-system")
    assert held
    records = real_pods.audit.records(user=SA_USER)
    assert records, "nothing was requested with the kaiwo-ray service account's token"
    forbidden = [(r.verb, r.resource, r.namespace, r.name) for r in records if r.code == 403]
    assert forbidden == []


def test_a_kaiwojob_runs_under_the_installed_operator(installed: dict[str, Any], kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "examples/cpu-job.yaml")
    jobs = get_json(kubectl, "kaiwojobs", "-A")["items"]
    assert jobs
    job = jobs[0]
    ns, name = job["metadata"]["namespace"], job["metadata"]["name"]

    def running() -> str | None:
        status = (get_json(kubectl, "kaiwojob", "-n", ns, name).get("status") or {}).get("status")
        return status if status in ("RUNNING", "COMPLETE") else None
    eventually(running, timeout=90, interval=1.0, message=f"KaiwoJob {ns}/{name} runs")
    children = get_json(kubectl, "jobs", "-n", ns, "-l", f"kaiwo.silogen.ai/name={name}")["items"]
    assert len(children) == 1


def test_a_serve_application_that_fails_to_import_leaves_the_rayservice_not_ready_with_its_error(
        installed: dict[str, Any], kubectl: Kubectl) -> None:
    """Bad input: KubeRay submits the config, Ray reports DEPLOY_FAILED with the import error, and the
    RayService stays not Ready with that message; the installed one is untouched."""
    service = get_json(kubectl, "rayservice", "-n", "kaiwo-system", "kaiwo-ray")
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
        status = get_json(kubectl, "rayservice", "-n", "default", "broken").get("status") or {}
        apps = (status.get("pendingServiceStatus") or status.get("activeServiceStatus") or {}).get(
            "applicationStatuses") or {}
        app = apps.get("app") or {}
        return app if app.get("status") == "DEPLOY_FAILED" else None
    app = eventually(failed, timeout=120, interval=2.0, message="Ray reports the application DEPLOY_FAILED")
    assert "no_such_module" in app["message"]
    status = get_json(kubectl, "rayservice", "-n", "default", "broken")
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
        status = get_json(kubectl, "pod", "-n", "default", "crasher")["status"]
        container = ((status.get("containerStatuses") or [{}])[0])
        waiting = (container.get("state") or {}).get("waiting") or {}
        return container if waiting.get("reason") == "CrashLoopBackOff" else None
    container = eventually(backing_off, timeout=60, interval=0.5, message="the container backs off")
    assert container["lastState"]["terminated"]["exitCode"] == 3
    assert container["lastState"]["terminated"]["reason"] == "Error"
    assert "about to fail" in kubectl("logs", "-n", "default", "crasher").stdout
    kubectl("delete", "pod", "-n", "default", "crasher", "--wait=false")


def _ray_json(kubectl: Kubectl, *command: str) -> Any:
    head = get_json(kubectl, "pods", "-n", "kaiwo-system", "-l", "ray.io/node-type=head")["items"][0]["metadata"]["name"]
    return json.loads(kubectl("exec", "-n", "kaiwo-system", head, "--", *command).stdout)


def test_one_telemetry_actor_on_every_gpu_telemetry_node(installed: dict[str, Any], kubectl: Kubectl) -> None:
    workers = get_json(kubectl, "pods", "-n", "kaiwo-system", "-l", "ray.io/group=gpu-telemetry")["items"]
    assert len(workers) == 3  # deploy/sandbox: one per GPU node of the default node set
    assert len({w["spec"]["nodeName"] for w in workers}) == 3
    worker_ips = {w["status"]["podIP"] for w in workers}

    def actors_placed() -> list[Any] | None:
        nodes = {n["node_id"]: n["node_ip"] for n in _ray_json(kubectl, "ray", "list", "nodes", "--format", "json")
                 if n["state"] == "ALIVE"}
        actors = [a for a in _ray_json(kubectl, "ray", "list", "actors", "--format", "json",
                                       "--filter", "class_name=TelemetryActor", "--filter", "state=ALIVE")]
        placed = sorted(nodes.get(a["node_id"], "?") for a in actors)
        return actors if placed == sorted(worker_ips) else None
    eventually(actors_placed, timeout=90, interval=2.0,
               message="exactly one TelemetryActor on each gpu-telemetry Ray node")


def test_idle_gpu_job_is_preempted_and_a_busy_one_is_not_under_the_shipped_role(installed: dict[str, Any],
                                                                               kubectl: Kubectl) -> None:
    namespace = "preempt"
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": namespace, "annotations": {PREFIX + "enabled": "true", PREFIX + "grace-period": "1s"}}}))

    def job(name: str, utilization: str) -> str:
        return json.dumps({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace},
                           "spec": {"backoffLimit": 0, "template": {
                               "metadata": {"annotations": {GPU_UTILIZATION: utilization}},
                               "spec": {"restartPolicy": "Never", "containers": [{
                                   "name": "main", "image": "busybox", "command": ["sleep", "3600"],
                                   "resources": {"limits": {"amd.com/gpu": "8"},
                                                 "requests": {"amd.com/gpu": "8"}}}]}}}})

    def phase(name: str) -> str:
        for item in get_json(kubectl, "gpuworkloads", "-n", namespace)["items"]:
            if item["spec"]["workloadRef"]["name"] == name:
                return str((item.get("status") or {}).get("phase") or "")
        return ""

    kubectl("apply", "-f", "-", stdin=job("train", "0"))
    eventually(lambda: phase("train") == "Idle", timeout=180, interval=1.0, message="train Idle")
    kubectl("apply", "-f", "-", stdin=job("busy", "90"))
    eventually(lambda: phase("busy") == "Active", timeout=90, interval=1.0, message="busy Active")
    kubectl("apply", "-f", "-", stdin=job("infer", "70"))  # both AMD nodes are full: it waits for GPUs
    eventually(lambda: phase("train") == "Preempted", timeout=90, interval=1.0, message="train Preempted")
    eventually(lambda: kubectl("get", "job", "-n", namespace, "train", check=False).returncode != 0, timeout=60,
               interval=1.0, message="the idle Job deleted")
    eventually(lambda: phase("infer") == "Active", timeout=90, interval=1.0, message="infer runs on the freed GPUs")
    assert phase("busy") == "Active"
    kubectl("get", "job", "-n", namespace, "busy")
    kubectl("delete", "namespace", namespace)  # its Jobs hold every AMD GPU: give them back for what follows
    eventually(lambda: not get_json(kubectl, "pods", "-n", namespace)["items"], timeout=60, interval=1.0,
               message="the preemption namespace's pods gone")


@pytest.fixture(scope="module")
def admin_url(installed: dict[str, Any], real_pods: RunningSandbox, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[str]:
    """The admin API as a user reaches it: `kubectl port-forward svc/kaiwo-ray-admin` to the head's Serve proxy."""
    binary = shutil.which("kubectl")
    assert binary is not None
    process = subprocess.Popen([binary, "--kubeconfig", str(real_pods.kubeconfig_path), "port-forward", "-n",
                                "kaiwo-system", "svc/kaiwo-ray-admin", ":8000"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        said: list[str] = []
        match = None
        # kubectl may first warn on stderr (a discovery error while an APIService is not yet Available)
        while match is None and len(said) < 20:
            line = process.stdout.readline()
            if not line:
                break
            said.append(line)
            match = re.search(r"Forwarding from 127\.0\.0\.1:(\d+)", line)
        assert match, f"kubectl port-forward said: {''.join(said)}"
        yield f"http://127.0.0.1:{match.group(1)}"
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_admin_api_through_port_forward_authenticates_and_authorizes_each_user(
        admin_url: str, real_pods: RunningSandbox, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all([
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "workload-reader", "namespace": "default"},
         "rules": [{"apiGroups": ["kaiwo.silogen.ai"], "resources": ["kaiwojobs", "kaiwoservices"],
                    "verbs": ["get", "list", "watch"]},
                   {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "alice-reads", "namespace": "default"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "workload-reader"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}]))
    kubectl("apply", "-f", "examples/cpu-job.yaml")
    path = "/api/v1/namespaces/default/kaiwojobs/cpu-job"
    alice, bob = real_pods.mint_token("alice"), real_pods.mint_token("bob")
    with httpx.Client(base_url=admin_url, timeout=30) as http:
        assert http.get(path).status_code == 401
        assert http.get(path, headers={"Authorization": f"Bearer {bob}"}).status_code == 403
        answer = http.get(path, headers={"Authorization": f"Bearer {alice}"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["summary"]["name"] == "cpu-job"


def test_the_admin_api_is_served_through_the_kubernetes_api_from_the_head(installed: dict[str, Any],
                                                                          real_pods: RunningSandbox,
                                                                          kubectl: Kubectl,
                                                                          tmp_path: Path) -> None:
    """The aggregated-api component as installed: the APIService turns Available once the listener in the
    head's Serve replica answers; kubectl lists the group and prints WorkloadSummaries with a user's own
    kubeconfig; RBAC refuses a user without the rule."""
    group = "admin.kaiwo.silogen.ai"
    eventually(lambda: _condition(get_json(kubectl, "apiservice", f"v1alpha1.{group}"), "Available").get("status")
               == "True", timeout=120, interval=1.0, message="the APIService Available")
    assert "workloadsummaries" in kubectl("api-resources", f"--api-group={group}").stdout
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all([
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "summaries-reader", "namespace": "default"},
         "rules": [{"apiGroups": [group], "resources": ["workloadsummaries"], "verbs": ["get", "list", "watch"]},
                   {"apiGroups": ["kaiwo.silogen.ai"], "resources": ["kaiwojobs", "kaiwoservices"],
                    "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "carol-reads-summaries", "namespace": "default"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "summaries-reader"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "carol"}]}]))
    kubectl("apply", "-f", "examples/cpu-job.yaml")
    binary = shutil.which("kubectl")
    assert binary is not None

    def as_user(user: str, *args: str) -> subprocess.CompletedProcess[str]:
        config = real_pods.kubeconfig_for(real_pods.mint_token(user), tmp_path / user / "kubeconfig")
        return subprocess.run([binary, "--kubeconfig", str(config), *args], capture_output=True, text=True,
                              timeout=60)

    def table() -> str | None:
        shown = as_user("carol", "get", "workloadsummaries", "-n", "default")
        return shown.stdout if shown.returncode == 0 and "cpu-job" in shown.stdout else None
    printed = eventually(table, timeout=60, interval=1.0, message="carol's kubectl prints the summaries")
    assert printed.splitlines()[0].split()[0] == "NAME"
    denied = as_user("dave", "get", "workloadsummaries", "-n", "default")
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower(), denied.stderr


def test_dashboard_loads_in_chromium_through_the_port_forward_with_charts_and_no_console_error(
        admin_url: str, real_pods: RunningSandbox) -> None:
    browser_path = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not browser_path or not driver_path:
        pytest.skip("chromium/chromedriver missing: run `make browser`")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser_path
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        driver.set_page_load_timeout(60)
        token = real_pods.mint_token("kaiwo-admin", ["system:masters"])
        # The token is in the page's storage before its scripts run, as after a user saved it.
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument",
                               {"source": f"localStorage.setItem('kaiwoToken', {json.dumps(token)});"})
        driver.get(f"{admin_url}/")
        eventually(lambda: driver.execute_script("return document.body.dataset.ready === '1'"), timeout=60,
                   interval=0.5, message="the dashboard rendered")
        charts = driver.execute_script(
            "return [...document.querySelectorAll('canvas')].filter(c => window.Chart && Chart.getChart(c)).length")
        assert charts >= 2, "the overview's charts are drawn (Chart.js served from the image)"
        severe = [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        assert severe == []
    finally:
        driver.quit()


def _port_number(pod: dict[str, Any], port: object) -> int | None:
    if isinstance(port, int) or str(port).isdigit():
        return int(str(port))
    for container in pod["spec"]["containers"]:
        for declared in container.get("ports") or []:
            if declared.get("name") == port:
                return int(declared["containerPort"])
    return None


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or selector).items())


def scrape_jobs(kubectl: Kubectl) -> list[dict[str, Any]]:
    """Prometheus scrape jobs from the shipped ServiceMonitor and PodMonitor, as the Prometheus operator
    derives them: the targets their selectors and ports name, the path, the scheme and the bearer token
    from the Secret they reference."""
    pods = [p for p in get_json(kubectl, "pods", "-n", "kaiwo-system")["items"] if p["status"].get("podIP")]
    services = get_json(kubectl, "services", "-n", "kaiwo-system")["items"]

    def token(credentials: dict[str, str]) -> str:
        secret = get_json(kubectl, "secret", "-n", "kaiwo-system", credentials["name"])
        return base64.b64decode(secret["data"][credentials["key"]]).decode()

    jobs: list[dict[str, Any]] = []
    for monitor in get_json(kubectl, "podmonitors", "-n", "kaiwo-system")["items"]:
        for index, endpoint in enumerate(monitor["spec"]["podMetricsEndpoints"]):
            targets = [f"{p['status']['podIP']}:{port}" for p in pods
                       if _selects(monitor["spec"]["selector"], p["metadata"].get("labels") or {})
                       and (port := _port_number(p, endpoint["port"])) is not None]
            jobs.append({"job_name": f"podMonitor/{monitor['metadata']['name']}/{index}", "targets": targets,
                         "path": endpoint.get("path", "/metrics"), "scheme": endpoint.get("scheme", "http"),
                         "token": token(endpoint["authorization"]["credentials"])})
    for monitor in get_json(kubectl, "servicemonitors", "-n", "kaiwo-system")["items"]:
        for index, endpoint in enumerate(monitor["spec"]["endpoints"]):
            targets = []
            for service in services:
                if not _selects(monitor["spec"]["selector"], service["metadata"].get("labels") or {}):
                    continue
                port = next(p for p in service["spec"]["ports"] if p.get("name") == endpoint["port"])
                for pod in pods:
                    if _selects(service["spec"].get("selector") or {"-": "-"}, pod["metadata"].get("labels") or {}):
                        number = _port_number(pod, port.get("targetPort", port["port"]))
                        if number is not None:
                            targets.append(f"{pod['status']['podIP']}:{number}")
            jobs.append({"job_name": f"serviceMonitor/{monitor['metadata']['name']}/{index}", "targets": targets,
                         "path": endpoint.get("path", "/metrics"), "scheme": endpoint.get("scheme", "http"),
                         "token": token(endpoint["authorization"]["credentials"])})
    return jobs


def _prometheus_starting(err: Exception) -> bool:
    """Prometheus not answering yet, or answering its start-up page instead of JSON."""
    return isinstance(err, (httpx.HTTPError, ValueError))


def test_debian_prometheus_scrapes_every_shipped_monitor_target(installed: dict[str, Any], kubectl: Kubectl,
                                                                tmp_path: Path) -> None:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("Debian's prometheus is missing: run `make promtool`")
    jobs = eventually(lambda: (lambda found: found if all(j["targets"] for j in found) and len(found) >= 2 else None)(
        scrape_jobs(kubectl)), timeout=60, interval=1.0, message="every monitor has targets and its token")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = {"global": {"scrape_interval": "2s", "scrape_timeout": "2s"}, "scrape_configs": [
        {"job_name": job["job_name"], "metrics_path": job["path"], "scheme": job["scheme"],
         "authorization": {"type": "Bearer", "credentials": job["token"]},
         "static_configs": [{"targets": job["targets"]}]} for job in jobs]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    process = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                                f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                               stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("w"))
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            def all_up() -> list[dict[str, Any]] | None:
                active = http.get("/api/v1/targets").json()["data"]["activeTargets"]
                expected = sum(len(j["targets"]) for j in jobs)
                return active if len(active) == expected and all(t["health"] == "up" for t in active) else None
            try:
                eventually(all_up, timeout=60, interval=1.0, ignoring=_prometheus_starting, message="every target up")
            except AssertionError:
                targets = http.get("/api/v1/targets").json()["data"]["activeTargets"]
                raise AssertionError([(t["scrapeUrl"], t["health"], t["lastError"]) for t in targets]) from None

            def series(query: str) -> list[Any] | None:
                return http.get("/api/v1/query", params={"query": query}).json()["data"]["result"] or None
            for query in ('{__name__=~"kaiwo_.+"}', "controller_runtime_reconcile_total",
                          "kaiwo_gpu_utilization_percent", '{__name__=~"ray_.+"}'):
                eventually(lambda q=query: series(q), timeout=60, interval=1.0, ignoring=_prometheus_starting,
                           message=f"series {query}")
    finally:
        process.terminate()
        process.wait(timeout=30)


# The disruptive steps come last: a new head restarts the Ray cluster (its workers rejoin), and the checks
# after it (doctor, the examples, the upgrades) show the install recovered.
def test_doctor_passes_every_check_against_the_install(installed: dict[str, Any], real_pods: RunningSandbox,
                                                       admin_url: str) -> None:
    result = subprocess.run([sys.executable, "-m", "hosts.cli.main", "doctor", "--kubeconfig",
                             str(real_pods.kubeconfig_path), "--admin-url", admin_url],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    failed = [line for line in result.stdout.splitlines() if line.lstrip().startswith(("FAIL", "TODO"))]
    assert result.returncode == 0 and failed == [], result.stdout + result.stderr


def test_head_pod_deleted_comes_back_and_the_operator_resumes_without_duplicates(installed: dict[str, Any],
                                                                                kubectl: Kubectl) -> None:
    head = get_json(kubectl, "pods", "-n", "kaiwo-system", "-l", "ray.io/node-type=head")["items"][0]
    kubectl("delete", "pod", "-n", "kaiwo-system", head["metadata"]["name"], "--wait=false")

    def new_head_serving() -> dict[str, Any] | None:
        heads = get_json(kubectl, "pods", "-n", "kaiwo-system", "-l", "ray.io/node-type=head")["items"]
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
        status = (get_json(kubectl, "kaiwojob", "-n", "default", "after-failover").get("status") or {}).get("status")
        return status if status in ("RUNNING", "COMPLETE") else None
    eventually(resumed, timeout=90, interval=1.0, message="a KaiwoJob submitted after the failover runs")
    for job in get_json(kubectl, "kaiwojobs", "-A")["items"]:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        children = get_json(kubectl, "jobs", "-n", ns, "-l", f"kaiwo.silogen.ai/name={name}")["items"]
        assert len(children) == 1, f"{ns}/{name} has {len(children)} Jobs"


EXAMPLE_SECRETS = {"s3-credentials": {"access-key-id": "e2e", "secret-access-key": "e2e"},
                   "hf-token": {"token": "e2e"}, "inference-api-config": {"config.yaml": "endpoint: none"}}


def test_every_example_reaches_its_final_phase_under_the_installed_operator(installed: dict[str, Any],
                                                                            kubectl: Kubectl) -> None:
    """Step 3: `kubectl apply -f examples/`, as written (with the Secrets its credentials name)."""
    for name, data in EXAMPLE_SECRETS.items():
        kubectl("create", "secret", "generic", name, "-n", "default",
                *[f"--from-literal={k}={v}" for k, v in data.items()], check=False)
    kubectl("apply", "-f", "examples/")
    table = yaml.safe_load((ROOT / "tests" / "examples_expected.yaml").read_text())
    plurals = {"KaiwoJob": "kaiwojobs", "KaiwoService": "kaiwoservices", "KaiwoQueueConfig": "kaiwoqueueconfigs"}

    def phases() -> dict[str, str]:
        reached = {}
        for filename, entry in table.items():
            if entry["kind"] not in plurals:
                reached[filename] = ""
                continue
            scope = ["-n", entry["namespace"]] if entry.get("namespace") else []
            found = kubectl("get", plurals[entry["kind"]], entry["name"], *scope, "-o", "json", check=False)
            reached[filename] = ((json.loads(found.stdout).get("status") or {}).get("status") or "") \
                if found.returncode == 0 else ""
        return reached

    wanted = {f: e["phase"] or "" for f, e in table.items()}
    try:
        eventually(lambda: phases() == wanted, timeout=240, interval=2.0, message="every example's final phase")
    except AssertionError:
        raise AssertionError(f"reached {phases()}, wanted {wanted}") from None


def test_a_new_serve_config_rolls_without_losing_a_workload(installed: dict[str, Any], kubectl: Kubectl) -> None:
    """Step 8: an upgrade of the Serve config (what a new kaiwo-ray version ships) is submitted to the
    running cluster, both applications serve again, and a workload running meanwhile is untouched."""
    manifest = (ROOT / "examples/cpu-job.yaml").read_text().replace("name: cpu-job", "name: during-upgrade") \
        .replace("sleep 5", "sleep 600")
    kubectl("apply", "-f", "-", stdin=manifest)
    eventually(lambda: (get_json(kubectl, "kaiwojob", "-n", "default", "during-upgrade").get("status") or {}).get(
        "status") == "RUNNING", timeout=90, interval=1.0, message="the workload runs before the upgrade")
    uid = get_json(kubectl, "kaiwojob", "-n", "default", "during-upgrade")["metadata"]["uid"]
    service = get_json(kubectl, "rayservice", "-n", "kaiwo-system", "kaiwo-ray")
    config = yaml.safe_load(service["spec"]["serveConfigV2"])
    for app in config["applications"]:
        app["runtime_env"] = {"env_vars": {"KAIWO_UPGRADE_MARK": "2"}}  # a new config: every replica restarts
    kubectl("patch", "rayservice", "-n", "kaiwo-system", "kaiwo-ray", "--type=merge", "-p",
            json.dumps({"spec": {"serveConfigV2": yaml.safe_dump(config)}}))

    def upgraded() -> bool:
        head = get_json(kubectl, "pods", "-n", "kaiwo-system", "-l", "ray.io/node-type=head")["items"][0]
        status = get_json(kubectl, "rayservice", "-n", "kaiwo-system", "kaiwo-ray")["status"]
        statuses = (status.get("activeServiceStatus") or {}).get("applicationStatuses") or {}
        running = bool(statuses) and all(a["status"] == "RUNNING" for a in statuses.values())
        out = kubectl("exec", "-n", "kaiwo-system", head["metadata"]["name"], "--", "sh", "-c",
                      "curl -s http://127.0.0.1:8265/api/serve/applications/ || python -c 'import urllib.request;"
                      "print(urllib.request.urlopen(\"http://127.0.0.1:8265/api/serve/applications/\").read().decode())'",
                      check=False).stdout
        return running and "KAIWO_UPGRADE_MARK" in out
    eventually(upgraded, timeout=180, interval=2.0, message="Ray runs the new config, both applications RUNNING")
    job = get_json(kubectl, "kaiwojob", "-n", "default", "during-upgrade")
    assert job["metadata"]["uid"] == uid and (job.get("status") or {}).get("status") == "RUNNING"
    children = get_json(kubectl, "jobs", "-n", "default", "-l", "kaiwo.silogen.ai/name=during-upgrade")["items"]
    assert len(children) == 1


@pytest.mark.timeout(900)  # two Ray clusters start and hand over on two cores
def test_a_new_image_tag_rolls_to_a_new_ray_cluster_without_losing_a_workload(installed: dict[str, Any],
                                                                           kubectl: Kubectl) -> None:
    """Step 8: a new image tag changes the Ray cluster's pods, so KubeRay prepares a new cluster, moves the
    Services once both applications serve there, and deletes the old one; the workload running since
    before is untouched, the new operator takes over, and no child is duplicated."""
    before = get_json(kubectl, "rayservice", "-n", "kaiwo-system", "kaiwo-ray")
    old_cluster = before["status"]["activeServiceStatus"]["rayClusterName"]
    uid = get_json(kubectl, "kaiwojob", "-n", "default", "during-upgrade")["metadata"]["uid"]
    head_image = before["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]
    new_image = head_image.rsplit(":", 1)[0] + ":0.1.1"
    kubectl("patch", "rayservice", "-n", "kaiwo-system", "kaiwo-ray", "--type=json", "-p", json.dumps([
        {"op": "replace", "path": "/spec/rayClusterConfig/headGroupSpec/template/spec/containers/0/image",
         "value": new_image},
        {"op": "replace", "path": "/spec/rayClusterConfig/workerGroupSpecs/0/template/spec/containers/0/image",
         "value": new_image}]))

    def rolled() -> str | None:
        status = get_json(kubectl, "rayservice", "-n", "kaiwo-system", "kaiwo-ray").get("status") or {}
        active = status.get("activeServiceStatus") or {}
        name = str(active.get("rayClusterName") or "")
        apps = active.get("applicationStatuses") or {}
        if name in ("", old_cluster) or not apps or any(a["status"] != "RUNNING" for a in apps.values()):
            return None
        return name if kubectl("get", "raycluster", "-n", "kaiwo-system", old_cluster, check=False).returncode else None
    new_cluster = eventually(rolled, timeout=300, interval=2.0, ignoring=_unreachable,
                             message="the new cluster serves and the old one is gone")
    heads = get_json(kubectl, "pods", "-n", "kaiwo-system", "-l", f"ray.io/cluster={new_cluster},ray.io/node-type=head")
    assert heads["items"][0]["spec"]["containers"][0]["image"] == new_image
    job = get_json(kubectl, "kaiwojob", "-n", "default", "during-upgrade")
    assert job["metadata"]["uid"] == uid and (job.get("status") or {}).get("status") == "RUNNING"
    manifest = (ROOT / "examples/cpu-job.yaml").read_text().replace("name: cpu-job", "name: after-upgrade")
    kubectl("apply", "-f", "-", stdin=manifest)
    eventually(lambda: (get_json(kubectl, "kaiwojob", "-n", "default", "after-upgrade").get("status") or {}).get(
        "status") in ("RUNNING", "COMPLETE"), timeout=120, interval=1.0, message="the new operator runs a new job")
    for name in ("during-upgrade", "after-upgrade"):
        children = get_json(kubectl, "jobs", "-n", "default", "-l", f"kaiwo.silogen.ai/name={name}")["items"]
        assert len(children) == 1, f"{name} has {len(children)} Jobs"


def test_uninstall_leaves_no_object_of_ours_and_no_user_workload_deleted(installed: dict[str, Any],
                                                                         kubectl: Kubectl) -> None:
    """Step 8: `kubectl delete -k` of what was applied removes every object it made (the namespace, the
    cluster-scoped roles, the RayService's cluster and pods) and nothing a user made outside it."""
    kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "users-own", "namespace": "default"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}}}}))
    # --ignore-not-found: the namespace goes first, and what it held may be gone before its own delete
    kubectl("delete", "-k", "deploy/monitoring/", "--ignore-not-found", "--wait=false")
    kubectl("delete", "-k", "deploy/sandbox/", "--ignore-not-found", "--wait=false")
    cluster_scoped = [d for d in yaml.safe_load_all(kubectl("kustomize", "deploy/sandbox/").stdout) if d
                      and not (d.get("metadata") or {}).get("namespace") and d["kind"] != "Namespace"]

    def gone() -> bool:
        if kubectl("get", "namespace", "kaiwo-system", check=False).returncode == 0:
            return False
        for doc in cluster_scoped:
            if kubectl("get", doc["kind"], doc["metadata"]["name"], check=False).returncode == 0:
                return False
        return True
    eventually(gone, timeout=120, interval=1.0, message="every object of the install gone")
    assert kubectl("get", "job", "-n", "default", "users-own", check=False).returncode == 0
    # the real Ray processes went with their pods
    assert not [p for p in get_json(kubectl, "pods", "-A")["items"]
                if (p["metadata"].get("labels") or {}).get("app.kubernetes.io/part-of") == "kaiwo-ray"]
