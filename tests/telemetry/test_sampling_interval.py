"""`SamplingSource` with an interval (what `kaiwo-ray simulate` reads GPU utilization through) answers as
the telemetry actors would have live: they sample at the middle of each interval of the operator's
clock, so a pod that started running after the latest of those moments has no reading yet."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from kaiwo_ray import clock
from kaiwo_ray.telemetry.aggregator import Aggregator
from kaiwo_ray.telemetry.model import GpuSample, NodeSample, PodRef
from kaiwo_ray.telemetry.sources import SamplingSource

NOW = 1_767_225_610.2  # 0.7 s after the sample at ...609.5


class OneNode:
    """A sampler whose node's one GPU is held, idle, by pod `train` (uid u-1)."""

    async def node_samples(self) -> list[NodeSample]:
        gpu = GpuSample(uuid="g0", index=0, vendor="sandbox-amd", utilization=0.0,
                        pods=(PodRef(namespace="default", pod="train", uid="u-1"),))
        return [NodeSample(node="n1", timestamp=clock.timestamp(), backend="sandbox", gpus=(gpu,))]


@pytest.fixture
def at_now() -> Iterator[None]:
    with clock.use(lambda: datetime.fromtimestamp(NOW, UTC)):
        yield


def _readings(started: float | None) -> list[float | None]:
    source = SamplingSource(OneNode(), Aggregator(stale_after=60.0), interval=1.0,
                            started={} if started is None else {"u-1": started})
    answer = asyncio.run(source.readings([("default", "train", "u-1")]))
    return [use.utilization for use in answer.get(("default", "train"), [])]


def test_a_pod_started_before_the_latest_sample_has_its_reading(at_now: None) -> None:
    assert _readings(started=NOW - 1.0) == [0.0]


def test_a_pod_started_after_the_latest_sample_is_unknown(at_now: None) -> None:
    assert _readings(started=NOW - 0.3) == []  # started at ...609.9, after the sample at ...609.5


def test_without_a_recorded_start_the_reading_stands(at_now: None) -> None:
    assert _readings(started=None) == [0.0]
