"""Hosting controllers: one `ControllerHost` per controller (what a Ray actor wraps), and an
in-process `Operator` that runs several hosts on one event loop (tests, `kaiwo-ray up --no-ray`).

A host warms its caches at once but reconciles only while it holds its Lease
(`kaiwo-ray-<controller>`), so a second kaiwo-ray instance — another Ray cluster during an upgrade,
say — stands by with hot caches and takes over within one lease period when the first goes away.
The process-wide knobs (`HostSettings.tune_gc`, `batch_scheduling`) are applied here, by the host,
never by the library.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from hosts.runtime.cpu_policy import run_as_batch
from hosts.runtime.gc_tuning import (
    SWEEP_SECONDS,
    SWEEPS,
    ensure_sweeper,
    filling_caches,
    forget_busy_check,
    tune_for_long_lived_caches,
)
from kaiwo_ray.controllers.base import Controller
from kaiwo_ray.controllers.manager import (
    HostSettings,
    build_controller,
    default_controller_names,
    make_client,
)
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.lease import LeaseElector, LeaseSettings, incarnation_identity

log = logging.getLogger(__name__)


class ControllerHost:
    """One controller, its API client and its leader election."""

    def __init__(self, name: str, settings: HostSettings) -> None:
        self.name = name
        self.settings = settings
        self.client: KubeClient | None = None
        self.controller: Controller | None = None
        self.elector: LeaseElector | None = None
        self._lease_client: KubeClient | None = None
        self._election: asyncio.Task[None] | None = None
        self._busy: Callable[[], bool] | None = None

    async def start(self) -> None:
        if self.settings.batch_scheduling:  # this thread runs the controller's loop: see hosts.runtime.cpu_policy
            run_as_batch()
        self.client = await make_client(self.settings)
        self.controller = build_controller(self.name, self.client, workers=self.settings.workers,
                                           **self.settings.controller_options.get(self.name, {}))
        self.controller.coalesce_seconds = self.settings.coalesce_seconds
        if self.settings.lease:
            self.controller.writes_enabled.clear()
            lease = LeaseSettings(name=f"kaiwo-ray-{self.name}", namespace=self.settings.lease_namespace,
                                  lease_seconds=self.settings.lease_seconds, renew_every=self.settings.renew_every,
                                  retry_every=min(2.0, self.settings.renew_every),
                                  renew_deadline=self.settings.renew_deadline)
            # Its own connection, so a renew never queues behind the controller's requests; and its
            # own identity per incarnation, so a restarted host never takes its predecessor's Lease
            # for its own.
            self._lease_client = await make_client(self.settings)
            self.elector = LeaseElector(self._lease_client, incarnation_identity(self.settings.identity), lease)
            self.client.write_guard = self.elector.may_write
        if self.settings.tune_gc:  # before the caches fill: see hosts.runtime.gc_tuning
            tune_for_long_lived_caches(freeze_after=1)
        with filling_caches() if self.settings.tune_gc else nullcontext():
            await self.controller.start()
        if self.settings.tune_gc:
            queue = self.controller.queue
            self._busy = lambda: len(queue) > 0 or queue.in_flight > 0
            sweep = self.settings.gc_sweep_seconds
            ensure_sweeper(self._busy, every=SWEEP_SECONDS if sweep is None else sweep)
        if self.controller.apis is not None:
            from kaiwo_ray.kube.discovery import missing_line

            for dep in self.controller.apis.missing():
                log.warning("%s: %s", self.name, missing_line(dep))
        if self.elector is not None:
            controller = self.controller

            async def started() -> None:
                controller.writes_enabled.set()
                controller.enqueue_all()  # whatever happened while we stood by

            async def stopped() -> None:
                controller.writes_enabled.clear()
                cut = controller.cancel_in_flight()
                if cut:
                    log.warning("%s: lost the lease; cut %d in-flight reconciles short", self.name, cut)

            self._election = asyncio.create_task(self.elector.run(started, stopped), name=f"lease-{self.name}")

    async def stop(self, grace_seconds: float = 10.0) -> None:
        """Finish in-flight reconciles, give the lease back, close the connection pool."""
        if self._busy is not None:
            forget_busy_check(self._busy)
            self._busy = None
        if self.controller is not None:
            await self.controller.stop(grace_seconds=grace_seconds)
        if self._election is not None:
            self._election.cancel()
            await asyncio.gather(self._election, return_exceptions=True)
        if self.elector is not None:
            await self.elector.release()
        if self._lease_client is not None:
            await self._lease_client.close()
        if self.client is not None:
            await self.client.close()

    def stats(self) -> dict[str, Any]:
        """The controller's metrics snapshot plus leader status (None before it started)."""
        if self.controller is None:
            return {"name": self.name, "started": False}
        snapshot = self.controller.stats_snapshot()
        snapshot["name"] = self.name
        snapshot["leader_election_master_status"] = self.elector.is_leader if self.elector is not None else True
        return snapshot

    def health(self) -> dict[str, Any]:
        if self.controller is None:
            return {"name": self.name, "started": False}
        report = self.controller.health()
        report["started"] = True
        report["leader"] = self.elector.is_leader if self.elector is not None else True
        if self.elector is not None:
            report["lease_identity"] = self.elector.identity
        report["writes"] = getattr(self.controller, "writes", None)
        if self._busy is not None:
            report["gc_sweeps"] = {"sweeps": SWEEPS.sweeps, "collected": SWEEPS.collected,
                                   "last_pause_seconds": round(SWEEPS.last_pause_seconds, 4)}
        return report


class Operator:
    """Several controller hosts on the current event loop."""

    def __init__(self, names: list[str] | None = None, settings: HostSettings | None = None) -> None:
        self.settings = settings or HostSettings()
        self.hosts = [ControllerHost(n, self.settings) for n in (names or default_controller_names(self.settings))]

    async def start(self) -> None:
        for host in self.hosts:
            await host.start()

    async def stop(self) -> None:
        await asyncio.gather(*(h.stop() for h in self.hosts))

    def host(self, name: str) -> ControllerHost:
        return next(h for h in self.hosts if h.name == name)

    def health(self) -> list[dict[str, Any]]:
        return [h.health() for h in self.hosts]
