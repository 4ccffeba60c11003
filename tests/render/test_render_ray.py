"""RayJob and AppWrapper(RayService) rules (spec/workloads.md §6.2, §6.4)."""

from __future__ import annotations

from typing import Any

import pytest
from render_fixtures import gpu_nodes, job, main, pod_templates, service

from kaiwo_ray.render import RenderError


def cluster(workers: int = 1) -> dict[str, Any]:
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "h"}]}}},
        "workerGroupSpecs": [
            {"groupName": f"g{i}", "replicas": 5, "template": {"spec": {"containers": [{"name": f"w{i}"}]}}}
            for i in range(workers)
        ],
    }


def test_ray_job_field_selects_ray_even_without_ray_flag() -> None:
    rendered = main(job({"rayJob": {"spec": {"rayClusterSpec": cluster()}}}))
    assert rendered["kind"] == "RayJob"


def test_job_and_ray_flag_becomes_a_rayjob() -> None:
    spec = {
        "ray": True,
        "image": "i",
        "job": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}},
    }
    assert main(job(spec))["kind"] == "RayJob"


def test_user_rayjob_keeps_its_spec_with_backoff_zero_and_entrypoint_override() -> None:
    spec = {
        "entrypoint": "python a.py",
        "rayJob": {
            "metadata": {"name": "ignored"},
            "spec": {
                "entrypoint": "old",
                "backoffLimit": 3,
                "runtimeEnvYAML": "pip: [x]",
                "rayClusterSpec": cluster(2),
            },
        },
    }
    rendered = main(job(spec), gpu_nodes("amd", 2, 8))
    assert rendered["metadata"]["name"] == "wl"
    rj = rendered["spec"]
    assert (rj["entrypoint"], rj["backoffLimit"], rj["runtimeEnvYAML"]) == ("python a.py", 0, "pip: [x]")
    assert "shutdownAfterJobFinishes" not in rj
    for group in rj["rayClusterSpec"]["workerGroupSpecs"]:
        assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (1, 1, 1)


def test_containers_without_image_get_spec_image_then_the_default_ray_image() -> None:
    templates = pod_templates(main(job({"rayJob": {"spec": {"rayClusterSpec": cluster()}}})))
    assert {t["spec"]["containers"][0]["image"] for t in templates} == {"ghcr.io/silogen/rocm-ray:6.4"}
    templates = pod_templates(main(job({"image": "mine", "rayJob": {"spec": {"rayClusterSpec": cluster()}}})))
    assert {t["spec"]["containers"][0]["image"] for t in templates} == {"mine"}


def test_rayjob_labels_are_head_labels_plus_kaiwo_labels_and_queue() -> None:
    spec = {"image": "i", "ray": True, "podTemplateSpecLabels": {"team": "a"}}
    rendered = main(job(spec, labels={"project": "p"}))
    labels = rendered["metadata"]["labels"]
    assert (
        labels["team"] == "a" and labels["project"] == "p" and labels["kueue.x-k8s.io/queue-name"] == "kaiwo"
    )


def test_rayjob_queue_labels_reach_the_head_template_only_like_upstreams_shared_map() -> None:
    rendered = main(job({"image": "i", "ray": True, "priorityClass": "high"}))
    head, worker = pod_templates(rendered)
    kueue = {"kueue.x-k8s.io/queue-name": "kaiwo", "kueue.x-k8s.io/priority-class": "high"}
    assert head["metadata"]["labels"] == rendered["metadata"]["labels"]
    assert kueue.items() <= head["metadata"]["labels"].items()
    assert not kueue.keys() & worker["metadata"]["labels"].keys()


def test_user_rayjob_without_cluster_spec_is_rejected_with_the_field_name() -> None:
    with pytest.raises(RenderError) as info:
        main(job({"rayJob": {"spec": {"entrypoint": "x", "clusterSelector": {"a": "b"}}}}))
    assert info.value.field == "spec.rayJob.spec.rayClusterSpec"
    assert str(info.value).startswith("spec.rayJob.spec.rayClusterSpec: required")


def test_user_rayjob_without_spec_is_rejected() -> None:
    with pytest.raises(RenderError, match=r"^spec.rayJob.spec: required"):
        main(job({"rayJob": {"metadata": {}}}))


def test_user_rayservice_without_cluster_config_is_rejected() -> None:
    with pytest.raises(RenderError, match=r"^spec.rayService.spec.rayClusterConfig: required"):
        main(service({"rayService": {"spec": {"serveConfigV2": "x"}}}))


def test_head_group_without_template_is_rejected() -> None:
    bad = cluster()
    del bad["headGroupSpec"]["template"]
    with pytest.raises(
        RenderError, match=r"^spec.rayJob.spec.rayClusterSpec.headGroupSpec.template: required"
    ):
        main(job({"rayJob": {"spec": {"rayClusterSpec": bad}}}))


def test_serve_config_overrides_the_user_rayservice_only_when_set() -> None:
    user = {"rayService": {"spec": {"serveConfigV2": "theirs", "rayClusterConfig": cluster()}}}
    assert main(service(user))["spec"]["components"][0]["template"]["spec"]["serveConfigV2"] == "theirs"
    ours = main(service({**user, "serveConfigV2": "ours"}))
    assert ours["spec"]["components"][0]["template"]["spec"]["serveConfigV2"] == "ours"


def test_appwrapper_declares_every_worker_group_with_computed_replicas() -> None:
    spec = {"gpus": 16, "rayService": {"spec": {"rayClusterConfig": cluster(2)}}}
    rendered = main(service(spec), gpu_nodes("amd", 2, 8))
    assert rendered["spec"]["components"][0]["podSets"] == [
        {"replicas": 1, "path": "template.spec.rayClusterConfig.headGroupSpec.template"},
        {"replicas": 2, "path": "template.spec.rayClusterConfig.workerGroupSpecs[0].template"},
        {"replicas": 2, "path": "template.spec.rayClusterConfig.workerGroupSpecs[1].template"},
    ]


def test_ray_service_entrypoint_is_ignored() -> None:
    rendered = main(service({"ray": True, "image": "i", "entrypoint": "python serve.py"}))
    templates = pod_templates(rendered)
    assert templates
    for template in templates:
        assert "command" not in template["spec"]["containers"][0]
