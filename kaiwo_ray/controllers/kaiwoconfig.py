"""The KaiwoConfig controller: make sure the cluster singleton `kaiwo` exists.

Upstream creates it once at start-up and errors when it is missing afterwards; here a missing or
deleted KaiwoConfig is recreated with an empty spec (the CRD's defaults fill it), and every other
controller reads it live from its cache, so edits act on the next reconcile without a restart.
"""

from __future__ import annotations

from kaiwo_ray.controllers.base import Controller, Key, Watch
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.errors import AlreadyExists

SINGLETON: Key = ("", "kaiwo")


def _singleton(event_type: str, obj: dict[str, object], old: dict[str, object] | None) -> list[Key]:
    return [SINGLETON]


class KaiwoConfigController(Controller):
    name = "kaiwoconfig-controller"

    def watches(self) -> list[Watch]:
        return [Watch(R.KAIWOCONFIGS, _singleton)]

    async def start(self) -> None:
        await super().start()
        self.queue.add(SINGLETON)  # also when the list was empty: that is exactly the case to fix

    async def reconcile(self, key: Key) -> float | None:
        if key != SINGLETON or self.cache(R.KAIWOCONFIGS).get(None, "kaiwo") is not None:
            return None
        body = {"apiVersion": R.KAIWOCONFIGS.api_version, "kind": "KaiwoConfig",
                "metadata": {"name": "kaiwo"}, "spec": {}}
        try:
            created = await self.client.create(R.KAIWOCONFIGS, body)
            self.cache(R.KAIWOCONFIGS).upsert_if_newer(created)
        except AlreadyExists:
            pass
        return None
