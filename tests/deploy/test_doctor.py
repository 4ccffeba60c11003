"""`kaiwo-ray doctor` against the sandbox (RBAC enforced): a healthy install (deploy/ applied, the operator
running in-cluster as its ServiceAccount) passes every check; a broken one names each problem with its
fix and exits 1."""

from __future__ import annotations

import asyncio
import copy
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from deploy_support import DEPLOY

from kaiwo_ray.controllers.manager import HostSettings, Operator
from kaiwo_ray.kube import incluster
from kaiwo_ray.nodes import default_nodes
from kaiwo_ray.permissions import LEASE_RULES, OPERATOR_RULES
from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox

NAMESPACE = "kaiwo-system"


def doctor(sb: RunningSandbox, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kaiwo_ray.cli.main", "doctor", "--kubeconfig",
                           str(sb.kubeconfig_path), *extra], capture_output=True, text=True, timeout=120)


def _nodes(*names: str) -> list[dict[str, Any]]:
    return [n for n in default_nodes() if n["metadata"]["name"] in names]


@pytest.fixture(scope="module")
def healthy(kubectl_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSandbox]:
    """One CPU and one GPU node (the sandbox does not simulate pod anti-affinity, so one telemetry worker
    per GPU node is only guaranteed with one replica), deploy/ applied, the operator in-cluster."""
    mount = tmp_path_factory.mktemp("serviceaccount")
    with start_sandbox(nodes=_nodes("cpu-epyc-01", "gpu-amd-mi300x-01"), cluster=True, time_factor=0.05,
                       authorization="RBAC") as sb, pytest.MonkeyPatch.context() as env:
        subprocess.run([kubectl_bin, "--kubeconfig", str(sb.kubeconfig_path), "apply", "-k", str(DEPLOY),
                        "--server-side"], check=True, capture_output=True, timeout=120)
        (mount / "token").write_text(sb.service_account_token(NAMESPACE, "kaiwo-ray"))
        (mount / "namespace").write_text(NAMESPACE)
        assert sb.ca_cert_path is not None
        shutil.copy(sb.ca_cert_path, mount / "ca.crt")
        env.setenv(incluster.DIR_VARIABLE, str(mount))
        env.setenv(incluster.HOST_VARIABLE, "127.0.0.1")
        env.setenv(incluster.PORT_VARIABLE, str(sb.sandbox.port))
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        operator = Operator(None, HostSettings(in_cluster=True, lease_namespace=NAMESPACE))
        asyncio.run_coroutine_threadsafe(operator.start(), loop).result(60)
        try:
            yield sb
        finally:
            asyncio.run_coroutine_threadsafe(operator.stop(), loop).result(60)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)


def test_a_healthy_install_passes_every_check(healthy: RunningSandbox) -> None:
    seen: list[str] = []

    def passes() -> subprocess.CompletedProcess[str] | None:
        result = doctor(healthy)
        seen[:] = [result.stdout + result.stderr]
        return result if result.returncode == 0 else None  # the queue config and telemetry need a moment

    try:
        result = eventually(passes, timeout=60, interval=0.5, message="doctor to pass")
    except AssertionError as err:
        raise AssertionError(f"{err}; its last output:\n{seen[0] if seen else ''}") from None
    lines = result.stdout.splitlines()
    assert lines[-1] == "every check passed"
    assert all(line.startswith("OK ") for line in lines[:-1]), result.stdout
    checks = {line.split()[1].rstrip(":") for line in lines[:-1]}
    assert checks == {"api-server", "crds", "kueue", "kuberay", "appwrapper", "scheduler", "operator", "permissions",
                      "gpus", "queues", "telemetry", "admin-api"}
    assert sum(1 for line in lines if " permissions: " in line) == len(OPERATOR_RULES) + len(LEASE_RULES)
    assert "OK    gpus: node gpu-amd-mi300x-01: 8 amd.com/gpu allocatable" in lines


@pytest.fixture(scope="module")
def broken() -> Iterator[RunningSandbox]:
    """CRDs of an older kaiwo-ray, no AppWrapper, no scheduler, no operator, its role missing a rule, and a
    GPU node whose device plugin is down."""
    dead = copy.deepcopy(_nodes("gpu-nvidia-h100-01")[0])
    dead["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    with start_sandbox(nodes=[*_nodes("cpu-epyc-01"), dead], authorization="RBAC") as sb:
        api = sb.api_client()
        extensions = kubernetes.client.ApiextensionsV1Api(api)
        extensions.delete_custom_resource_definition("appwrappers.workload.codeflare.dev")
        path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/kaiwojobs.kaiwo.silogen.ai"
        stale = json.loads(sb.http("GET", path)[2])
        stale["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"].pop("gpus")
        assert sb.http("PUT", path, stale)[0] == 200  # as if generated by another version
        kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
        for doc in yaml.safe_load_all((DEPLOY / "base" / "rbac-operator.yaml").read_text()):
            if doc["kind"] == "ClusterRole":
                doc["rules"] = [r for r in doc["rules"] if r["resources"] != ["events"]]
            kubernetes.utils.create_from_dict(api, doc)
        yield sb


def test_a_broken_cluster_names_each_problem_with_its_fix(broken: RunningSandbox) -> None:
    result = doctor(broken)
    assert result.returncode == 1, result.stdout + result.stderr
    failures = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    text = "\n".join(failures)
    assert "crds: installed but not this version's: kaiwojobs.kaiwo.silogen.ai -> fix: kubectl apply -k deploy/" in text
    assert "appwrapper: AppWrapper is not installed" in text
    assert "scheduler: kaiwo-scheduler is not running" in text and "components/scheduler" in text
    assert "operator: no fresh Lease in kaiwo-system for: kaiwoconfig, kaiwoqueueconfig, kaiwojob, kaiwoservice" in text
    assert ("permissions: system:serviceaccount:kaiwo-system:kaiwo-ray may not create events (create events (core))"
            in text)
    assert "gpus: node gpu-nvidia-h100-01 is a GPU node but allocates no nvidia.com/gpu" in text
    assert "queues: KaiwoQueueConfig kaiwo does not exist" in text
    assert all(" -> fix: " in line for line in failures)
    assert len([line for line in result.stdout.splitlines() if " permissions: " in line and line.startswith("OK")]) \
        == len(OPERATOR_RULES) + len(LEASE_RULES) - 1
    assert "SKIP  telemetry: no RayService kaiwo-ray in kaiwo-system" in result.stdout
    assert result.stdout.splitlines()[-1] == f"{len(failures)} check(s) failed"


def test_doctor_without_a_kubeconfig_is_a_usage_error(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "kaiwo_ray.cli.main", "doctor", "--kubeconfig",
                             str(tmp_path / "none")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.startswith("kaiwo-ray doctor: kubeconfig ")


def test_the_permission_table_is_deploys_role() -> None:
    docs = {d["kind"]: d for d in yaml.safe_load_all((DEPLOY / "base" / "rbac-operator.yaml").read_text())}
    for kind, rules in (("ClusterRole", OPERATOR_RULES), ("Role", LEASE_RULES)):
        assert [(tuple(r["apiGroups"]), tuple(r["resources"]), tuple(r["verbs"])) for r in docs[kind]["rules"]] == \
            [(r.groups, r.resources, r.verbs) for r in rules]
