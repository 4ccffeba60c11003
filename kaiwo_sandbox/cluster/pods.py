"""Pure helpers over pod-shaped dicts shared by the scheduler, kubelet and workload controllers:
effective resource requests, QoS class, ownership, and pod lifecycle predicates."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from kaiwo_sandbox.cluster.resources import spec_requests_milli
from kaiwo_sandbox.contracts import JsonObj

# One quantity parser for the whole simulated cluster, so the scheduler's fit and Kueue's quota
# count requests identically (and the sandbox never imports the heavy `kubernetes` package).
from kaiwo_sandbox.semantics.quantity import QuantityError, parse_milli

_MILLI = Decimal(1000)

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
GPU_RESOURCES = ("amd.com/gpu", "nvidia.com/gpu")


def quantity(value: Any) -> Decimal:
    """Parse a Kubernetes quantity ("500m", "16Gi", 8); unparseable values count as zero so one
    malformed object cannot stall the whole simulated cluster (validation is the store's job)."""
    try:
        return Decimal(parse_milli(value)) / _MILLI
    except (QuantityError, ValueError, TypeError):
        return Decimal(0)


def as_int(value: Any, default: int) -> int:
    """An integer field as a controller reads it: absent or malformed means the default (the
    API layer is where bad input is rejected; a controller must not crash on what slipped by)."""
    if value is None or isinstance(value, bool):
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def pod_requests_units(pod: JsonObj) -> dict[str, Decimal]:
    """What the scheduler charges a node for, in units: the same total Kueue charges quota for
    (`cluster.resources.spec_requests_milli`: containers, init containers by the max rule, native sidecars,
    overhead), since both real components use the same Kubernetes helper. A pod with a quantity
    that does not parse (the store refuses those; this is only a guard) is charged nothing rather
    than stalling the scheduler."""
    try:
        milli = spec_requests_milli(pod.get("spec") or {})
    except QuantityError:
        return {}
    return {name: Decimal(amount) / _MILLI for name, amount in milli.items()}




def is_terminal(pod: JsonObj) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def is_ready(pod: JsonObj) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def controller_of(obj: JsonObj) -> JsonObj | None:
    """The ownerReference marked controller, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def owner_reference(owner: JsonObj) -> JsonObj:
    """A controller ownerReference to `owner`, as the built-in controllers write it."""
    meta = owner.get("metadata") or {}
    return {
        "apiVersion": owner.get("apiVersion", ""),
        "kind": owner.get("kind", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def namespaced_name(obj: JsonObj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class PodsByController:
    """Pods by their controller, kept current from watch events so reconciles never scan every pod.

    Holds the store's read-only snapshots: readers must copy before mutating. Events arrive
    synchronously after each commit, so the index always matches committed state."""

    def __init__(self, owner_kind: str) -> None:
        self.owner_kind = owner_kind
        self._by_uid: dict[str, dict[tuple[str, str], JsonObj]] = {}
        self._by_name: dict[tuple[str, str], set[str]] = {}  # (namespace, owner name) -> owner uids
        self._owner_of: dict[tuple[str, str], str] = {}  # pod key -> owner uid

    def observe(self, event_type: str, pod: JsonObj) -> tuple[str, str] | None:
        """Record a pod event; returns (namespace, owner name) when the pod belongs to our kind."""
        meta = pod.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        previous = self._owner_of.pop(key, None)
        if previous is not None:
            self._by_uid.get(previous, {}).pop(key, None)
            if not self._by_uid.get(previous):
                self._by_uid.pop(previous, None)
        ref = controller_of(pod)
        if ref is None or ref.get("kind") != self.owner_kind:
            return None
        owner = (key[0], str(ref.get("name", "")))
        if event_type != "DELETED":
            uid = str(ref.get("uid", ""))
            self._by_uid.setdefault(uid, {})[key] = pod
            self._owner_of[key] = uid
            self._by_name.setdefault(owner, set()).add(uid)
        return owner

    def pods(self, owner_uid: str) -> list[JsonObj]:
        return list(self._by_uid.get(owner_uid, {}).values())

    def orphans(self, namespace: str, owner_name: str, live_uid: str | None) -> list[JsonObj]:
        """Pods claiming an owner of that name whose uid is not the live one."""
        uids = self._by_name.get((namespace, owner_name), set())
        stale = [uid for uid in uids if uid != live_uid]
        found = [pod for uid in stale for pod in self.pods(uid)]
        for uid in stale:
            if uid not in self._by_uid:
                uids.discard(uid)
        if not uids:
            self._by_name.pop((namespace, owner_name), None)
        return found
