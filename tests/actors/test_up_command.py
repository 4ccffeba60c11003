"""`kaiwo-ray up` as a subprocess joining the test session's Ray (so no second Ray start): it
starts detached named actors and the admin API on Ray Serve, runs a KaiwoJob to COMPLETE (seen
through the admin API, whose /metrics carries the controller actors' stats), recreates an actor
killed for good, and on SIGINT stops the actors and the admin API and exits 0 without leaving them
behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, TypeVar

import httpx
import kubernetes
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from kaiwo_sandbox.testing import RunningSandbox, polling

pytestmark = [pytest.mark.ray, pytest.mark.slow]

T = TypeVar("T")
REPO = Path(__file__).parents[2]
RAY_NAMESPACE = "kaiwo-up-test"


# Poll under a deadline: the one polling loop is kaiwo_sandbox.testing.eventually.
wait_for = polling(interval=0.1)


def named_actor_exists(ray: Any, name: str) -> bool:
    try:
        ray.get_actor(name, namespace=RAY_NAMESPACE)
    except ValueError:
        return False
    return True


def test_up_joins_ray_runs_the_operator_and_stops_on_sigint(ray_session: Any, sandbox: RunningSandbox,
                                                            tmp_path: Path) -> None:
    ray = ray_session
    address = ray.get_runtime_context().gcs_address
    log_path = tmp_path / "up.log"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        admin_port = sock.getsockname()[1]
    admin = f"http://127.0.0.1:{admin_port}"
    command = [sys.executable, "-m", "hosts.cli.main", "up", "--kubeconfig", str(sandbox.kubeconfig_path),
               "--ray-address", address, "--controllers", "kaiwojob,kaiwoqueueconfig",
               "--ray-namespace", RAY_NAMESPACE, "--health-interval", "0.5", "--identity", "up-test",
               "--admin-auth", "none", "--admin-port", str(admin_port)]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        wait_for(lambda: "Running." in log_path.read_text() or process.poll() is not None, 180, "up is running")
        assert process.poll() is None, log_path.read_text()
        output = log_path.read_text()
        assert "kaiwojob" in output and "kaiwoqueueconfig" in output and "RSS-MIB" in output
        assert named_actor_exists(ray, "kaiwojob") and named_actor_exists(ray, "kaiwoqueueconfig")
        assert not named_actor_exists(ray, "kaiwoservice")  # --controllers is honoured

        custom: Any = kubernetes.client.CustomObjectsApi(sandbox.api_client())
        body = yaml.safe_load((REPO / "examples" / "cpu-job.yaml").read_text())
        custom.create_namespaced_custom_object("kaiwo.silogen.ai", "v1alpha1", "default", "kaiwojobs", body)
        wait_for(lambda: (custom.get_namespaced_custom_object(
            "kaiwo.silogen.ai", "v1alpha1", "default", "kaiwojobs", "cpu-job").get("status") or {}).get("status")
            == "COMPLETE", 60, "cpu-job COMPLETE")

        # The admin API on Ray Serve: printed, answering from its cache, with the actors' metrics.
        assert f"Admin API and dashboard: {admin}" in log_path.read_text()
        listing = wait_for(lambda: [i for i in httpx.get(f"{admin}/api/v1/workloads").json()["items"]
                                    if i["name"] == "cpu-job" and i["phase"] == "COMPLETE"], 30,
                           "cpu-job COMPLETE through the admin API")
        assert listing[0]["namespace"] == "default"
        text = httpx.get(f"{admin}/metrics", timeout=30).text
        families = {f.name: f for f in text_string_to_metric_families(text)}
        assert any(s.labels.get("controller") == "kaiwojob" and s.labels.get("result") == "success" and s.value > 0
                   for s in families["controller_runtime_reconcile"].samples)
        assert json.loads(httpx.get(f"{admin}/healthz").text) == {"synced": True}

        # Gone for good (Ray will not restart it): the supervisor in `up` starts a new one.
        ray.kill(ray.get_actor("kaiwojob", namespace=RAY_NAMESPACE), no_restart=True)
        wait_for(lambda: "kaiwojob: actor was gone" in log_path.read_text(), 60, "up recreates kaiwojob")
        wait_for(lambda: named_actor_exists(ray, "kaiwojob"), 30, "the new kaiwojob actor")

        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0, log_path.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    output = log_path.read_text()
    assert "Controllers stopped." in output
    with pytest.raises(httpx.TransportError):  # the admin API went with it
        httpx.get(f"{admin}/healthz", timeout=5)
    assert not named_actor_exists(ray, "kaiwojob") and not named_actor_exists(ray, "kaiwoqueueconfig")
