"""Typed decoding of built-in kinds: wrongly typed fields are a 400 naming the Go field (as the
apiserver's JSON decoder reports them), never stored and never a 422 or a 500."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from kubernetes.client import ApiException
from kubernetes.dynamic import DynamicClient

from kaiwo_sandbox.contracts import ApiError
from kaiwo_sandbox.semantics.builtin.decoding import check_builtin_types


def _pod(container: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i", **container}]}}


@pytest.mark.parametrize(("group", "kind", "obj", "message"), [
    ("", "ConfigMap", {"data": ["a", "b"]},
     "json: cannot unmarshal array into Go struct field ConfigMap.data of type map[string]string"),
    ("", "ConfigMap", {"data": {"k": 1}},
     "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"),
    ("", "Secret", {"stringData": {"k": True}},
     "json: cannot unmarshal bool into Go struct field Secret.stringData of type string"),
    ("", "Pod", _pod({"resources": {"limits": "x"}}),
     "json: cannot unmarshal string into Go struct field ResourceRequirements.spec.containers.resources.limits "
     "of type v1.ResourceList"),
    ("", "Pod", _pod({"env": {"name": "A"}}),
     "json: cannot unmarshal object into Go struct field Container.spec.containers.env of type []v1.EnvVar"),
    ("", "Pod", _pod({"args": ["--x", 1]}),
     "json: cannot unmarshal number into Go struct field Container.spec.containers.args of type string"),
    ("batch", "Job", {"spec": {"parallelism": 1.5, "template": {"spec": {}}}},
     "json: cannot unmarshal number 1.5 into Go struct field JobSpec.spec.parallelism of type int32"),
    ("batch", "Job", {"spec": {"template": {"spec": {"containers": [{"name": "c", "ports": [
        {"containerPort": "80"}]}]}}}},
     "json: cannot unmarshal string into Go struct field ContainerPort.spec.template.spec.containers.ports."
     "containerPort of type int32"),
    ("apps", "Deployment", {"spec": {"replicas": "3"}},
     "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"),
    ("", "Service", {"spec": {"selector": "app=x"}},
     "json: cannot unmarshal string into Go struct field ServiceSpec.spec.selector of type map[string]string"),
])
def test_wrongly_typed_fields_are_400_naming_the_go_field(group: str, kind: str, obj: dict[str, Any],
                                                          message: str) -> None:
    with pytest.raises(ApiError) as exc:
        check_builtin_types(group, kind, "v1", obj)
    assert exc.value.code == 400
    assert exc.value.message == f'{kind} in version "v1" cannot be handled as a {kind}: {message}'


@pytest.mark.parametrize(("group", "kind", "obj"), [
    ("", "ConfigMap", {"data": {"k": "v"}, "binaryData": {"b": "aGk="}, "immutable": True}),
    ("", "ConfigMap", {"data": None}),
    ("", "Pod", _pod({"resources": {"limits": {"cpu": 2, "memory": "1Gi", "amd.com/gpu": "8"}},
                      "env": [{"name": "A", "value": "1"}], "ports": [{"containerPort": 80}]})),
    ("batch", "Job", {"spec": {"parallelism": 2, "suspend": False, "template": {"spec": {}}}}),
    ("example.com", "Widget", {"spec": ["anything"]}),  # not built in: its schema decides
])
def test_well_typed_objects_decode(group: str, kind: str, obj: dict[str, Any]) -> None:
    check_builtin_types(group, kind, "v1", obj)


def _refused(api: Any, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    # The DynamicClient sends the dict as it is (the typed API would refuse it client-side first).
    resource = DynamicClient(api).resources.get(api_version="v1", kind=kind)
    with pytest.raises(ApiException) as exc:
        resource.create(body=body, namespace="default")
    assert exc.value.status == 400
    status: dict[str, Any] = orjson.loads(exc.value.body)
    assert status["reason"] == "BadRequest"
    assert resource.get(namespace="default").items == []
    return status


def test_the_server_refuses_a_configmap_with_list_data_and_stores_nothing(api: Any) -> None:
    status = _refused(api, "ConfigMap", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"},
                                         "data": ["a"]})
    assert "Go struct field ConfigMap.data of type map[string]string" in status["message"]


def test_the_server_refuses_a_pod_whose_limits_are_a_string(api: Any) -> None:
    status = _refused(api, "Pod", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"}, "spec": {
        "containers": [{"name": "c", "image": "i", "resources": {"limits": "x"}}]}})
    assert "resources.limits of type v1.ResourceList" in status["message"]


def test_a_patch_whose_result_is_wrongly_typed_is_refused(api: Any) -> None:
    configmaps = DynamicClient(api).resources.get(api_version="v1", kind="ConfigMap")
    configmaps.create(body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}},
                      namespace="default")
    with pytest.raises(ApiException) as exc:
        configmaps.patch(name="c", namespace="default", body={"data": {"a": 1}},
                         content_type="application/merge-patch+json")
    assert exc.value.status == 400
    assert "Go struct field ConfigMap.data of type string" in orjson.loads(exc.value.body)["message"]
    with pytest.raises(ApiException) as exc:
        configmaps.server_side_apply(body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                                           "data": ["a"]}, name="c", namespace="default", field_manager="t")
    assert exc.value.status == 400
    assert configmaps.get(name="c", namespace="default").data.a == "1"
