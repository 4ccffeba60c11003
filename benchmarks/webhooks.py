"""Benchmark: what the admission webhooks add to a Job create (issue 33), served as installed (plain
uvicorn in the operator's process) and, for comparison, as a Ray Serve application.

A sandbox takes managed batch Jobs at a paced `--rate` (default 50 creates/s) from one keep-alive
client, three times: with no webhook configured; with kaiwo-ray's configurations as
deploy/components/webhooks registers them (Service reference, caBundle from the operator's Secret),
served by serve/webhook_server.py in a process of its own (`kaiwo-ray dev`'s serve/webhook_local.py);
and with the same configurations pointed at the same ASGI app (serve/webhooks.py) behind Ray Serve's
HTTPS proxy. The three take turns in blocks of `--block` seconds (both servers run throughout), so a
machine whose load drifts (a shared 2-core box) loads each alike. Then the webhook call alone:
sequential AdmissionReviews POSTed to each server.

Figures, each on its own line with its target: p50/p99 create latency of each run and what each
server adds over the run without webhooks (targets: <= 5 ms p50, <= 15 ms p99); the direct call's
p50/p99 on each server and Serve's extra cost per call (no target: the reason the installed form is
not Serve). Never fails on a miss.

    .venv/bin/python benchmarks/webhooks.py [--rate 50] [--seconds 15] [--no-serve]
"""

from __future__ import annotations

import argparse
import datetime
import functools
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._stats import percentile
from kaiwo_ray.admission import certs
from kaiwo_sandbox.contracts import GVR
from kaiwo_sandbox.testing import eventually, start_sandbox

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE, SERVICE = "kaiwo-system", "kaiwo-ray-webhooks"
TARGET_P50, TARGET_P99 = 5.0, 15.0
JOB: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "Job",
       "metadata": {"generateName": "bench-", "labels": {"kaiwo.silogen.ai/managed": "true"}},
       "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
           {"name": "main", "image": "busybox", "resources": {"limits": {"amd.com/gpu": 1}}}]}}}}


# -- the load ------------------------------------------------------------------------------------

def creates(sandbox: Any, rate: float, seconds: float) -> list[float]:
    """Paced creates (one every 1/rate s), each timed from send to full response, in ms."""
    host, port = sandbox.url.removeprefix("https://").split(":")
    context = ssl.create_default_context(cadata=sandbox.sandbox.cert.cert_pem.decode())
    connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=30)
    headers = {"Authorization": f"Bearer {sandbox.token}", "Content-Type": "application/json"}
    body = json.dumps(JOB)
    latencies: list[float] = []
    interval = 1.0 / rate
    start = time.perf_counter()
    for i in range(int(rate * seconds)):
        delay = start + i * interval - time.perf_counter()
        if delay > 0:
            time.sleep(delay)  # pacing the load, not synchronisation
        sent = time.perf_counter()
        connection.request("POST", "/apis/batch/v1/namespaces/default/jobs", body=body, headers=headers)
        response = connection.getresponse()
        text = response.read()
        latencies.append((time.perf_counter() - sent) * 1000)
        if response.status != 201:
            raise SystemExit(f"create answered {response.status}: {text[:300]!r}")
    connection.close()
    return latencies


