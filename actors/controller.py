"""One controller in one Ray actor: a thin shell around `ControllerHost`.

The actor holds no state that Kubernetes does not also hold: its caches are rebuilt by listing, its
work by the resync that follows the first list, and its right to write by the Lease. So when Ray
restarts it (`max_restarts=-1`) the new incarnation only has to run `__init__` again — which starts
the host straight away, without waiting for the supervisor to call anything. The identity in
`HostSettings` comes from the supervisor and is the same for every incarnation, but each incarnation
campaigns under its own Lease identity (that identity plus a random suffix): a crashed incarnation's
Lease must expire (`lease_seconds` after its last renew was seen) before the new one leads, so two
incarnations never both believe they hold it; a graceful stop releases the Lease at once.

Every method is idempotent (start happens once per incarnation; stop on a stopped host is a no-op),
which is what makes `max_task_retries=-1` safe: a call interrupted by a crash is simply replayed on
the next incarnation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from typing import Any

import psutil

from hosts.runtime.controller_host import ControllerHost
from hosts.runtime.cpu_policy import is_batch
from kaiwo_ray.controllers.manager import HostSettings

# Options for `ray.remote`: the actor reserves no CPU (it is I/O bound and must never wait for a
# slot behind user tasks), Ray restarts it forever and replays interrupted calls (all idempotent).
ACTOR_OPTIONS: dict[str, Any] = {
    "num_cpus": 0,
    "max_restarts": -1,
    "max_task_retries": -1,
    "max_concurrency": 64,  # only health/ready/stop calls arrive, a few at a time
}


class ControllerActor:
    """Wrapped by `ray.remote(**ACTOR_OPTIONS)` in the supervisor; a plain class, testable without Ray."""

    def __init__(self, name: str, settings: HostSettings, log_level: int = logging.WARNING) -> None:
        logging.basicConfig(level=log_level, format="%(levelname)s %(name)s: %(message)s")
        self.name = name
        self.host = ControllerHost(name, settings)
        self.born = time.monotonic()
        self._process = psutil.Process(os.getpid())
        self._start: asyncio.Task[None] | None = None
        self._stopped = False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # Ray versions that run __init__ off the actor's loop: start on first call
            loop = None
        if loop is not None:
            self._start = loop.create_task(self.host.start(), name=f"start-{name}")

    def _starting(self) -> asyncio.Task[None]:
        if self._start is None:
            self._start = asyncio.get_running_loop().create_task(self.host.start(), name=f"start-{self.name}")
        return self._start

    async def ready(self, leader_wait: float = 0.0) -> dict[str, Any]:
        """Wait until the caches are warm and the workers run (raising the start-up error if there
        was one), then up to `leader_wait` seconds for the Lease, so that the first health report
        shows who leads rather than a campaign still in progress."""
        if not self._stopped:
            await asyncio.shield(self._starting())
            elector = self.host.elector
            if elector is not None and leader_wait > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(leader_wait):
                        await elector.leading.wait()
        return await self.health()

    async def health(self) -> dict[str, Any]:
        report: dict[str, Any] = dict(self.host.health())
        report.pop("name", None)  # the controller's own name ("kaiwojob-controller"); the actor's is ours
        start = self._start
        if start is not None and start.done() and not start.cancelled() and start.exception() is not None:
            err = start.exception()
            report["error"] = f"start failed: {type(err).__name__}: {err}"
            report["started"] = False
        elif self._stopped:
            report["error"] = "stopped"
        elif start is None or not start.done():
            report["started"] = False
        report.update(
            name=self.name,
            identity=self.host.settings.identity,
            alive=True,
            pid=os.getpid(),
            rss_bytes=self._process.memory_info().rss,
            uptime_s=round(time.monotonic() - self.born, 3),
            batch_scheduling=is_batch(),  # of this thread, the one the controller's loop runs on
        )
        return report

    async def stats(self) -> dict[str, Any]:
        """Metrics snapshot for the admin API's /metrics (controller-runtime's names)."""
        return self.host.stats()

    async def stop(self, grace_seconds: float = 10.0) -> dict[str, Any]:
        """Stop taking work, let in-flight reconciles finish, give the Lease back."""
        if not self._stopped:
            self._stopped = True
            start = self._starting()
            if not start.done():
                start.cancel()
            await asyncio.gather(start, return_exceptions=True)
            await self.host.stop(grace_seconds=grace_seconds)
        return await self.health()

