"""GPU telemetry on Ray: one `TelemetryActor` per Ray node, one `AggregatorActor`, and the
driver-side `TelemetryFleet` that keeps the first in line with the live node set.

* A telemetry actor is pinned to its node (`NodeAffinitySchedulingStrategy(soft=False)`: it
  measures *that* node's GPUs, so it must never migrate), samples every `interval` seconds and
  pushes the samples to the aggregator. It reserves no CPU. With the sandbox backend (`kaiwo-ray
  dev`, one Ray node) the single actor reports every simulated GPU node.
* The aggregator (pure core in `kaiwo_ray.telemetry.aggregator`) answers per-pod readings for the
  resource monitor and GPU preemption and serves `/metrics`.
* The fleet runs on a thread of the `up`/`dev` process, like the controller supervisor, or of the
  operator's Serve replica in a deploy/ install (actors/operator_app.py), where only the nodes of the
  gpu-telemetry worker group get an actor (`TelemetrySettings.node_resource`): a node joins -> its
  actor is started; a node dies -> its actor is killed and the aggregator told, so that node's GPUs
  read as unknown at once instead of after `stale_after`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from kaiwo_ray import clock
from kaiwo_ray.telemetry.aggregator import Aggregator
from kaiwo_ray.telemetry.model import NodeSample
from kaiwo_ray.telemetry.settings import AGGREGATOR_NAME, SAMPLE_PHASE, TelemetrySettings, actor_name

log = logging.getLogger(__name__)

CONTROL_ACTOR: dict[str, Any] = {"num_cpus": 0, "max_restarts": -1, "max_task_retries": -1, "max_concurrency": 16}


def kubernetes_node_name() -> str:
    """The Kubernetes node this Ray node runs on: the downward-API variable the deployment sets
    (`NODE_NAME` from `spec.nodeName`), else the host name (a Ray pod's host name is the pod's)."""
    return os.environ.get("KAIWO_NODE_NAME") or os.environ.get("NODE_NAME") or socket.gethostname()


class AggregatorActor:
    def __init__(self, settings: TelemetrySettings) -> None:
        self.settings = settings
        self.core = Aggregator(stale_after=settings.effective_stale_after)
        self.pushes = 0
        self.address = ""
        self._runner: Any = None
        self._serving: asyncio.Task[None] | None = None
        if settings.metrics_port is not None:
            with contextlib.suppress(RuntimeError):
                self._serving = asyncio.get_running_loop().create_task(self._serve())

    async def _serve(self) -> None:
        from aiohttp import web

        from kaiwo_ray.telemetry.exposition import render

        async def metrics(request: web.Request) -> web.Response:
            return web.Response(body=render(self.core), headers={"Content-Type": "text/plain; version=0.0.4"})

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.settings.metrics_host, self.settings.metrics_port or 0)
        await site.start()
        self._runner = runner
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.address = f"http://{self.settings.metrics_host}:{port}/metrics"

    async def metrics_address(self, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while not self.address and self._serving is not None and not self._serving.done():
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        return self.address

    def push(self, samples: list[NodeSample]) -> int:
        received = clock.timestamp()
        for sample in samples:
            self.core.ingest(sample, received)
        self.pushes += 1
        return len(samples)

    def pod_readings(self, pods: list[tuple[str, str, str]]) -> dict[tuple[str, str], list[Any]]:
        """Readings for many pods at once: [(namespace, name, uid)] -> {(namespace, name): [GpuReading]}."""
        now = clock.timestamp()
        return {(ns, name): self.core.pod_readings(ns, name, uid, now) for ns, name, uid in pods}

    def forget_ray_nodes_except(self, alive: list[str]) -> list[str]:
        keep = set(alive)
        gone = [name for name, state in self.core.nodes.items()
                if state.live and state.sample.ray_node_id and state.sample.ray_node_id not in keep]
        for name in gone:
            self.core.forget_node(name)
        return gone

    def snapshot(self) -> list[tuple[NodeSample, bool]]:
        return self.core.snapshot()

    def compact_snapshot(self) -> list[Any]:
        """Every node's latest sample as the GPU ledger reads it (kaiwo_ray.telemetry.sources.compact)."""
        from kaiwo_ray.telemetry.sources import compact

        return compact(state.sample for _, state in sorted(self.core.nodes.items()))

    def history(self, node: str, uuid: str) -> dict[str, Any]:
        found = self.core.history.get((node, uuid))
        if found is None:
            return {"recent": [], "summary": []}
        return {"recent": found.recent(), "summary": found.summary()}

    def health(self) -> dict[str, Any]:
        return {"pushes": self.pushes, "samples": self.core.ingested, "nodes": len(self.core.nodes),
                "live": self.core.live_nodes(), "metrics": self.address, "pid": os.getpid()}


