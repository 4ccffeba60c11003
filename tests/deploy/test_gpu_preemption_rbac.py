"""GPU preemption under the shipped roles, with RBAC enforced: the operator runs in-cluster as deploy/'s
ServiceAccount, bound to nothing but deploy/base/rbac-operator.yaml and rbac-gpu-preemption.yaml, with
its settings read from the environment as the deployed head reads them (GPU_PREEMPTION_ENABLED=true).
An idle GPU Job is preempted for a pending one, a busy one is not, without one forbidden request, and
the evaluation Lease is taken in kaiwo-system, where the operator's Role allows Leases."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_support import DEPLOY
from e2e_harness import in_process_operator
from e2e_support import Kube, wait_for

from actors.operator_app import settings_from_env
from kaiwo_ray.kube import incluster
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.permissions import PREEMPTION_RULES
from kaiwo_ray.reconcile.gpupreemption import PREFIX
from kaiwo_ray.telemetry.aggregator import Aggregator
from kaiwo_ray.telemetry.sampler import SandboxSampler
from kaiwo_ray.telemetry.sources import SamplingSource
from kaiwo_sandbox.cluster.nodes.gpusim import ANNOTATION
from kaiwo_sandbox.testing import start_sandbox

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "telemetry"))
from late_source import LateSource  # tests/telemetry is no package: on the path above

NAMESPACE = "kaiwo-system"
SA_USER = f"system:serviceaccount:{NAMESPACE}:kaiwo-ray"
API = "kaiwo.silogen.ai/v1alpha1"


def _documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / "base" / name).read_text()) if d]


def _job(name: str, utilization: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {
                "metadata": {"annotations": {ANNOTATION: utilization}},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "busybox", "command": ["sleep", "3600"],
                    "resources": {"limits": {"amd.com/gpu": "8"}, "requests": {"amd.com/gpu": "8"}}}]}}}}


def test_the_role_file_is_the_permission_table() -> None:
    (role,) = [d for d in _documents("rbac-gpu-preemption.yaml") if d["kind"] == "ClusterRole"]
    assert [(tuple(r["apiGroups"]), tuple(r["resources"]), tuple(r["verbs"])) for r in role["rules"]] == \
        [(r.groups, r.resources, r.verbs) for r in PREEMPTION_RULES]


@pytest.mark.slow
def test_preemption_runs_under_the_shipped_roles_without_one_forbidden_request(tmp_path: Path) -> None:
    mount = tmp_path / "serviceaccount"
    mount.mkdir()
    with start_sandbox(cluster=True, time_factor=1.0, authorization="RBAC") as sb:
        kube = Kube(sb.api_client())
        for name in ("namespace.yaml", "serviceaccount.yaml", "rbac-operator.yaml", "rbac-gpu-preemption.yaml"):
            for doc in _documents(name):
                kube.create(doc)
        (mount / "token").write_text(sb.service_account_token(NAMESPACE, "kaiwo-ray"))
        (mount / "namespace").write_text(NAMESPACE)
        assert sb.ca_cert_path is not None
        shutil.copy(sb.ca_cert_path, mount / "ca.crt")
        env = {incluster.DIR_VARIABLE: str(mount), incluster.HOST_VARIABLE: "127.0.0.1",
               incluster.PORT_VARIABLE: str(sb.sandbox.port), "KAIWO_IN_CLUSTER": "true",
               "GPU_PREEMPTION_ENABLED": "true", "GPU_PREEMPTION_POLLING_INTERVAL": "300ms"}
        with pytest.MonkeyPatch.context() as patch:  # the operator's clients read the mount from the environment
            for key, value in env.items():
                patch.setenv(key, value)
            settings, names, _ = settings_from_env(env)
            assert "gpuworkload" in names and settings.lease_namespace == NAMESPACE
            source = LateSource()  # utilization from the sandbox's GPUs, read as the admin (not under test)
            settings.controller_options["gpuworkload"]["source"] = source
            with in_process_operator(settings, names) as running:
                client = running.run(KubeClient.from_kubeconfig(str(sb.kubeconfig_path)))
                source.inner = SamplingSource(SandboxSampler(client), Aggregator(stale_after=30))
                try:
                    _idle_job_preempted_for_a_pending_one(kube)
                finally:
                    running.run(client.close())
        records = sb.audit.records(user=SA_USER)
    forbidden = [(r.verb, r.group, r.resource, r.namespace, r.name) for r in records if r.code == 403]
    assert forbidden == []
    assert {r.namespace for r in records if r.resource == "leases"} == {NAMESPACE}
    assert any(r.resource == "leases" and r.name == "gpu-preemption-eval" for r in records)
    assert any(r.resource == "jobs" and r.verb == "delete" and r.name == "train" for r in records)


def _idle_job_preempted_for_a_pending_one(kube: Kube) -> None:
    namespace = "preempt"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": namespace, "annotations": {PREFIX + "enabled": "true", PREFIX + "grace-period": "1s"}}})

    def phase(job: str) -> str:
        for item in kube.items(API, "GpuWorkload", namespace):
            if item["spec"]["workloadRef"]["name"] == job:
                return str((item.get("status") or {}).get("phase") or "")
        return ""

    kube.create(_job("train", "0"), namespace)
    wait_for(lambda: phase("train") == "Idle", 60, "train Idle")
    kube.create(_job("busy", "90"), namespace)
    wait_for(lambda: phase("busy") == "Active", 60, "busy Active")
    kube.create(_job("infer", "70"), namespace)  # both AMD nodes are full: it waits for GPUs
    wait_for(lambda: phase("train") == "Preempted", 60, "train Preempted")
    wait_for(lambda: kube.get("batch/v1", "Job", "train", namespace) is None, 30, "the train Job deleted")
    wait_for(lambda: phase("infer") == "Active", 60, "infer runs on the freed GPUs")
    assert phase("busy") == "Active" and kube.get("batch/v1", "Job", "busy", namespace) is not None
