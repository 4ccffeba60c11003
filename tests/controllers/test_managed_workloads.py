"""Plain workloads brought under Kaiwo, end to end through kubectl: the admission webhooks
(serve/webhooks.py under uvicorn over TLS) label a `kaiwo.silogen.ai/managed` Job or Deployment, Kueue
queues it, the managed-workload controller creates the KaiwoJob/KaiwoService that tracks it under the
submitting user, and the workload controllers report its progress. Deleting either deletes both, as
upstream users see it."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest
from e2e_harness import SANDBOX_TIMEOUT, TIME_FACTOR, in_process_operator
from e2e_scenarios import wait_phase
from e2e_support import KAIWO_API, Kube, Target, wait_for
from webhook_harness import AsgiServer

from kaiwo_ray.admission.registration import configurations
from kaiwo_ray.admission.workloads import Settings
from kaiwo_ray.controllers.manager import HostSettings
from kaiwo_sandbox.testing import RunningSandbox, start_sandbox
from serve.webhooks import build_webhook_app

Kubectl = Callable[..., subprocess.CompletedProcess[str]]
USER = "jane.doe-example.com"  # Jane.Doe@example.com, RFC 1123-sanitised
CONTROLLERS = ["kaiwoconfig", "kaiwoqueueconfig", "kaiwojob", "kaiwoservice", "managedworkload"]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningSandbox, Target]]:
    sb = start_sandbox(cluster=True, time_factor=TIME_FACTOR)
    server = AsgiServer(build_webhook_app(Settings()))
    try:
        wait_for(lambda: server.started, 10, "the webhook server to start")
        custom = kubernetes.client.CustomObjectsApi(sb.api_client())
        for config in configurations(url=server.url, ca_bundle=server.ca_bundle):
            custom.create_cluster_custom_object("admissionregistration.k8s.io", "v1",
                                                config["kind"].lower() + "s", config)
        settings = HostSettings(kubeconfig=str(sb.kubeconfig_path), lease=False)
        with in_process_operator(settings, CONTROLLERS, timeout=30):
            target = Target(Kube(sb.api_client()), "sandbox", SANDBOX_TIMEOUT, sandbox=True)
            wait_for(lambda: target.kube.get(target.kube.kueue_api, "ClusterQueue", "kaiwo"), SANDBOX_TIMEOUT,
                     "the default ClusterQueue kaiwo")
            yield sb, target
    finally:
        server.stop()
        sb.stop()


@pytest.fixture(scope="module")
def kubectl(env: tuple[RunningSandbox, Target], tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    import shutil

    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip("kubectl not installed")
    sb = env[0]
    tmp = tmp_path_factory.mktemp("jane")
    config = sb.kubeconfig_for(sb.mint_token("Jane.Doe@example.com", ["devs"]), tmp / "jane.kubeconfig")

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([binary, "--kubeconfig", str(config), "--cache-dir", str(tmp / "c"), *args],
                                input=stdin, capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    return run


def get(target: Target, api: str, kind: str, name: str, namespace: str) -> Any:
    return target.kube.get(api, kind, name, namespace)


GPU_JOB = """apiVersion: batch/v1
kind: Job
metadata: {{name: {name}, namespace: {namespace}, labels: {{kaiwo.silogen.ai/managed: "true"}}}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{{name: main, image: busybox:1.36, command: [sleep, "20"], resources: {{limits: {{amd.com/gpu: 1}}}}}}]
"""

GPU_DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {namespace}, labels: {{kaiwo.silogen.ai/managed: "true"}}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: [{{name: main, image: nginx:1.27, command: [sleep, infinity], resources: {{limits: {{amd.com/gpu: 1}}}}}}]
"""


def test_a_labelled_gpu_job_is_queued_tracked_under_its_user_and_runs(
        env: tuple[RunningSandbox, Target], kubectl: Kubectl) -> None:
    _, target = env
    namespace = target.namespace("managed-job")
    kubectl("apply", "-f", "-", stdin=GPU_JOB.format(name="train", namespace=namespace))

    job = get(target, "batch/v1", "Job", "train", namespace)
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kaiwo"  # queued through Kueue
    assert job["metadata"]["labels"]["kaiwo.silogen.ai/user"] == USER
    tracker = wait_phase(target, "KaiwoJob", "train", namespace, "COMPLETE")
    assert tracker["spec"]["user"] == USER
    assert tracker["metadata"]["labels"]["kaiwo.silogen.ai/user"] == USER
    assert tracker["spec"]["job"]["spec"]["template"]["spec"]["containers"][0]["name"] == "main"
    job = get(target, "batch/v1", "Job", "train", namespace)
    assert job["status"].get("succeeded") == 1  # it ran
    assert job["metadata"]["labels"]["kaiwo.silogen.ai/run-id"] == tracker["metadata"]["uid"]
    assert [r["kind"] for r in job["metadata"]["ownerReferences"] if r.get("controller")] == ["KaiwoJob"]
    workloads = target.kube.items(target.kube.kueue_api, "Workload", namespace)
    assert [w for w in workloads if any(c["type"] == "Admitted" and c["status"] == "True"
                                        for c in (w.get("status") or {}).get("conditions") or [])]


