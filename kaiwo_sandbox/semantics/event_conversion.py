"""core/v1 Event <-> events.k8s.io/v1 Event, as the apiserver converts them: both are views of one
storage (core/v1 is the stored form here), so `kubectl get events` and `EventsV1Api` see the same
objects."""

from __future__ import annotations

from kaiwo_sandbox.contracts import JsonObj

# events.k8s.io/v1 field -> core/v1 field, for fields that only change name.
_RENAMED = {
    "regarding": "involvedObject",
    "note": "message",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
    "reportingController": "reportingComponent",
}
_SHARED = ("metadata", "reason", "type", "eventTime", "series", "action", "related", "reportingInstance")


def to_core(event: JsonObj) -> JsonObj:
    """An events.k8s.io/v1 Event as the core/v1 Event that is stored."""
    out: JsonObj = {"apiVersion": "v1", "kind": "Event"}
    for key in _SHARED:
        if key in event:
            out[key] = event[key]
    for new, old in _RENAMED.items():
        if new in event:
            out[old] = event[new]
    return out


def from_core(event: JsonObj) -> JsonObj:
    """A stored core/v1 Event as events.k8s.io/v1."""
    out: JsonObj = {"apiVersion": "events.k8s.io/v1", "kind": "Event"}
    for key in _SHARED:
        if key in event:
            out[key] = event[key]
    for new, old in _RENAMED.items():
        if old in event:
            out[new] = event[old]
    return out
