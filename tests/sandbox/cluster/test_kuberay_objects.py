"""What the simulated KubeRay renders, as pure functions: pod names/labels/commands, Services,
the submitter Job and how long the simulated Ray job runs, and worker-count arithmetic."""

from __future__ import annotations

from typing import Any

import pytest

from kaiwo_sandbox.cluster.kuberay.objects import (
    build_pod,
    default_submitter_template,
    head_service,
    ray_cluster_for,
    ray_job_run_annotations,
    rayjob_cluster_name,
    submitter_job,
)
from kaiwo_sandbox.cluster.kuberay.raycluster import desired_resources, desired_workers
from kaiwo_sandbox.cluster.kuberay.rayservice import serve_applications

CLUSTER: dict[str, Any] = {
    "apiVersion": "ray.io/v1", "kind": "RayCluster",
    "metadata": {"name": "rc", "namespace": "team", "uid": "u-1"},
    "spec": {"headGroupSpec": {"rayStartParams": {"num-cpus": "0"}, "template": {
        "metadata": {"labels": {"team": "ml"}},
        "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0",
                                 "resources": {"requests": {"cpu": "2", "memory": "8Gi"}}}]}}},
             "workerGroupSpecs": [{"groupName": "gpu", "replicas": 3, "minReplicas": 1, "maxReplicas": 2,
                                   "numOfHosts": 2, "rayStartParams": {}, "template": {"spec": {"containers": [
                                       {"name": "ray-worker", "image": "rayproject/ray:2.60.0",
                                        "resources": {"limits": {"amd.com/gpu": "8"}}}]}}}]},
}


def test_head_pod_is_labelled_named_and_runs_ray_start_block() -> None:
    pod = build_pod(CLUSTER, "head", CLUSTER["spec"]["headGroupSpec"], "headgroup")
    meta = pod["metadata"]
    assert meta["generateName"] == "rc-head-"
    assert meta["labels"] == {"team": "ml", "ray.io/cluster": "rc", "ray.io/node-type": "head",
                              "ray.io/group": "headgroup", "ray.io/is-ray-node": "yes",
                              "ray.io/identifier": "rc-head", "app.kubernetes.io/name": "kuberay",
                              "app.kubernetes.io/created-by": "kuberay-operator", "ray.io/serve": "true"}
    assert meta["ownerReferences"][0] == {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc",
                                          "uid": "u-1", "controller": True, "blockOwnerDeletion": True}
    container = pod["spec"]["containers"][0]
    assert container["command"] == ["/bin/bash", "-c", "--"]
    # KubeRay's rendering: sorted flags, each padded with a space; the filled-in defaults; no memory
    # flag without a memory limit
    assert container["args"][0] == ("ulimit -n 65536; ray start --head  --block  --dashboard-agent-listen-port=52365 "
                                    " --dashboard-host=0.0.0.0  --metrics-export-port=8080  --num-cpus=0 ")
    env = {e["name"]: e for e in container["env"]}
    assert env["RAY_CLUSTER_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['ray.io/cluster']"
    assert env["KUBERAY_GEN_RAY_START_CMD"]["value"] == container["args"][0].removeprefix("ulimit -n 65536; ")
    assert env["RAY_ADDRESS"]["value"] == "127.0.0.1:6379"
    assert {p["containerPort"] for p in container["ports"]} == {6379, 8265, 10001, 8080}
    assert CLUSTER["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0].get("command") is None


def test_worker_pod_joins_the_head_service() -> None:
    pod = build_pod(CLUSTER, "worker", CLUSTER["spec"]["workerGroupSpecs"][0], "gpu")
    assert pod["metadata"]["generateName"] == "rc-gpu-worker-"
    assert pod["metadata"]["labels"]["ray.io/group"] == "gpu"
    args = pod["spec"]["containers"][0]["args"][0]
    assert " --address=rc-head-svc.team.svc.cluster.local:6379 " in args
    assert " --num-gpus=8 " in args  # from the first limit ending in "gpu"
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["FQ_RAY_IP"] == "rc-head-svc.team.svc.cluster.local"
    assert env["RAY_ADDRESS"] == "rc-head-svc.team.svc.cluster.local:6379"


def test_overwrite_annotation_keeps_the_users_command() -> None:
    group = {"template": {"metadata": {"annotations": {"ray.io/overwrite-container-cmd": "true"}},
                          "spec": {"containers": [{"name": "c", "command": ["sleep", "5"]}]}}}
    pod = build_pod(CLUSTER, "head", group, "headgroup")
    assert pod["spec"]["containers"][0]["command"] == ["sleep", "5"]


def test_head_service_selects_the_head() -> None:
    svc = head_service(CLUSTER)
    assert svc["metadata"]["name"] == "rc-head-svc"
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == {"ray.io/cluster": "rc", "ray.io/node-type": "head"}


def test_worker_counts_clamp_to_min_max_and_hosts() -> None:
    group = CLUSTER["spec"]["workerGroupSpecs"][0]
    assert desired_workers(group) == 4  # replicas 3 clamped to max 2, times 2 hosts
    assert desired_workers({**group, "suspend": True}) == 0
    assert desired_workers({"minReplicas": 2}) == 2
    assert desired_resources(CLUSTER) == {"desiredCPU": "2", "desiredMemory": "8Gi", "desiredGPU": "32",
                                          "desiredTPU": "0"}


def test_cluster_for_a_rayjob_carries_origin_labels_and_owner() -> None:
    rayjob = {"apiVersion": "ray.io/v1", "kind": "RayJob",
              "metadata": {"name": "train", "namespace": "team", "uid": "j", "labels": {"kaiwo": "x"}}}
    name = rayjob_cluster_name("train")
    assert name.startswith("train-") and len(name) == 11
    cluster = ray_cluster_for(rayjob, name, {"suspend": True, "headGroupSpec": {}}, "RayJob")
    assert cluster["metadata"]["labels"] == {"kaiwo": "x", "ray.io/originated-from-cr-name": "train",
                                             "ray.io/originated-from-crd": "RayJob"}
    assert "suspend" not in cluster["spec"]
    assert cluster["metadata"]["ownerReferences"][0]["kind"] == "RayJob"


@pytest.mark.parametrize(("entrypoint", "annotations", "expected"), [
    ("sleep 30", {}, {"sandbox.kaiwo-ray.dev/run-seconds": "30", "sandbox.kaiwo-ray.dev/exit-code": "0"}),
    ("python -c 'while True: pass'; sleep infinity", {}, {"sandbox.kaiwo-ray.dev/run-seconds": "infinity",
                                                         "sandbox.kaiwo-ray.dev/exit-code": "0"}),
    ("sleep 2; exit 3", {}, {"sandbox.kaiwo-ray.dev/run-seconds": "2", "sandbox.kaiwo-ray.dev/exit-code": "3"}),
    ("python train.py", {}, {}),
    ("sleep 30", {"sandbox.kaiwo-ray.dev/run-seconds": "7"}, {"sandbox.kaiwo-ray.dev/run-seconds": "7"}),
])
def test_how_long_the_ray_job_runs(entrypoint: str, annotations: dict[str, str], expected: dict[str, str]) -> None:
    rayjob = {"metadata": {"annotations": annotations}, "spec": {"entrypoint": entrypoint}}
    assert ray_job_run_annotations(rayjob) == expected


def test_submitter_job_submits_the_entrypoint() -> None:
    rayjob = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "train", "namespace": "team",
                                                                        "uid": "j"},
              "spec": {"entrypoint": "sleep 5", "rayClusterSpec": CLUSTER["spec"]}}
    job = submitter_job(rayjob, "train-abcde", "train-xyz12")
    assert job["metadata"]["name"] == "train"
    assert job["spec"]["backoffLimit"] == 2
    template = job["spec"]["template"]
    assert template["metadata"]["annotations"]["sandbox.kaiwo-ray.dev/run-seconds"] == "5"
    command = template["spec"]["containers"][0]["command"]
    assert command == ["ray", "job", "submit", "--address", "http://train-abcde-head-svc.team.svc.cluster.local:8265",
                       "--no-wait", "--submission-id", "train-xyz12", "--", "sleep 5"]
    assert default_submitter_template(rayjob)["spec"]["containers"][0]["image"] == "rayproject/ray:2.60.0"


