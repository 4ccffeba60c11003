"""The worked examples E1-E8 of spec/workloads.md §9, as written there (E9 is lifecycle, not rendering)."""

from __future__ import annotations

import yaml
from render_fixtures import CONFIG, children, container, env_of, gpu_nodes, job, main, pod_templates, service

from kaiwo_ray.api.workloads import KaiwoJob
from kaiwo_ray.render import render_storage, workload_gpu_check

KAIWO_LABELS_E1 = {
    "kaiwo.silogen.ai/user": "jane.doe-example.com",
    "kaiwo.silogen.ai/name": "hello",
    "kaiwo.silogen.ai/type": "job",
    "kaiwo.silogen.ai/run-id": "U1",
}
# Upstream's pod securityContext plus, deliberately (docs/compatibility.md, Pod Security), what the
# "restricted" standard asks of a pod and of each container, and no API token in the pod.
SECURITY = {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
            "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
NO_GPU_ENV = [("NUM_GPUS", "0"), ("NUM_REPLICAS", "1"), ("NUM_GPUS_PER_REPLICA", "0")]


def test_e1_minimal_kaiwojob_renders_exactly_the_documented_job() -> None:
    workload = KaiwoJob.model_validate(
        {
            "apiVersion": "kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoJob",
            "metadata": {"name": "hello", "namespace": "team-a", "uid": "U1", "labels": {"project": "x"}},
            "spec": {
                "user": "Jane.Doe@example.com",
                "image": "busybox:latest",
                "entrypoint": "echo hi\nsleep 5\n",
            },
        }
    )
    assert children(workload) == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "hello",
                "namespace": "team-a",
                "labels": {"project": "x", **KAIWO_LABELS_E1, "kueue.x-k8s.io/queue-name": "kaiwo"},
                "ownerReferences": [
                    {
                        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
                        "kind": "KaiwoJob",
                        "name": "hello",
                        "uid": "U1",
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "suspend": True,
                "backoffLimit": 0,
                "ttlSecondsAfterFinished": 3600,
                "template": {
                    "metadata": {"labels": {"project": "x", **KAIWO_LABELS_E1}},
                    "spec": {
                        "schedulerName": "kaiwo-scheduler",
                        "restartPolicy": "Never",
                        "securityContext": SECURITY,
                        "containers": [
                            {
                                "name": "workload",
                                "image": "busybox:latest",
                                "imagePullPolicy": "Always",
                                "command": ["/bin/sh", "-c", "echo hi\nsleep 5"],
                                "env": [
                                    {"name": "NUM_GPUS", "value": "0"},
                                    {"name": "NUM_REPLICAS", "value": "1"},
                                    {"name": "NUM_GPUS_PER_REPLICA", "value": "0"},
                                ],
                                "resources": {
                                    "requests": {"cpu": "2", "memory": "16Gi"},
                                    "limits": {"cpu": "2", "memory": "16Gi"},
                                },
                                "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
                                "securityContext": CONTAINER_SECURITY,
                            }
                        ],
                        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}],
                        "automountServiceAccountToken": False,
                    },
                },
            },
        }
    ]


def test_e2_gpu_job_gets_gpu_derived_resources_and_env() -> None:
    nodes = gpu_nodes("nvidia", 2, 8)
    rendered = main(job({"gpuVendor": "nvidia", "gpus": 8, "image": "i"}), nodes)
    c = container(rendered)
    expected = {"nvidia.com/gpu": "8", "cpu": "32", "memory": "256Gi"}
    assert c["resources"] == {"requests": expected, "limits": expected}
    assert env_of(c) == [("NUM_GPUS", "8"), ("NUM_REPLICAS", "1"), ("NUM_GPUS_PER_REPLICA", "8")]


def test_e2_sixteen_gpus_on_eight_gpu_nodes_is_still_one_pod_of_eight() -> None:
    nodes = gpu_nodes("nvidia", 2, 8)
    workload = job({"gpuVendor": "nvidia", "gpus": 16, "image": "i"})
    rendered = main(workload, nodes)
    assert "parallelism" not in rendered["spec"] and "completions" not in rendered["spec"]
    c = container(rendered)
    assert c["resources"]["requests"]["nvidia.com/gpu"] == "8"
    assert env_of(c) == [("NUM_GPUS", "16"), ("NUM_REPLICAS", "2"), ("NUM_GPUS_PER_REPLICA", "8")]
    # deliberate difference: the Schedulable check reports the short single pod instead of running it
    check = workload_gpu_check(workload, CONFIG, nodes)
    assert (check.schedulable, check.reason) == (False, "InsufficientGPUsPerPod")


