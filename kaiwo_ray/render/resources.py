"""Default requests/limits of main containers (upstream `CreateResourceRequirements` + fill), without
upstream's shared mutation: every container gets fresh maps built from an immutable `ResourceDefaults`.

Precedence per resource key: the container's own value, then `spec.resources` (and the GPU count /
Ray head memory), then the derived default (cpu = 4 per GPU, memory = 32Gi per GPU; `2` / `16Gi`
without GPUs). A filled value yields to a higher-precedence value on the other side, so a child is
never rejected for `limit < request`: a defaulted limit is raised to the request, a defaulted request
is capped at an explicit limit, and extended resources (GPUs) take the other side's value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kaiwo_ray.api.quantity import parse_quantity

DEFAULT_CPU = "2"
DEFAULT_MEMORY = "16Gi"
CPU_PER_GPU = 4
MEMORY_GI_PER_GPU = 32


@dataclass(frozen=True, slots=True)
class ResourceDefaults:
    """Values a main container receives for keys it does not set. Never mutated after construction."""

    requests: Mapping[str, Any]
    limits: Mapping[str, Any]
    explicit_requests: frozenset[str] = frozenset()
    """Keys of `requests` set by the user or the GPU arithmetic (the rest are derived defaults)."""
    explicit_limits: frozenset[str] = frozenset()


def resource_defaults(
    spec_resources: Mapping[str, Any] | None,
    *,
    gpus_per_replica: int,
    gpu_key: str,
    head_memory: str | None = None,
) -> ResourceDefaults:
    """Defaults for one kind of container. For a Ray head pass `gpus_per_replica=0` and `head_memory`.

    `head_memory` (KaiwoConfig `ray.headPodMemory`) overrides `spec.resources` memory on both sides
    when it is a positive quantity.
    """
    source = spec_resources or {}
    maps: list[dict[str, Any]] = []
    explicit: list[frozenset[str]] = []
    for side in ("requests", "limits"):
        values = dict(source.get(side) or {})
        if head_memory and _positive(head_memory):
            values["memory"] = head_memory
        if gpus_per_replica > 0:
            values[gpu_key] = str(gpus_per_replica)
        explicit.append(frozenset(values))
        values.setdefault("cpu", str(CPU_PER_GPU * gpus_per_replica) if gpus_per_replica > 0 else DEFAULT_CPU)
        values.setdefault(
            "memory", f"{MEMORY_GI_PER_GPU * gpus_per_replica}Gi" if gpus_per_replica > 0 else DEFAULT_MEMORY
        )
        maps.append(values)
    return ResourceDefaults(maps[0], maps[1], explicit[0], explicit[1])


# Precedence of a value: the container's own > explicit (spec.resources, GPUs, head memory) > derived.
_OWN, _EXPLICIT, _DERIVED = 3, 2, 1


def fill_container_resources(container: dict[str, Any], defaults: ResourceDefaults) -> None:
    """Give `container` every default key it lacks, keeping request <= limit (container values win)."""
    resources = dict(container.get("resources") or {})
    own_requests: Mapping[str, Any] = resources.get("requests") or {}
    own_limits: Mapping[str, Any] = resources.get("limits") or {}
    requests = dict(own_requests)
    request_rank: dict[str, int] = dict.fromkeys(own_requests, _OWN)
    for key, value in defaults.requests.items():
        if key in requests:
            continue
        rank = _EXPLICIT if key in defaults.explicit_requests else _DERIVED
        if key in own_limits:
            limit, limit_rank = own_limits[key], _OWN
        elif key in defaults.explicit_limits:
            limit, limit_rank = defaults.limits[key], _EXPLICIT
        else:
            limit, limit_rank = None, _DERIVED
        requests[key] = _bounded(key, value, limit, upper=True) if limit_rank > rank else value
        request_rank[key] = rank
    limits = dict(own_limits)
    for key, value in defaults.limits.items():
        if key in limits:
            continue
        rank = _EXPLICIT if key in defaults.explicit_limits else _DERIVED
        if key in requests and request_rank[key] > rank:
            value = _bounded(key, value, requests[key], upper=False)
        limits[key] = value
    for key, value in requests.items():
        if "/" in key and key not in limits:
            limits[key] = value  # an extended resource (a GPU) needs its limit, equal to the request
    resources["requests"] = requests
    resources["limits"] = limits
    container["resources"] = resources


def _bounded(key: str, value: Any, other: Any, *, upper: bool) -> Any:
    """`value`, moved to respect `other` (the opposite side): capped by a limit or raised to a request."""
    if other is None:
        return value
    if "/" in key:  # extended resources (GPUs) must have request == limit
        return other
    mine, theirs = _decimal(value), _decimal(other)
    if mine is None or theirs is None:
        return value
    if (upper and theirs < mine) or (not upper and theirs > mine):
        return other
    return value


def _decimal(value: Any) -> Decimal | None:
    try:
        return parse_quantity(value)
    except (ValueError, ArithmeticError):
        return None


def _positive(quantity: str) -> bool:
    value = _decimal(quantity)
    return value is not None and value > 0


def requests_any(container: Mapping[str, Any], keys: tuple[str, ...]) -> bool:
    """Whether the container requests any of `keys` (the GPU-toleration trigger)."""
    requests = (container.get("resources") or {}).get("requests") or {}
    return any(key in requests for key in keys)
