"""Pure Deployment/ReplicaSet arithmetic: pod-template hashes, rolling-update surge and
unavailability budgets, which pods a ReplicaSet gives up first, and the status conditions."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from kaiwo_sandbox.cluster.pods import as_int, is_ready
from kaiwo_sandbox.contracts import JsonObj

POD_TEMPLATE_HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand: no vowels, no 0/1/3


def fnv32a(data: bytes) -> int:
    value = 0x811C9DC5
    for byte in data:
        value ^= byte
        value = (value * 0x01000193) & 0xFFFFFFFF
    return value


def safe_encode(text: str) -> str:
    """rand.SafeEncodeString: each byte mapped into an alphabet that cannot spell words."""
    return "".join(SAFE_ALPHABET[ord(ch) % len(SAFE_ALPHABET)] for ch in text)


def pod_template_hash(template: JsonObj, collision_count: int = 0) -> str:
    """Stable hash of a pod template (without any pod-template-hash label), in the shape the
    Deployment controller gives it (e.g. `7c5ddbdf54`). The bytes differ from Go's spew dump."""
    clean = json.loads(json.dumps(template))
    labels = (clean.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(POD_TEMPLATE_HASH, None)
    digest = fnv32a((json.dumps(clean, sort_keys=True, separators=(",", ":")) + f"#{collision_count}").encode())
    return safe_encode(str(digest))


def resolve_int_or_percent(value: object, total: int, *, round_up: bool, default: str) -> int:
    raw = default if value is None else value
    if isinstance(raw, int) and not isinstance(raw, bool):
        return max(raw, 0)
    text = str(raw).strip()
    if text.endswith("%"):
        try:
            percent = float(text[:-1])
        except ValueError:
            percent = float(default.rstrip("%"))
        scaled = percent * total / 100.0
        return max(math.ceil(scaled) if round_up else math.floor(scaled), 0)
    try:
        return max(int(text), 0)
    except ValueError:
        return 0


@dataclass(frozen=True, slots=True)
class Budget:
    max_surge: int
    max_unavailable: int


def rolling_budget(deployment: JsonObj) -> Budget:
    """maxSurge rounds up, maxUnavailable rounds down; both zero is not allowed, so unavailable
    becomes 1 (the controller's own fallback). Recreate has no surge and full unavailability."""
    spec = deployment.get("spec") or {}
    replicas = desired_replicas(deployment)
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return Budget(0, replicas)
    rolling = strategy.get("rollingUpdate") or {}
    surge = resolve_int_or_percent(rolling.get("maxSurge"), replicas, round_up=True, default="25%")
    unavailable = resolve_int_or_percent(rolling.get("maxUnavailable"), replicas, round_up=False, default="25%")
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return Budget(surge, unavailable)


def desired_replicas(obj: JsonObj) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return max(as_int(value, 1), 0)


def deletion_order(pods: list[JsonObj]) -> list[JsonObj]:
    """ReplicaSet scale-down order: unscheduled before scheduled, pending before running,
    not-ready before ready, and among equals the newest first."""
    newest_first = sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""),
                          reverse=True)

    def rank(pod: JsonObj) -> tuple[int, int, int]:
        status = pod.get("status") or {}
        phase = {"Pending": 0, "Unknown": 1, "Running": 2}.get(str(status.get("phase") or "Pending"), 0)
        return (1 if (pod.get("spec") or {}).get("nodeName") else 0, phase, 1 if is_ready(pod) else 0)

    return sorted(newest_first, key=rank)  # stable: keeps newest-first within a rank


def revision_of(obj: JsonObj) -> int:
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(REVISION)
    try:
        return int(raw) if raw is not None else 0
    except ValueError:
        return 0
