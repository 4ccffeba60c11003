"""What a telemetry actor runs each tick: read the devices, attribute them to pods, wrap them in
`NodeSample`s. Two kinds:

* `HardwareSampler`: this node's backend (NVML / AMD SMI / none) plus the kubelet's PodResources
  API (and cgroups). The blocking driver calls run in a worker thread, so a slow driver never
  stalls the actor's event loop.
* `SandboxSampler`: the sandbox's simulated GPUs of *every* simulated node (in `kaiwo-ray dev` one
  Ray node stands in for the whole cluster), each sample under its Kubernetes node name.

Neither raises for a failed read: the NodeSample carries `error`, and the aggregator then treats
that node's GPUs as unknown.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Protocol

from kaiwo_ray import clock
from kaiwo_ray.telemetry.attribution import attribute
from kaiwo_ray.telemetry.backends import GpuBackend
from kaiwo_ray.telemetry.model import GpuSample, NodeSample, PodRef
from kaiwo_ray.telemetry.podresources import (
    KUBELET_SOCKET,
    DeviceAllocation,
    PodResourcesError,
    list_allocations,
)

log = logging.getLogger(__name__)

SANDBOX_DEVICES_PATH = "/sandbox/gpus"


class Sampler(Protocol):
    name: str

    async def node_samples(self) -> list[NodeSample]: ...

    def close(self) -> None: ...


class HardwareSampler:
    def __init__(self, backend: GpuBackend, node: str, ray_node_id: str = "", *,
                 podresources_socket: str | None = KUBELET_SOCKET, proc_root: Path | None = Path("/proc")) -> None:
        self.backend = backend
        self.name = backend.name
        self.node = node
        self.ray_node_id = ray_node_id
        self.podresources_socket = podresources_socket
        self.proc_root = proc_root
        self.attribution_error = ""

    def _allocations(self) -> list[DeviceAllocation] | None:
        if not self.podresources_socket or not Path(self.podresources_socket).exists():
            return None
        try:
            found = list_allocations(self.podresources_socket)
        except PodResourcesError as err:
            if str(err) != self.attribution_error:
                log.warning("%s (falling back to cgroups)", err)
            self.attribution_error = str(err)
            return None
        self.attribution_error = ""
        return found

    def read(self) -> NodeSample:
        """One blocking tick (driver calls + the kubelet), for a worker thread."""
        stamp = clock.timestamp()
        try:
            gpus = self.backend.sample()
        except Exception as err:  # a backend bug must not kill the actor: report the node as unreadable
            log.exception("GPU backend %s failed", self.name)
            return NodeSample(node=self.node, ray_node_id=self.ray_node_id, timestamp=stamp, backend=self.name,
                              error=f"{type(err).__name__}: {err}")
        if gpus:
            gpus = attribute(gpus, self._allocations(), self.proc_root)
        return NodeSample(node=self.node, ray_node_id=self.ray_node_id, timestamp=stamp, backend=self.name,
                          gpus=tuple(gpus))

    async def node_samples(self) -> list[NodeSample]:
        return [await asyncio.to_thread(self.read)]

    def close(self) -> None:
        self.backend.close()


class SandboxSampler:
    """The sandbox's GPUs through its `/sandbox/gpus` route, with the operator's API client: every
    simulated node's (one actor stands for all, as `kaiwo-ray dev` runs it), or only `node`'s (an actor
    in a pod of the installed gpu-telemetry group reads the node its pod runs on, as on hardware)."""

    name = "sandbox"

    def __init__(self, client: Any, ray_node_id: str = "", node: str | None = None) -> None:
        self.client = client
        self.ray_node_id = ray_node_id
        self.node = node
        self.known_nodes: set[str] = set()

    async def node_samples(self) -> list[NodeSample]:
        # The operator's clock (the wall clock, except in `kaiwo-ray simulate`, where it is the
        # simulated cluster's and the sandbox's readings are of that time too).
        stamp = clock.timestamp()
        try:
            body = await self.client.request("GET", SANDBOX_DEVICES_PATH)
            # The sandbox computed the readings somewhere between asking and answering: the middle is
            # the closest guess (the GPU ledger integrates over these stamps; on a busy machine the
            # answer can take a good part of an interval).
            stamp = (stamp + clock.timestamp()) / 2
        except Exception as err:  # the sandbox restarting: every simulated node is unreadable this tick
            return [NodeSample(node=n, ray_node_id=self.ray_node_id, timestamp=stamp, backend=self.name,
                               error=f"{type(err).__name__}: {err}") for n in sorted(self.known_nodes)]
        by_node: dict[str, list[GpuSample]] = {self.node: []} if self.node else {}
        for item in (body or {}).get("items") or []:
            if self.node is None or str(item["node"]) == self.node:
                by_node.setdefault(str(item["node"]), []).append(sandbox_gpu(item))
        self.known_nodes = set(by_node)
        return [NodeSample(node=node, ray_node_id=self.ray_node_id, timestamp=stamp, backend=self.name,
                           gpus=tuple(gpus)) for node, gpus in sorted(by_node.items())]

    def close(self) -> None:
        return None


def sandbox_gpu(item: dict[str, Any]) -> GpuSample:
    pods: tuple[PodRef, ...] = ()
    if item.get("pod"):
        pods = (PodRef(namespace=item.get("namespace") or "", pod=item["pod"], container=item.get("container") or "",
                       uid=item.get("podUid") or ""),)
    return GpuSample(uuid=str(item["uuid"]), index=int(item["index"]), vendor=f"sandbox-{item['vendor']}",
                     model=str(item.get("model") or ""), bus_id=str(item.get("busId") or ""),
                     utilization=item.get("utilization"), memory_used_bytes=item.get("memoryUsedBytes"),
                     memory_total_bytes=item.get("memoryTotalBytes"), power_watts=item.get("powerWatts"),
                     temperature_c=item.get("temperatureC"), pods=pods, error=str(item.get("error") or ""))
