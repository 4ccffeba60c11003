"""Leader election on a coordination.k8s.io/v1 Lease, so that one kaiwo-ray instance writes at a time,
with client-go's rules (k8s.io/client-go/tools/leaderelection).

A Ray named actor is unique only within one Ray cluster; during an upgrade two Ray clusters run the
operator at once. The Lease is the cluster-wide lock:

* **Expiry is judged by local observation**, never by comparing the holder's `renewTime` with our
  clock: a candidate remembers when it last saw the Lease record change (monotonic time) and takes
  the Lease only once it has stayed unchanged for `leaseDurationSeconds`. Clock skew between
  machines therefore cannot steal a live lease nor keep a dead one.
* **A leader stops writing before anyone may start.** Every successful renew keeps leadership for
  `renew_deadline` seconds from the moment the renew was *sent* (< `lease_seconds`: anyone else waits
  at least `lease_seconds` from when they *saw* that renew). A leader that cannot renew within its
  deadline steps down; `may_write()` is false from that instant even before the loop notices.
* **Every incarnation has its own identity** (`<identity>-<random>`): a restarted actor never mistakes
  its predecessor's Lease for its own; a graceful stop releases the Lease so the successor need not wait.
* Optimistic concurrency (resourceVersion on PUT) makes acquisition race-free.
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from kaiwo_ray.api.jsonobj import JsonObj
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
    lease_seconds: float = 15.0  # client-go's LeaseDuration
    renew_every: float = 2.0  # how often the leader renews (client-go's RetryPeriod)
    retry_every: float = 2.0  # how often a candidate (or a failing leader) tries again
    renew_deadline: float | None = None  # None: 2/3 of lease_seconds (client-go's 10 s of 15 s)

    def deadline(self) -> float:
        deadline = self.renew_deadline if self.renew_deadline is not None else self.lease_seconds * 2 / 3
        if not 0 < deadline < self.lease_seconds:
            raise ValueError(f"renew deadline {deadline}s must be positive and shorter than the lease "
                             f"({self.lease_seconds}s)")
        return deadline


def incarnation_identity(identity: str) -> str:
    """`identity` plus a suffix of its own: two incarnations of one identity never share a Lease."""
    return f"{identity}_{secrets.token_hex(4)}"


class LeaseElector:
    def __init__(self, client: KubeClient, identity: str, settings: LeaseSettings | None = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.identity = identity  # used as given: callers pass incarnation_identity(...) (the host does)
        self.settings = settings or LeaseSettings()
        self.renew_deadline = self.settings.deadline()
        self.clock = clock  # only for the timestamps written into the Lease (informational)
        self.monotonic = monotonic  # every decision is taken on this clock
        self.is_leader = False
        self.leading = asyncio.Event()
        self.transitions = 0
        self._valid_until = 0.0  # monotonic: may_write() is false from then on
        self._observed: tuple[Any, ...] | None = None  # the Lease record as last seen
        self._observed_at = 0.0  # monotonic: when it last changed
        self.last_holder = ""

    def may_write(self) -> bool:
        """Checked immediately before every write: leader, and within the renew deadline."""
        return self.is_leader and self.monotonic() < self._valid_until

    def _observe(self, lease: JsonObj, now: float) -> None:
        """Remember when the record last changed. Any write changes the resourceVersion, so a holder
        whose clock stands still (identical renewTimes) is still seen renewing."""
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity") or "", spec.get("renewTime"), spec.get("acquireTime"),
                  spec.get("leaseTransitions"), spec.get("leaseDurationSeconds"),
                  (lease.get("metadata") or {}).get("resourceVersion"))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        self.last_holder = str(record[0])

    async def try_acquire_or_renew(self) -> bool:
        """One round: True when we hold the lease afterwards (and then may write until the deadline)."""
        s = self.settings
        sent = self.monotonic()  # leadership is counted from when we asked, never from the answer
        wall = self.clock()
        try:
            lease = await self.client.get(LEASES, s.name, s.namespace)
        except NotFound:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": s.name, "namespace": s.namespace},
                    "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(s.lease_seconds + 0.999),
                             "acquireTime": _micro(wall), "renewTime": _micro(wall), "leaseTransitions": 0}}
            try:
                created = await self.client.create(LEASES, body, s.namespace)
            except Conflict:
                return False
            self._observe(created, sent)
            self._valid_until = sent + self.renew_deadline
            return True
        self._observe(lease, sent)
        spec: JsonObj = dict(lease.get("spec") or {})
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or s.lease_seconds)
        if holder and holder != self.identity and sent < self._observed_at + duration:
            return False  # someone else's, and we saw it change less than a lease duration ago
        if holder != self.identity:
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
            spec["acquireTime"] = _micro(wall)
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=int(s.lease_seconds + 0.999),
                    renewTime=_micro(wall))
        lease["spec"] = spec
        try:
            updated = await self.client.replace(LEASES, lease)  # carries resourceVersion: loses cleanly on a race
        except Conflict:
            return False
        self._observe(updated, sent)
        self._valid_until = sent + self.renew_deadline
        return True

    async def _attempt(self, budget: float | None) -> bool:
        """One round that never raises, bounded by `budget` seconds when leading."""
        s = self.settings
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns the result when it is
            # cancelled in the instant the round completes, swallowing the cancellation, and the
            # campaign of a stopping host then renews on forever (seen: a stop hung in CI).
            async with asyncio.timeout(None if budget is None else max(budget, 0.001)):
                return await self.try_acquire_or_renew()
        except TimeoutError:
            log.warning("lease %s/%s: renew did not answer within the deadline", s.namespace, s.name)
        except Exception as err:  # any failure (not only API errors) must not end the campaign
            log.warning("lease %s/%s: %s", s.namespace, s.name, err)
        return False

    def _pause(self, seconds: float) -> float:
        return seconds * (0.8 + random.random() * 0.4)  # jitter: candidates do not retry in lockstep

    async def run(self, on_started: Callable[[], Awaitable[None]],
                  on_stopped: Callable[[], Awaitable[None]]) -> None:
        """Campaign forever: call `on_started` when we become leader, `on_stopped` when we stop."""
        s = self.settings
        while True:
            if not await self._attempt(None):
                await asyncio.sleep(self._pause(s.retry_every))
                continue
            self.is_leader = True
            self.transitions += 1
            self.leading.set()
            log.info("lease %s/%s acquired by %s", s.namespace, s.name, self.identity)
            try:
                await on_started()
                await self._hold()
            finally:
                self.is_leader = False
                self.leading.clear()
            log.warning("lease %s/%s lost by %s", s.namespace, s.name, self.identity)
            await on_stopped()

    async def _hold(self) -> None:
        """Renew every `renew_every`; return (step down) when a renew cannot land before the deadline
        or someone else holds the Lease."""
        s = self.settings
        while True:
            await asyncio.sleep(max(0.0, min(s.renew_every, self._valid_until - self.monotonic())))
            while True:
                left = self._valid_until - self.monotonic()
                if left <= 0:
                    return  # could not renew in time: others may take over soon, so stop now
                if await self._attempt(left):
                    break
                if self.last_holder and self.last_holder != self.identity:
                    return  # taken over
                await asyncio.sleep(min(self._pause(s.retry_every), max(0.0, self._valid_until - self.monotonic())))

    async def release(self) -> None:
        """Give the lease up on graceful shutdown so a successor need not wait for expiry."""
        if not self.is_leader and self.last_holder != self.identity:
            return
        self.is_leader = False
        self.leading.clear()
        self._valid_until = 0.0
        s = self.settings
        try:
            lease = await self.client.get(LEASES, s.name, s.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["renewTime"] = _micro(self.clock() - timedelta(seconds=s.lease_seconds + 1))
                await self.client.replace(LEASES, lease)
        except KubeError as err:
            log.warning("lease release failed: %s", err)
