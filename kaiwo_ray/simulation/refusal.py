"""Why a simulated cluster refused a what-if's queue configuration, read from the Warning events the
operator's kaiwoqueueconfig controller records on the KaiwoQueueConfig (pure).

The controller reports a Kueue object the API server refused (Kueue's webhooks or its CRD's rules:
a 403 `admission webhook "vclusterqueue.kb.io" denied the request: ...` or a 422 `... is invalid: ...`)
as `Failed to create ClusterQueue /team-a: 403 Forbidden: <Kueue's reason>`, and a KaiwoQueueConfig
it cannot use as KaiwoQueueConfigInvalidSpec / KaiwoQueueConfigInvalidName. Either means the run
can never start its queues, so the simulation stops at once with that reason instead of waiting.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

KIND = "KaiwoQueueConfig"
# Objects Kueue validates; a refused LocalQueue (its namespace going away) is not a configuration error.
KUEUE_TARGETS = ("ResourceFlavor", "ClusterQueue", "WorkloadPriorityClass", "Topology")
CONFIG_REASONS = ("KaiwoQueueConfigInvalidSpec", "KaiwoQueueConfigInvalidName")
_FAILED = re.compile(r"^Failed to (?P<verb>\w+) (?P<target>\w+) (?P<namespace>[^/\s]*)/(?P<name>\S+): "
                     r"(?:\d{3} \w+: )?(?P<error>.*)$", re.DOTALL)
_REFUSED = ("denied the request", " is invalid: ")


def queue_config_refusal(events: Iterable[dict[str, Any]], name: str) -> str | None:
    """The first refusal recorded on KaiwoQueueConfig `name` (oldest first), as one line naming the
    object and the reason (`Kueue refused ClusterQueue team-a: admission webhook ...`); None when
    there is none."""
    found = [e for e in events if e.get("type") == "Warning"
             and (e.get("involvedObject") or {}).get("kind") == KIND
             and (e.get("involvedObject") or {}).get("name") == name]
    found.sort(key=lambda e: (str(e.get("firstTimestamp") or ""), str(e.get("message") or "")))
    for event in found:
        reason, message = str(event.get("reason") or ""), str(event.get("message") or "")
        if reason in CONFIG_REASONS:
            return f"KaiwoQueueConfig {name}: {_one_line(message)}"
        matched = _FAILED.match(message)
        if matched and matched["target"] in KUEUE_TARGETS and any(word in matched["error"] for word in _REFUSED):
            return f"Kueue refused {matched['target']} {matched['name']}: {_one_line(matched['error'])}"
    return None


def _one_line(text: str) -> str:
    return " ".join(text.split())
