"""The operator on the cluster's scaled clock (`kaiwo-ray dev --scaled-clock`, KAIWO_CLOCK_SCALE):
`now()` and `monotonic()` read cluster seconds, and a work queue's delay of N cluster seconds waits
N * F wall seconds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from kaiwo_ray import clock
from kaiwo_ray.kube.workqueue import WorkQueue


@pytest.fixture
def scaled() -> Iterator[clock.Scale]:
    scale = clock.Scale(time.time() - 10.0, 0.1)  # 10 wall seconds ago: 100 cluster seconds ago
    previous = clock.scale()
    clock.set_scale(scale)
    try:
        yield scale
    finally:
        clock.set_scale(previous)


def test_now_is_cluster_time(scaled: clock.Scale) -> None:
    assert abs(clock.timestamp() - (scaled.origin + 100.0)) < 1.0
    assert abs(clock.now().timestamp() - clock.timestamp()) < 1.0
    assert clock.wall_seconds(30.0) == pytest.approx(3.0)


def test_a_delay_of_cluster_seconds_waits_that_times_f_on_the_wall(scaled: clock.Scale) -> None:
    async def body() -> float:
        queue: WorkQueue[str] = WorkQueue()
        began = time.monotonic()
        queue.add_after("k", 3.0)  # 0.3 wall seconds
        async with asyncio.timeout(2.0):  # 3 seconds would not do
            assert await queue.get() == "k"
        return time.monotonic() - began

    waited = asyncio.run(body())
    assert 0.25 <= waited < 2.0


def test_the_scale_comes_from_the_environment_as_dev_writes_it() -> None:
    scale = clock.Scale(1767225600.0, 0.2)
    assert clock.parse_scale(scale.encode()) == scale
    with pytest.raises(ValueError, match="greater than 0"):
        clock.parse_scale("1767225600 0")
    with pytest.raises(ValueError, match="KAIWO_CLOCK_SCALE"):
        clock.parse_scale("0.2")