class TelemetryActor:
    def __init__(self, settings: TelemetrySettings, ray_namespace: str) -> None:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        self.settings = settings
        self.ray_namespace = ray_namespace
        self.ray_node_id = ray.get_runtime_context().get_node_id()
        self.node = kubernetes_node_name()
        self.ticks = 0
        self.errors = 0
        self.last_error = ""
        self.backend = ""
        self._sampler: Any = None
        self._task: asyncio.Task[None] | None = None
        with contextlib.suppress(RuntimeError):
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _make_sampler(self) -> Any:
        from kaiwo_ray.telemetry.sampler import HardwareSampler, SandboxSampler

        if self.settings.backend == "sandbox":
            from kaiwo_ray.kube.client import KubeClient

            client = (KubeClient.in_cluster() if self.settings.in_cluster
                      else await KubeClient.from_kubeconfig(self.settings.kubeconfig))
            return SandboxSampler(client, self.ray_node_id, self.node if self.settings.in_cluster else None)
        from kaiwo_ray.telemetry.backends import select_backend

        backend = await asyncio.to_thread(select_backend, self.settings.backend)
        return HardwareSampler(backend, self.node, self.ray_node_id,
                               podresources_socket=self.settings.podresources_socket)

    async def _run(self) -> None:
        self._sampler = await self._make_sampler()
        self.backend = self._sampler.name
        aggregator = ray.get_actor(AGGREGATOR_NAME, namespace=self.ray_namespace)
        pending: Any = None
        interval = self.settings.interval  # of the operator's clock (the cluster's, when scaled)
        while True:
            try:
                samples = await self._sampler.node_samples()
                if pending is not None:  # one push in flight at most: a slow aggregator gets fresh data
                    with contextlib.suppress(Exception):
                        async with asyncio.timeout(clock.wall_seconds(interval)):
                            await pending
                pending = aggregator.push.remote(samples)
                self.ticks += 1
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the aggregator restarting, a network blip: keep sampling
                self.errors += 1
                self.last_error = f"{type(err).__name__}: {err}"
                with contextlib.suppress(Exception):
                    aggregator = ray.get_actor(AGGREGATOR_NAME, namespace=self.ray_namespace)
            # The next sample's moment on the clock (a tick that ran late skips the moments it missed).
            await clock.sleep_to_multiple(interval, SAMPLE_PHASE * interval)

    def health(self) -> dict[str, Any]:
        failed = ""
        if self._task is not None and self._task.done() and not self._task.cancelled():
            err = self._task.exception()
            failed = f"{type(err).__name__}: {err}" if err else ""
        return {"node": self.node, "ray_node_id": self.ray_node_id, "backend": self.backend, "ticks": self.ticks,
                "errors": self.errors, "last_error": failed or self.last_error, "pid": os.getpid()}

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._sampler is not None:
            self._sampler.close()


