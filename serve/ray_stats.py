"""Controller stats from the controller actors (`kaiwo-ray up`/`dev`): one `stats()` call per actor."""

from __future__ import annotations

import asyncio
from typing import Any

from kaiwo_ray.controllers.manager import CONTROLLERS
from serve.state import StatsSource


def actor_stats_source(namespace: str, names: list[str] | None = None) -> StatsSource:
    async def collect() -> list[dict[str, Any]]:
        import ray

        async def one(name: str) -> dict[str, Any] | None:
            try:
                handle = ray.get_actor(name, namespace=namespace)
                snapshot: dict[str, Any] = await handle.stats.remote()
                return snapshot
            except Exception:  # not running (yet), or an older actor without stats(): leave it out
                return None

        results = await asyncio.gather(*(one(n) for n in names or list(CONTROLLERS)))
        return [r for r in results if r is not None]

    return collect
