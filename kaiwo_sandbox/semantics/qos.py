"""v1.PodQOSClass, as the API server computes it when a pod is created and the kubelet reports it."""

from __future__ import annotations

from typing import Any

from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.semantics.quantity import QuantityError, parse_milli


def _dict(value: Any) -> JsonObj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _same_amount(request: Any, limit: Any) -> bool:
    """Quantities compare by amount (`1` equals `1000m`); malformed ones, which validation reports
    later, by their text."""
    try:
        return parse_milli(request) == parse_milli(limit)
    except QuantityError:
        return str(request) == str(limit)


def qos_class(spec: JsonObj) -> str:
    """Guaranteed when every container (init containers included) limits cpu and memory with requests
    equal to the limits, BestEffort when none requests or limits anything, Burstable otherwise.
    Malformed parts count as unset."""
    spec = _dict(spec)
    containers = [c for key in ("containers", "initContainers") for c in _list(spec.get(key))
                  if isinstance(c, dict)]
    any_set = False
    guaranteed = bool(containers)
    for container in containers:
        resources = _dict(container.get("resources"))
        requests, limits = _dict(resources.get("requests")), _dict(resources.get("limits"))
        if requests or limits:
            any_set = True
        for name in ("cpu", "memory"):
            limit = limits.get(name)
            if limit is None or not _same_amount(requests.get(name, limit), limit):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
