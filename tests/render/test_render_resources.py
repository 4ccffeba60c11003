"""Resource defaults (spec/workloads.md §4.3) and the Ray head override, without shared mutation."""

from __future__ import annotations

from typing import Any

from render_fixtures import container, gpu_nodes, job, main, pod_templates

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.render.resources import ResourceDefaults, fill_container_resources, resource_defaults


def resources_of(
    spec: dict[str, Any], nodes: list[dict[str, Any]] | None = None, index: int = 0
) -> dict[str, Any]:
    return container(main(job({"image": "i", **spec}), nodes), index)["resources"]  # type: ignore[no-any-return]


def user_job(container_resources: dict[str, Any]) -> dict[str, Any]:
    """`spec.job` with one container `c` that sets `container_resources` itself."""
    container = {"name": "c", "image": "i", "resources": container_resources}
    return {"job": {"spec": {"template": {"spec": {"containers": [container]}}}}}


def test_spec_resources_beat_gpu_derived_defaults() -> None:
    res = resources_of(
        {"gpus": 2, "resources": {"requests": {"cpu": "1"}, "limits": {"memory": "8Gi"}}},
        gpu_nodes("amd", 1, 8),
    )
    # the GPU-derived memory request (64Gi) is capped by the explicit 8Gi limit (upstream: rejected child)
    assert res["requests"] == {"cpu": "1", "amd.com/gpu": "2", "memory": "8Gi"}
    assert res["limits"] == {"memory": "8Gi", "amd.com/gpu": "2", "cpu": "8"}


def test_gpu_key_in_spec_resources_is_kept_without_gpus_and_overwritten_with_them() -> None:
    spec = {"resources": {"requests": {"amd.com/gpu": "3", "nvidia.com/gpu": "1"}}}
    assert resources_of(spec)["requests"]["amd.com/gpu"] == "3"
    with_gpus = resources_of({**spec, "gpus": 2}, gpu_nodes("amd", 1, 8))
    assert with_gpus["requests"]["amd.com/gpu"] == "2"
    assert with_gpus["requests"]["nvidia.com/gpu"] == "1"  # another vendor's key survives


def test_missing_limit_defaults_to_at_least_the_request() -> None:
    # upstream: limits.cpu "2" < requests.cpu "4" and the API server rejects the Job
    res = resources_of({"resources": {"requests": {"cpu": "4", "memory": "1Gi"}}})
    assert res["requests"] == {"cpu": "4", "memory": "1Gi"}
    assert res["limits"] == {"cpu": "4", "memory": "16Gi"}


def test_container_request_above_the_default_limit_raises_the_filled_limit() -> None:
    user = user_job({"requests": {"memory": "64Gi", "cpu": "500m"}})
    res = resources_of(user)
    assert res["limits"] == {"cpu": "2", "memory": "64Gi"}


def test_filled_request_is_capped_by_the_containers_own_limit() -> None:
    user = user_job({"limits": {"memory": "1Gi", "cpu": "500m"}})
    res = resources_of(user)
    assert res["requests"] == {"cpu": "500m", "memory": "1Gi"}
    assert res["limits"] == {"memory": "1Gi", "cpu": "500m"}


def test_extended_resources_get_request_equal_to_the_containers_own_value() -> None:
    user = {"gpus": 4, **user_job({"limits": {"amd.com/gpu": "1"}})}
    res = resources_of(user, gpu_nodes("amd", 1, 8))
    assert res["requests"]["amd.com/gpu"] == "1" and res["limits"]["amd.com/gpu"] == "1"


def test_defaults_are_never_shared_between_containers_or_renders() -> None:
    defaults = resource_defaults({"requests": {"cpu": "1"}}, gpus_per_replica=1, gpu_key="amd.com/gpu")
    before = (dict(defaults.requests), dict(defaults.limits))
    first: dict[str, Any] = {"name": "a"}
    second: dict[str, Any] = {"name": "b"}
    fill_container_resources(first, defaults)
    fill_container_resources(second, defaults)
    first["resources"]["requests"]["cpu"] = "99"
    assert second["resources"]["requests"]["cpu"] == "1"
    assert (dict(defaults.requests), dict(defaults.limits)) == before


def test_spec_resources_dict_of_the_model_is_not_mutated() -> None:
    workload = job(
        {"image": "i", "ray": True, "gpus": 8, "resources": {"requests": {"cpu": "3", "amd.com/gpu": "1"}}}
    )
    snapshot = workload.model_dump()
    main(workload, gpu_nodes("amd", 1, 8))
    assert workload.model_dump() == snapshot


def test_ray_head_gets_head_memory_no_gpus_and_spec_cpu() -> None:
    spec = {
        "ray": True,
        "gpus": 8,
        "resources": {"requests": {"cpu": "3", "amd.com/gpu": "2"}, "limits": {"memory": "1Gi"}},
    }
    rendered = main(job({"image": "i", **spec}), gpu_nodes("amd", 1, 8))
    head, worker = (t["spec"]["containers"][0]["resources"] for t in pod_templates(rendered))
    # head: spec.resources cpu, head memory on both sides, no GPU; the default cpu limit rises to the request
    assert head == {"requests": {"cpu": "3", "memory": "16Gi"}, "limits": {"memory": "16Gi", "cpu": "3"}}
    assert worker["requests"] == {"cpu": "3", "amd.com/gpu": "8", "memory": "1Gi"}
    assert worker["limits"] == {"memory": "1Gi", "amd.com/gpu": "8", "cpu": "32"}


def test_head_override_with_requests_only_resources_does_not_crash() -> None:
    # upstream panics on spec.resources with only requests (or only limits) for Ray
    spec = {"ray": True, "resources": {"requests": {"memory": "2Gi"}}}
    head = container(main(job({"image": "i", **spec})), 0)["resources"]
    assert head["requests"]["memory"] == "16Gi" and head["limits"]["memory"] == "16Gi"


def test_head_memory_follows_kaiwoconfig() -> None:
    config = KaiwoConfigSpec.model_validate({"ray": {"headPodMemory": "200Mi"}})
    head = container(main(job({"image": "i", "ray": True}), config=config), 0)["resources"]
    assert head["requests"]["memory"] == "200Mi" and head["limits"]["memory"] == "200Mi"


def test_resource_defaults_without_gpus() -> None:
    assert resource_defaults(None, gpus_per_replica=0, gpu_key="amd.com/gpu") == ResourceDefaults(
        requests={"cpu": "2", "memory": "16Gi"}, limits={"cpu": "2", "memory": "16Gi"}
    )
