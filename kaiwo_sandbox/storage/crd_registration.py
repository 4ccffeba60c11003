"""CRD registration: what a stored CustomResourceDefinition makes the sandbox serve, and installing the
CRDs a fresh cluster starts with. The store calls `register` after a CRD is committed and `served` before
a CRD's objects are dropped with it; the registry is the only state touched here."""

from __future__ import annotations

import logging

from kaiwo_sandbox.contracts import ApiError, JsonObj, ResourceInfo
from kaiwo_sandbox.registry import Registry, info_from_crd

log = logging.getLogger(__name__)


def check(crd: JsonObj) -> None:
    """422 for a CRD the sandbox could not serve (before it is stored)."""
    info_from_crd(crd)


def register(registry: Registry, crd: JsonObj) -> None:
    """Serve `crd`'s resource (a built-in resource of the same name is never shadowed)."""
    try:
        info = info_from_crd(crd)
    except ApiError:
        log.warning("sandbox: CRD %s not served", crd.get("metadata", {}).get("name"))
        return
    existing = registry.find(info.group, info.resource)
    if existing is not None and not existing.custom:
        return
    registry.add(info)


def served(registry: Registry, crd: JsonObj) -> ResourceInfo | None:
    """The custom resource `crd` serves, if it is served (what its deletion takes away)."""
    spec = crd.get("spec") or {}
    info = registry.find(spec.get("group") or "", (spec.get("names") or {}).get("plural") or "")
    return info if info is not None and info.custom else None
