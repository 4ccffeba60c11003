"""Bad input gets a RenderError naming the field, never a crash or a child the API server rejects."""

from __future__ import annotations

import re
from typing import Any

import pytest
from render_fixtures import job, main, service

from kaiwo_ray.render import RenderError
from kaiwo_ray.render.podspec import check_resources


@pytest.mark.parametrize(
    ("workload_spec", "message"),
    [
        ({}, r"^spec.image: required: container 'workload'"),
        (
            {"job": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}},
            r"^spec.image: required",
        ),
        ({"job": {"spec": {}}}, r"^spec.job.spec.template: required"),
        ({"job": {"kind": "Job"}}, r"^spec.job.spec: required"),
        (
            {"job": {"spec": {"template": {"spec": {"containers": []}}}}},
            r"^spec.job.spec.template.spec.containers: must list",
        ),
        (
            {"job": {"spec": {"template": {"spec": {"containers": ["x"]}}}}},
            r"^spec.job.spec.template.spec.containers\[0\]: must be",
        ),
        ({"job": {"spec": {"template": {"metadata": {}}}}}, r"^spec.job.spec.template.spec: required"),
    ],
)
def test_job_errors(workload_spec: dict[str, Any], message: str) -> None:
    with pytest.raises(RenderError, match=message):
        main(job(workload_spec))


def test_deployment_errors() -> None:
    with pytest.raises(RenderError, match=r"^spec.deployment.spec.template: required"):
        main(service({"deployment": {"spec": {"replicas": 1}}}))
    with pytest.raises(RenderError, match=r"^spec.image: required"):
        main(service({}))


def test_missing_name_is_an_error() -> None:
    with pytest.raises(RenderError, match=r"^metadata.name: required"):
        main(job({"image": "i"}, name=None))


@pytest.mark.parametrize("name", ["Bad_Name", "UPPER", "-lead", "trail.", "a..b", "a.-b", "x" * 64])
def test_names_the_api_server_would_refuse_for_the_children_are_errors(name: str) -> None:
    with pytest.raises(RenderError, match=rf'^metadata.name: invalid name "{re.escape(name)}"'):
        main(job({"image": "i"}, name=name))


@pytest.mark.parametrize("name", ["a", "train-1", "v1.2", "x" * 63])
def test_valid_names_render(name: str) -> None:
    assert main(job({"image": "i"}, name=name))["metadata"]["name"] == name


def test_render_error_is_a_value_error_with_field() -> None:
    with pytest.raises(ValueError) as info:
        main(service({"rayService": {"spec": {}}}))
    assert isinstance(info.value, RenderError)
    assert info.value.field == "spec.rayService.spec.rayClusterConfig"


def _user_job(container: dict[str, Any], **pod: Any) -> dict[str, Any]:
    return {
        "job": {
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i", **container}], **pod}}}
        }
    }


@pytest.mark.parametrize(
    ("workload_spec", "field"),
    [
        (_user_job({"env": {"A": "1"}}), "spec.job.spec.template.spec.containers[0].env"),
        (_user_job({"volumeMounts": "x"}), "spec.job.spec.template.spec.containers[0].volumeMounts"),
        (_user_job({"resources": ["cpu"]}), "spec.job.spec.template.spec.containers[0].resources"),
        (
            _user_job({"resources": {"limits": "2"}}),
            "spec.job.spec.template.spec.containers[0].resources.limits",
        ),
        (_user_job({}, volumes={"a": 1}), "spec.job.spec.template.spec.volumes"),
        (_user_job({}, tolerations="all"), "spec.job.spec.template.spec.tolerations"),
        (_user_job({}, affinity=[1]), "spec.job.spec.template.spec.affinity"),
    ],
)
def test_malformed_shapes_are_reported_by_path(workload_spec: dict[str, Any], field: str) -> None:
    with pytest.raises(RenderError) as info:
        main(job(workload_spec))
    assert info.value.field == field


def test_malformed_template_labels_and_selector() -> None:
    template = {"metadata": {"labels": ["a"]}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    with pytest.raises(RenderError, match=r"^spec.deployment.spec.template.metadata.labels: must be a map"):
        main(service({"deployment": {"spec": {"template": template}}}))
    template["metadata"] = {}
    with pytest.raises(RenderError, match=r"^spec.deployment.spec.selector.matchLabels: must be a map"):
        main(service({"deployment": {"spec": {"selector": {"matchLabels": "x"}, "template": template}}}))


def test_spec_resources_are_checked_even_when_the_model_did_not() -> None:
    # the API model validates spec.resources too; the renderer must not rely on it (model_construct, dicts)
    with pytest.raises(RenderError) as info:
        check_resources({"requests": ["cpu"]}, "spec.resources")
    assert info.value.field == "spec.resources.requests"
    with pytest.raises(RenderError, match=r'^spec.resources.limits.cpu: invalid quantity "lots"'):
        check_resources({"limits": {"cpu": "lots"}}, "spec.resources")
    check_resources({"limits": {"cpu": 2, "memory": "1Gi"}}, "spec.resources")
