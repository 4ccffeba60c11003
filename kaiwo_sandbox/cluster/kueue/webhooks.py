"""Kueue's validating webhooks for ClusterQueues and ResourceFlavors (`validation.py`), as an
in-process admission hook that runs wherever the simulated Kueue runs: a write Kueue would refuse
is refused with Kueue's reason, by every client, before it is stored."""

from __future__ import annotations

from kaiwo_sandbox.cluster.base import Controller, Key
from kaiwo_sandbox.cluster.kueue import validation
from kaiwo_sandbox.contracts import GVR, JsonObj


class KueueWebhooks(Controller):
    """No reconcile work: only the admission hook (started with the `kueue` controller)."""

    name = "kueue-webhooks"

    def admit(self, operation: str, gvr: GVR, obj: JsonObj, old: JsonObj | None, user: str) -> None:
        validation.check(operation, gvr, obj, old)

    def reconcile(self, key: Key) -> float | None:
        return None
