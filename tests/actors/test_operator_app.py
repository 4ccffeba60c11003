"""actors/operator_app.py on real Ray Serve, as deploy/'s RayService runs it: the replica, in-cluster as
deploy's ServiceAccount (a service-account mount and KUBERNETES_SERVICE_HOST/PORT in its runtime env)
against the sandbox with RBAC enforced, starts the controller actors; /operator/healthz reports them, the
controllers do their work (KaiwoConfig created, Leases in the pod's namespace), and no request is refused."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox

pytestmark = [pytest.mark.ray, pytest.mark.slow]

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "base"
NAMESPACE = "kaiwo-system"
SA_USER = f"system:serviceaccount:{NAMESPACE}:kaiwo-ray"
CONTROLLERS = ["kaiwoconfig", "kaiwojob"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def rbac_sandbox(tmp_path: Path) -> Iterator[tuple[RunningSandbox, Path]]:
    with start_sandbox(cluster=True, time_factor=0.05, authorization="RBAC") as sb:
        api = sb.api_client()
        kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
        for name in ("serviceaccount.yaml", "rbac-operator.yaml"):
            for doc in yaml.safe_load_all((DEPLOY / name).read_text()):
                kubernetes.utils.create_from_dict(api, doc)
        mount = tmp_path / "serviceaccount"
        mount.mkdir()
        (mount / "token").write_text(sb.service_account_token(NAMESPACE, "kaiwo-ray"))
        (mount / "namespace").write_text(NAMESPACE)
        assert sb.ca_cert_path is not None
        shutil.copy(sb.ca_cert_path, mount / "ca.crt")
        yield sb, mount


def _healthz(port: int) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/operator/healthz", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, {}


def test_the_serve_app_starts_the_controllers_in_cluster(ray_session: Any,
                                                         rbac_sandbox: tuple[RunningSandbox, Path]) -> None:
    from ray import serve

    from actors.operator_app import _deployment

    sb, mount = rbac_sandbox
    ray = ray_session
    ray_namespace = f"kaiwo-serve-{uuid.uuid4().hex[:6]}"
    env = {"KAIWO_SERVICE_ACCOUNT_DIR": str(mount), "KUBERNETES_SERVICE_HOST": "127.0.0.1",
           "KUBERNETES_SERVICE_PORT": str(sb.sandbox.port), "KAIWO_IN_CLUSTER": "true",
           "KAIWO_RAY_NAMESPACE": ray_namespace, "KAIWO_CONTROLLERS": ",".join(CONTROLLERS),
           "KAIWO_ACTOR_RESOURCES": '{"node:__internal_head__": 0.001}'}  # as deploy/ sets it
    port = _free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    try:
        app = _deployment().options(ray_actor_options={"num_cpus": 0, "runtime_env": {"env_vars": env}}).bind()
        serve.run(app, name="operator", route_prefix="/operator")

        def healthy() -> dict[str, Any] | None:
            code, body = _healthz(port)
            return body if code == 200 else None

        body = eventually(healthy, timeout=180, interval=0.5)
        assert [c["name"] for c in body["controllers"]] == CONTROLLERS
        custom: Any = kubernetes.client.CustomObjectsApi(sb.api_client())
        eventually(lambda: custom.list_cluster_custom_object("config.kaiwo.silogen.ai", "v1alpha1",
                                                             "kaiwoconfigs")["items"], timeout=60)
        leases = kubernetes.client.CoordinationV1Api(sb.api_client()).list_namespaced_lease(NAMESPACE).items
        assert {lease.metadata.name for lease in leases} == {f"kaiwo-ray-{c}" for c in CONTROLLERS}
        records = sb.audit.records(user=SA_USER)
        assert records and not [r for r in records if r.code == 403]
        # `kaiwo-ray doctor --admin-url` reads Serve's real route table: here the operator app alone.
        import asyncio

        from kaiwo_ray.doctor.gather import _probe_admin

        answered, why = asyncio.run(_probe_admin(f"http://127.0.0.1:{port}"))
        assert not answered and why == "Serve routes ['/operator'] have no admin application at /", why
    finally:
        serve.shutdown()
        from kaiwo_ray.telemetry.settings import AGGREGATOR_NAME

        # detached: they outlive the replica, as they must on a real cluster (this one-node Ray offers no
        # kaiwo_gpu_telemetry, so the telemetry fleet is its aggregator alone)
        for name in [*CONTROLLERS, AGGREGATOR_NAME]:
            with contextlib.suppress(ValueError):
                ray.kill(ray.get_actor(name, namespace=ray_namespace), no_restart=True)


def test_the_deployed_operator_keeps_one_telemetry_actor_per_telemetry_node() -> None:
    """A multi-node Ray cluster of its own (a fresh interpreter: the session's Ray is one node): exactly one
    telemetry actor, on the node offering kaiwo_gpu_telemetry, reporting that node's Kubernetes name;
    none on the head or a plain worker; a telemetry node joining gets one, leaving drops it."""
    import os
    import subprocess
    import sys

    script = Path(__file__).with_name("operator_fleet_script.py")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env,
                          cwd=root)
    lines = [line for line in done.stdout.splitlines()
             if line.split(" ")[0] in {"placed", "joined", "left", "FAILED:"}]
    assert done.returncode == 0, "\n".join(lines) + done.stderr[-3000:]
    placed = next(line for line in lines if line.startswith("placed "))
    gpu_node = placed.rsplit(" ", 1)[1]
    assert placed == f"placed [('{gpu_node}', 'k8s-gpu-1')] gpu {gpu_node}"
    assert "joined ['k8s-gpu-1', 'k8s-gpu-2']" in lines
    assert "left ['k8s-gpu-1']" in lines