def test_e2_upper_case_vendor_keeps_the_key_but_finds_no_capacity() -> None:
    nodes = gpu_nodes("nvidia", 2, 8)
    workload = job({"gpuVendor": "NVIDIA", "gpus": 8, "image": "i"})
    c = container(main(workload, nodes))
    assert c["resources"]["requests"]["nvidia.com/gpu"] == "8"
    check = workload_gpu_check(workload, CONFIG, nodes)
    assert (check.schedulable, check.reason, check.message) == (
        False,
        "NoGPUs",
        "Cluster has 0 GPUs (vendor: NVIDIA)",
    )


def test_e3_user_job_merges_resources_and_gets_no_default_template_fields() -> None:
    workload = job(
        {
            "resources": {"requests": {"memory": "100Mi"}},
            "job": {
                "metadata": {"labels": {"dropped": "yes"}},
                "spec": {
                    "backoffLimit": 2,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "busybox",
                                    "resources": {"limits": {"memory": "125Mi"}, "requests": {"cpu": "125m"}},
                                }
                            ],
                        }
                    },
                },
            },
        }
    )
    rendered = main(workload)
    c = container(rendered)
    assert c["resources"] == {
        "requests": {"cpu": "125m", "memory": "100Mi"},
        "limits": {"memory": "125Mi", "cpu": "2"},
    }
    assert env_of(c) == NO_GPU_ENV
    assert c["image"] == "busybox"
    spec = rendered["spec"]
    assert (spec["backoffLimit"], spec["ttlSecondsAfterFinished"], spec["suspend"]) == (0, 3600, True)
    pod = spec["template"]["spec"]
    assert "schedulerName" not in pod and "volumes" not in pod
    assert "volumeMounts" not in c
    # No upstream securityContext (runAsUser 1000) on a user template; only the restricted fields it lacks.
    assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert c["securityContext"] == CONTAINER_SECURITY
    assert "dropped" not in rendered["metadata"]["labels"]


