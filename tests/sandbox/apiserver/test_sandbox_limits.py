"""What a real apiserver refuses, through the official client and raw HTTP: bodies over 3 MiB,
objects over etcd's 1.5 MiB, ConfigMap/Secret data over 1 MiB, badly formed list options."""

from __future__ import annotations

import base64
import json
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

from kaiwo_sandbox.testing import RunningSandbox

MIB = 1024 * 1024


def _error(exc: pytest.ExceptionInfo[ApiException]) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.value.body)
    return body


def _pod(name: str, env_value: str) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36",
                                     "env": [{"name": "BIG", "value": env_value}]}]}}


def _deployment(env_value: str) -> dict[str, Any]:
    labels = {"app": "grow"}
    return {"metadata": {"name": "grow"},
            "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": _pod("grow", env_value)["spec"]}}}


def test_a_body_over_3_mib_is_413_request_entity_too_large(core: Any) -> None:
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map("default", {"metadata": {"name": "huge"}, "data": {"k": "x" * (3 * MIB)}})
    assert exc.value.status == 413
    body = _error(exc)
    assert body["reason"] == "RequestEntityTooLarge"
    assert body["message"] == "Request entity too large: limit is 3145728"
    assert core.list_namespaced_config_map("default", field_selector="metadata.name=huge").items == []


def test_a_chunked_body_over_3_mib_is_413_too(sandbox: RunningSandbox) -> None:
    """Without Content-Length the server still stops reading at the limit."""
    import http.client
    import ssl

    host, port = sandbox.url.removeprefix("https://").split(":")
    context = ssl.create_default_context(cafile=sandbox.ca_cert_path)
    connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=30)
    payload = json.dumps({"metadata": {"name": "chunked"}, "data": {"k": "x" * (3 * MIB + 10)}}).encode()
    chunks = (payload[i:i + 65536] for i in range(0, len(payload), 65536))
    try:
        connection.request("POST", "/api/v1/namespaces/default/configmaps", body=chunks, encode_chunked=True,
                           headers={"Authorization": f"Bearer {sandbox.token}", "Content-Type": "application/json"})
        response = connection.getresponse()
        status, body = response.status, json.loads(response.read())
    finally:
        connection.close()
    assert status == 413
    assert body["message"] == "Request entity too large: limit is 3145728"


def test_configmap_data_over_1_mib_is_422_too_long_on_the_whole_object(core: Any) -> None:
    half = "x" * (MIB // 2)
    blob = base64.b64encode(b"y" * 16).decode()
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map("default", {"metadata": {"name": "big"}, "data": {"a": half, "b": half},
                                                      "binaryData": {"c": blob}})
    assert exc.value.status == 422
    body = _error(exc)
    assert body["message"] == 'ConfigMap "big" is invalid: []: Too long: may not be more than 1048576 bytes'
    assert body["details"]["causes"][0]["field"] == "[]"
    # Exactly 1 MiB is allowed.
    core.create_namespaced_config_map("default", {"metadata": {"name": "fits"}, "data": {"a": half, "b": half}})


def test_secret_data_over_1_mib_is_422_too_long_on_data(core: Any) -> None:
    value = base64.b64encode(b"z" * (MIB + 1)).decode()
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_secret("default", {"metadata": {"name": "big"}, "data": {"k": value}})
    assert exc.value.status == 422
    assert _error(exc)["message"] == 'Secret "big" is invalid: data: Too long: may not be more than 1048576 bytes'
    # stringData counts too (it becomes data before validation).
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_secret("default", {"metadata": {"name": "big"}, "stringData": {"k": "z" * (MIB + 1)}})
    assert exc.value.status == 422


def test_an_object_over_1_5_mib_is_refused_by_storage_as_etcd_does(core: Any) -> None:
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("default", _pod("big", "v" * (1536 * 1024)))
    assert exc.value.status == 500
    body = _error(exc)
    assert body["message"] == "etcdserver: request is too large"
    assert "reason" not in body
    assert core.list_namespaced_pod("default").items == []
    # An update that grows an object past the limit is refused the same way; the object is unchanged.
    apps = kubernetes.client.AppsV1Api(core.api_client)
    apps.create_namespaced_deployment("default", _deployment("v"))
    with pytest.raises(ApiException) as exc:
        apps.replace_namespaced_deployment("grow", "default", _deployment("v" * (1536 * 1024)))
    assert exc.value.status == 500
    stored = apps.read_namespaced_deployment("grow", "default")
    assert stored.spec.template.spec.containers[0].env[0].value == "v"


def test_dry_run_of_an_oversized_object_is_not_refused_by_storage(core: Any) -> None:
    created = core.create_namespaced_pod("default", _pod("dry", "v" * (1536 * 1024)), dry_run="All")
    assert created.metadata.name == "dry"


def test_limit_minus_one_lists_everything_as_the_real_server_does(core: Any, sandbox: RunningSandbox) -> None:
    for name in ("a", "b", "c"):
        core.create_namespaced_config_map("default", {"metadata": {"name": name}})
    listed = core.list_namespaced_config_map("default", limit=-1)
    assert [cm.metadata.name for cm in listed.items if cm.metadata.name in "abc"] == ["a", "b", "c"]
    assert listed.metadata._continue is None
    status, _, raw = sandbox.http("GET", "/api/v1/namespaces/default/configmaps?limit=0")
    assert status == 200 and len(json.loads(raw)["items"]) >= 3


@pytest.mark.parametrize("query", ["timeoutSeconds=abc", "limit=abc", "watch=1&timeoutSeconds=abc",
                                   "timeoutSeconds=1.5", "limit=99999999999999999999"])
def test_malformed_list_options_are_400_with_go_s_parse_error(sandbox: RunningSandbox, query: str) -> None:
    status, _, raw = sandbox.http("GET", f"/api/v1/namespaces/default/configmaps?{query}")
    assert status == 400
    body = json.loads(raw)
    assert body["reason"] == "BadRequest"
    value = query.rsplit("=", 1)[1]
    problem = "value out of range" if value.startswith("9999") else "invalid syntax"
    assert body["message"] == f'strconv.ParseInt: parsing "{value}": {problem}'
