"""Benchmark: what the admission webhooks add to a Job create (issue 33).

A sandbox (its own process, `kaiwo-ray sandbox`'s server on TLS) takes managed batch Jobs at a paced
`--rate` (default 50 creates/s) from one keep-alive client, first with no webhook configured, then
with kaiwo-ray's Mutating/ValidatingWebhookConfigurations (kaiwo_ray/admission/registration.py) pointed
by `url` at the webhook app (serve/webhooks.py) under plain uvicorn over TLS in a process of its own.
Figures: p50 and p99 create latency of each run and the difference.
Targets: webhooks add <= 5 ms to p50 and <= 15 ms to p99 (never fails on a miss).

Not measured here yet: the same app under Ray Serve (the in-cluster form), so Serve's cost against plain
uvicorn is not printed.

    .venv/bin/python benchmarks/webhooks.py [--rate 50] [--seconds 20]
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._stats import percentile
from kaiwo_ray.admission.registration import configurations
from kaiwo_sandbox.apiserver import tls
from kaiwo_sandbox.testing import eventually, start_sandbox

JOB = {"apiVersion": "batch/v1", "kind": "Job",
       "metadata": {"generateName": "bench-", "labels": {"kaiwo.silogen.ai/managed": "true"}},
       "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
           {"name": "main", "image": "busybox", "resources": {"limits": {"amd.com/gpu": 1}}}]}}}}


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
        due = start + i * interval
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)  # pacing the load, not synchronisation
        sent = time.perf_counter()
        connection.request("POST", "/apis/batch/v1/namespaces/default/jobs", body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        latencies.append((time.perf_counter() - sent) * 1000)
        if response.status != 201:
            raise SystemExit(f"create answered {response.status}")
    connection.close()
    return latencies


def webhook_server(workdir: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    cert = tls.generate()  # its own CA: the certificate is the caBundle
    (workdir / "tls.crt").write_bytes(cert.cert_pem)
    (workdir / "tls.key").write_bytes(cert.key_pem)
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "serve.webhooks:build_webhook_app", "--host", "127.0.0.1",
         "--port", str(port), "--ssl-certfile", str(workdir / "tls.crt"), "--ssl-keyfile", str(workdir / "tls.key"),
         "--log-level", "warning", "--no-access-log"],
        cwd=Path(__file__).resolve().parents[1], env=dict(os.environ))
    return process, f"https://127.0.0.1:{port}", base64.b64encode(cert.cert_pem).decode()


def summary(name: str, latencies: list[float]) -> tuple[float, float]:
    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
    print(f"{name:<18} n={len(latencies):<5} p50 {p50:6.2f} ms   p99 {p99:6.2f} ms")
    return p50, p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    sandbox = start_sandbox(nodes=[])
    with tempfile.TemporaryDirectory() as tmp:
        process, url, ca = webhook_server(Path(tmp))
        try:
            creates(sandbox, args.rate, 2.0)  # warm-up: connections, caches
            base = summary("without webhooks", creates(sandbox, args.rate, args.seconds))
            custom = __import__("kubernetes").client.CustomObjectsApi(sandbox.api_client())
            for config in configurations(url=url, ca_bundle=ca):
                custom.create_cluster_custom_object("admissionregistration.k8s.io", "v1",
                                                    config["kind"].lower() + "s", config)
            eventually(lambda: _answers(sandbox), 20, "the webhook server to answer", interval=0.2)
            creates(sandbox, args.rate, 2.0)
            hooked = summary("with webhooks", creates(sandbox, args.rate, args.seconds))
        finally:
            process.terminate()
            process.wait(10)
            sandbox.stop()
    added50, added99 = hooked[0] - base[0], hooked[1] - base[1]
    print(f"added by webhooks: p50 {added50:+.2f} ms (target <= 5), p99 {added99:+.2f} ms (target <= 15)")


def _answers(sandbox: Any) -> bool:
    status, _, _ = sandbox.http("POST", "/apis/batch/v1/namespaces/default/jobs", JOB)
    return status == 201


if __name__ == "__main__":
    main()
