"""Resource arithmetic for the simulated Kueue: Kubernetes quantities as exact integers and the
per-pod request a pod template asks for, the way Kueue totals it.

Every amount is an integer in milli-units (cpu "500m" -> 500, memory "1Ki" -> 1_024_000,
"nvidia.com/gpu: 8" -> 8000) so quota sums never drift and one unit works for every resource.
"""

from __future__ import annotations

from typing import Any

from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.semantics.quantity import parse_milli


def _container_requests(container: JsonObj) -> dict[str, int]:
    """A container's requests; a resource with only a limit requests its limit (apiserver default)."""
    resources = container.get("resources") or {}
    merged: dict[str, Any] = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    return {name: parse_milli(value) for name, value in merged.items()}


def spec_requests_milli(pod_spec: JsonObj) -> dict[str, int]:
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
        total[name] = total.get(name, 0) + parse_milli(value)
    return {name: amount for name, amount in total.items() if amount}
