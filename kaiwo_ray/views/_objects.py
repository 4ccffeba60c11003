"""Small readers over plain Kubernetes objects (dicts), shared by the views."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict

from kaiwo_ray.api.quantity import format_quantity, parse_quantity

GPU_RESOURCES = ("amd.com/gpu", "nvidia.com/gpu")
TERMINAL_POD_PHASES = frozenset({"Succeeded", "Failed"})


class ObjectRef(BaseModel):
    """Which object a fact comes from."""

    model_config = ConfigDict(frozen=True)

    kind: str
    name: str
    namespace: str | None = None


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("status") or {}


def ref(obj: Mapping[str, Any]) -> ObjectRef:
    m = meta(obj)
    return ObjectRef(kind=str(obj.get("kind") or ""), name=str(m.get("name") or ""),
                     namespace=m.get("namespace") or None)


def uid(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("uid") or "")


def condition(obj: Mapping[str, Any], ctype: str) -> Mapping[str, Any] | None:
    for cond in status(obj).get("conditions") or ():
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def is_true(obj: Mapping[str, Any], ctype: str) -> bool:
    cond = condition(obj, ctype)
    return cond is not None and cond.get("status") == "True"


def owner_uids(obj: Mapping[str, Any]) -> set[str]:
    return {str(r.get("uid")) for r in meta(obj).get("ownerReferences") or () if r.get("uid")}


def quantity(value: Any) -> Decimal:
    """A quantity's value; unparsable or missing text counts as zero (views never raise on bad data)."""
    if value is None:
        return Decimal(0)
    try:
        return parse_quantity(value)
    except ValueError:
        return Decimal(0)


def show(resource: str, value: Decimal) -> str:
    """A quantity as people read it: memory in binary units, the rest in decimal ones."""
    if resource == "memory" or resource.endswith("storage"):
        exact = format_quantity(value, "BinarySI")
        if exact[-2:] in ("Gi", "Ti", "Pi", "Ei") or value < Decimal(2) ** 30:
            return exact
        for suffix, power in (("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):  # not a whole unit: round
            if value >= Decimal(2) ** power:
                return f"{float(value) / 2 ** power:.1f}{suffix}"
    return format_quantity(value)


def pod_requests(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """Effective requests of a pod: sum of its containers, at least each init container (as the
    scheduler counts), a limit standing in for a missing request (as the API server defaults it)."""
    spec = pod.get("spec") or {}
    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or ():
        for name, value in _container_requests(container).items():
            total[name] = total.get(name, Decimal(0)) + value
    for container in spec.get("initContainers") or ():
        for name, value in _container_requests(container).items():
            total[name] = max(total.get(name, Decimal(0)), value)
    return total


def _container_requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: quantity(value) for name, value in merged.items()}


def sum_requests(requests: Iterable[Mapping[str, Decimal]]) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for item in requests:
        for name, value in item.items():
            total[name] = total.get(name, Decimal(0)) + value
    return total
