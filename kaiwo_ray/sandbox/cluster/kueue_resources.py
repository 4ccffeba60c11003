"""Resource arithmetic for the simulated Kueue: Kubernetes quantities as exact integers and the
per-pod request a pod template asks for, the way Kueue totals it.

Every amount is an integer in milli-units (cpu "500m" -> 500, memory "1Ki" -> 1_024_000,
"nvidia.com/gpu: 8" -> 8000) so quota sums never drift and one unit works for every resource.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from kaiwo_ray.sandbox.types import JsonObj

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
            "P": Decimal("1e15"), "E": Decimal("1e18")}


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: Any) -> int:
    """Parse a Kubernetes quantity ("500m", "1Gi", "8", 2, "1e3") into milli-units, rounding up
    as the apiserver does for sub-milli precision."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must be numbers or strings, not {value!r}")
    if isinstance(value, int | float):
        number = Decimal(str(value))
    elif isinstance(value, str):
        text = value.strip()
        if not text:
            raise QuantityError("empty quantity")
        number = _parse_text(text)
    else:
        raise QuantityError(f"quantities must be numbers or strings, not {value!r}")
    return int((number * 1000).to_integral_value(rounding=ROUND_CEILING))


def _parse_text(text: str) -> Decimal:
    for suffix, factor in _BINARY.items():
        if text.endswith(suffix):
            return _number(text[: -len(suffix)], text) * factor
    if text[-1] in _DECIMAL and not text[-1].isdigit():
        return _number(text[:-1], text) * _DECIMAL[text[-1]]
    return _number(text, text)


def _number(digits: str, original: str) -> Decimal:
    try:
        number = Decimal(digits)
    except InvalidOperation:
        raise QuantityError(f"quantities must match the regular expression "
                            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {original!r}") from None
    if not number.is_finite():
        raise QuantityError(f"quantity {original!r} is not finite")
    return number


def format_quantity(resource: str, milli: int) -> str:
    """Canonical-looking text for an amount: cpu in cores or millicores, memory-like resources
    with the largest exact binary suffix, counts (GPUs, pods) as plain integers."""
    if milli % 1000:
        return f"{milli}m"
    whole = milli // 1000
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for suffix, factor in reversed(_BINARY.items()):
            if whole and whole % factor == 0:
                return f"{whole // factor}{suffix}"
    return str(whole)


def _container_requests(container: JsonObj) -> dict[str, int]:
    """A container's requests; a resource with only a limit requests its limit (apiserver default)."""
    resources = container.get("resources") or {}
    merged: dict[str, Any] = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    return {name: parse_quantity(value) for name, value in merged.items()}


def pod_requests(pod_spec: JsonObj) -> dict[str, int]:
    """What one pod of this spec requests, as Kueue totals it: the sum of the main containers,
    at least each non-sidecar init container, plus the pod overhead. Zero amounts are dropped."""
    total: dict[str, int] = {}
    for container in pod_spec.get("containers") or []:
        for name, amount in _container_requests(container).items():
            total[name] = total.get(name, 0) + amount
    sidecars: dict[str, int] = {}  # native sidecars started so far: they run alongside what follows
    init_peak: dict[str, int] = {}
    for init in pod_spec.get("initContainers") or []:
        requests = _container_requests(init)
        if init.get("restartPolicy") == "Always":
            for name, amount in requests.items():
                sidecars[name] = sidecars.get(name, 0) + amount
            continue
        for name, amount in requests.items():
            init_peak[name] = max(init_peak.get(name, 0), amount + sidecars.get(name, 0))
    for name, amount in sidecars.items():
        total[name] = total.get(name, 0) + amount
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, 0), amount)
    for name, value in (pod_spec.get("overhead") or {}).items():
        total[name] = total.get(name, 0) + parse_quantity(value)
    return {name: amount for name, amount in total.items() if amount}