def test_deleting_the_job_deletes_its_kaiwojob(env: tuple[RunningSandbox, Target], kubectl: Kubectl) -> None:
    _, target = env
    namespace = target.namespace("managed-del-job")
    kubectl("apply", "-f", "-", stdin=GPU_JOB.format(name="gone", namespace=namespace))
    wait_for(lambda: get(target, KAIWO_API, "KaiwoJob", "gone", namespace), target.timeout, "the KaiwoJob")
    kubectl("delete", "job", "gone", "-n", namespace)
    wait_for(lambda: get(target, KAIWO_API, "KaiwoJob", "gone", namespace) is None, target.timeout,
             "the KaiwoJob deleted with its Job")


def test_deleting_the_kaiwojob_deletes_its_job(env: tuple[RunningSandbox, Target], kubectl: Kubectl) -> None:
    _, target = env
    namespace = target.namespace("managed-del-cr")
    kubectl("apply", "-f", "-", stdin=GPU_JOB.format(name="gone", namespace=namespace))
    wait_for(lambda: (job := get(target, "batch/v1", "Job", "gone", namespace))
             and job["metadata"].get("ownerReferences"), target.timeout, "the Job adopted by its KaiwoJob")
    kubectl("delete", "kaiwojob", "gone", "-n", namespace)
    wait_for(lambda: get(target, "batch/v1", "Job", "gone", namespace) is None, target.timeout,
             "the Job deleted with its KaiwoJob")


