"""The sandbox's schemas and validators against the project's real objects: every example manifest and
everything the renderer makes from it must be accepted as a real apiserver would accept it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kaiwo_ray.api.crd import all_crds
from kaiwo_ray.cli import render
from kaiwo_sandbox.cluster.crds import preinstalled_crds
from kaiwo_sandbox.semantics.builtin.defaults import apply_builtin_defaults
from kaiwo_sandbox.semantics.builtin.validation import validate_builtin
from kaiwo_sandbox.semantics.metadata import validate_object_meta
from kaiwo_sandbox.semantics.schema import apply_defaults, prune, unknown_fields, validate

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
MANIFESTS = sorted(EXAMPLES.glob("*.yaml"))  # every file there is a manifest
CLUSTER_SCOPED = {"ClusterQueue", "ResourceFlavor", "WorkloadPriorityClass", "Namespace", "KaiwoQueueConfig",
                  "KaiwoConfig", "AIMNamespaceConfig", "Topology", "PriorityClass"}


def _schemas() -> dict[tuple[str, str, str], dict[str, Any]]:
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for crd in [*all_crds(), *preinstalled_crds()]:
        for version in crd["spec"]["versions"]:
            key = (crd["spec"]["group"], version["name"], crd["spec"]["names"]["kind"])
            out[key] = version["schema"]["openAPIV3Schema"]
    return out


def _problems(obj: dict[str, Any], schemas: dict[tuple[str, str, str], dict[str, Any]]) -> list[Any]:
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    kind = str(obj.get("kind"))
    schema = schemas.get((group, version, kind))
    if schema is not None:
        return unknown_fields(schema, obj) + validate(schema, apply_defaults(schema, prune(schema, obj)))
    defaulted = apply_builtin_defaults(group, kind, obj)
    return validate_builtin(group, kind, defaulted, None) + validate_object_meta(
        defaulted, namespaced=kind not in CLUSTER_SCOPED, kind=kind)


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_example_manifests_are_accepted(path: Path) -> None:
    schemas = _schemas()
    docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    assert docs
    for doc in docs:
        doc.setdefault("metadata", {}).setdefault("namespace", "default")
        assert _problems(doc, schemas) == [], (path.name, doc.get("kind"))


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_rendered_children_are_accepted(path: Path) -> None:
    schemas = _schemas()
    rendered = render.render_file(str(path))
    assert rendered
    for obj in rendered:
        meta = obj.setdefault("metadata", {})
        if obj.get("kind") not in CLUSTER_SCOPED:
            meta.setdefault("namespace", "default")
        meta.setdefault("uid", "uid-1")
        for ref in meta.get("ownerReferences") or []:
            ref["uid"] = ref.get("uid") or "owner-uid"  # offline rendering has no live owner
        assert _problems(obj, schemas) == [], (path.name, obj.get("kind"), meta.get("name"))
