"""kaiwo_ray/admission/workloads.py on what the operator itself renders: a KaiwoJob's Job (Kaiwo's run-id
label, the CR's managed label copied) keeps the labels the operator wrote, and enforcement lets it be."""

from __future__ import annotations

from typing import Any

from kaiwo_ray.admission.workloads import Settings, mutate, validate

RENDERED: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "default",
                         "labels": {"kaiwo.silogen.ai/managed": "true", "kaiwo.silogen.ai/run-id": "uid-1",
                                    "kaiwo.silogen.ai/user": "jane", "kueue.x-k8s.io/queue-name": "kaiwo"}},
            "spec": {"template": {"spec": {"containers": [{"name": "main", "image": "x",
                                                           "resources": {"limits": {"amd.com/gpu": 1}}}]}}}}
OPERATOR = {"username": "system:serviceaccount:kaiwo-system:kaiwo-ray"}


def _request(obj: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    return {"uid": "u", "kind": {"group": "batch", "version": "v1", "kind": "Job"}, "operation": operation,
            "userInfo": OPERATOR, "object": obj}


def test_the_operators_rendering_keeps_its_user_and_passes_enforcement() -> None:
    assert mutate(_request(RENDERED), Settings()).patch == []
    assert validate(_request(RENDERED), Settings(enforce_on_gpu_workloads=True)).allowed
    unmarked = {**RENDERED, "metadata": {**RENDERED["metadata"], "labels": {"kaiwo.silogen.ai/run-id": "uid-1"}}}
    assert validate(_request(unmarked), Settings(enforce_on_gpu_workloads=True)).allowed


def test_a_users_labelled_job_is_still_attributed_to_its_submitter() -> None:
    plain = {**RENDERED, "metadata": {**RENDERED["metadata"], "labels": {"kaiwo.silogen.ai/managed": "true"}}}
    ops = mutate(_request(plain), Settings()).patch
    assert {"op": "add", "path": "/metadata/labels/kaiwo.silogen.ai~1user",
            "value": "system-serviceaccount-kaiwo-system-kaiwo-ray"} in ops
    assert not validate(_request({**plain, "metadata": {"name": "gpu", "labels": {}}}),
                        Settings(enforce_on_gpu_workloads=True)).allowed
