"""Pod-template rules (spec/workloads.md §4, §5): templates, labels, annotations, env, mounts, scheduling."""

from __future__ import annotations

from typing import Any

from render_fixtures import CONFIG, container, env_of, gpu_nodes, job, main, pod_templates, service

from kaiwo_ray.api.config import KaiwoConfigSpec

USER_JOB = {
    "job": {
        "spec": {
            "template": {
                "metadata": {"labels": {"own": "1", "kaiwo.silogen.ai/name": "spoofed"}},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "initContainers": [
                        {"name": "init", "image": "busybox", "env": [{"name": "PRE", "value": "p"}]}
                    ],
                    "containers": [
                        {"name": "main", "image": "app", "env": [{"name": "OWN", "value": "o"}]},
                        {"name": "side", "image": "side"},
                    ],
                },
            }
        }
    }
}


def test_default_template_is_non_root_with_scheduler_and_shm() -> None:
    pod = main(job({"image": "i"}))["spec"]["template"]["spec"]
    assert pod["schedulerName"] == "kaiwo-scheduler"
    assert pod["securityContext"] == {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
                                      "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]
    assert pod["containers"][0]["imagePullPolicy"] == "Always"


def test_scheduler_name_comes_from_kaiwoconfig() -> None:
    config = KaiwoConfigSpec.model_validate({"scheduling": {"kubeSchedulerName": "other"}})
    assert main(job({"image": "i"}), config=config)["spec"]["template"]["spec"]["schedulerName"] == "other"


def test_dangerous_drops_security_context_of_default_templates_only() -> None:
    assert "securityContext" not in main(job({"image": "i", "dangerous": True}))["spec"]["template"]["spec"]
    ray = main(job({"image": "i", "ray": True, "dangerous": True}))
    assert all("securityContext" not in t["spec"] for t in pod_templates(ray))
    # A user template never gets upstream's runAsUser/runAsGroup/fsGroup (only the restricted fields:
    # tests/render/test_render_security.py).
    user = main(job({**USER_JOB, "dangerous": False}))
    assert not {"runAsUser", "runAsGroup", "fsGroup"} & set(user["spec"]["template"]["spec"]["securityContext"])


def test_user_template_keeps_its_fields_and_gets_no_defaults() -> None:
    pod = main(job(USER_JOB))["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "OnFailure"
    assert "schedulerName" not in pod and "volumes" not in pod
    assert [c["name"] for c in pod["containers"]] == ["main", "side"]


def test_env_order_on_main_and_init_containers() -> None:
    spec = {
        **USER_JOB,
        "env": [{"name": "A", "value": "a"}, {"name": "OWN", "value": "dup"}],
        "storage": {"storageEnabled": True, "huggingFace": {"storageSize": "1Gi", "mountPath": "/hf"}},
    }
    pod = main(job(spec))["spec"]["template"]["spec"]
    assert env_of(pod["containers"][0]) == [
        ("OWN", "o"),
        ("A", "a"),
        ("OWN", "dup"),  # duplicates are not de-duplicated
        ("HF_HOME", "/hf"),
        ("NUM_GPUS", "0"),
        ("NUM_REPLICAS", "1"),
        ("NUM_GPUS_PER_REPLICA", "0"),
    ]
    assert env_of(pod["containers"][1])[0] == ("A", "a")
    assert env_of(pod["initContainers"][0]) == [("PRE", "p"), ("A", "a"), ("OWN", "dup"), ("HF_HOME", "/hf")]


def test_init_containers_get_mounts_and_env_but_no_resources_image_or_gpu_env() -> None:
    spec = {
        **USER_JOB,
        "image": "default",
        "secretVolumes": [{"name": "s", "secretName": "sec", "mountPath": "/s"}],
    }
    init = main(job(spec))["spec"]["template"]["spec"]["initContainers"][0]
    assert "resources" not in init
    assert init["image"] == "busybox"
    assert init["volumeMounts"] == [{"name": "s", "mountPath": "/s"}]
    assert not any(name.startswith("NUM_") for name, _ in env_of(init))


def test_every_main_container_gets_defaults_and_spec_image_only_when_missing() -> None:
    spec: dict[str, Any] = {
        "image": "fallback",
        "job": {
            "spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "b", "image": "own"}]}}}
        },
    }
    containers = main(job(spec))["spec"]["template"]["spec"]["containers"]
    assert [c["image"] for c in containers] == ["fallback", "own"]
    assert all(c["resources"]["requests"] == {"cpu": "2", "memory": "16Gi"} for c in containers)


def test_template_labels_precedence() -> None:
    spec = {**USER_JOB, "podTemplateSpecLabels": {"own": "pts", "team": "t", "kaiwo.silogen.ai/type": "x"}}
    workload = job(spec, labels={"team": "cr", "project": "p", "kueue.x-k8s.io/queue-name": "mine"})
    labels = main(workload)["spec"]["template"]["metadata"]["labels"]
    assert labels == {
        "own": "pts",  # podTemplateSpecLabels overwrite the template's own labels
        "kaiwo.silogen.ai/name": "wl",  # system labels overwrite everything
        "team": "t",  # CR labels never overwrite
        "kaiwo.silogen.ai/type": "job",
        "project": "p",
        "kaiwo.silogen.ai/user": "",
        "kaiwo.silogen.ai/run-id": "UID-1",
    }


def test_managed_label_is_copied_only_when_the_cr_has_it() -> None:
    assert "kaiwo.silogen.ai/managed" not in main(job({"image": "i"}))["metadata"]["labels"]
    managed = main(job({"image": "i"}, labels={"kaiwo.silogen.ai/managed": "true"}))
    assert managed["metadata"]["labels"]["kaiwo.silogen.ai/managed"] == "true"
    assert managed["spec"]["template"]["metadata"]["labels"]["kaiwo.silogen.ai/managed"] == "true"


def test_every_cr_annotation_is_copied_to_templates_even_kubectl_last_applied() -> None:
    annotations = {"a": "1", "kubectl.kubernetes.io/last-applied-configuration": "{...}"}
    rendered = main(job({"image": "i"}, annotations=annotations))
    assert rendered["spec"]["template"]["metadata"]["annotations"] == annotations
    assert "annotations" not in rendered["metadata"]


def test_topology_annotation_required_wins_over_preferred() -> None:
    both = {"image": "i", "requiredTopologyLabel": "rack", "preferredTopologyLabel": "block"}
    assert main(job(both))["spec"]["template"]["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-required-topology": "rack"
    }
    preferred = {"image": "i", "preferredTopologyLabel": "block", "ray": True}
    for template in pod_templates(main(job(preferred))):
        assert template["metadata"]["annotations"] == {"kueue.x-k8s.io/podset-preferred-topology": "block"}


def test_image_pull_secrets_are_appended_to_workload_pods() -> None:
    spec: dict[str, Any] = {"imagePullSecrets": [{"name": "reg"}]}
    spec["job"] = {
        "spec": {
            "template": {
                "spec": {"imagePullSecrets": [{"name": "own"}], "containers": [{"name": "c", "image": "i"}]}
            }
        }
    }
    assert main(job(spec))["spec"]["template"]["spec"]["imagePullSecrets"] == [
        {"name": "own"},
        {"name": "reg"},
    ]
    ray = main(job({"image": "i", "ray": True, "imagePullSecrets": [{"name": "reg"}]}))
    assert all(t["spec"]["imagePullSecrets"] == [{"name": "reg"}] for t in pod_templates(ray))


def test_secret_volumes_mount_the_whole_secret_in_every_container() -> None:
    spec = {
        **USER_JOB,
        "secretVolumes": [
            {
                "name": "creds",
                "secretName": "s1",
                "key": "ignored",
                "mountPath": "/creds",
                "subPath": "token",
            },
            {"name": "cfg", "secretName": "s2", "mountPath": "/cfg"},
        ],
    }
    pod = main(job(spec))["spec"]["template"]["spec"]
    assert pod["volumes"] == [
        {"name": "creds", "secret": {"secretName": "s1"}},
        {"name": "cfg", "secret": {"secretName": "s2"}},
    ]
    mounts = [
        {"name": "creds", "mountPath": "/creds", "subPath": "token"},
        {"name": "cfg", "mountPath": "/cfg"},
    ]
    for c in [*pod["containers"], *pod["initContainers"]]:
        assert c["volumeMounts"] == mounts


def test_gpu_models_replace_node_affinity_only_with_gpus() -> None:
    affinity: dict[str, Any] = {
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
        "podAffinity": {"x": 1},
    }
    spec: dict[str, Any] = {
        "gpus": 8,
        "gpuModels": ["mi300x", "mi325x"],
        "job": {
            "spec": {
                "template": {"spec": {"affinity": affinity, "containers": [{"name": "c", "image": "i"}]}}
            }
        },
    }
    pod = main(job(spec), gpu_nodes("amd", 1, 8))["spec"]["template"]["spec"]
    assert pod["affinity"] == {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kaiwo/gpu-model", "operator": "In", "values": ["mi300x", "mi325x"]}
                        ]
                    }
                ]
            }
        },
        "podAffinity": {"x": 1},
    }
    no_gpus = main(job({"image": "i", "gpuModels": ["mi300x"]}))["spec"]["template"]["spec"]
    assert "affinity" not in no_gpus


