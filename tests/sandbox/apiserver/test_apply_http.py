"""Server-side apply end to end through the official client's DynamicClient, as operators use it."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient


def test_dynamic_client_server_side_apply_with_two_managers(api: Any) -> None:
    configmaps = DynamicClient(api).resources.get(api_version="v1", kind="ConfigMap")
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "c", "namespace": "default"}, "data": {"a": "1"}}
    created = configmaps.server_side_apply(body=body, name="c", namespace="default", field_manager="kaiwo",
                                           force_conflicts=True)
    assert created.data.to_dict() == {"a": "1"}
    shared = configmaps.server_side_apply(body={**body, "data": {"b": "2"}}, name="c", namespace="default",
                                          field_manager="other")
    assert shared.data.to_dict() == {"a": "1", "b": "2"}, "a second manager adds, it does not replace"

    with pytest.raises(ApiException) as caught:
        configmaps.server_side_apply(body={**body, "data": {"a": "9"}}, name="c", namespace="default",
                                     field_manager="other")
    assert caught.value.status == 409
    assert 'Apply failed with 1 conflict: conflict with \\"kaiwo\\": .data.a' in caught.value.body

    # kaiwo stops applying "a": nobody else owns it, so it goes; "b" stays with its owner
    pruned = configmaps.server_side_apply(body={**body, "data": {}}, name="c", namespace="default",
                                          field_manager="kaiwo")
    assert (pruned.data.to_dict() if pruned.data else {}) == {"b": "2"}
    managers = {(e["manager"], e["operation"]) for e in pruned.to_dict()["metadata"]["managedFields"]}
    assert ("other", "Apply") in managers


def test_dynamic_client_server_side_apply_on_a_custom_resource(api: Any) -> None:
    rayjobs = DynamicClient(api).resources.get(api_version="ray.io/v1", kind="RayJob")
    body = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j", "namespace": "default"},
            "spec": {"entrypoint": "python train.py"}}
    applied = rayjobs.server_side_apply(body=body, name="j", namespace="default", field_manager="kaiwo",
                                        force_conflicts=True)
    assert applied.spec.entrypoint == "python train.py"
    entry = next(e for e in applied.to_dict()["metadata"]["managedFields"] if e["manager"] == "kaiwo")
    assert entry["operation"] == "Apply"
    assert entry["fieldsV1"] == {"f:spec": {"f:entrypoint": {}}}
