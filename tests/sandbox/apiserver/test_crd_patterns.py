"""CRD `pattern`s are matched as the apiserver matches them (Go regexp = RE2): in linear time, so a
pattern that makes a backtracking engine explode cannot stall the server, and with RE2's syntax."""

from __future__ import annotations

import json
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

from kaiwo_sandbox.testing import RunningSandbox

pytest.importorskip("re2", reason="google-re2 (the [sandbox] extra) is not installed: patterns use Python's re")

SCHEMA = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
    "name": {"type": "string", "pattern": "^(a+)+$"},  # exponential for a backtracking engine
    "letters": {"type": "string", "pattern": r"^\pL+$"},  # RE2/Go syntax, not Python's
}}}}


def _crd() -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "patterns.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "patterns", "singular": "pattern", "kind": "Pattern"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": SCHEMA}}]}}


def _create(custom: Any, object_name: str, **spec: Any) -> Any:
    return custom.create_namespaced_custom_object("example.com", "v1", "default", "patterns", {
        "apiVersion": "example.com/v1", "kind": "Pattern", "metadata": {"name": object_name}, "spec": spec})


def test_a_catastrophic_pattern_answers_at_once(sandbox: RunningSandbox, custom: Any) -> None:
    kubernetes.client.ApiextensionsV1Api(sandbox.api_client()).create_custom_resource_definition(_crd())
    _create(custom, "ok", name="aaaa", letters="Grüße")
    with pytest.raises(ApiException) as exc:
        # Python's re needs ~2^40 steps here; RE2 one pass. The client's timeout fails the old engine.
        custom.create_namespaced_custom_object(
            "example.com", "v1", "default", "patterns",
            {"apiVersion": "example.com/v1", "kind": "Pattern", "metadata": {"name": "evil"},
             "spec": {"name": "a" * 40 + "!"}}, _request_timeout=20)
    assert exc.value.status == 422
    assert json.loads(exc.value.body)["details"]["causes"][0]["field"] == "spec.name"
    with pytest.raises(ApiException) as exc:
        _create(custom, "digits", letters="abc1")
    assert exc.value.status == 422


def test_a_crd_whose_pattern_go_cannot_compile_is_422(sandbox: RunningSandbox) -> None:
    crd = _crd()
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["name"][
        "pattern"] = r"^(a)\1$"  # a backreference: Python's re compiles it, Go's regexp does not
    with pytest.raises(ApiException) as exc:
        kubernetes.client.ApiextensionsV1Api(sandbox.api_client()).create_custom_resource_definition(crd)
    assert exc.value.status == 422
    cause = json.loads(exc.value.body)["details"]["causes"][0]
    assert cause["field"] == ("spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[name]"
                              ".pattern")
    assert "must be a valid regular expression, but isn't: error parsing regexp: invalid escape sequence" in \
        cause["message"]
