"""Leader election against the sandbox: one holder at a time, hand-over on release and on expiry,
and the campaign survives any error (not only API errors)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.lease import LeaseElector, LeaseSettings
from kaiwo_ray.kube.resources import LEASES
from kaiwo_sandbox.testing import RunningSandbox


def test_one_holder_then_hand_over_on_release(sandbox: RunningSandbox) -> None:
    async def body() -> None:
        client = await KubeClient.from_kubeconfig(str(sandbox.kubeconfig_path))
        try:
            settings = LeaseSettings(name="t-release", lease_seconds=15)
            a, b = LeaseElector(client, "a", settings), LeaseElector(client, "b", settings)
            assert await a.try_acquire_or_renew()
            assert not await b.try_acquire_or_renew()
            assert await a.try_acquire_or_renew(), "the holder renews"
            a.is_leader = True
            await a.release()
            assert await b.try_acquire_or_renew(), "a released lease is free at once"
        finally:
            await client.close()

    asyncio.run(body())


def test_expired_lease_is_taken_over(sandbox: RunningSandbox) -> None:
    async def body() -> None:
        client = await KubeClient.from_kubeconfig(str(sandbox.kubeconfig_path))
        try:
            settings = LeaseSettings(name="t-expiry", lease_seconds=5)
            now = datetime.now(UTC)
            stale = LeaseElector(client, "old", settings, clock=lambda: now - timedelta(seconds=60))
            assert await stale.try_acquire_or_renew()
            fresh = LeaseElector(client, "new", settings, clock=lambda: now)
            assert await fresh.try_acquire_or_renew()
            lease = await client.get(LEASES, "t-expiry", "kube-system")
            assert lease["spec"]["holderIdentity"] == "new"
            assert lease["spec"]["leaseTransitions"] == 1
        finally:
            await client.close()

    asyncio.run(body())


class FlakyClient:
    """Fails every call with a non-API error, as a broken connection mid-body does."""

    calls = 0

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        FlakyClient.calls += 1
        raise RuntimeError("connection reset while reading the body")


def test_campaign_survives_unexpected_errors_and_steps_down() -> None:
    async def body() -> None:
        settings = LeaseSettings(name="x", lease_seconds=1, renew_every=0.01, retry_every=0.01)
        elector = LeaseElector(FlakyClient(), "me", settings)  # type: ignore[arg-type]
        elector.is_leader = True
        elector.leading.set()
        stopped = asyncio.Event()

        async def on_started() -> None:
            return None

        async def on_stopped() -> None:
            stopped.set()

        task = asyncio.create_task(elector.run(on_started, on_stopped))
        await asyncio.wait_for(stopped.wait(), timeout=10)
        assert not task.done(), "the campaign goes on after errors"
        assert not elector.is_leader
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(body())