def test_gpu_toleration_only_with_add_taints_and_a_gpu_request() -> None:
    tainting = KaiwoConfigSpec.model_validate(
        {"nodes": {"addTaintsToGpuNodes": True, "defaultGpuTaintKey": "gpu-taint"}}
    )
    nodes = gpu_nodes("amd", 1, 8)
    toleration = {"key": "gpu-taint", "operator": "Exists", "effect": "NoSchedule"}
    assert main(job({"image": "i", "gpus": 1}), nodes, tainting)["spec"]["template"]["spec"][
        "tolerations"
    ] == [toleration]
    assert (
        "tolerations" not in main(job({"image": "i", "gpus": 1}), nodes, CONFIG)["spec"]["template"]["spec"]
    )
    assert "tolerations" not in main(job({"image": "i"}), nodes, tainting)["spec"]["template"]["spec"]
    ray = main(job({"image": "i", "gpus": 8, "ray": True}), nodes, tainting)
    head, worker = pod_templates(ray)
    assert "tolerations" not in head["spec"] and worker["spec"]["tolerations"] == [toleration]
    # a GPU in spec.resources counts too (kept when gpus is 0)
    via_resources = {"image": "i", "resources": {"requests": {"nvidia.com/gpu": "1"}}}
    assert main(job(via_resources), nodes, tainting)["spec"]["template"]["spec"]["tolerations"] == [
        toleration
    ]


