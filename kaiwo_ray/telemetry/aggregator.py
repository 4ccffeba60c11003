"""The aggregator's pure core: the latest sample of every GPU, which nodes have live telemetry, a
bounded history, per-pod readings for resource monitoring and GPU preemption, and the metrics.

Unknown is not idle. A GPU's reading is None (unknown) when its node's telemetry is not live (no
sample within `stale_after` seconds, or the node was forgotten because its Ray node died) or when
the device could not be read; consumers must never act on None. Only a reading the source actually
measured - including 0 % - counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kaiwo_ray import clock
from kaiwo_ray.telemetry.history import GpuHistory, HistorySettings
from kaiwo_ray.telemetry.model import GpuSample, NodeSample, PodRef

GpuKey = tuple[str, str]  # (node, uuid)


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU held by a pod, as a consumer sees it."""

    node: str
    uuid: str
    gpu_id: str  # the GPU's index on its node, as exporters label it
    resource: str
    utilization: float | None  # None: unknown (stale node, unreadable device)
    timestamp: float
    container: str = ""


@dataclass(slots=True)
class _NodeState:
    sample: NodeSample
    received: float
    live: bool = True


@dataclass(slots=True)
class Aggregator:
    stale_after: float = 5.0
    history_settings: HistorySettings = field(default_factory=HistorySettings)
    nodes: dict[str, _NodeState] = field(default_factory=dict)
    history: dict[GpuKey, GpuHistory] = field(default_factory=dict)
    _pods: dict[tuple[str, str], list[tuple[str, GpuSample, PodRef]]] = field(default_factory=dict)
    _uids: dict[str, list[tuple[str, GpuSample, PodRef]]] = field(default_factory=dict)
    ingested: int = 0
    _index_dirty: bool = True  # the pod index is rebuilt on the first query after an ingest

    # -- input ----------------------------------------------------------------------------------

    def ingest(self, sample: NodeSample, received: float | None = None) -> None:
        now = clock.timestamp() if received is None else received
        previous = self.nodes.get(sample.node)
        if previous is not None and sample.timestamp < previous.sample.timestamp:
            return  # a late push from before the last one (a restarted actor's backlog)
        self.nodes[sample.node] = _NodeState(sample, now)
        self.ingested += 1
        for gpu in sample.gpus:
            key = (sample.node, gpu.uuid)
            history = self.history.get(key)
            if history is None:
                history = self.history[key] = GpuHistory(self.history_settings)
            history.add(sample.timestamp, None if gpu.error else gpu.utilization)
        self._index_dirty = True

    def forget_node(self, node: str) -> None:
        """The node's telemetry is gone for good (its Ray node died): its GPUs become unknown. The
        last sample is kept for display, marked not live; history stays until it ages out."""
        state = self.nodes.get(node)
        if state is not None:
            state.live = False

    def forget_nodes_except(self, live: Iterable[str]) -> list[str]:
        keep = set(live)
        gone = [name for name, state in self.nodes.items() if state.live and name not in keep]
        for name in gone:
            self.forget_node(name)
        return gone

    # -- queries ---------------------------------------------------------------------------------

    def is_live(self, node: str, now: float | None = None) -> bool:
        state = self.nodes.get(node)
        if state is None or not state.live:
            return False
        current = clock.timestamp() if now is None else now
        return current - state.received <= self.stale_after and not state.sample.error

    def live_nodes(self, now: float | None = None) -> list[str]:
        return sorted(n for n in self.nodes if self.is_live(n, now))

    def _reindex(self) -> None:
        pods: dict[tuple[str, str], list[tuple[str, GpuSample, PodRef]]] = {}
        uids: dict[str, list[tuple[str, GpuSample, PodRef]]] = {}
        for node, state in self.nodes.items():
            for gpu in state.sample.gpus:
                for ref in gpu.pods:
                    if ref.pod:
                        pods.setdefault((ref.namespace, ref.pod), []).append((node, gpu, ref))
                    if ref.uid:
                        uids.setdefault(ref.uid, []).append((node, gpu, ref))
        self._pods, self._uids = pods, uids
        self._index_dirty = False

    def pod_readings(self, namespace: str, pod: str, uid: str = "", now: float | None = None) -> list[GpuReading]:
        """Every GPU the pod holds (by name, or by UID where only cgroups attributed it), with its
        utilization, or None where unknown. An empty list: no telemetry source knows this pod."""
        if self._index_dirty:
            self._reindex()
        current = clock.timestamp() if now is None else now
        found = list(self._pods.get((namespace, pod), []))
        if uid:
            found.extend(self._uids.get(uid, []))
        readings: dict[GpuKey, GpuReading] = {}
        for node, gpu, ref in found:
            live = self.is_live(node, current)
            state = self.nodes[node]
            value = gpu.utilization if live and not gpu.error else None
            readings[(node, gpu.uuid)] = GpuReading(node, gpu.uuid, str(gpu.index), gpu.resource, value,
                                                    state.sample.timestamp, ref.container)
        return list(readings.values())

    def snapshot(self, now: float | None = None) -> list[tuple[NodeSample, bool]]:
        """Every node's last sample and whether it is live (for the admin API, dashboard, metrics)."""
        current = clock.timestamp() if now is None else now
        return [(state.sample, self.is_live(name, current)) for name, state in sorted(self.nodes.items())]
