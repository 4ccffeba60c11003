"""Leader election on a coordination.k8s.io/v1 Lease, so that one kaiwo-ray instance writes at a time.

A Ray named actor is unique only within one Ray cluster; during an upgrade two Ray clusters run the
operator at once. The Lease is the cluster-wide lock: a candidate acquires it when it is absent,
expired or already its own, renews it every `renew_every` seconds, and steps down when it cannot
renew within `lease_seconds` (so a partitioned leader stops writing before anyone else may start).
Optimistic concurrency (resourceVersion on PUT) makes acquisition race-free.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from kaiwo_ray.api.meta import parse_time
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import Conflict, KubeError, NotFound
from kaiwo_ray.kube.resources import LEASES

log = logging.getLogger(__name__)


def _micro(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(slots=True)
class LeaseSettings:
    name: str = "kaiwo-ray"
    namespace: str = "kube-system"
    lease_seconds: int = 15
    renew_every: float = 5.0
    retry_every: float = 2.0


class LeaseElector:
    def __init__(self, client: KubeClient, identity: str, settings: LeaseSettings | None = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.client = client
        self.identity = identity
        self.settings = settings or LeaseSettings()
        self.clock = clock
        self.is_leader = False
        self.leading = asyncio.Event()
        self.transitions = 0

    async def try_acquire_or_renew(self) -> bool:
        """One round: True when we hold the lease afterwards."""
        s = self.settings
        now = self.clock()
        try:
            lease = await self.client.get(LEASES, s.name, s.namespace)
        except NotFound:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": s.name, "namespace": s.namespace},
                    "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": s.lease_seconds,
                             "acquireTime": _micro(now), "renewTime": _micro(now), "leaseTransitions": 0}}
            try:
                await self.client.create(LEASES, body, s.namespace)
                return True
            except Conflict:
                return False
        spec: dict[str, Any] = dict(lease.get("spec") or {})
        holder = spec.get("holderIdentity") or ""
        renewed = parse_time(spec.get("renewTime")) or datetime.min.replace(tzinfo=UTC)
        duration = int(spec.get("leaseDurationSeconds") or s.lease_seconds)
        expired = renewed + timedelta(seconds=duration) < now
        if holder and holder != self.identity and not expired:
            return False
        if holder != self.identity:
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
            spec["acquireTime"] = _micro(now)
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=s.lease_seconds, renewTime=_micro(now))
        lease["spec"] = spec
        try:
            await self.client.replace(LEASES, lease)  # carries resourceVersion: loses cleanly on a race
        except Conflict:
            return False
        return True

    async def run(self, on_started: Callable[[], Awaitable[None]],
                  on_stopped: Callable[[], Awaitable[None]]) -> None:
        """Campaign forever: call `on_started` when we become leader, `on_stopped` when we lose it."""
        s = self.settings
        last_renew = self.clock()
        while True:
            errored = False
            try:
                held = await self.try_acquire_or_renew()
            except Exception as err:  # any failure (not only API errors) must not end the campaign
                log.warning("lease %s/%s: %s", s.namespace, s.name, err)
                held, errored = False, True
            now = self.clock()
            if held:
                last_renew = now
                if not self.is_leader:
                    self.is_leader = True
                    self.transitions += 1
                    self.leading.set()
                    log.info("lease %s/%s acquired by %s", s.namespace, s.name, self.identity)
                    await on_started()
            elif self.is_leader and (not errored or now - last_renew >= timedelta(seconds=s.lease_seconds)):
                # Someone else holds it now, or we could not renew for a whole lease: stop writing.
                self.is_leader = False
                self.leading.clear()
                log.warning("lease %s/%s lost by %s", s.namespace, s.name, self.identity)
                await on_stopped()
            await asyncio.sleep(s.renew_every if self.is_leader else s.retry_every)

    async def release(self) -> None:
        """Give the lease up on graceful shutdown so a successor need not wait for expiry."""
        if not self.is_leader:
            return
        s = self.settings
        try:
            lease = await self.client.get(LEASES, s.name, s.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["renewTime"] = _micro(self.clock() - timedelta(seconds=s.lease_seconds + 1))
                await self.client.replace(LEASES, lease)
        except KubeError as err:
            log.warning("lease release failed: %s", err)
        self.is_leader = False
        self.leading.clear()
