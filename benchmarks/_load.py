"""The load client: `Loader` creates KaiwoJobs as its own user, one at a time, many at once, or
paced at a rate on an event loop of its own; `arrival_offsets` says when each paced create is sent
(steady by default, a Poisson stream with BENCH_ARRIVALS=poisson).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _objects import GROUP, VERSION, kaiwojob
from _runtime import api_client, deployed_loop, k8s


class Loader:
    """Creates KaiwoJobs as its own user: one at a time or many at once with the real `kubernetes`
    client, and paced (the latency runs) with kaiwo-ray's own `KubeClient` on an event loop of its own.
    The load client shares the 2 cores with the parties it measures, which on a cluster it would not:
    a paced create costs this process 0.6 ms of CPU that way against 1.6-2.0 ms through the
    `kubernetes` client (4 runs of 20 s at 100 a second), 10-13% of a core less taken from the API
    server and the operator it loads."""

    PACED_IN_FLIGHT = 4  # creates awaiting their answer at once, at most (the thread pool it replaced had 4)

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self._local = threading.local()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None

    def _api(self) -> Any:
        api = getattr(self._local, "api", None)
        if api is None:
            api = k8s().client.CustomObjectsApi(api_client(self.kubeconfig))
            self._local.api = api
        return api

    def create(self, name: str, entrypoint: str = "sleep 600") -> None:
        self._api().create_namespaced_custom_object(GROUP, VERSION, self.namespace, "kaiwojobs",
                                                    kaiwojob(name, self.namespace, entrypoint),
                                                    _preload_content=False).release_conn()

    def create_many(self, names: list[str], threads: int = 4, entrypoint: str = "sleep 600") -> float:
        """Create as fast as `threads` clients can; returns the seconds it took."""
        began = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda n: self.create(n, entrypoint), names))
        return time.perf_counter() - began

    def paced(self, names: list[str], rate: float) -> dict[str, float]:
        """Create at `rate` per second; returns name -> wall time just before its request was sent.
        Up to PACED_IN_FLIGHT creates await their answers at once, so a slow one does not delay the
        next one's send time; with that many waiting, the next waits for one of them. The loop and
        its client (and so its connections) live from one call to the next, so that a warm-up call
        leaves warm connections to the measured one."""
        if self._loop is None:
            from kaiwo_ray.kube.client import KubeClient

            self._loop = deployed_loop()
            threading.Thread(target=self._loop.run_forever, daemon=True, name="paced-loader").start()
            self._client = asyncio.run_coroutine_threadsafe(
                KubeClient.from_kubeconfig(str(self.kubeconfig)), self._loop).result()
        return asyncio.run_coroutine_threadsafe(self._paced(names, rate), self._loop).result()

    async def _paced(self, names: list[str], rate: float) -> dict[str, float]:
        from kaiwo_ray.kube.resources import KAIWOJOBS

        loop = asyncio.get_running_loop()
        sent: dict[str, float] = {}
        in_flight = asyncio.Semaphore(self.PACED_IN_FLIGHT)
        offsets = arrival_offsets(len(names), rate)
        start = loop.time() + 0.05

        async def one(index: int, name: str) -> None:
            delay = start + offsets[index] - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)  # pacing, not synchronisation
            async with in_flight:
                sent[name] = time.time()
                await self._client.create(KAIWOJOBS, kaiwojob(name, self.namespace), self.namespace, answer=False)

        await asyncio.gather(*(one(i, name) for i, name in enumerate(names)))
        return sent


def arrival_offsets(count: int, rate: float) -> list[float]:
    """Seconds from the start at which each of `count` paced creates is sent: one every 1/rate (the
    default), or, with BENCH_ARRIVALS=poisson (diagnosis), a Poisson process of the same mean rate, as
    independent submitters make, drawn the same for every party (seeded by count and rate). Steady
    pacing at 20 a second puts each create exactly one 50 ms settle window after the one before, so
    our deferred status write meets the next create every time; a Poisson stream meets it by chance."""
    if os.environ.get("BENCH_ARRIVALS", "steady") != "poisson":
        return [i / rate for i in range(count)]
    import random

    draw = random.Random(f"{count}/{rate}")
    offsets, at = [], 0.0
    for _ in range(count):
        offsets.append(at)
        at += draw.expovariate(rate)
    return offsets
