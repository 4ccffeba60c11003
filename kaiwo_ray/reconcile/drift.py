"""Deciding whether a child needs a write, and what an update may carry.

Children are server-side applied. Two rules keep that safe and cheap:

* **No write without drift.** The desired object is compared with the live one as a subset (every
  field we set must have the same value live; fields the server or other controllers added are
  ignored). A no-op resync therefore costs zero API calls.
* **Never fight the platform.** Some fields cannot or must not change after creation: Kubernetes
  rejects them (a Job's pod template, a Deployment's selector, a PVC's class), or another controller
  owns them (Kueue flips `spec.suspend`, AppWrapper components are immutable). For an existing
  object those paths are pinned to their live values, so the apply neither fails nor takes them
  back; each such spec change is reported so the reconciler can say so in an event.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.quantity import parse_quantity

Path = tuple[str, ...]

# Paths that an update must not change, per (apiVersion group, kind).
FROZEN_PATHS: dict[tuple[str, str], tuple[Path, ...]] = {
    ("batch", "Job"): (("spec", "template"), ("spec", "selector"), ("spec", "completions"),
                       ("spec", "completionMode"), ("spec", "suspend")),
    ("apps", "Deployment"): (("spec", "selector"),),
    ("ray.io", "RayJob"): (("spec",),),
    ("ray.io", "RayService"): (),
    ("workload.codeflare.dev", "AppWrapper"): (("spec",),),
    ("", "PersistentVolumeClaim"): (("spec", "accessModes"), ("spec", "storageClassName"),
                                    ("spec", "volumeMode"), ("spec", "volumeName"), ("spec", "selector")),
    ("kueue.x-k8s.io", "LocalQueue"): (("spec", "clusterQueue"),),
}

_QUANTITY_PARENTS = frozenset({"requests", "limits", "nominalQuota", "borrowingLimit", "lendingLimit",
                               "capacity", "allocatable"})


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _get(obj: Mapping[str, Any], path: Path) -> Any:
    cur: Any = obj
    for part in path:
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _set(obj: JsonObj, path: Path, value: Any) -> None:
    cur = obj
    for part in path[:-1]:
        nxt = cur.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            cur[part] = nxt
        cur = nxt
    if value is None:
        cur.pop(path[-1], None)
    else:
        cur[path[-1]] = value


def _amount(value: Any) -> Decimal | None:
    """A field's value as a quantity's amount (`1Gi`, 2, 0.5), for comparing children's resources; None
    for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    if isinstance(value, str):
        try:
            return parse_quantity(value)
        except (ValueError, InvalidOperation):
            return None
    return None


def is_subset(desired: Any, live: Any, *, quantities: bool = False) -> bool:
    """Every field in `desired` has the same value in `live` (extra live fields are fine).
    Lists compare element-wise in order; values under resource maps (requests, limits, quotas)
    compare as quantities (`"2"` == `2` == `"2000m"`), as the apiserver normalizes them.
    (Plain loops and exact-type checks first: a no-op reconcile spent most of its time here, much
    of it in `isinstance(x, Mapping)`, an ABC check.)"""
    if desired is live:
        return True
    if type(desired) is dict or isinstance(desired, Mapping):
        if type(live) is not dict and not isinstance(live, Mapping):
            return False
        for key, value in desired.items():
            if key not in live:
                return False
            if not is_subset(value, live[key], quantities=quantities or key in _QUANTITY_PARENTS):
                return False
        return True
    if type(desired) is list:
        if type(live) is not list or len(desired) != len(live):
            return False
        for want, have in zip(desired, live, strict=True):
            if not is_subset(want, have, quantities=quantities):
                return False
        return True
    if desired == live and type(desired) is type(live):
        return True
    if quantities:
        a, b = _amount(desired), _amount(live)
        return a is not None and a == b
    return False


def update_body(desired: JsonObj, live: JsonObj | None) -> tuple[JsonObj, list[str]]:
    """What to apply: `desired` itself for a create; for an update, `desired` with frozen paths
    pinned to their live values. Returns (body, frozen paths whose desired value differs)."""
    if live is None:
        return desired, []
    frozen = FROZEN_PATHS.get((_group(str(desired.get("apiVersion", ""))), str(desired.get("kind", ""))), ())
    if not frozen:
        return desired, []
    body = dict(desired)
    for top in {p[0] for p in frozen}:
        if isinstance(body.get(top), dict):
            body[top] = _copy_dicts(body[top])
    not_propagated: list[str] = []
    for path in frozen:
        want = _get(desired, path)
        have = _get(live, path)
        if want is None or is_subset(want, have):
            continue
        not_propagated.append(".".join(path))
        _set(body, path, have)
    return body, not_propagated


def _copy_dicts(value: Any) -> Any:
    """Copy nested dicts (not lists or leaves) so pinning a path never mutates the caller's object."""
    if isinstance(value, dict):
        return {k: _copy_dicts(v) for k, v in value.items()}
    return value


def drifted(desired: JsonObj, live: JsonObj | None) -> bool:
    """`needs_write(update_body(desired, live)[0], live)` without building the body: a frozen path
    pinned to its live value never differs, so it is left out of the comparison (for a Job, its pod
    template: most of the object, compared on every reconcile before)."""
    if live is None:
        return True
    frozen = FROZEN_PATHS.get((_group(str(desired.get("apiVersion", ""))), str(desired.get("kind", ""))), ())
    view = _without_status(desired)
    for path in frozen:
        view = _without_path(view, path)
    return not is_subset(view, live)


def _without_path(obj: JsonObj, path: Path) -> JsonObj:
    """`obj` less `path`, copying only the dicts along it (the rest is shared, never mutated)."""
    head, rest = path[0], path[1:]
    if head not in obj:
        return obj
    out = dict(obj)
    if not rest:
        del out[head]
    elif isinstance(out[head], dict):
        out[head] = _without_path(out[head], rest)
    return out


def needs_write(body: JsonObj, live: JsonObj | None) -> bool:
    return live is None or not is_subset(_without_status(body), live)


def _without_status(obj: JsonObj) -> JsonObj:
    return {k: v for k, v in obj.items() if k != "status"}
