"""`kaiwo-ray dev`: argument errors answer at once; the real thing, as a subprocess, serves a
cluster where `examples/cpu-job.yaml` runs to COMPLETE, and Ctrl-C (SIGINT to its process group)
stops it gracefully, leaving no process behind."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TypeVar

import httpx
import kubernetes
import psutil
import pytest
import yaml

from hosts.cli.dev import next_steps
from hosts.cli.main import main
from kaiwo_sandbox.testing import polling

T = TypeVar("T")
REPO = Path(__file__).parents[2]


# Poll under a deadline: the one polling loop is kaiwo_sandbox.testing.eventually.
wait_for = polling(interval=0.2)


def test_dev_rejects_a_non_positive_time_factor(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["dev", "--kubeconfig", str(tmp_path / "kc"), "--time-factor", "0"]) == 2
    assert "--time-factor must be greater than 0" in capsys.readouterr().err


def test_dev_refuses_a_clock_origin_without_a_scaled_clock(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["dev", "--kubeconfig", str(tmp_path / "kc"), "--clock-origin", "1767225600"]) == 2
    assert capsys.readouterr().err.strip() == "kaiwo-ray dev: --clock-origin needs --scaled-clock"


def test_dev_names_a_missing_nodes_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nodes.yaml"
    assert main(["dev", "--kubeconfig", str(tmp_path / "kc"), "--nodes", str(missing)]) == 2
    err = capsys.readouterr().err
    assert "--nodes" in err and "nodes.yaml" in err
    assert not (tmp_path / "kc").exists()  # nothing started


def test_dev_rejects_a_wrong_batch_scheduling_value_before_starting_anything(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAIWO_BATCH_SCHEDULING", "sometimes")
    assert main(["dev", "--kubeconfig", str(tmp_path / "kc")]) == 2
    err = capsys.readouterr().err
    assert err == "kaiwo-ray dev: KAIWO_BATCH_SCHEDULING must be true or false, not 'sometimes'\n"
    assert not (tmp_path / "kc").exists()  # nothing started


def test_next_steps_point_at_the_kubeconfig_and_the_example(tmp_path: Path) -> None:
    assert "Admin API and dashboard: http://127.0.0.1:8000" in next_steps(tmp_path / "kc", "http://127.0.0.1:8000")
    text = next_steps(tmp_path / "kc")
    assert f"export KUBECONFIG={tmp_path / 'kc'}" in text
    assert "kubectl apply -f examples/cpu-job.yaml" in text
    assert "kubectl get kaiwojobs -w" in text and "kubectl get workloads,jobs,pods" in text


def _exists(custom: Any, name: str) -> bool:
    try:
        custom.get_namespaced_custom_object("kaiwo.silogen.ai", "v1alpha1", "default", "kaiwojobs", name)
    except kubernetes.client.ApiException as err:
        if err.status == 404:
            return False
        raise
    return True


def _gone(process: psutil.Process) -> bool:
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.ray
@pytest.mark.slow
def test_dev_runs_an_example_to_complete_and_sigint_leaves_no_process(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "state" / "kubeconfig"
    log_path = tmp_path / "dev.log"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        admin_port = sock.getsockname()[1]
    command = [sys.executable, "-m", "hosts.cli.main", "dev", "--kubeconfig", str(kubeconfig),
               "--time-factor", "0.05", "--admin-port", str(admin_port)]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {"PYTHONUNBUFFERED": "1"}
    with log_path.open("wb") as log:
        # Its own process group, so that signalling the group is what Ctrl-C in a terminal does.
        dev = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, env=env,
                               start_new_session=True)
    descendants: list[psutil.Process] = []
    try:
        wait_for(lambda: "kaiwo-ray dev is ready" in log_path.read_text() or dev.poll() is not None, 240,
                 "dev is ready")
        assert dev.poll() is None, log_path.read_text()
        descendants = psutil.Process(dev.pid).children(recursive=True)
        names = {p.name() for p in descendants}
        assert {"raylet", "gcs_server"} <= names, names  # a Ray of its own ...
        assert sum("ControllerActor" in n for n in names) >= 1, names  # ... hosting the controllers

        new_client: Any = kubernetes.config.new_client_from_config  # untyped upstream
        custom: Any = kubernetes.client.CustomObjectsApi(new_client(config_file=str(kubeconfig)))
        body = yaml.safe_load((REPO / "examples" / "cpu-job.yaml").read_text())
        custom.create_namespaced_custom_object("kaiwo.silogen.ai", "v1alpha1", "default", "kaiwojobs", body)
        wait_for(lambda: (custom.get_namespaced_custom_object(
            "kaiwo.silogen.ai", "v1alpha1", "default", "kaiwojobs", "cpu-job").get("status") or {}).get("status")
            == "COMPLETE", 90, "cpu-job COMPLETE")

        # `dev` printed the admin API's URL, and the dashboard and API answer there (auth off in dev).
        admin = f"http://127.0.0.1:{admin_port}"
        assert f"Admin API and dashboard: {admin}" in log_path.read_text()
        assert "<title>kaiwo-ray</title>" in httpx.get(f"{admin}/", timeout=30).text
        wait_for(lambda: [i for i in httpx.get(f"{admin}/api/v1/workloads", timeout=30).json()["items"]
                          if i["name"] == "cpu-job" and i["phase"] == "COMPLETE"], 30, "cpu-job via the admin API")

        # The admin API is also served through the Kubernetes API (registered as deploy/components/
        # aggregated-api registers it): kubectl reaches it with the kubeconfig alone.
        def summaries() -> str | None:
            shown = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "get", "workloadsummaries", "-n",
                                    "default"], capture_output=True, text=True, timeout=60)
            return shown.stdout if shown.returncode == 0 and "cpu-job" in shown.stdout else None
        if shutil.which("kubectl"):
            wait_for(summaries, 60, "kubectl get workloadsummaries through the aggregated admin API")
            # ... and the admin API runs as its own ServiceAccount, as deployed (serve/admin_identity.py)
            whoami = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig.parent / "admin-api.kubeconfig"),
                                     "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"],
                                    capture_output=True, text=True, timeout=60)
            assert whoami.stdout == "system:serviceaccount:kaiwo-system:kaiwo-ray-admin-api", whoami.stderr
        assert "admin API identity not provisioned" not in log_path.read_text()

        # The admission webhooks run against the sandbox: a labelled plain Job is queued (Kueue's label set
        # at admission) and tracked by a KaiwoJob of its name (the managedworkload controller).
        assert "Admission webhooks: https://127.0.0.1:" in log_path.read_text()
        batch: Any = kubernetes.client.BatchV1Api(new_client(config_file=str(kubeconfig)))
        plain = {"apiVersion": "batch/v1", "kind": "Job",
                 "metadata": {"name": "plain", "labels": {"kaiwo.silogen.ai/managed": "true"}},
                 "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                     {"name": "main", "image": "busybox", "command": ["true"]}]}}}}
        created = batch.create_namespaced_job("default", plain)
        assert created.metadata.labels["kueue.x-k8s.io/queue-name"] == "kaiwo"
        wait_for(lambda: _exists(custom, "plain"), 60, "the KaiwoJob tracking the plain Job")

        os.killpg(dev.pid, signal.SIGINT)  # the whole foreground group, as a terminal's Ctrl-C
        assert dev.wait(90) == 0, log_path.read_text()
    finally:
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait(10)
    output = log_path.read_text()
    assert "Controllers stopped." in output and "Stopped: controllers, Ray and the sandbox." in output
    assert "not stopped cleanly" not in output  # the actors stopped gracefully, not killed by the signal
    deadline = time.monotonic() + 20.0
    left = [p for p in descendants if not _gone(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.2)  # polling period under a deadline
        left = [p for p in left if not _gone(p)]
    assert left == [], [(p.pid, p.name()) for p in left]
