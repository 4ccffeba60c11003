"""Emit core/v1 Events the way real components do (reason, message, source component)."""

from __future__ import annotations

import contextlib
import secrets

from kaiwo_sandbox.contracts import EVENTS, ApiError, Clock, JsonObj, Store, rfc3339


def record_event(store: Store, clock: Clock, involved: JsonObj, event_type: str, reason: str,
                 message: str, component: str) -> None:
    """Create an Event about `involved` (a stored object) in its namespace (`default` when
    cluster-scoped). Failures are swallowed: losing an event must never break a controller."""
    meta = involved.get("metadata", {})
    namespace = meta.get("namespace") or "default"
    now = rfc3339(clock.now())
    event: JsonObj = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta.get('name', 'unknown')}.{secrets.token_hex(8)}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion", ""),
            "kind": involved.get("kind", ""),
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "reason": reason,
        "message": message,
        "type": event_type,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": "",
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    with contextlib.suppress(ApiError):
        store.create(EVENTS, event, namespace=namespace, user=f"system:{component}")
