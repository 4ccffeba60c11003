"""`kaiwo-ray up --in-cluster` as a pod runs it: KUBERNETES_SERVICE_HOST/PORT and a service-account mount
(token, ca.crt, namespace) instead of a kubeconfig, as deploy/'s ServiceAccount, against the sandbox with
RBAC enforced. The operator takes its Leases in the pod's namespace and is never refused."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes
import yaml
from deploy_support import DEPLOY

from kaiwo_sandbox.testing import eventually, start_sandbox

NAMESPACE = "kaiwo-system"
SA_USER = f"system:serviceaccount:{NAMESPACE}:kaiwo-ray"


def test_up_in_cluster_runs_as_the_service_account_with_leases_in_its_namespace(tmp_path: Path) -> None:
    with start_sandbox(cluster=True, time_factor=0.05, authorization="RBAC") as sb:
        core = kubernetes.client.CoreV1Api(sb.api_client())
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        api = sb.api_client()
        for name in ("serviceaccount.yaml", "rbac-operator.yaml"):
            for doc in yaml.safe_load_all((DEPLOY / "base" / name).read_text()):
                kubernetes.utils.create_from_dict(api, doc)
        mount = tmp_path / "serviceaccount"
        mount.mkdir()
        (mount / "token").write_text(sb.service_account_token(NAMESPACE, "kaiwo-ray"))
        (mount / "namespace").write_text(NAMESPACE)
        assert sb.ca_cert_path is not None
        shutil.copy(sb.ca_cert_path, mount / "ca.crt")
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "KAIWO_SERVICE_ACCOUNT_DIR": str(mount),
               "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(sb.sandbox.port)}
        env.pop("KUBECONFIG", None)
        log_path = tmp_path / "up.log"
        command = [sys.executable, "-m", "hosts.cli.main", "up", "--in-cluster", "--no-ray",
                   "--controllers", "kaiwoconfig,kaiwojob", "--health-interval", "0.5"]
        with log_path.open("wb") as log:
            up = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
        try:
            eventually(lambda: "Running." in log_path.read_text() or up.poll() is not None, timeout=60)
            assert up.poll() is None, log_path.read_text()
            custom: Any = kubernetes.client.CustomObjectsApi(sb.api_client())
            eventually(lambda: custom.list_cluster_custom_object("config.kaiwo.silogen.ai", "v1alpha1",
                                                                 "kaiwoconfigs")["items"], timeout=30)
            body = yaml.safe_load((DEPLOY.parent / "examples" / "cpu-job.yaml").read_text())
            custom.create_namespaced_custom_object("kaiwo.silogen.ai", "v1alpha1", "default", "kaiwojobs", body)
            eventually(lambda: (custom.get_namespaced_custom_object(
                "kaiwo.silogen.ai", "v1alpha1", "default", "kaiwojobs", "cpu-job").get("status") or {}).get(
                "status") in ("PENDING", "STARTING", "RUNNING", "COMPLETE"), timeout=60)
            up.send_signal(signal.SIGTERM)
            assert up.wait(30) == 0, log_path.read_text()
        finally:
            if up.poll() is None:
                up.kill()
                up.wait(10)
        leases = kubernetes.client.CoordinationV1Api(sb.api_client()).list_namespaced_lease(NAMESPACE).items
        assert {lease.metadata.name for lease in leases} == {"kaiwo-ray-kaiwoconfig", "kaiwo-ray-kaiwojob"}
        records = sb.audit.records(user=SA_USER)
        assert records and not [r for r in records if r.code == 403], [r for r in records if r.code == 403][:3]
