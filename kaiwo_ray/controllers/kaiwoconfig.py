"""The KaiwoConfig controller: make sure the cluster singleton `kaiwo` exists.

Upstream creates it once at start-up and errors when it is missing afterwards; here a missing or
deleted KaiwoConfig is recreated with an empty spec (the CRD's defaults fill it; the operator's
`DEFAULT_CLUSTER_QUEUE_NAME`, when set, names the default queue), and every other
controller reads it live from its cache, so edits act on the next reconcile without a restart.

A KaiwoConfig that still names the storage block `data` (seed 003, upstream's Helm chart) works (the
model reads it as `storage`) and gets a Warning event `DeprecatedField`, once per generation: the
API server's warning header would say it at apply time, but that needs an admission webhook, which
kaiwo-ray does not run.
"""

from __future__ import annotations

import os
from typing import Any

from kaiwo_ray.controllers.base import Controller, Key, Watch
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import AlreadyExists
from kaiwo_ray.kube.events import EventRecorder

SINGLETON: Key = ("", "kaiwo")


def default_spec_from_env() -> dict[str, Any]:
    """The spec of a KaiwoConfig we create: `DEFAULT_CLUSTER_QUEUE_NAME` names the default queue
    (seed 001: workloads without `clusterQueue` go to the queue this variable names), the CRD's
    defaults fill the rest. A KaiwoConfig someone wrote keeps its own value."""
    queue = os.environ.get("DEFAULT_CLUSTER_QUEUE_NAME", "").strip()
    return {"defaultClusterQueueName": queue} if queue else {}


def _singleton(event_type: str, obj: dict[str, object], old: dict[str, object] | None) -> list[Key]:
    return [SINGLETON]


class KaiwoConfigController(Controller):
    name = "kaiwoconfig-controller"

    def __init__(self, client: KubeClient, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self.recorder = EventRecorder(client, self.name)
        self._warned: tuple[str, int] | None = None  # (uid, generation) told about `data`

    def watches(self) -> list[Watch]:
        return [Watch(R.KAIWOCONFIGS, _singleton)]

    async def start(self) -> None:
        await super().start()
        self.queue.add(SINGLETON)  # also when the list was empty: that is exactly the case to fix

    async def reconcile(self, key: Key) -> float | None:
        if key != SINGLETON:
            return None
        current = self.cache(R.KAIWOCONFIGS).get(None, "kaiwo")
        if current is not None:
            self._warn_deprecated(current)
            return None
        body = {"apiVersion": R.KAIWOCONFIGS.api_version, "kind": "KaiwoConfig",
                "metadata": {"name": "kaiwo"}, "spec": default_spec_from_env()}
        try:
            created = await self.client.create(R.KAIWOCONFIGS, body)
            self.cache(R.KAIWOCONFIGS).upsert_if_newer(created)
        except AlreadyExists:
            pass
        return None

    def _warn_deprecated(self, config: dict[str, Any]) -> None:
        if "data" not in (config.get("spec") or {}):
            return
        meta = config.get("metadata") or {}
        seen = (str(meta.get("uid") or ""), int(meta.get("generation") or 0))
        if seen == self._warned:
            return
        self._warned = seen
        involved = {"apiVersion": R.KAIWOCONFIGS.api_version, "kind": "KaiwoConfig", "metadata": meta}
        self.recorder.emit(involved, "Warning", "DeprecatedField",
                           "spec.data is deprecated: it is read as spec.storage; rename it to storage")

    async def drain(self) -> None:
        await self.recorder.flush()