def test_e4_ray_kaiwojob_becomes_a_rayjob_with_folded_entrypoint_and_two_workers() -> None:
    workload = job(
        {
            "user": "test@amd.com",
            "ray": True,
            "image": "rayproject/ray:2.41.0",
            "gpuVendor": "nvidia",
            "gpus": 14,
            "entrypoint": "python train.py \\\n  --epochs 2",
        }
    )
    rendered = main(workload, gpu_nodes("nvidia", 2, 8))
    assert (rendered["apiVersion"], rendered["kind"]) == ("ray.io/v1", "RayJob")
    assert rendered["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kaiwo"
    assert rendered["metadata"]["labels"]["kaiwo.silogen.ai/user"] == "test-amd.com"
    spec = rendered["spec"]
    assert spec["entrypoint"] == "python train.py    --epochs 2"
    assert spec["shutdownAfterJobFinishes"] is True
    cluster = spec["rayClusterSpec"]
    assert cluster["enableInTreeAutoscaling"] is False
    head = cluster["headGroupSpec"]
    assert head["rayStartParams"] == {"dashboard-host": "0.0.0.0"}
    head_container = head["template"]["spec"]["containers"][0]
    assert head_container["name"] == "ray-head"
    assert head_container["image"] == "rayproject/ray:2.41.0"
    env = [("NUM_GPUS", "14"), ("NUM_REPLICAS", "2"), ("NUM_GPUS_PER_REPLICA", "7")]
    assert env_of(head_container) == env
    assert head_container["resources"] == {
        "requests": {"cpu": "2", "memory": "16Gi"},
        "limits": {"cpu": "2", "memory": "16Gi"},
    }
    assert head["template"]["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] == "1Gi"
    (worker,) = cluster["workerGroupSpecs"]
    assert worker["groupName"] == "default-worker-group"
    assert (worker["replicas"], worker["minReplicas"], worker["maxReplicas"]) == (2, 2, 2)
    assert worker["rayStartParams"] == {}
    worker_pod = worker["template"]["spec"]
    worker_container = worker_pod["containers"][0]
    assert worker_container["name"] == "ray-worker"
    assert env_of(worker_container) == env
    gpu = {"nvidia.com/gpu": "7", "cpu": "28", "memory": "224Gi"}
    assert worker_container["resources"] == {"requests": gpu, "limits": gpu}
    assert worker_pod["volumes"][0]["emptyDir"]["sizeLimit"] == "200Gi"
    assert worker_pod["securityContext"] == SECURITY
    assert worker_container["securityContext"] == CONTAINER_SECURITY
    assert worker_pod["schedulerName"] == "kaiwo-scheduler"
    assert "suspend" not in spec


def test_e5_service_becomes_a_deployment_with_queue_labels_on_template_and_object() -> None:
    workload = service(
        {
            "image": "nginx:1.27",
            "replicas": 2,
            "priorityClass": "high",
            "entrypoint": "nginx -g 'daemon off;'",
        },
        name="web",
    )
    rendered = main(workload)
    assert (rendered["apiVersion"], rendered["kind"]) == ("apps/v1", "Deployment")
    spec = rendered["spec"]
    assert spec["replicas"] == 2
    assert spec["selector"] == {"matchLabels": {"app": "web"}}
    labels = {
        "app": "web",
        "kueue.x-k8s.io/queue-name": "kaiwo",
        "kueue.x-k8s.io/priority-class": "high",
        "kaiwo.silogen.ai/user": "",
        "kaiwo.silogen.ai/name": "web",
        "kaiwo.silogen.ai/type": "service",
        "kaiwo.silogen.ai/run-id": "UID-1",
    }
    assert spec["template"]["metadata"]["labels"] == labels
    assert rendered["metadata"]["labels"] == labels
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Always"
    assert pod["schedulerName"] == "kaiwo-scheduler"
    assert pod["securityContext"] == SECURITY
    assert pod["containers"][0]["securityContext"] == CONTAINER_SECURITY
    assert pod["containers"][0]["command"] == ["/bin/sh", "-c", "nginx -g 'daemon off;'"]


def test_e6_ray_service_becomes_an_appwrapper_around_a_rayservice() -> None:
    serve = "applications: [...]"
    workload = service(
        {"ray": True, "image": "ghcr.io/silogen/ray-test:v0.3", "serveConfigV2": serve}, name="svc"
    )
    rendered = main(workload)
    assert (rendered["apiVersion"], rendered["kind"]) == ("workload.codeflare.dev/v1beta2", "AppWrapper")
    kaiwo = {
        "kaiwo.silogen.ai/user": "",
        "kaiwo.silogen.ai/name": "svc",
        "kaiwo.silogen.ai/type": "service",
        "kaiwo.silogen.ai/run-id": "UID-1",
    }
    assert rendered["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "kaiwo", **kaiwo}
    (component,) = rendered["spec"]["components"]
    assert component["podSets"] == [
        {"replicas": 1, "path": "template.spec.rayClusterConfig.headGroupSpec.template"},
        {"replicas": 1, "path": "template.spec.rayClusterConfig.workerGroupSpecs[0].template"},
    ]
    ray_service = component["template"]
    assert (ray_service["apiVersion"], ray_service["kind"]) == ("ray.io/v1", "RayService")
    assert ray_service["metadata"] == {"name": "svc", "namespace": "ns", "labels": kaiwo}
    assert ray_service["spec"]["serveConfigV2"] == serve
    worker = ray_service["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
    resources = worker["template"]["spec"]["containers"][0]["resources"]
    assert resources == {"requests": {"cpu": "2", "memory": "16Gi"}, "limits": {"cpu": "2", "memory": "16Gi"}}
    assert "ownerReferences" not in ray_service["metadata"]


E7_SPEC = {
    "image": "trainer:1",
    "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}],
    "storage": {
        "storageEnabled": True,
        "storageClassName": "rwx-nfs",
        "data": {
            "storageSize": "10Gi",
            "download": {
                "s3": [
                    {
                        "endpointUrl": "https://s3.example",
                        "accessKeyId": {"secretName": "s3", "secretKey": "id"},
                        "secretKey": {"secretName": "s3", "secretKey": "key"},
                        "buckets": [{"name": "b", "folders": [{"path": "ds/", "targetPath": "ds"}]}],
                    }
                ]
            },
        },
        "huggingFace": {"storageSize": "50Gi", "preCacheRepos": [{"repoId": "org/model"}]},
    },
}


def test_e7_storage_children_in_creation_order() -> None:
    rendered = children(job(E7_SPEC, name="train"))
    assert [(o["kind"], o["metadata"]["name"]) for o in rendered] == [
        ("PersistentVolumeClaim", "train-data"),
        ("PersistentVolumeClaim", "train-hf"),
        ("ConfigMap", "train-download"),
        ("Job", "train-download"),
        ("Job", "train"),
    ]
    data_pvc, hf_pvc = rendered[0], rendered[1]
    assert data_pvc["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "rwx-nfs",
        "resources": {"requests": {"storage": "10Gi"}},
    }
    assert hf_pvc["spec"]["resources"] == {"requests": {"storage": "50Gi"}}
    assert data_pvc["metadata"]["labels"] == {"kaiwo.silogen.ai/run-id": "UID-1"}  # only the label the watches select on
    assert all(o["metadata"]["ownerReferences"][0]["name"] == "train" for o in rendered)


def test_e7_download_config_yaml_matches_the_spec() -> None:
    config_map = children(job(E7_SPEC, name="train"))[2]
    text = config_map["data"]["config.yaml"]
    assert yaml.safe_load(text) == {
        "downloadRoot": "/workload",
        "hfHome": "/hf_cache",
        "s3": [
            {
                "endpointUrl": "https://s3.example",
                "accessKeyId": {"file": "/app/secrets/s3/id", "secretName": "s3", "secretKey": "id"},
                "secretKey": {"file": "/app/secrets/s3/key", "secretName": "s3", "secretKey": "key"},
                "buckets": [{"name": "b", "files": [], "folders": [{"path": "ds/", "targetPath": "ds"}]}],
            }
        ],
        "hf": [{"repoId": "org/model", "files": []}],
    }
    assert list(yaml.safe_load(text)) == ["downloadRoot", "hfHome", "s3", "hf"]
    assert text.startswith(
        "downloadRoot: /workload\nhfHome: /hf_cache\ns3:\n- endpointUrl: https://s3.example\n"
    )


def test_e7_download_job_mounts_config_data_secrets_and_hf() -> None:
    download = children(job(E7_SPEC, name="train"))[3]
    assert download["metadata"]["labels"]["kaiwo.silogen.ai/type"] == "downloader"
    spec = download["spec"]
    assert spec["backoffLimit"] == 0 and "suspend" not in spec and "ttlSecondsAfterFinished" not in spec
    assert "kueue.x-k8s.io/queue-name" not in download["metadata"]["labels"]
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["securityContext"] == SECURITY
    assert "schedulerName" not in pod and "imagePullSecrets" not in pod
    assert pod["automountServiceAccountToken"] is False
    (c,) = pod["containers"]
    assert c["name"] == "data-downloader"
    assert c["securityContext"] == CONTAINER_SECURITY
    assert c["image"] == "ghcr.io/silogen/kaiwo-python:0.6"
    assert c["imagePullPolicy"] == "Always"
    assert c["command"] == ["python", "-m", "kaiwo.downloader", "--log-level=INFO", "/config/config.yaml"]
    assert c["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"cpu": "2", "memory": "4Gi"},
    }
    assert c["volumeMounts"] == [
        {"name": "config", "mountPath": "/config"},
        {"name": "data", "mountPath": "/workload"},
        {"name": "secret-s3", "mountPath": "/app/secrets/s3"},
        {"name": "hf", "mountPath": "/hf_cache"},
    ]
    assert pod["volumes"] == [
        {"name": "config", "configMap": {"name": "train-download"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "train-data"}},
        {
            "name": "secret-s3",
            "secret": {
                "secretName": "s3",
                "items": [{"key": "id", "path": "id"}, {"key": "key", "path": "key"}],
            },
        },
        {"name": "hf", "persistentVolumeClaim": {"claimName": "train-hf"}},
    ]
    assert env_of(c) == [
        ("HF_HOME", "/hf_cache"),
        ("HF_TOKEN", {"secretKeyRef": {"name": "hf", "key": "token"}}),
    ]


def test_e7_workload_pods_mount_both_volumes_with_hf_home() -> None:
    rendered = children(job(E7_SPEC, name="train"))[-1]
    pod = pod_templates(rendered)[0]["spec"]
    assert pod["volumes"][1:] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "train-data"}},
        {"name": "hf", "persistentVolumeClaim": {"claimName": "train-hf"}},
    ]
    c = pod["containers"][0]
    assert c["volumeMounts"][1:] == [
        {"name": "data", "mountPath": "/workload"},
        {"name": "hf", "mountPath": "/hf_cache"},
    ]
    assert [name for name, _ in env_of(c)] == [
        "HF_TOKEN",
        "HF_HOME",
        "NUM_GPUS",
        "NUM_REPLICAS",
        "NUM_GPUS_PER_REPLICA",
    ]


def test_e7_render_storage_is_render_all_without_the_main_object() -> None:
    workload = job(E7_SPEC, name="train")
    assert render_storage(workload, CONFIG, []) == children(workload)[:-1]


def entry(entrypoint: str) -> list[str]:
    return container(main(job({"image": "i", "entrypoint": entrypoint})))["command"]  # type: ignore[no-any-return]


def ray_entry(entrypoint: str) -> str:
    return main(job({"image": "i", "ray": True, "entrypoint": entrypoint}))["spec"]["entrypoint"]  # type: ignore[no-any-return]


def test_e8_entrypoint_parsing_table() -> None:
    assert entry("sleep 1") == ["/bin/sh", "-c", "sleep 1"]
    assert ray_entry("sleep 1") == "sleep 1"
    shebang = "#!/bin/bash\n echo a\n echo b"
    assert entry(shebang) == ["/bin/bash", "-c", " echo a\n echo b"]
    assert ray_entry(shebang) == shebang
    continued = "python x.py \\\n--tasks 5 \\\n--delay 0.5\n"
    assert entry(continued) == ["/bin/sh", "-c", "python x.py  --tasks 5  --delay 0.5"]
    assert ray_entry(continued) == "python x.py  --tasks 5  --delay 0.5"
