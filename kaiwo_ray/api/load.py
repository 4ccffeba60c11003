"""Parse a manifest (a dict, or YAML text) into the matching typed Kaiwo object.

The single entry point other layers use to turn user input into models: it dispatches on
apiVersion+kind and reports every problem as a `ManifestError` with wire-named field paths.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from kaiwo_ray.api.aim import AIMNamespaceConfig
from kaiwo_ray.api.config import KaiwoConfig
from kaiwo_ray.api.errors import FieldError, ManifestError, errors_from_validation
from kaiwo_ray.api.queueconfig import KaiwoQueueConfig
from kaiwo_ray.api.workloads import KaiwoJob, KaiwoService
from kaiwo_ray.api.yaml_input import safe_load_all

__all__ = ["KINDS", "KaiwoObject", "ManifestError", "parse_as", "parse_object", "parse_yaml"]

KaiwoObject = KaiwoJob | KaiwoService | KaiwoQueueConfig | KaiwoConfig | AIMNamespaceConfig

# kind -> (apiVersion, model)
KINDS: dict[str, tuple[str, type[KaiwoObject]]] = {
    model.model_fields["kind"].default: (model.model_fields["api_version"].default, model)
    for model in (KaiwoJob, KaiwoService, KaiwoQueueConfig, KaiwoConfig, AIMNamespaceConfig)
}

ModelT = TypeVar("ModelT", bound=BaseModel)


def parse_object(doc: Mapping[str, Any]) -> KaiwoObject:
    """The typed object for one manifest; raises ManifestError (e.g. `spec.gpus: must be >= 0`)."""
    if not isinstance(doc, Mapping):
        raise ManifestError.single(
            "", f"a manifest must be a mapping with apiVersion and kind, got {_kind_of(doc)}"
        )
    kind = doc.get("kind")
    if kind is None:
        raise ManifestError.single("kind", "required")
    entry = KINDS.get(kind) if isinstance(kind, str) else None
    if entry is None:
        raise ManifestError.single("kind", f'unknown kind "{kind}" (expected one of {", ".join(KINDS)})')
    api_version, model = entry
    if doc.get("apiVersion") is None:
        raise ManifestError.single("apiVersion", f"required (expected {api_version})")
    if doc.get("apiVersion") != api_version:
        raise ManifestError.single(
            "apiVersion", f'"{doc.get("apiVersion")}" does not serve {kind} (expected {api_version})'
        )
    return parse_as(model, doc)


def parse_as(model: type[ModelT], doc: Mapping[str, Any]) -> ModelT:
    """Validate wire data as a given model, converting pydantic errors to a ManifestError.

    Only wire (camelCase) names are accepted here: the API server would prune `gpus_per_replica`,
    so accepting it would make a manifest behave differently on a cluster.
    """
    try:
        return model.model_validate(doc, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise ManifestError(errors_from_validation(exc, model)) from None


def parse_yaml(text: str) -> list[KaiwoObject]:
    """Every Kaiwo object in a (multi-document) YAML or JSON text; empty documents are skipped.

    Errors name the document when there is more than one: `document 2: spec.gpus: must be >= 0`.
    """
    docs = list(_load_documents(text))
    objects: list[KaiwoObject] = []
    errors: list[FieldError] = []
    for index, doc in enumerate(docs, start=1):
        try:
            objects.append(parse_object(doc))
        except ManifestError as exc:
            errors.extend((exc.prefixed(f"document {index}") if len(docs) > 1 else exc).errors)
    if errors:
        raise ManifestError(errors)
    return objects


def _load_documents(text: str) -> Iterator[Any]:
    try:
        for doc in safe_load_all(text):
            if doc is not None:
                yield doc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ManifestError.single("", f"invalid YAML{where}: {problem}") from None


def _kind_of(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else type(value).__name__
