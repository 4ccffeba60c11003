"""The operator's admission webhooks (serve/webhooks.py over kaiwo_ray/admission) registered in the
sandbox and exercised through kubectl: invalid Kaiwo specs refused with their field paths, plain
workloads labelled and defaulted, GPU workloads refused under enforcement, dry runs without effects."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from webhook_harness import AsgiServer

from kaiwo_ray.admission.registration import configurations
from kaiwo_ray.admission.workloads import Settings
from kaiwo_sandbox.contracts import GVR
from kaiwo_sandbox.testing import RunningSandbox, eventually
from serve.webhooks import build_webhook_app

Kubectl = Callable[..., subprocess.CompletedProcess[str]]
JOBS = GVR("batch", "v1", "jobs")
KAIWOJOBS = GVR("kaiwo.silogen.ai", "v1alpha1", "kaiwojobs")


def install(sandbox: RunningSandbox, settings: Settings) -> Iterator[AsgiServer]:
    server = AsgiServer(build_webhook_app(settings))
    try:
        eventually(lambda: server.started, 10, "the webhook server to start")
        custom = kubernetes.client.CustomObjectsApi(sandbox.api_client())
        for config in configurations(url=server.url, ca_bundle=server.ca_bundle):
            plural = config["kind"].lower() + "s"
            custom.create_cluster_custom_object("admissionregistration.k8s.io", "v1", plural, config)
        yield server
    finally:
        server.stop()


@pytest.fixture
def webhooks(sandbox: RunningSandbox) -> Iterator[AsgiServer]:
    yield from install(sandbox, Settings())


@pytest.fixture
def enforcing(sandbox: RunningSandbox) -> Iterator[AsgiServer]:
    yield from install(sandbox, Settings(enforce_on_gpu_workloads=True))


@pytest.fixture
def kubectl(sandbox: RunningSandbox, kubectl_bin: str, tmp_path: Path) -> Kubectl:
    token = sandbox.mint_token("Jane.Doe@example.com", ["devs"])
    config = sandbox.kubeconfig_for(token, tmp_path / "jane.kubeconfig")

    def run(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([kubectl_bin, "--kubeconfig", str(config), "--cache-dir", str(tmp_path / "c"),
                                 *args], input=stdin, capture_output=True, text=True, timeout=60)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    return run


@pytest.fixture
def kubectl_bin() -> str:
    import shutil

    path = shutil.which("kubectl")
    if path is None:
        pytest.skip("kubectl not installed")
    return path


def job(name: str, *, labels: dict[str, str] | None = None, gpus: int = 0) -> str:
    resources = f"{{limits: {{amd.com/gpu: {gpus}}}}}" if gpus else "{}"
    return f"""apiVersion: batch/v1