def test_a_labelled_gpu_deployment_is_queued_tracked_under_its_user_and_runs(
        env: tuple[RunningSandbox, Target], kubectl: Kubectl) -> None:
    _, target = env
    namespace = target.namespace("managed-deploy")
    kubectl("apply", "-f", "-", stdin=GPU_DEPLOYMENT.format(name="serve", namespace=namespace))

    tracker = wait_phase(target, "KaiwoService", "serve", namespace, "RUNNING")
    assert tracker["spec"]["user"] == USER
    assert "deployment" in tracker["spec"]
    deployment = get(target, "apps/v1", "Deployment", "serve", namespace)
    assert deployment["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kaiwo"
    assert deployment["metadata"]["labels"]["kaiwo.silogen.ai/user"] == USER
    pods = [p for p in target.kube.items("v1", "Pod", namespace) if p["metadata"]["name"].startswith("serve-")]
    assert pods and all(p["status"].get("phase") == "Running" for p in pods if not p["metadata"].get(
        "deletionTimestamp"))


# One head and one one-GPU worker: the Ray cluster of both the RayJob and the RayService below.
_GPU_RAY_CLUSTER = """    headGroupSpec:
      rayStartParams: {{}}
      template:
        spec:
          containers: [{{name: ray-head, image: rayproject/ray:2.49.1, resources: {{limits: {{cpu: "1", memory: 2Gi}}}}}}]
    workerGroupSpecs:
    - groupName: gpu
      replicas: 1
      minReplicas: 1
      maxReplicas: 1
      rayStartParams: {{}}
      template:
        spec:
          containers: [{{name: ray-worker, image: rayproject/ray:2.49.1, resources: {{limits: {{amd.com/gpu: 1}}}}}}]
"""

GPU_RAYJOB = """apiVersion: ray.io/v1
kind: RayJob
metadata: {{name: {name}, namespace: {namespace}, labels: {{kaiwo.silogen.ai/managed: "true"}}}}
spec:
  entrypoint: python -c "print(1)"
  shutdownAfterJobFinishes: true
  rayClusterSpec:
""" + _GPU_RAY_CLUSTER

GPU_RAYSERVICE = """apiVersion: ray.io/v1
kind: RayService
metadata: {{name: {name}, namespace: {namespace}, labels: {{kaiwo.silogen.ai/managed: "true"}}}}
spec:
  serveConfigV2: |
    applications:
    - name: app
      import_path: app:deployment
      route_prefix: /
  rayClusterConfig:
""" + _GPU_RAY_CLUSTER


def _admitted_workload_of(target: Target, namespace: str, owner_kind: str) -> bool:
    return any(ref.get("kind") == owner_kind for w in target.kube.items(target.kube.kueue_api, "Workload", namespace)
               if any(c["type"] == "Admitted" and c["status"] == "True"
                      for c in (w.get("status") or {}).get("conditions") or [])
               for ref in w["metadata"].get("ownerReferences") or [])


def test_a_labelled_gpu_rayjob_is_queued_tracked_under_its_user_and_runs(
        env: tuple[RunningSandbox, Target], kubectl: Kubectl) -> None:
    _, target = env
    namespace = target.namespace("managed-rayjob")
    kubectl("apply", "-f", "-", stdin=GPU_RAYJOB.format(name="tune", namespace=namespace))

    rayjob = get(target, "ray.io/v1", "RayJob", "tune", namespace)
    assert rayjob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kaiwo"
    assert rayjob["metadata"]["labels"]["kaiwo.silogen.ai/user"] == USER
    tracker = wait_phase(target, "KaiwoJob", "tune", namespace, {"RUNNING", "COMPLETE"})
    assert tracker["spec"]["user"] == USER
    assert "rayJob" in tracker["spec"]
    assert _admitted_workload_of(target, namespace, "RayJob")  # queued through Kueue, and admitted
    rayjob = get(target, "ray.io/v1", "RayJob", "tune", namespace)
    assert [r["kind"] for r in rayjob["metadata"]["ownerReferences"] if r.get("controller")] == ["KaiwoJob"]


def test_a_labelled_gpu_rayservice_is_queued_tracked_under_its_user_and_runs(
        env: tuple[RunningSandbox, Target], kubectl: Kubectl) -> None:
    _, target = env
    namespace = target.namespace("managed-raysvc")
    kubectl("apply", "-f", "-", stdin=GPU_RAYSERVICE.format(name="infer", namespace=namespace))

    service = get(target, "ray.io/v1", "RayService", "infer", namespace)
    assert service["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kaiwo"
    assert service["metadata"]["labels"]["kaiwo.silogen.ai/user"] == USER
    tracker = wait_phase(target, "KaiwoService", "infer", namespace, "RUNNING")
    assert tracker["spec"]["user"] == USER
    assert tracker["spec"]["rayService"]["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["groupName"] == "gpu"
    assert _admitted_workload_of(target, namespace, "RayService")  # queued through Kueue, and admitted
    service = get(target, "ray.io/v1", "RayService", "infer", namespace)
    assert service["metadata"]["labels"]["kaiwo.silogen.ai/run-id"] == tracker["metadata"]["uid"]
    assert [r["kind"] for r in service["metadata"]["ownerReferences"] if r.get("controller")] == ["KaiwoService"]
    assert not target.kube.items("workload.codeflare.dev/v1beta2", "AppWrapper", namespace)  # no wrapper made
    clusters = target.kube.items("ray.io/v1", "RayCluster", namespace)
    assert clusters and all(c["metadata"]["ownerReferences"][0]["kind"] == "RayService" for c in clusters)


def test_deleting_the_rayservice_deletes_its_kaiwoservice_and_back(
        env: tuple[RunningSandbox, Target], kubectl: Kubectl) -> None:
    _, target = env
    namespace = target.namespace("managed-raysvc-del")
    kubectl("apply", "-f", "-", stdin=GPU_RAYSERVICE.format(name="gone", namespace=namespace))
    wait_for(lambda: get(target, KAIWO_API, "KaiwoService", "gone", namespace), target.timeout, "the KaiwoService")
    kubectl("delete", "rayservice", "gone", "-n", namespace)
    wait_for(lambda: get(target, KAIWO_API, "KaiwoService", "gone", namespace) is None, target.timeout,
             "the KaiwoService deleted with its RayService")

    kubectl("apply", "-f", "-", stdin=GPU_RAYSERVICE.format(name="back", namespace=namespace))
    wait_for(lambda: (svc := get(target, "ray.io/v1", "RayService", "back", namespace))
             and svc["metadata"].get("ownerReferences"), target.timeout, "the RayService adopted by its KaiwoService")
    kubectl("delete", "kaiwoservice", "back", "-n", namespace)
    wait_for(lambda: get(target, "ray.io/v1", "RayService", "back", namespace) is None, target.timeout,
             "the RayService deleted with its KaiwoService")