def test_queue_label_placement_per_kind() -> None:
    spec = {"image": "i", "clusterQueue": "team-q", "priorityClass": "high"}
    queue = {"kueue.x-k8s.io/queue-name": "team-q", "kueue.x-k8s.io/priority-class": "high"}

    def has(labels: dict[str, str]) -> bool:
        return queue.items() <= labels.items()

    def has_none(labels: dict[str, str]) -> bool:
        return not (queue.keys() & labels.keys())

    batch = main(job(spec))
    assert has(batch["metadata"]["labels"]) and has_none(batch["spec"]["template"]["metadata"]["labels"])
    rayjob = main(job({**spec, "ray": True}))
    assert has(rayjob["metadata"]["labels"])
    head, worker = pod_templates(rayjob)
    assert has(head["metadata"]["labels"]) and has_none(worker["metadata"]["labels"])  # upstream's shared map
    deployment = main(service(spec))
    assert has(deployment["metadata"]["labels"]) and has(deployment["spec"]["template"]["metadata"]["labels"])
    wrapper = main(service({**spec, "ray": True}))
    assert has(wrapper["metadata"]["labels"])
    assert has_none(wrapper["spec"]["components"][0]["template"]["metadata"]["labels"])
    assert all(has_none(t["metadata"]["labels"]) for t in pod_templates(wrapper))


def test_default_queue_comes_from_kaiwoconfig() -> None:
    config = KaiwoConfigSpec.model_validate({"defaultClusterQueueName": "fallback"})
    assert (
        main(job({"image": "i"}), config=config)["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
        == "fallback"
    )


def test_owner_reference_uses_the_cr_uid_or_empty() -> None:
    ref = main(service({"image": "i"}))["metadata"]["ownerReferences"]
    assert ref == [
        {
            "apiVersion": "kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoService",
            "name": "wl",
            "uid": "UID-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert main(job({"image": "i"}, uid=None))["metadata"]["ownerReferences"][0]["uid"] == ""


def test_user_deployment_keeps_its_selector_and_gets_app_and_restart_always() -> None:
    spec = {
        "replicas": 3,
        "deployment": {
            "spec": {
                "replicas": 9,
                "selector": {"matchLabels": {"tier": "web"}},
                "template": {
                    "metadata": {"labels": {"tier": "web"}},
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]},
                },
            }
        },
    }
    rendered = main(service(spec))
    assert rendered["spec"]["replicas"] == 3
    assert rendered["spec"]["selector"] == {"matchLabels": {"tier": "web", "app": "wl"}}
    assert rendered["spec"]["template"]["spec"]["restartPolicy"] == "Always"
    assert rendered["spec"]["template"]["metadata"]["labels"]["tier"] == "web"


def test_deployment_replicas_follow_the_gpu_arithmetic() -> None:
    rendered = main(service({"image": "i", "gpus": 16}), gpu_nodes("amd", 2, 8))
    assert rendered["spec"]["replicas"] == 2
    assert container(rendered)["resources"]["limits"]["amd.com/gpu"] == "8"


def test_user_job_backoff_and_ttl_rules() -> None:
    def spec_of(job_spec: dict[str, Any]) -> dict[str, Any]:
        job_spec = {**job_spec, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
        return main(job({"job": {"spec": job_spec}}))["spec"]  # type: ignore[no-any-return]

    kept = spec_of({"ttlSecondsAfterFinished": 60})
    assert "backoffLimit" not in kept and kept["ttlSecondsAfterFinished"] == 60 and kept["suspend"] is True
    assert spec_of({"backoffLimit": 0, "suspend": False})["suspend"] is True
