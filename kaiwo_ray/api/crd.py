"""Generate apiextensions.k8s.io/v1 CustomResourceDefinitions from the API models.

The models are the single source of truth: the CRD schemas (types, defaults, enums, patterns, limits,
required fields) are derived from pydantic's JSON Schema and rewritten into Kubernetes' *structural*
OpenAPI v3 dialect: `$ref`s inlined, `X | None` unions collapsed (optional fields become `nullable`),
`const` turned into `enum`, `additionalProperties: false` dropped (pruning does that job), embedded
Kubernetes objects marked `x-kubernetes-preserve-unknown-fields`. Output is deterministic (keys sorted)
so the committed YAML under `crds/` can be checked against the generator.

Import-light on purpose: the sandbox imports this to preinstall our CRDs.
"""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from kaiwo_ray.api.aim import AIMNamespaceConfig
from kaiwo_ray.api.config import CONFIG_GROUP, KaiwoConfig
from kaiwo_ray.api.gpuworkload import GpuWorkload
from kaiwo_ray.api.queueconfig import KaiwoQueueConfig
from kaiwo_ray.api.workloads import KAIWO_GROUP, KaiwoJob, KaiwoService

VERSION = "v1alpha1"

# OpenAPI v3 keywords a CRD schema may carry (apiextensions JSONSchemaProps), minus ones we never emit.
_KEEP_KEYS = frozenset(
    {
        "type",
        "format",
        "description",
        "default",
        "enum",
        "pattern",
        "minimum",
        "maximum",
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
        "nullable",
        "anyOf",
    }
)


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    json_path: str
    type: str = "string"

    def to_dict(self) -> dict[str, Any]:
        return {"jsonPath": self.json_path, "name": self.name, "type": self.type}


@dataclass(frozen=True)
class CrdInfo:
    """Everything about a kind that its model does not say: names, scope, columns."""

    model: type[BaseModel]
    group: str
    kind: str
    plural: str
    scope: str
    printer_columns: tuple[PrinterColumn, ...] = ()
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def file_name(self) -> str:
        return f"{self.group}_{self.plural}.yaml"

    @property
    def has_status(self) -> bool:
        return "status" in self.model.model_fields


_WORKLOAD_COLUMNS = (
    PrinterColumn("Status", ".status.status"),
    PrinterColumn("StartTime", ".status.startTime"),
)
_DURATION_COLUMN = PrinterColumn("Duration(s)", ".status.duration", "integer")

CRDS: tuple[CrdInfo, ...] = (
    CrdInfo(
        KaiwoJob,
        KAIWO_GROUP,
        "KaiwoJob",
        "kaiwojobs",
        "Namespaced",
        (*_WORKLOAD_COLUMNS, PrinterColumn("CompletionTime", ".status.completionTime"), _DURATION_COLUMN),
    ),
    CrdInfo(
        KaiwoService,
        KAIWO_GROUP,
        "KaiwoService",
        "kaiwoservices",
        "Namespaced",
        (*_WORKLOAD_COLUMNS, _DURATION_COLUMN),
    ),
    CrdInfo(
        KaiwoQueueConfig,
        KAIWO_GROUP,
        "KaiwoQueueConfig",
        "kaiwoqueueconfigs",
        "Cluster",
        (PrinterColumn("WorkloadStatus", ".status.status"),),
    ),
    CrdInfo(KaiwoConfig, CONFIG_GROUP, "KaiwoConfig", "kaiwoconfigs", "Cluster"),
    CrdInfo(
        AIMNamespaceConfig,
        CONFIG_GROUP,
        "AIMNamespaceConfig",
        "aimnamespaceconfigs",
        "Namespaced",
        (
            PrinterColumn("Gateway", ".spec.gateway.name"),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
        ),
        short_names=("aimns",),
        categories=("kaiwo", "all"),
    ),
    CrdInfo(
        GpuWorkload,
        KAIWO_GROUP,
        "GpuWorkload",
        "gpuworkloads",
        "Namespaced",
        (
            PrinterColumn("Workload", ".spec.workloadRef.name"),
            PrinterColumn("Kind", ".spec.workloadRef.kind"),
            PrinterColumn("Phase", ".status.phase"),
            PrinterColumn("Utilization", ".status.aggregatedUtilization", "number"),
            PrinterColumn("IdleSince", ".status.idleSince", "date"),
            PrinterColumn("PreemptedFor", ".status.preemptedFor"),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
        ),
        short_names=("gpuwl",),
        categories=("kaiwo",),
    ),
)