kind: Job
metadata: {{name: {name}, labels: {labels or {}}}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{{name: main, image: busybox, resources: {resources}}}]
"""


def stored(sandbox: RunningSandbox, gvr: GVR, name: str) -> Any:
    return sandbox.store.find_ref(gvr, "default", name)


# Each is a spec the models or the renderer refuse, with the field path kubectl must show.
INVALID_KAIWOJOBS = [
    ("spec: {image: busybox, entrypoint: 'echo', clusterQueue: 'not a label!'}", "spec.clusterQueue: "),
    ("spec: {image: busybox, entrypoint: 'echo', podTemplateSpecLabels: {'bad key!': x}}",
     "spec.podTemplateSpecLabels: "),
    ("spec: {image: busybox, entrypoint: 'echo', resources: {limits: {amd.com/gpu: '1.5'}}}",
     "spec.resources.limits.amd.com/gpu: "),
]


@pytest.mark.parametrize(("spec", "expected"), INVALID_KAIWOJOBS)
def test_an_invalid_kaiwojob_is_refused_with_its_field_path_and_not_stored(
        sandbox: RunningSandbox, webhooks: AsgiServer, kubectl: Kubectl, spec: str, expected: str) -> None:
    manifest = f"apiVersion: kaiwo.silogen.ai/v1alpha1\nkind: KaiwoJob\nmetadata: {{name: bad}}\n{spec}\n"
    result = kubectl("apply", "-f", "-", stdin=manifest, check=False)
    assert result.returncode == 1
    assert f'The KaiwoJob "bad" is invalid: {expected}' in result.stderr  # kubectl prints an Invalid's causes
    assert stored(sandbox, KAIWOJOBS, "bad") is None
    status, _, raw = sandbox.http("POST", "/apis/kaiwo.silogen.ai/v1alpha1/namespaces/default/kaiwojobs",
                                  yaml.safe_load(manifest))
    body = json.loads(raw)
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"].startswith('admission webhook "vkaiwojob.kaiwo.silogen.ai" denied the request: '
                                      'KaiwoJob.kaiwo.silogen.ai "bad" is invalid: ')
    assert body["details"]["causes"][0]["field"] == expected.rstrip(": ")


def test_a_valid_kaiwojob_and_a_misnamed_kaiwoconfig(sandbox: RunningSandbox, webhooks: AsgiServer,
                                                    kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin="apiVersion: kaiwo.silogen.ai/v1alpha1\nkind: KaiwoJob\nmetadata: {name: ok}\n"
                                      "spec: {image: busybox, entrypoint: 'echo hi'}\n")
    assert stored(sandbox, KAIWOJOBS, "ok") is not None
    result = kubectl("apply", "--validate=false", "-f", "-", check=False, stdin="apiVersion: config.kaiwo.silogen.ai/v1alpha1\n"
                     "kind: KaiwoConfig\nmetadata: {name: other}\nspec: {}\n")
    assert 'metadata.name: must be "kaiwo"' in result.stderr


def test_a_labelled_job_gets_its_queue_user_and_grace_period_at_admission(
        sandbox: RunningSandbox, webhooks: AsgiServer, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=job("train", labels={"kaiwo.silogen.ai/managed": "true"}, gpus=1))
    obj = stored(sandbox, JOBS, "train")
    labels = obj["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "kaiwo"
    assert labels["kaiwo.silogen.ai/user"] == "jane.doe-example.com"
    # Upstream's default (0 when unset) never applies: the API server defaults it to 30 before
    # mutating webhooks run, in a real cluster as in the sandbox.
    assert obj["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 30
    assert "finalizers" not in obj["metadata"]  # nothing but labels and defaults at admission


def test_enforcement_refuses_an_unlabelled_gpu_job_with_the_fix_and_leaves_cpu_jobs_alone(
        sandbox: RunningSandbox, enforcing: AsgiServer, kubectl: Kubectl) -> None:
    result = kubectl("apply", "-f", "-", stdin=job("gpu", gpus=1), check=False)
    assert result.returncode == 1
    assert ('Error from server (Forbidden): error when creating "STDIN": admission webhook "vjob.kaiwo.silogen.ai" '
            'denied the request: Job "gpu" requests GPUs') in result.stderr
    assert 'add the label kaiwo.silogen.ai/managed: "true"' in result.stderr
    assert stored(sandbox, JOBS, "gpu") is None

    kubectl("apply", "-f", "-", stdin=job("cpu"))
    cpu = stored(sandbox, JOBS, "cpu")
    assert "kueue.x-k8s.io/queue-name" not in (cpu["metadata"].get("labels") or {})
    assert "kaiwo.silogen.ai/user" not in (cpu["metadata"].get("labels") or {})


def test_server_side_dry_run_creates_nothing_anywhere(sandbox: RunningSandbox, webhooks: AsgiServer,
                                                      kubectl: Kubectl) -> None:
    before = {gvr: len(sandbox.store.refs(gvr)) for gvr in (JOBS, KAIWOJOBS, GVR("kueue.x-k8s.io", "v1beta2",
                                                                                      "localqueues"))}
    result = kubectl("apply", "--dry-run=server", "-o", "yaml", "-f", "-",
                     stdin=job("dry", labels={"kaiwo.silogen.ai/managed": "true"}, gpus=1))
    assert "kueue.x-k8s.io/queue-name: kaiwo" in result.stdout  # the webhook answered, the patch shows
    assert {gvr: len(sandbox.store.refs(gvr)) for gvr in before} == before


def test_enforcement_leaves_what_the_operator_renders_for_a_kaiwojob_alone(
        sandbox: RunningSandbox, enforcing: AsgiServer, kubectl: Kubectl) -> None:
    """A KaiwoJob's Job carries Kaiwo's run-id (no managed label): under Kaiwo already, so the validating
    webhook's objectSelector skips it and the operator's creates never wait on the webhook server."""
    kubectl("apply", "-f", "-", stdin=job("rendered", labels={"kaiwo.silogen.ai/run-id": "1234"}, gpus=1))
    assert stored(sandbox, JOBS, "rendered") is not None
    enforcing.stop()  # the server gone: a call would fail the create (failurePolicy Fail); none is made
    kubectl("apply", "-f", "-", stdin=job("rendered-2", labels={"kaiwo.silogen.ai/run-id": "5678"}, gpus=1))
    assert stored(sandbox, JOBS, "rendered-2") is not None


def test_the_submitter_is_recorded_from_the_request_and_cannot_be_forged_or_changed(
        sandbox: RunningSandbox, webhooks: AsgiServer, kubectl: Kubectl) -> None:
    """GPU accounting charges `kaiwo.silogen.ai/submitted-by` (docs/accounting.md): the webhook writes the
    authenticated username there, over whatever the manifest claimed, and keeps it on every update."""
    kubectl("apply", "-f", "-", stdin="apiVersion: kaiwo.silogen.ai/v1alpha1\nkind: KaiwoJob\nmetadata:\n"
                                      "  name: forged\n  annotations: {kaiwo.silogen.ai/submitted-by: boss}\n"
                                      "spec: {image: busybox, entrypoint: 'echo hi', user: boss@example.com}\n")
    obj = stored(sandbox, KAIWOJOBS, "forged")
    assert obj["metadata"]["annotations"]["kaiwo.silogen.ai/submitted-by"] == "Jane.Doe@example.com"
    assert obj["spec"]["user"] == "boss@example.com"  # the declared user stays as written, shown beside
    kubectl("annotate", "--overwrite", "kaiwojob", "forged", "kaiwo.silogen.ai/submitted-by=boss")
    assert stored(sandbox, KAIWOJOBS, "forged")["metadata"]["annotations"][
        "kaiwo.silogen.ai/submitted-by"] == "Jane.Doe@example.com"
    kubectl("apply", "-f", "-", stdin=job("plain", labels={"kaiwo.silogen.ai/managed": "true"}, gpus=1))
    assert stored(sandbox, JOBS, "plain")["metadata"]["annotations"][
        "kaiwo.silogen.ai/submitted-by"] == "Jane.Doe@example.com"