class TelemetryFleet:
    """Driver side: the aggregator plus one telemetry actor per live Ray node (one in total with the
    sandbox backend), reconciled on a background thread every `reconcile_interval` seconds."""

    def __init__(self, settings: TelemetrySettings, namespace: str = "kaiwo", *, detached: bool = False) -> None:
        self.settings = settings
        self.namespace = namespace
        self.detached = detached
        self.aggregator: Any = None
        self.actors: dict[str, Any] = {}  # ray node id -> handle
        self.started: list[str] = []
        self.removed: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _options(self, name: str) -> dict[str, Any]:
        options: dict[str, Any] = {"name": name, "namespace": self.namespace, "get_if_exists": True}
        if self.detached:
            options["lifetime"] = "detached"
        return options

    def start(self) -> TelemetryFleet:
        remote = ray.remote(**CONTROL_ACTOR)(AggregatorActor)
        options = self._options(AGGREGATOR_NAME)
        if self.settings.aggregator_resources:
            options["resources"] = dict(self.settings.aggregator_resources)
        self.aggregator = remote.options(**options).remote(self.settings)
        self.reconcile()
        self._thread = threading.Thread(target=self._loop, name="telemetry-fleet", daemon=True)
        self._thread.start()
        return self

    def metrics_address(self, timeout: float = 10.0) -> str:
        return str(ray.get(self.aggregator.metrics_address.remote(timeout), timeout=timeout + 5))

    def _loop(self) -> None:
        while not self._stop.wait(self.settings.reconcile_interval):
            try:
                self.reconcile()
            except Exception:  # Ray briefly unreachable: try again next interval
                log.exception("telemetry fleet reconcile failed")

    def desired_nodes(self) -> list[str]:
        if self.settings.node_resource:
            return sorted(_alive_nodes(self.settings.node_resource))
        alive = sorted(_alive_nodes())
        if self.settings.backend == "sandbox":
            own = ray.get_runtime_context().get_node_id()
            return [own] if own in alive else alive[:1]
        return alive

    def reconcile(self) -> tuple[list[str], list[str]]:
        """Start actors on nodes without one, drop those of dead nodes; (started, removed) node ids."""
        with self._lock:
            alive = _alive_nodes()
            desired = self.desired_nodes()
            started: list[str] = []
            removed: list[str] = []
            remote = ray.remote(**CONTROL_ACTOR)(TelemetryActor)
            for node_id in desired:
                if node_id in self.actors and self._exists(node_id):
                    continue
                strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
                self.actors[node_id] = remote.options(scheduling_strategy=strategy,
                                                      **self._options(actor_name(node_id))).remote(
                    self.settings, self.namespace)
                started.append(node_id)
            for node_id in [n for n in self.actors if n not in desired]:
                handle = self.actors.pop(node_id)
                with contextlib.suppress(Exception):
                    ray.kill(handle, no_restart=True)
                removed.append(node_id)
            if removed or any(n not in alive for n in desired):
                ray.get(self.aggregator.forget_ray_nodes_except.remote(sorted(alive)), timeout=30)
            self.started.extend(started)
            self.removed.extend(removed)
            return started, removed

    def _exists(self, node_id: str) -> bool:
        try:
            ray.get_actor(actor_name(node_id), namespace=self.namespace)
        except ValueError:
            return False
        return True

    def health(self, timeout: float = 5.0) -> dict[str, Any]:
        refs = {node: handle.health.remote() for node, handle in self.actors.items()}
        ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout) if refs else ([], [])
        actors = {}
        for node, ref in refs.items():
            try:
                actors[node] = ray.get(ref) if ref in ready else {"error": "no answer"}
            except ray.exceptions.RayError as err:
                actors[node] = {"error": str(err).splitlines()[-1]}
        return {"aggregator": ray.get(self.aggregator.health.remote(), timeout=timeout), "actors": actors}

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.settings.reconcile_interval + 5)
        with self._lock:
            for handle in self.actors.values():
                with contextlib.suppress(Exception):
                    ray.get(handle.stop.remote(), timeout=5)
                with contextlib.suppress(Exception):
                    ray.kill(handle, no_restart=True)
            self.actors.clear()
            if self.aggregator is not None:
                with contextlib.suppress(Exception):
                    ray.kill(self.aggregator, no_restart=True)
                self.aggregator = None


def _alive_nodes(resource: str = "") -> set[str]:
    """Ids of the live Ray nodes (with `resource`: only those whose total offers some of it)."""
    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    return {str(n["NodeID"]) for n in nodes
            if n.get("Alive") and (not resource or float((n.get("Resources") or {}).get(resource, 0)) > 0)}
