from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kaiwo_api_examples import ALL_EXAMPLES, E1_MINIMAL_JOB, E7_STORAGE_JOB, EXAMPLE_B_NAMESPACED
from kaiwo_api_strategies import wire_documents

from kaiwo_ray.api.crd import CRDS, all_crds
from kaiwo_ray.api.errors import ManifestError
from kaiwo_ray.api.gpuworkload import GpuWorkload
from kaiwo_ray.api.load import KINDS as USER_KINDS
from kaiwo_ray.api.load import parse_as
from kaiwo_ray.api.load import parse_object as parse_user_object
from kaiwo_ray.api.structural import structural_problems, to_json_schema

# Every kind with a CRD: the ones users submit, plus GpuWorkload, which only the operator creates.
KINDS: dict[str, tuple[str, Any]] = {**USER_KINDS,
                                     "GpuWorkload": (GpuWorkload.model_fields["api_version"].default, GpuWorkload)}


def parse_object(doc: dict[str, Any]) -> Any:
    if doc.get("kind") == "GpuWorkload":
        return parse_as(GpuWorkload, doc)
    return parse_user_object(doc)


REPO = Path(__file__).resolve().parents[2]
CRD_BY_KIND = {crd["spec"]["names"]["kind"]: crd for crd in all_crds()}


def schema_of(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = CRD_BY_KIND[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def validator_for(kind: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(to_json_schema(schema_of(kind)))


def schema_errors(doc: dict[str, Any]) -> list[str]:
    errors = validator_for(doc["kind"]).iter_errors(doc)
    return sorted(".".join(str(p) for p in error.absolute_path) for error in errors)


# --- shape of the CRDs ---------------------------------------------------------------------------


def test_one_crd_per_kind() -> None:
    assert set(CRD_BY_KIND) == set(KINDS)


@pytest.mark.parametrize(
    ("kind", "name", "scope", "has_status"),
    [
        ("KaiwoJob", "kaiwojobs.kaiwo.silogen.ai", "Namespaced", True),
        ("KaiwoService", "kaiwoservices.kaiwo.silogen.ai", "Namespaced", True),
        ("KaiwoQueueConfig", "kaiwoqueueconfigs.kaiwo.silogen.ai", "Cluster", True),
        ("KaiwoConfig", "kaiwoconfigs.config.kaiwo.silogen.ai", "Cluster", False),
        ("AIMNamespaceConfig", "aimnamespaceconfigs.config.kaiwo.silogen.ai", "Namespaced", True),
        ("GpuWorkload", "gpuworkloads.kaiwo.silogen.ai", "Namespaced", True),
    ],
)
def test_names_scope_and_subresources(kind: str, name: str, scope: str, has_status: bool) -> None:
    crd = CRD_BY_KIND[kind]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == name
    spec = crd["spec"]
    plural, group = name.split(".", 1)
    assert spec["group"] == group
    assert spec["scope"] == scope
    assert spec["names"]["plural"] == plural
    assert spec["names"]["singular"] == kind.lower()
    assert spec["names"]["listKind"] == f"{kind}List"
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert ("subresources" in version) is has_status
    assert ("status" in version["schema"]["openAPIV3Schema"]["properties"]) is has_status


def test_aim_namespace_config_names() -> None:
    names = CRD_BY_KIND["AIMNamespaceConfig"]["spec"]["names"]
    assert names["shortNames"] == ["aimns"]
    assert names["categories"] == ["kaiwo", "all"]
    for kind in ("KaiwoJob", "KaiwoService", "KaiwoQueueConfig", "KaiwoConfig"):
        assert "shortNames" not in CRD_BY_KIND[kind]["spec"]["names"]


@pytest.mark.parametrize(
    ("kind", "columns"),
    [
        (
            "KaiwoJob",
            [
                ("Status", ".status.status", "string"),
                ("StartTime", ".status.startTime", "string"),
                ("CompletionTime", ".status.completionTime", "string"),
                ("Duration(s)", ".status.duration", "integer"),
            ],
        ),
        (
            "KaiwoService",
            [
                ("Status", ".status.status", "string"),
                ("StartTime", ".status.startTime", "string"),
                ("Duration(s)", ".status.duration", "integer"),
            ],
        ),
        ("KaiwoQueueConfig", [("WorkloadStatus", ".status.status", "string")]),
        ("KaiwoConfig", []),
        (
            "AIMNamespaceConfig",
            [("Gateway", ".spec.gateway.name", "string"), ("Age", ".metadata.creationTimestamp", "date")],
        ),
    ],
)
def test_printer_columns(kind: str, columns: list[tuple[str, str, str]]) -> None:
    version = CRD_BY_KIND[kind]["spec"]["versions"][0]
    got = [(c["name"], c["jsonPath"], c["type"]) for c in version.get("additionalPrinterColumns", [])]
    assert got == columns


def test_output_is_deterministic_and_sorted() -> None:
    first, second = all_crds(), all_crds()
    assert json.dumps(first) == json.dumps(second)
    assert json.dumps(first, sort_keys=True) == json.dumps(first)


def test_importing_the_generator_stays_light() -> None:
    code = "import sys, kaiwo_ray.api.crd; print(sorted(m for m in ('ray', 'kubernetes', 'aiohttp') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


# --- structural schemas ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_schemas_are_structural(kind: str) -> None:
    assert structural_problems(schema_of(kind)) == []
    text = json.dumps(schema_of(kind))
    for leftover in (
        '"$ref"',
        '"$defs"',
        '"title"',
        '"const"',
        '"additionalProperties": true',
        '"additionalProperties": false',
    ):
        assert leftover not in text


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "object", "properties": {"a": {"description": "untyped"}}}, "a: type is required"),
        ({"type": "object", "properties": {"a": {"$ref": "#/x"}}}, "a: $ref/definitions are not allowed"),
        (
            {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}},
            "a: anyOf/oneOf/allOf are only allowed for int-or-string here",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "object", "additionalProperties": False, "properties": {}}},
            },
            "a: properties and additionalProperties are mutually exclusive",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "array"}}},
            "a: arrays need a single `items` schema",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string", "const": "x"}}},
            "a: unknown or unsupported keyword 'const'",
        ),
        (
            {"type": "object", "required": ["b"], "properties": {}},
            "<root>: required names unknown properties ['b']",
        ),
        (
            {
                "type": "object",
                "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}},
            },
            "metadata.properties: only name and generateName may be restricted",
        ),
        (
            {"type": "object", "properties": {"q": {"x-kubernetes-int-or-string": True, "type": "string"}}},
            "q: x-kubernetes-int-or-string nodes must not set type",
        ),
        (
            {
                "type": "object",
                "properties": {"e": {"type": "string", "x-kubernetes-embedded-resource": True}},
            },
            "e: embedded resources must be objects",
        ),
        ({"type": "string"}, "<root>: type must be object"),
    ],
)
def test_structural_checker_catches_violations(schema: dict[str, Any], problem: str) -> None:
    assert problem in structural_problems(schema)


