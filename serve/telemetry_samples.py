"""Per-GPU utilization for /api/v1/nodes from the telemetry aggregator actor (`kaiwo-ray up`/`dev`).

`gpu_samples_from_snapshot` is the pure conversion: the aggregator's [(NodeSample, live)] -> the node
view's `GpuReading`s; a GPU of a node whose telemetry is not live, or a device that could not be read,
gets `utilization=None` (unknown, never idle). `AggregatorSamples` is the thin Ray shell the admin
app calls on every request: it answers from the last snapshot and asks the actor again at most once
per `ttl` seconds, without blocking the request on the answer (one call in flight at most). An absent
aggregator (telemetry off, not started yet, restarting) means no samples, never a failed request.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from typing import Any

from kaiwo_ray.telemetry.model import NodeSample
from kaiwo_ray.telemetry.settings import AGGREGATOR_NAME
from kaiwo_ray.views._objects import ObjectRef
from kaiwo_ray.views.nodes import GpuReading

log = logging.getLogger(__name__)


def gpu_samples_from_snapshot(snapshot: Iterable[tuple[NodeSample, bool]]) -> list[GpuReading]:
    samples: list[GpuReading] = []
    for node, live in snapshot:
        for gpu in node.gpus:
            holder = next((p for p in gpu.pods if p.pod), None)
            known = live and not gpu.error and not node.error
            samples.append(GpuReading(
                node=node.node, index=gpu.index,
                utilization=gpu.utilization if known else None,
                memory_used_bytes=float(gpu.memory_used_bytes) if known and gpu.memory_used_bytes is not None
                else None,
                memory_total_bytes=float(gpu.memory_total_bytes) if gpu.memory_total_bytes is not None else None,
                pod=ObjectRef(kind="Pod", name=holder.pod, namespace=holder.namespace or None) if holder else None))
    return samples


class AggregatorSamples:
    """The `AdminSettings.gpu_samples` callable on Ray: the aggregator's snapshot, cached `ttl` seconds."""

    def __init__(self, namespace: str, ttl: float = 1.0, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.namespace = namespace
        self.ttl = ttl
        self.clock = clock
        self.samples: list[GpuReading] = []
        self.asked = -math.inf
        self.fetches = 0
        self._actor: Any = None
        self._pending: Any = None

    def __call__(self) -> list[GpuReading]:
        import ray

        if self._pending is not None:
            ready, _ = ray.wait([self._pending], timeout=0)
            if ready:
                ref, self._pending = self._pending, None
                try:
                    self.samples = gpu_samples_from_snapshot(ray.get(ref))
                except Exception as err:  # the actor died mid-call: unknown until it is back
                    log.debug("telemetry snapshot failed: %s", err)
                    self.samples, self._actor = [], None
        if self._pending is None and self.clock() - self.asked >= self.ttl:
            self.asked = self.clock()
            try:
                if self._actor is None:
                    self._actor = ray.get_actor(AGGREGATOR_NAME, namespace=self.namespace)
                self._pending = self._actor.snapshot.remote()
                self.fetches += 1
            except Exception:  # no aggregator (telemetry off or not started): no samples
                self.samples, self._actor = [], None
        return self.samples
