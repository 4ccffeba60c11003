"""One real local Ray for the telemetry tests that need it (started on first use)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    ray = pytest.importorskip("ray")
    from actors.supervisor import init_ray

    started = init_ray(None, namespace="kaiwo-tests", num_cpus=2)
    yield ray
    if started:
        ray.shutdown()