def test_int_or_string_is_accepted_in_kubebuilder_form() -> None:
    node = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
        "pattern": "^x$",
    }
    assert structural_problems({"type": "object", "properties": {"q": node}}) == []


def test_quota_fields_are_int_or_string() -> None:
    quota = schema_of("KaiwoQueueConfig")["properties"]["spec"]["properties"]["clusterQueues"]["items"][
        "properties"
    ]["spec"]["properties"]["resourceGroups"]["items"]["properties"]["flavors"]["items"]["properties"][
        "resources"
    ]["items"]
    assert quota["properties"]["nominalQuota"]["x-kubernetes-int-or-string"] is True
    assert quota["required"] == ["name", "nominalQuota"]


def test_embedded_kubernetes_objects_preserve_unknown_fields() -> None:
    spec = schema_of("KaiwoJob")["properties"]["spec"]["properties"]
    for name in ("job", "rayJob"):
        assert spec[name]["type"] == "object"
        assert spec[name]["x-kubernetes-preserve-unknown-fields"] is True
    service = schema_of("KaiwoService")["properties"]["spec"]["properties"]
    for name in ("deployment", "rayService"):
        assert service[name]["x-kubernetes-preserve-unknown-fields"] is True
    assert schema_of("KaiwoJob")["properties"]["metadata"] == {"type": "object"}


# --- the schemas validate manifests like the models do ---------------------------------------------


@pytest.mark.parametrize("name", sorted(ALL_EXAMPLES))
def test_upstream_manifests_are_valid_against_the_crds(name: str) -> None:
    assert schema_errors(ALL_EXAMPLES[name]) == []


