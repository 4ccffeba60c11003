"""The work queue's contract: de-duplication, one in flight per key, backoff, budget, requeue-after."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from kaiwo_ray.kube.workqueue import Backoff, TokenBucket, WorkQueue


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(coro)


def test_duplicate_adds_queue_once() -> None:
    async def body() -> None:
        q: WorkQueue[str] = WorkQueue()
        q.add("a")
        q.add("a")
        q.add("b")
        assert len(q) == 2
        assert await q.get() == "a"
        assert await q.get() == "b"

    run(body())


def test_key_added_while_in_flight_runs_again_after_done_not_concurrently() -> None:
    async def body() -> None:
        q: WorkQueue[str] = WorkQueue()
        q.add("a")
        key = await q.get()
        q.add("a")  # an event arrives while reconciling
        assert len(q) == 0, "must not be handed out while in flight"
        q.done(key)
        assert q.pending_keys() == ["a"]

    run(body())


def test_backoff_doubles_from_5ms_and_caps_at_5min() -> None:
    b = Backoff()
    delays = [b.next_delay("k") for _ in range(20)]
    assert delays[0] == pytest.approx(0.005)
    assert delays[1] == pytest.approx(0.010)
    assert delays[2] == pytest.approx(0.020)
    assert delays[-1] == 300.0
    b.forget("k")
    assert b.next_delay("k") == pytest.approx(0.005)


def test_token_bucket_limits_burst_then_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=10, burst=3, clock=clock)
    waits = [bucket.reserve() for _ in range(5)]
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert waits[3] == pytest.approx(0.1)
    assert waits[4] == pytest.approx(0.2)
    clock.t += 10
    assert bucket.reserve() == 0.0


def test_add_after_keeps_earliest_deadline() -> None:
    async def body() -> None:
        clock = FakeClock()
        q: WorkQueue[str] = WorkQueue(clock=clock)
        q.add_after("late", 5)
        q.add_after("x", 2)
        q.add_after("x", 1)  # earlier wins
        q.add_after("x", 3)  # later is ignored
        clock.t += 1.5
        assert await asyncio.wait_for(q.get(), 1) == "x"
        q.done("x")
        clock.t += 2.0  # x's superseded deadlines (2 and 3) must not fire it again
        q.add("poke")
        assert await asyncio.wait_for(q.get(), 1) == "poke"
        assert q.pending_keys() == []
        clock.t += 2.0
        assert await asyncio.wait_for(q.get(), 1) == "late"

    run(body())


def test_get_wakes_for_delayed_key_in_real_time() -> None:
    async def body() -> None:
        q: WorkQueue[str] = WorkQueue()
        q.add_after("k", 0.05)
        assert await asyncio.wait_for(q.get(), 2) == "k"

    run(body())


def test_rate_limited_add_uses_per_key_backoff() -> None:
    async def body() -> None:
        clock = FakeClock()
        q: WorkQueue[str] = WorkQueue(clock=clock, bucket=TokenBucket(rate=1000, burst=1000, clock=clock))
        q.add_rate_limited("k")
        q.add_rate_limited("k")
        assert q.retries("k") == 2
        assert len(q) == 0
        clock.t += 0.006
        assert await asyncio.wait_for(q.get(), 1) == "k"
        q.forget("k")
        assert q.retries("k") == 0

    run(body())


def test_shutdown_stops_handing_out_keys() -> None:
    async def body() -> None:
        q: WorkQueue[str] = WorkQueue()
        q.add("a")
        q.shutdown()
        with pytest.raises(asyncio.CancelledError):
            await q.get()

    run(body())


def test_coalesced_adds_run_once_per_window_and_join_a_waiting_run() -> None:
    async def body() -> None:
        clock = FakeClock()
        q: WorkQueue[str] = WorkQueue(clock=clock)
        q.add_coalesced("job", 0.05)  # first event of a burst sets the time
        clock.t += 0.03
        q.add_coalesced("job", 0.05)  # joins it: no later deadline
        assert q.pending_keys() == []
        clock.t += 0.021
        assert await asyncio.wait_for(q.get(), 1) == "job"
        q.done("job")
        clock.t += 1.0
        q.add("poke")
        assert await asyncio.wait_for(q.get(), 1) == "poke"
        assert q.pending_keys() == []  # the second event's window did not schedule a second run
        q.add("ready")
        q.add_coalesced("ready", 0.05)  # already waiting to run: that run reads the newer state
        assert await asyncio.wait_for(q.get(), 1) == "ready"
        q.done("ready")
        clock.t += 1.0
        q.add("poke2")
        assert await asyncio.wait_for(q.get(), 1) == "poke2"

    run(body())


def test_coalesced_add_while_in_flight_runs_again_after_the_window() -> None:
    async def body() -> None:
        clock = FakeClock()
        q: WorkQueue[str] = WorkQueue(clock=clock)
        q.add("k")
        assert await q.get() == "k"
        q.add_coalesced("k", 0.05)  # an event the running reconcile may have missed
        clock.t += 0.06
        q.done("k")
        assert await asyncio.wait_for(q.get(), 1) == "k"

    run(body())


def test_backoff_survives_thousands_of_failures_at_the_cap() -> None:
    b = Backoff()
    delays = [b.next_delay("k") for _ in range(2_000)]  # 2.0**1024 overflowed at the 1,025th
    assert delays[-1] == 300.0 and b.retries("k") == 2_000


def test_a_key_wakes_one_idle_worker_and_each_ready_key_gets_one() -> None:
    """Idle workers are woken one per key, not all at once: with 4 idle, one add wakes one; three
    adds at once wake three (each taker passes the rest on), and the fourth sleeps on."""
    async def body() -> None:
        q: WorkQueue[str] = WorkQueue()
        wakes = 0
        taken: list[str] = []

        async def worker() -> None:
            nonlocal wakes
            while True:
                key = await q.get()
                wakes += 1
                taken.append(key)
                q.done(key)

        workers = [asyncio.create_task(worker()) for _ in range(4)]
        for _ in range(3):
            await asyncio.sleep(0)  # all four idle on the queue
        assert len(q._waiters) == 4
        q.add("a")
        for _ in range(5):
            await asyncio.sleep(0)
        assert taken == ["a"] and len(q._waiters) == 4
        for key in ("b", "c", "d"):
            q.add(key)
        for _ in range(10):
            await asyncio.sleep(0)
        assert sorted(taken) == ["a", "b", "c", "d"] and wakes == 4 and len(q._waiters) == 4
        q.shutdown()
        await asyncio.gather(*workers, return_exceptions=True)
        assert all(w.done() for w in workers)

    run(body())


def test_delayed_keys_run_on_time_while_the_first_is_still_in_flight() -> None:
    """Two keys due 50 ms apart, two workers: the first worker is busy with the first key for long
    after the second is due, and the second key is still handed to the other worker on time: the queue's
    one timer, spent on the first key, is armed again for the second by the idle worker."""
    async def body() -> None:
        q: WorkQueue[str] = WorkQueue()
        started: dict[str, float] = {}
        loop = asyncio.get_running_loop()
        release = asyncio.Event()

        async def worker() -> None:
            while True:
                key = await q.get()
                started[key] = loop.time()
                await release.wait()  # busy until the test ends
                q.done(key)

        workers = [asyncio.create_task(worker()) for _ in range(2)]
        await asyncio.sleep(0)
        began = loop.time()
        q.add_after("first", 0.05)
        q.add_after("second", 0.10)
        deadline = loop.time() + 2.0
        while len(started) < 2 and loop.time() < deadline:
            await asyncio.sleep(0.005)
        assert set(started) == {"first", "second"}
        assert started["second"] - began < 0.5  # not left until the first worker is free (2 s here)
        release.set()
        q.shutdown()
        await asyncio.gather(*workers, return_exceptions=True)

    run(body())


def test_processing_seconds_sum_and_longest_of_keys_in_flight() -> None:
    async def body() -> None:
        clock = FakeClock()
        q: WorkQueue[str] = WorkQueue(clock=clock)
        assert q.processing_seconds() == (0.0, 0.0)
        q.add("a")
        q.add("b")
        assert await q.get() == "a"
        clock.t += 3.0
        assert await q.get() == "b"
        clock.t += 1.0
        assert q.processing_seconds() == (5.0, 4.0)
        q.done("a")
        assert q.processing_seconds() == (1.0, 1.0)

    run(body())