def direct_calls(port: int, ca_pem: bytes, count: int) -> list[float]:
    """Sequential AdmissionReviews to one server over one kept-alive TLS connection, in ms."""
    context = ssl.create_default_context(cadata=ca_pem.decode())
    context.check_hostname = False  # dialled by address; the chain is still verified
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
    obj = {**JOB, "metadata": {"name": "direct", "namespace": "default", "labels": JOB["metadata"]["labels"]}}
    latencies: list[float] = []
    for _ in range(count):
        review = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": str(uuid.uuid4()), "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "resource": {"group": "batch", "version": "v1", "resource": "jobs"}, "operation": "CREATE",
            "namespace": "default", "userInfo": {"username": "bench"}, "object": obj, "dryRun": False}})
        sent = time.perf_counter()
        connection.request("POST", "/mutate-batch-v1-job?timeout=5s", body=review,
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        latencies.append((time.perf_counter() - sent) * 1000)
        if response.status != 200:
            raise SystemExit(f"webhook answered {response.status}")
    connection.close()
    return latencies[count // 10:]  # the first tenth warms up


# -- the servers ---------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _child(code: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    """A child process that prints one line when ready (its port) and stops when stdin closes."""
    process = subprocess.Popen([sys.executable, "-c", code, *args], cwd=ROOT, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line:
        process.kill()
        raise SystemExit(f"server child exited without a port (rc {process.wait()})")
    return process, line


UVICORN_CHILD = """
import sys
from serve.webhook_local import start_local
server = start_local(sys.argv[1])
print(server.port, flush=True)
sys.stdin.read()
server.stop()
"""

SERVE_CHILD = """
import sys, ray
from ray import serve
from serve.webhooks import build_webhook_app
from kaiwo_ray.admission.workloads import Settings
port, certfile, keyfile = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ray.init(num_cpus=2, include_dashboard=False, namespace="bench-webhooks", log_to_driver=False)
serve.start(http_options={"host": "127.0.0.1", "port": port, "keep_alive_timeout_s": 75,
                          "ssl_certfile": certfile, "ssl_keyfile": keyfile})

@serve.deployment(name="Webhooks", ray_actor_options={"num_cpus": 0}, max_ongoing_requests=256,
                  logging_config={"enable_access_log": False, "log_level": "WARNING"})
@serve.ingress()
class Webhooks:
    def __serve_build_asgi_app__(self):
        return build_webhook_app(Settings())

serve.run(Webhooks.bind(), name="webhooks", route_prefix="/", blocking=False)
print(port, flush=True)
sys.stdin.read()
serve.shutdown()
ray.shutdown()
"""


def _configure(sandbox: Any, mode: str, port: int, ca_bundle: str) -> None:
    """`none`: no configuration; else both configurations as the component registers them, with this
    server's caBundle, and the Service's Endpoints at its port."""
    import kubernetes

    from kaiwo_ray.admission.registration import configurations

    api = sandbox.api_client()
    custom: Any = kubernetes.client.CustomObjectsApi(api)
    group = "admissionregistration.k8s.io"
    for config in configurations(service=(NAMESPACE, SERVICE, 443), ca_bundle=ca_bundle):
        plural = config["kind"].lower() + "s"
        try:
            current: dict[str, Any] = custom.get_cluster_custom_object(group, "v1", plural, "kaiwo-ray")
        except kubernetes.client.ApiException:
            current = {}
        if mode == "none":
            if current:
                custom.delete_cluster_custom_object(group, "v1", plural, "kaiwo-ray")
            continue
        if current:
            config["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            custom.replace_cluster_custom_object(group, "v1", plural, "kaiwo-ray", config)
        else:
            custom.create_cluster_custom_object(group, "v1", plural, config)
    if mode != "none":
        core: Any = kubernetes.client.CoreV1Api(api)
        core.patch_namespaced_endpoints(SERVICE, NAMESPACE, {
            "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": port}]}]})


def _answers(sandbox: Any, hooked: bool = True) -> bool:
    """A create passes and shows whether the mutating webhook ran, as `hooked` wants."""
    status, _, raw = sandbox.http("POST", "/apis/batch/v1/namespaces/default/jobs", JOB)
    return status == 201 and (b"kueue.x-k8s.io/queue-name" in raw) == hooked


