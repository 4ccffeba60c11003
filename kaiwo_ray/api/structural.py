"""Check that a CRD schema is *structural* and turn it into plain JSON Schema for validation.

Kubernetes rejects CRDs whose openAPIV3Schema is not structural (every node typed, no `$ref`,
`anyOf` only carrying value validations, ...). `structural_problems` reports violations the way the
API server would, so a generator bug is caught by a test, not by a cluster. `to_json_schema` rewrites
the OpenAPI v3 dialect (`nullable`, `x-kubernetes-int-or-string`) into JSON Schema so tools such as
`jsonschema` can validate manifests against a CRD.
"""

from __future__ import annotations

from typing import Any

# apiextensions.k8s.io/v1 JSONSchemaProps fields (OpenAPI v3.0 keywords plus Kubernetes extensions).
ALLOWED_KEYS = frozenset(
    {
        "$schema",
        "id",
        "type",
        "format",
        "title",
        "description",
        "default",
        "example",
        "externalDocs",
        "enum",
        "pattern",
        "multipleOf",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "required",
        "items",
        "properties",
        "additionalProperties",
        "patternProperties",
        "dependencies",
        "additionalItems",
        "definitions",
        "nullable",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-list-type",
        "x-kubernetes-map-type",
        "x-kubernetes-validations",
    }
)
# Keys a structural schema forbids inside anyOf/allOf/oneOf/not (only value validations may appear).
_JUNCTOR_FORBIDDEN = frozenset(
    {
        "type",
        "default",
        "nullable",
        "additionalProperties",
        "description",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
    }
)
_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})
_JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]


def structural_problems(schema: dict[str, Any]) -> list[str]:
    """Every way `schema` (a CRD's openAPIV3Schema) fails Kubernetes' structural-schema rules."""
    problems: list[str] = []
    if schema.get("type") != "object":
        problems.append("<root>: type must be object")
    metadata = schema.get("properties", {}).get("metadata")
    if metadata is not None and set(metadata) - {"type", "properties", "description"}:
        problems.append("metadata: only type (and name/generateName restrictions) may be specified")
    if metadata is not None and set(metadata.get("properties", {})) - {"name", "generateName"}:
        problems.append("metadata.properties: only name and generateName may be restricted")
    _check_node(schema, "<root>", problems, in_junctor=False)
    return problems


def _check_node(node: Any, path: str, problems: list[str], *, in_junctor: bool) -> None:
    if not isinstance(node, dict):
        problems.append(f"{path}: must be a schema object")
        return
    for key in node:
        if key not in ALLOWED_KEYS:
            problems.append(f"{path}: unknown or unsupported keyword {key!r}")
    if "$ref" in node or "definitions" in node:
        problems.append(f"{path}: $ref/definitions are not allowed")
    if in_junctor:
        for key in _JUNCTOR_FORBIDDEN & set(node):
            problems.append(f"{path}: {key} is forbidden inside anyOf/allOf/oneOf/not")
    else:
        _check_typed(node, path, problems)
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{path}: properties and additionalProperties are mutually exclusive")
    if isinstance(node.get("additionalProperties"), bool):
        problems.append(f"{path}: additionalProperties must be a schema, not a boolean")
    if node.get("type") == "array" and not in_junctor and not isinstance(node.get("items"), dict):
        problems.append(f"{path}: arrays need a single `items` schema")
    required = node.get("required", [])
    missing = [name for name in required if name not in node.get("properties", {})]
    if missing and not in_junctor:
        problems.append(f"{path}: required names unknown properties {missing}")
    for name, child in node.get("properties", {}).items():
        _check_node(child, f"{path}.{name}" if path != "<root>" else name, problems, in_junctor=in_junctor)
    if isinstance(node.get("additionalProperties"), dict):
        _check_node(node["additionalProperties"], f"{path}.*", problems, in_junctor=in_junctor)
    if isinstance(node.get("items"), dict):
        _check_node(node["items"], f"{path}[*]", problems, in_junctor=in_junctor)
    for junctor in _JUNCTORS:
        branches = node.get(junctor)
        if junctor == "anyOf" and node.get("x-kubernetes-int-or-string") and branches == INT_OR_STRING_ANY_OF:
            continue  # the one typed anyOf Kubernetes allows
        if branches is None:
            continue
        for index, branch in enumerate(branches if isinstance(branches, list) else [branches]):
            _check_node(branch, f"{path}.{junctor}[{index}]", problems, in_junctor=True)


def _check_typed(node: dict[str, Any], path: str, problems: list[str]) -> None:
    node_type = node.get("type")
    if node.get("x-kubernetes-int-or-string"):
        if node_type is not None:
            problems.append(f"{path}: x-kubernetes-int-or-string nodes must not set type")
        any_of = node.get("anyOf")
        if any_of is not None and any_of != INT_OR_STRING_ANY_OF:
            problems.append(f"{path}: int-or-string anyOf must be [integer, string]")
        return
    if "anyOf" in node or "oneOf" in node or "allOf" in node:
        problems.append(f"{path}: anyOf/oneOf/allOf are only allowed for int-or-string here")
    if node_type is None:
        if not node.get("x-kubernetes-preserve-unknown-fields"):
            problems.append(f"{path}: type is required")
        return
    if node_type not in _TYPES:
        problems.append(f"{path}: unknown type {node_type!r}")
    if node.get("x-kubernetes-embedded-resource") and node_type != "object":
        problems.append(f"{path}: embedded resources must be objects")
    if "default" in node and node_type == "object" and not isinstance(node["default"], dict):
        problems.append(f"{path}: default must be an object")


def to_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI v3 (CRD dialect) -> JSON Schema (draft 2020-12) with the same meaning."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties":
            out[key] = {name: to_json_schema(child) for name, child in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = to_json_schema(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [to_json_schema(branch) for branch in value]
        elif key == "nullable" or key.startswith("x-kubernetes-"):
            continue
        else:
            out[key] = value
    if schema.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if schema.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        if "anyOf" in out:
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
    return out
