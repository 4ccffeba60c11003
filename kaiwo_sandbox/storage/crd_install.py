"""The CRDs a sandbox serves from its start: created, or brought to the shipped spec when a restored
store (`--state`) holds an older one, so an upgrade of kaiwo-ray upgrades its CRDs."""

from __future__ import annotations

from collections.abc import Iterable

from kaiwo_sandbox.contracts import CRDS, JsonObj
from kaiwo_sandbox.storage.pipeline import clone
from kaiwo_sandbox.storage.store import ObjectStore


def install_crds(store: ObjectStore, crds: Iterable[JsonObj]) -> int:
    """Install CRDs at startup. Returns how many were created or changed."""
    changed = 0
    crd_info = store.resolve(CRDS)
    for crd in crds:
        name = (crd.get("metadata") or {}).get("name", "")
        existing = store.tables.bucket(crd_info).get(("", name))
        if existing is None:
            store.create_owned(CRDS, clone(crd), managed=False, admit=False)
            changed += 1
        elif existing.get("spec") != store.admission.default(crd_info, clone(crd)).get("spec"):
            updated = clone(existing)
            updated["spec"] = clone(crd.get("spec"))
            store.update_owned(CRDS, updated, managed=False, admit=False)
            changed += 1
    return changed