def _stop(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.close()
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


# -- report --------------------------------------------------------------------------------------

def summary(name: str, latencies: list[float]) -> tuple[float, float]:
    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
    print(f"{name}: n={len(latencies)} p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    return p50, p99


def added(name: str, base: tuple[float, float], hooked: tuple[float, float]) -> None:
    d50, d99 = hooked[0] - base[0], hooked[1] - base[1]
    print(f"added by webhooks on {name} p50: {d50:+.2f} ms (target <= {TARGET_P50:g} ms) "
          f"{'met' if d50 <= TARGET_P50 else 'MISSED'}")
    print(f"added by webhooks on {name} p99: {d99:+.2f} ms (target <= {TARGET_P99:g} ms) "
          f"{'met' if d99 <= TARGET_P99 else 'MISSED'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=15.0, help="load per mode, in blocks of --block s")
    parser.add_argument("--block", type=float, default=3.0,
                        help="the modes take turns in blocks this long, so drifting machine load hits each alike")
    parser.add_argument("--calls", type=int, default=1000, help="direct webhook calls per server")
    parser.add_argument("--no-serve", action="store_true", help="skip the Ray Serve server (no Ray start)")
    args = parser.parse_args()
    sandbox = start_sandbox(nodes=[])
    print(f"machine: {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f} at start")
    children: list[subprocess.Popen[str]] = []
    tmp = tempfile.TemporaryDirectory()
    try:
        uvicorn, port = _child(UVICORN_CHILD, str(sandbox.kubeconfig_path))
        children.append(uvicorn)
        eventually(lambda: _answers(sandbox), 20, "the webhook server to answer", interval=0.2)
        secret = sandbox.store.find_ref(GVR("", "v1", "secrets"), NAMESPACE, "kaiwo-ray-webhook-cert")
        uvicorn_bundle = certs.from_secret_data((secret or {}).get("data"))
        assert uvicorn_bundle is not None
        servers = {"none": (0, ""), "uvicorn": (int(port), uvicorn_bundle.ca_bundle())}
        pems = {"uvicorn": uvicorn_bundle.ca_pem}
        if not args.no_serve:
            serve_bundle = certs.issue(certs.service_names(SERVICE, NAMESPACE), datetime.datetime.now(datetime.UTC))
            (Path(tmp.name) / "tls.crt").write_bytes(serve_bundle.cert_pem)
            (Path(tmp.name) / "tls.key").write_bytes(serve_bundle.key_pem)
            began = time.monotonic()
            served, serve_port = _child(SERVE_CHILD, str(_free_port()), str(Path(tmp.name) / "tls.crt"),
                                        str(Path(tmp.name) / "tls.key"))
            children.append(served)
            print(f"ray serve started in {time.monotonic() - began:.1f} s")
            servers["serve"] = (int(serve_port), serve_bundle.ca_bundle())
            pems["serve"] = serve_bundle.ca_pem
        latencies: dict[str, list[float]] = {mode: [] for mode in servers}
        modes = list(servers)
        for turn in range(max(1, round(args.seconds / args.block))):
            for mode in modes[turn % len(modes):] + modes[:turn % len(modes)]:
                _configure(sandbox, mode, *servers[mode])
                eventually(functools.partial(_answers, sandbox, mode != "none"), 60, f"{mode} to take the creates",
                           interval=0.2)
                creates(sandbox, args.rate, 0.5)  # warm-up: connections of this mode
                latencies[mode] += creates(sandbox, args.rate, args.block)
        base = summary("creates without webhooks", latencies["none"])
        for mode, label in (("uvicorn", "uvicorn"), ("serve", "Ray Serve")):
            if mode in latencies:
                added(label, base, summary(f"creates with webhooks on {label}", latencies[mode]))
        alone = {mode: summary(f"webhook call alone on {'Ray Serve' if mode == 'serve' else mode}",
                               direct_calls(servers[mode][0], pems[mode], args.calls)) for mode in pems}
        if "serve" in alone:
            print(f"Ray Serve's cost per webhook call over uvicorn: p50 {alone['serve'][0] - alone['uvicorn'][0]:+.2f} "
                  f"ms, p99 {alone['serve'][1] - alone['uvicorn'][1]:+.2f} ms (no target)")
    finally:
        for child in children:
            _stop(child)
        tmp.cleanup()
        sandbox.stop()
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
