"""Leader election against the sandbox, with client-go's rules (issue 14, item 4): one holder at a
time, hand-over on release; expiry judged by locally observed time since the Lease last changed (so
a holder's skewed clock neither lets its live Lease be stolen nor keeps a dead one); a leader that
cannot renew within its deadline steps down and is fenced; and the campaign survives any error."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.lease import LeaseElector, LeaseSettings, incarnation_identity
from kaiwo_ray.kube.resources import LEASES
from kaiwo_sandbox.testing import RunningSandbox


def run_with_client(sandbox: RunningSandbox, body: Any) -> None:
    async def main() -> None:
        client = await KubeClient.from_kubeconfig(str(sandbox.kubeconfig_path))
        try:
            await body(client)
        finally:
            await client.close()

    asyncio.run(main())


def test_one_holder_then_hand_over_on_release(sandbox: RunningSandbox) -> None:
    async def body(client: KubeClient) -> None:
        settings = LeaseSettings(name="t-release", lease_seconds=15)
        a, b = LeaseElector(client, "a", settings), LeaseElector(client, "b", settings)
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()
        assert await a.try_acquire_or_renew(), "the holder renews"
        a.is_leader = True
        await a.release()
        assert not a.may_write()
        assert await b.try_acquire_or_renew(), "a released lease is free at once"

    run_with_client(sandbox, body)


def test_a_silent_lease_is_taken_after_a_lease_duration_whatever_its_renew_time_says(sandbox: RunningSandbox) -> None:
    async def body(client: KubeClient) -> None:
        settings = LeaseSettings(name="t-future", lease_seconds=1)
        ahead = datetime.now(UTC) + timedelta(hours=1)  # the holder's clock runs an hour ahead
        dead = LeaseElector(client, "dead", settings, clock=lambda: ahead)
        assert await dead.try_acquire_or_renew()  # ... and then it crashes: no more renews
        fresh = LeaseElector(client, "fresh", settings)
        assert not await fresh.try_acquire_or_renew(), "just seen changing: not expired yet"
        began = time.monotonic()
        while not await fresh.try_acquire_or_renew():
            assert time.monotonic() - began < 5, "a dead holder's future renewTime kept its Lease"
            await asyncio.sleep(0.05)
        assert time.monotonic() - began >= 0.9, "taken before a whole lease duration of silence"
        lease = await client.get(LEASES, "t-future", "kube-system")
        assert lease["spec"]["holderIdentity"] == "fresh" and lease["spec"]["leaseTransitions"] == 1

    run_with_client(sandbox, body)


def test_a_live_lease_whose_holder_clock_lags_is_not_stolen(sandbox: RunningSandbox) -> None:
    async def body(client: KubeClient) -> None:
        settings = LeaseSettings(name="t-past", lease_seconds=1)
        # The holder's clock runs an hour behind: every renewTime it writes is an hour "old".
        holder = LeaseElector(client, "holder", settings, clock=lambda: datetime.now(UTC) - timedelta(hours=1))
        candidate = LeaseElector(client, "candidate", settings)
        assert await holder.try_acquire_or_renew()
        began = time.monotonic()
        while time.monotonic() - began < 3:  # three lease durations of a live, renewing holder
            assert await holder.try_acquire_or_renew()
            assert not await candidate.try_acquire_or_renew(), "a live lease was stolen over clock skew"
            await asyncio.sleep(0.1)

    run_with_client(sandbox, body)


def test_two_incarnations_of_one_identity_never_both_hold(sandbox: RunningSandbox) -> None:
    async def body(client: KubeClient) -> None:
        settings = LeaseSettings(name="t-same", lease_seconds=1)
        first = LeaseElector(client, incarnation_identity("operator-x"), settings)
        restarted = LeaseElector(client, incarnation_identity("operator-x"), settings)
        assert first.identity != restarted.identity and first.identity.startswith("operator-x")
        assert await first.try_acquire_or_renew()
        began = time.monotonic()
        while time.monotonic() - began < 2.5:
            assert await first.try_acquire_or_renew()
            assert not await restarted.try_acquire_or_renew(), "the restarted incarnation took its predecessor's Lease"
            await asyncio.sleep(0.1)

    run_with_client(sandbox, body)


def test_a_leader_that_cannot_renew_steps_down_within_its_deadline(sandbox: RunningSandbox) -> None:
    async def body(client: KubeClient) -> None:
        settings = LeaseSettings(name="t-partition", lease_seconds=3, renew_every=0.2, retry_every=0.2,
                                 renew_deadline=2)
        elector = LeaseElector(client, "leader", settings)
        started, stopped = asyncio.Event(), asyncio.Event()

        async def on_started() -> None:
            started.set()

        async def on_stopped() -> None:
            stopped.set()

        task = asyncio.create_task(elector.run(on_started, on_stopped))
        rule = 0
        try:
            await asyncio.wait_for(started.wait(), 10)
            # From now on every Lease request of ours hangs for 30 s (a partition), then fails.
            rule = sandbox.faults.fail(code=503, latency=30, resources="leases", names="t-partition")
            cut = time.monotonic()
            deadline = cut + settings.lease_seconds  # fenced before anyone else may take over
            while elector.may_write() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)  # polling the fence, under the deadline
            fenced_after = time.monotonic() - cut
            assert not elector.may_write(), f"still writing {fenced_after:.2f} s into the partition"
            assert fenced_after < settings.lease_seconds, fenced_after
            await asyncio.wait_for(stopped.wait(), 5)
            assert not elector.is_leader and not task.done()
        finally:
            sandbox.faults.remove(rule)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    run_with_client(sandbox, body)


class FlakyClient:
    """Answers like a sandbox at first, then fails every call with a non-API error (as a connection
    reset mid-body does)."""

    def __init__(self, real: KubeClient, good_calls: int) -> None:
        self.real = real
        self.left = good_calls

    def _spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise RuntimeError("connection reset while reading the body")

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        self._spend()
        return await self.real.get(*args, **kwargs)

    async def create(self, *args: Any, **kwargs: Any) -> Any:
        self._spend()
        return await self.real.create(*args, **kwargs)

    async def replace(self, *args: Any, **kwargs: Any) -> Any:
        self._spend()
        return await self.real.replace(*args, **kwargs)


def test_campaign_survives_unexpected_errors_and_steps_down(sandbox: RunningSandbox) -> None:
    async def body(client: KubeClient) -> None:
        settings = LeaseSettings(name="t-flaky", lease_seconds=1, renew_every=0.05, retry_every=0.05)
        elector = LeaseElector(FlakyClient(client, 4), "me", settings)  # type: ignore[arg-type]
        stopped = asyncio.Event()

        async def on_started() -> None:
            return None

        async def on_stopped() -> None:
            stopped.set()

        task = asyncio.create_task(elector.run(on_started, on_stopped))
        await asyncio.wait_for(stopped.wait(), timeout=10)
        assert elector.transitions == 1
        assert not task.done(), "the campaign goes on after errors"
        assert not elector.is_leader
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    run_with_client(sandbox, body)


class CancelledAsTheRenewLands(LeaseElector):
    """Cancels the campaign from inside a renew round, just before the round returns: the cancel
    and the round's result arrive in the same loop iteration."""

    campaign: asyncio.Task[None] | None = None
    cancel_on_round = 3  # the first round acquires; later ones are renews under the deadline

    async def try_acquire_or_renew(self) -> bool:
        held = await super().try_acquire_or_renew()
        self.cancel_on_round -= 1
        if self.cancel_on_round == 0 and self.campaign is not None:
            self.campaign.cancel()
        return held


def test_a_campaign_cancelled_as_a_renew_lands_ends(sandbox: RunningSandbox) -> None:
    """Stopping a host cancels its campaign; a cancel that lands with a renew's answer must still
    end it (Python 3.11's wait_for swallowed it, and the stop then waited forever)."""

    async def body(client: KubeClient) -> None:
        settings = LeaseSettings(name="t-cancel", lease_seconds=3, renew_every=0.05, retry_every=0.05)
        elector = CancelledAsTheRenewLands(client, "me", settings)

        async def nothing() -> None:
            return None

        elector.campaign = asyncio.create_task(elector.run(nothing, nothing))
        done, _ = await asyncio.wait({elector.campaign}, timeout=10)
        assert done, f"the campaign outlived its cancel ({3 - elector.cancel_on_round} rounds so far)"
        assert elector.campaign.cancelled()

    run_with_client(sandbox, body)