def test_serve_applications_from_serve_config() -> None:
    config = "applications:\n- name: a\n  deployments:\n  - name: D1\n- import_path: x:y\n"
    assert serve_applications(config) == {"a": ["D1"], "default": []}
    assert serve_applications("not: [valid") == {}
    assert serve_applications(None) == {}


def test_ray_containers_get_kuberays_probes_unless_they_have_their_own() -> None:
    """KubeRay 1.4: exec probes on the raylet (and the head's GCS); a RayService's workers are ready only
    with their Serve proxy healthy, failing at once; a probe the user set is kept as it is."""
    head = build_pod(CLUSTER, "head", CLUSTER["spec"]["headGroupSpec"], "headgroup")["spec"]["containers"][0]
    command = head["readinessProbe"]["exec"]["command"]
    assert command[:2] == ["bash", "-c"]
    assert command[2] == ("wget -T 2 -q -O- http://localhost:52365/api/local_raylet_healthz | grep success && "
                          "wget -T 10 -q -O- http://localhost:8265/api/gcs_healthz | grep success")
    assert (head["readinessProbe"]["initialDelaySeconds"], head["readinessProbe"]["failureThreshold"]) == (10, 10)
    assert (head["livenessProbe"]["initialDelaySeconds"], head["livenessProbe"]["failureThreshold"]) == (30, 120)
    assert head["livenessProbe"]["exec"]["command"] == command

    service_cluster = {**CLUSTER, "metadata": {**CLUSTER["metadata"], "labels": {"ray.io/originated-from-crd": "RayService"}}}
    group = CLUSTER["spec"]["workerGroupSpecs"][0]
    worker = build_pod(service_cluster, "worker", group, "gpu")["spec"]["containers"][0]
    assert worker["readinessProbe"]["exec"]["command"][2].endswith(
        "&& wget -T 10 -q -O- http://localhost:8000/-/healthz | grep success")
    assert worker["readinessProbe"]["failureThreshold"] == 1
    assert "-/healthz" not in worker["livenessProbe"]["exec"]["command"][2]

    own = {"httpGet": {"path": "/ready", "port": 9000}}
    custom = {**group, "template": {"spec": {"containers": [{**group["template"]["spec"]["containers"][0],
                                                            "readinessProbe": own}]}}}
    kept = build_pod(service_cluster, "worker", custom, "gpu")["spec"]["containers"][0]
    assert kept["readinessProbe"] == own and "exec" in kept["livenessProbe"]