def _with(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node: Any = doc
    for key in parents:
        node = node[key]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return doc


_DELETE = object()


@pytest.mark.parametrize(
    ("doc", "path", "value"),
    [
        (E1_MINIMAL_JOB, "spec.gpus", -1),
        (E1_MINIMAL_JOB, "spec.gpus", "8"),
        (E1_MINIMAL_JOB, "spec.duration", "1d"),
        (E7_STORAGE_JOB, "spec.env.0.name", _DELETE),
        (E1_MINIMAL_JOB, "spec.resources", {"requests": {"cpu": "two"}}),
        (E7_STORAGE_JOB, "spec.storage.accessMode", "RWX"),
        (E7_STORAGE_JOB, "spec.storage.data.download.s3.0.endpointUrl", _DELETE),
        (E7_STORAGE_JOB, "spec.storage.data.storageSize", "ten"),
        (E7_STORAGE_JOB, "spec.storage.huggingFace.preCacheRepos.0.repoId", _DELETE),
        (EXAMPLE_B_NAMESPACED, "spec.clusterQueues.0.spec.queueingStrategy", "FIFO"),
        (
            EXAMPLE_B_NAMESPACED,
            "spec.clusterQueues.0.spec.resourceGroups.0.flavors.0.resources.0.nominalQuota",
            "lots",
        ),
        (EXAMPLE_B_NAMESPACED, "spec.resourceFlavors", [{"name": f"f{i}"} for i in range(21)]),
    ],
)
def test_bad_manifests_fail_both_crd_and_model_naming_the_field(
    doc: dict[str, Any], path: str, value: Any
) -> None:
    bad = _with(doc, path, value)
    # jsonschema reports a missing required property at its parent; the model names the property.
    crd_path = path if value is not _DELETE else path.rsplit(".", 1)[0]
    errors = schema_errors(bad)
    assert errors, "the CRD must reject it"
    assert errors[0].startswith(crd_path)
    model_path = re.sub(r"\.(\d+)", r"[\1]", path)
    with pytest.raises(ManifestError) as info:
        parse_object(bad)
    assert str(info.value).startswith(f"{model_path}: ") or str(info.value).startswith(f"{model_path}.")


@pytest.mark.parametrize("kind", sorted(KINDS))
# per kind: the test runs once for each of the kinds, so fewer examples each keeps the total bounded
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_whatever_the_model_accepts_and_dumps_the_crd_accepts(kind: str, data: st.DataObject) -> None:
    _, model = KINDS[kind]
    doc = data.draw(wire_documents(model))
    wire = parse_object({**doc, "apiVersion": KINDS[kind][0], "kind": kind}).to_wire()
    assert schema_errors(wire) == []


# --- defaults in the schema equal the model's -----------------------------------------------------


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Structural defaulting as the API server does it: absent properties get their default, recursively."""
    if isinstance(value, dict) and "properties" in schema:
        value = dict(value)
        for name, child in schema["properties"].items():
            if name not in value and "default" in child:
                value[name] = copy.deepcopy(child["default"])
            if name in value:
                value[name] = apply_defaults(child, value[name])
    elif isinstance(value, list) and "items" in schema:
        value = [apply_defaults(schema["items"], item) for item in value]
    return value


def prune_empty(value: Any) -> Any:
    if isinstance(value, dict):
        pruned = {k: prune_empty(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if v not in ({}, [])}
    if isinstance(value, list):
        return [prune_empty(v) for v in value]
    return value


SKELETONS: dict[str, dict[str, Any]] = {
    "GpuWorkload": {
        "spec": {"workloadRef": {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u"}},
        "status": {"trackedPods": [{"podName": "p", "gpuMetrics": [{"gpuId": "0", "utilization": 1}]}]},
    },
    "KaiwoJob": {
        "spec": {"storage": {"data": {"download": {}}, "huggingFace": {"preCacheRepos": [{"repoId": "r"}]}}},
        "status": {},
    },
    "KaiwoService": {"spec": {"storage": {"data": {}, "huggingFace": {}}}, "status": {}},
    "KaiwoQueueConfig": {
        "spec": {
            "clusterQueues": [
                {"name": "q", "spec": {"fairSharing": {}, "preemption": {}, "flavorFungibility": {}}}
            ],
            "resourceFlavors": [{"name": "f"}],
            "workloadPriorityClasses": [{"metadata": {"name": "p"}, "value": 1}],
        },
        "status": {},
    },
    "KaiwoConfig": {},
    "AIMNamespaceConfig": {"spec": {"gateway": {}, "credentials": {}, "images": {}}},
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_schema_defaults_equal_model_defaults(kind: str) -> None:
    doc = {"apiVersion": KINDS[kind][0], "kind": kind, "metadata": {"name": "x"}, **SKELETONS[kind]}
    by_schema = apply_defaults(schema_of(kind), doc)
    by_model = parse_object(doc).to_wire()
    assert prune_empty(by_schema) == prune_empty(by_model)


def test_kaiwo_config_defaults_reach_every_leaf_from_an_empty_object() -> None:
    defaulted = apply_defaults(schema_of("KaiwoConfig"), {})
    assert defaulted["spec"]["ray"]["defaultRayImage"] == "ghcr.io/silogen/rocm-ray:6.4"
    assert defaulted["spec"]["resourceMonitoring"]["terminateUnderutilizedAfter"] == "24h"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_default_validates_against_its_own_schema(kind: str) -> None:
    def walk(node: dict[str, Any], path: str) -> None:
        if "default" in node:
            jsonschema.validate(node["default"], to_json_schema(node))
        for name, child in node.get("properties", {}).items():
            walk(child, f"{path}.{name}")
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]")

    walk(schema_of(kind), kind)


def test_crd_table_is_complete() -> None:
    assert [info.kind for info in CRDS] == list(KINDS)
