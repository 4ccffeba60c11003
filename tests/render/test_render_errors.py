"""Bad input gets a RenderError naming the field, never a crash or a child the API server rejects."""

from __future__ import annotations

from typing import Any

import pytest
from render_fixtures import job, main, service

from kaiwo_ray.render import RenderError


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


def test_render_error_is_a_value_error_with_field() -> None:
    with pytest.raises(ValueError) as info:
        main(service({"rayService": {"spec": {}}}))
    assert isinstance(info.value, RenderError)
    assert info.value.field == "spec.rayService.spec.rayClusterConfig"
