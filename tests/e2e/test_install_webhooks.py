"""The admission webhooks as installed (`deploy/sandbox/` plus `deploy/components/webhooks`) against a
sandbox that runs the `kaiwo-ray` image's pods as real processes, RBAC enforced: the webhook server runs
in the admin API's Serve replica on the real Ray head, makes its certificate Secret and the caBundle,
and the API server reaches it through Service kaiwo-ray-webhooks over TLS. A module of its own (not
test_install.py's install): the component is opt-in, and while a new head starts its webhook server,
creates the webhooks match are refused (failurePolicy Fail), which test_install.py's failover and
rollout steps would meet.

Needs root (each pod runs in a network namespace of its own), as CI has it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
import yaml
from real_install import INSTALL_SECONDS, ROOT, SA_USER, Kubectl, get_json, needs_real_pods

from kaiwo_sandbox.testing import RunningSandbox, eventually

pytestmark = needs_real_pods


def _ready(obj: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


@pytest.fixture(scope="module")
def installed(kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory) -> None:
    overlay = tmp_path_factory.mktemp("overlay")
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(ROOT / "deploy" / "sandbox", overlay)],
        "components": [os.path.relpath(ROOT / "deploy" / "components" / "webhooks", overlay)]}))
    kubectl("apply", "-k", str(overlay))
    eventually(lambda: _ready(get_json(kubectl, "rayservice", "-n", "kaiwo-system", "kaiwo-ray")),
               timeout=INSTALL_SECONDS, message="the RayService is Ready", interval=1.0,
               ignoring=lambda err: isinstance(err, (AssertionError, KeyError)))

    def answering() -> bool:  # the admin replica has started the webhook server and injected its CA
        probe = {"apiVersion": "batch/v1", "kind": "Job",
                 "metadata": {"generateName": "probe-", "namespace": "default",
                              "labels": {"kaiwo.silogen.ai/managed": "true"}},
                 "spec": {"template": {"spec": {"restartPolicy": "Never",
                                                "containers": [{"name": "c", "image": "busybox"}]}}}}
        return kubectl("create", "--dry-run=server", "-f", "-", stdin=json.dumps(probe), check=False).returncode == 0
    eventually(answering, timeout=120, interval=1.0, message="the webhooks answer through the API server")


def test_the_installed_webhooks_queue_and_track_a_labelled_plain_gpu_job(installed: None, kubectl: Kubectl) -> None:
    secret = get_json(kubectl, "secret", "-n", "kaiwo-system", "kaiwo-ray-webhook-cert")
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        hooks = get_json(kubectl, kind, "kaiwo-ray")["webhooks"]
        assert {h["clientConfig"].get("caBundle") for h in hooks} == {secret["data"]["ca.crt"]}
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "plain-gpu", "namespace": "default", "labels": {"kaiwo.silogen.ai/managed": "true"}},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "main", "image": "busybox", "command": ["sleep", "5"],
                "resources": {"limits": {"amd.com/gpu": 1}}}]}}}}
    dry = kubectl("apply", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(job))
    assert json.loads(dry.stdout)["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kaiwo"
    assert kubectl("get", "job", "-n", "default", "plain-gpu", check=False).returncode != 0  # nothing stored
    kubectl("apply", "-f", "-", stdin=json.dumps(job))
    labels = get_json(kubectl, "job", "-n", "default", "plain-gpu")["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "kaiwo" and labels["kaiwo.silogen.ai/user"]

    def tracked() -> dict[str, Any] | None:
        found = kubectl("get", "kaiwojob", "-n", "default", "plain-gpu", "-o", "json", check=False)
        return json.loads(found.stdout) if found.returncode == 0 else None
    tracker = eventually(tracked, timeout=60, interval=1.0, message="the KaiwoJob tracking the plain Job")
    assert tracker["spec"]["user"] == labels["kaiwo.silogen.ai/user"]

    def ran() -> str | None:
        status = (get_json(kubectl, "kaiwojob", "-n", "default", "plain-gpu").get("status") or {}).get("status")
        return status if status in ("RUNNING", "COMPLETE") else None
    eventually(ran, timeout=120, interval=1.0, message="the tracked plain Job runs")


def test_an_invalid_kaiwojob_is_refused_at_apply_and_a_kaiwojob_runs(installed: None, kubectl: Kubectl) -> None:
    bad = kubectl("apply", "-f", "-", check=False, stdin="apiVersion: kaiwo.silogen.ai/v1alpha1\nkind: KaiwoJob\n"
                  "metadata: {name: bad, namespace: default}\n"
                  "spec: {image: busybox, entrypoint: 'echo', clusterQueue: 'not a label!'}\n")
    assert bad.returncode == 1 and 'The KaiwoJob "bad" is invalid: spec.clusterQueue: ' in bad.stderr
    assert kubectl("get", "kaiwojob", "-n", "default", "bad", check=False).returncode != 0
    kubectl("apply", "-f", "examples/cpu-job.yaml")  # its Job (Kaiwo's run-id) is never sent to the webhooks

    def running() -> str | None:
        status = (get_json(kubectl, "kaiwojob", "-n", "default", "cpu-job").get("status") or {}).get("status")
        return status if status in ("RUNNING", "COMPLETE") else None
    eventually(running, timeout=90, interval=1.0, message="cpu-job runs")


def test_doctor_passes_and_the_service_account_met_no_403(installed: None, real_pods: RunningSandbox) -> None:
    result = subprocess.run([sys.executable, "-m", "hosts.cli.main", "doctor", "--kubeconfig",
                             str(real_pods.kubeconfig_path)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    lines = result.stdout.splitlines()
    failed = [line for line in lines if line.lstrip().startswith(("FAIL", "TODO"))]
    assert result.returncode == 0 and failed == [], result.stdout + result.stderr
    assert any(line.startswith("OK    webhooks: certificate valid until ") for line in lines), result.stdout
    assert "OK    webhooks: the API server reached them: a dry-run labelled Job in default was mutated" in lines
    forbidden = [(r.verb, r.resource, r.namespace, r.name) for r in real_pods.audit.records(user=SA_USER)
                 if r.code == 403]
    assert forbidden == []