def all_crds() -> list[dict[str, Any]]:
    """Every CRD manifest, as plain dicts with sorted keys (fresh copies: callers may mutate them)."""
    crds: list[dict[str, Any]] = json.loads(_all_crds_json())
    return crds


@functools.cache
def _all_crds_json() -> str:
    # Generating the schemas takes a few hundred milliseconds; the sandbox asks on every start.
    return json.dumps([crd_for(info) for info in CRDS])


def crd_for(info: CrdInfo) -> dict[str, Any]:
    names: dict[str, Any] = {
        "kind": info.kind,
        "listKind": f"{info.kind}List",
        "plural": info.plural,
        "singular": info.kind.lower(),
    }
    if info.short_names:
        names["shortNames"] = list(info.short_names)
    if info.categories:
        names["categories"] = list(info.categories)
    version: dict[str, Any] = {
        "name": VERSION,
        "schema": {"openAPIV3Schema": openapi_schema(info.model)},
        "served": True,
        "storage": True,
    }
    if info.printer_columns:
        version["additionalPrinterColumns"] = [column.to_dict() for column in info.printer_columns]
    if info.has_status:
        version["subresources"] = {"status": {}}
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": info.name},
        "spec": {"group": info.group, "names": names, "scope": info.scope, "versions": [version]},
    }
    result: dict[str, Any] = _sorted(crd)
    return result


def openapi_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural openAPIV3Schema of a top-level kind."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    definitions: dict[str, Any] = raw.pop("$defs", {})
    schema = _convert(raw, definitions)
    properties = schema["properties"]
    properties["apiVersion"] = {
        "description": "APIVersion defines the versioned schema of this representation of an object.",
        "type": "string",
    }
    properties["kind"] = {
        "description": "Kind is a string value representing the REST resource this object represents.",
        "type": "string",
    }
    properties["metadata"] = {"type": "object"}
    schema.pop("required", None)
    result: dict[str, Any] = _sorted(schema)
    return result


def _convert(node: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    node = _inline(node, definitions)
    node = _collapse_optional(node, definitions)
    if "const" in node:
        node["enum"] = [node.pop("const")]
    # `extra="forbid"` -> additionalProperties false: dropped, pruning rejects nothing but drops unknowns.
    # `extra="allow"` / dict[str, Any] -> additionalProperties true: keep unknown fields instead.
    if isinstance(node.get("additionalProperties"), bool) and node.pop("additionalProperties"):
        node["x-kubernetes-preserve-unknown-fields"] = True
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-"):
            out[key] = value
        elif key not in _KEEP_KEYS:
            continue
        elif key == "properties":
            out[key] = {name: _convert(child, definitions) for name, child in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _convert(value, definitions)
        elif key == "anyOf":
            out[key] = [_convert(branch, definitions) for branch in value]
        elif key == "default":
            out[key] = copy.deepcopy(value)
        else:
            out[key] = value
    if out.get("type") == "object" and "properties" in out and not out["properties"]:
        del out["properties"]
    return out


def _inline(node: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """Replace `$ref` (and single-element `allOf`) with the referenced schema; siblings win."""
    node = dict(node)
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1:
        del node["allOf"]
        node = {**all_of[0], **node}
    while "$ref" in node:
        target = definitions[node.pop("$ref").rsplit("/", 1)[-1]]
        node = {**target, **node}
    return node


def _collapse_optional(node: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """`anyOf: [X, null]` -> X; nullable when the field's default is null (the API server keeps `null`)."""
    branches = node.get("anyOf")
    if not isinstance(branches, list):
        return node
    rest = [branch for branch in branches if branch != {"type": "null"}]
    if len(rest) == len(branches) or len(rest) != 1:
        return node
    outer = {key: value for key, value in node.items() if key != "anyOf"}
    nullable = "default" in outer and outer["default"] is None
    if outer.get("default", 0) is None:
        del outer["default"]
    inner = _inline(rest[0], definitions)
    merged = {**inner, **outer}
    if nullable:
        merged["nullable"] = True
    return merged


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value
