"""Replay a trace against a live cluster in real time (a sandbox with a time factor, e.g. `kaiwo-ray dev
--time-factor 0.1`), recording what `kaiwo-ray simulate` records, to measure how faithful the
simulation is (kaiwo_ray/simulation/faithful.py, benchmarks/simulate_faithful.py).

Each trace line becomes the KaiwoJob the simulator submits (`simulator.kaiwojob`), created at
`submit * time_factor` wall seconds after the first. The Kueue Workloads are watched, and the
simulator's own Recorder stamps their admissions, evictions and ends with this process's monotonic
clock divided by the time factor (the API's timestamps are whole seconds: too coarse at 0.1).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

from hosts.runtime.simulator import Recorder, SimulationError, SimulationInputs, kaiwojob
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import AlreadyExists
from kaiwo_ray.simulation.report import Recording
from kaiwo_sandbox.contracts import WORKLOADS, JsonObj, WatchEvent


@dataclass
class LiveRecorder(Recorder):
    """The simulator's Recorder on the wall clock: `now()` in simulated seconds since the trace's start."""

    time_factor: float = 1.0

    def now(self) -> float:
        return (time.monotonic() - self.origin) / self.time_factor


async def _watch_workloads(client: KubeClient, recorder: LiveRecorder) -> None:
    while True:
        listing = await client.list(R.WORKLOADS)
        for item in listing.get("items") or []:
            recorder.on_event(WatchEvent("ADDED", WORKLOADS, item))
        version = str((listing.get("metadata") or {}).get("resourceVersion") or "0")
        async for event in client.watch(R.WORKLOADS, resource_version=version, timeout_seconds=3600):
            kind = event.get("type")
            obj = event.get("object") or {}
            if kind == "ERROR":
                break  # relist
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                recorder.on_event(WatchEvent(kind, WORKLOADS, obj))


async def _create_or_replace(client: KubeClient, res: R.Resource, body: JsonObj) -> None:
    """A running operator made the default `kaiwo` KaiwoConfig and KaiwoQueueConfig at its start:
    the trace's replace their spec."""
    try:
        await client.create(res, body)
    except AlreadyExists:
        current = await client.get(res, str(body["metadata"]["name"]))
        await client.replace(res, {**current, "spec": body.get("spec") or {}})


async def replay_live(kubeconfig: str, inputs: SimulationInputs, time_factor: float,
                      timeout_seconds: float) -> Recording:
    """Submit the trace to the cluster behind `kubeconfig` in scaled real time; return the Recording
    (simulated seconds) once every workload finished, or, after `inputs.settle_seconds` simulated
    seconds without change with nothing running, with what never started; SimulationError after
    `timeout_seconds` of wall time."""
    loop = asyncio.get_running_loop()
    recorder = LiveRecorder(loop, time_factor=time_factor)
    client = await KubeClient.from_kubeconfig(kubeconfig)
    watcher: asyncio.Task[None] | None = None
    try:
        for res, body in ((R.KAIWOCONFIGS, inputs.kaiwo_config), (R.KAIWOQUEUECONFIGS, inputs.queue_config)):
            if body is not None:
                await _create_or_replace(client, res, body)
        queues = {str(q.get("name")) for q in (inputs.queue_config.get("spec") or {}).get("clusterQueues") or []}
        async with asyncio.timeout(60.0):
            while not queues <= {o["metadata"]["name"] for o in (await client.list(R.CLUSTERQUEUES))["items"]}:
                await asyncio.sleep(0.1)
        for namespace in sorted({e.workload.namespace for e in inputs.trace}):
            with contextlib.suppress(AlreadyExists):
                await client.create(R.NAMESPACES, {"metadata": {"name": namespace}})
        for entry in inputs.trace:
            recorder.expect(entry)
        recorder.origin = time.monotonic()
        watcher = asyncio.ensure_future(_watch_workloads(client, recorder))
        async with asyncio.timeout(timeout_seconds):
            for entry in sorted(inputs.trace, key=lambda e: (e.workload.submit, e.line)):
                due = recorder.origin + entry.workload.submit * time_factor
                if due > time.monotonic():
                    await asyncio.sleep(due - time.monotonic())
                recorder.submitted(entry)
                await client.create(R.KAIWOJOBS, kaiwojob(entry), entry.workload.namespace)
            total = len(inputs.trace)
            while recorder.finished < total:
                recorder.changed.clear()
                try:
                    async with asyncio.timeout(inputs.settle_seconds * time_factor):
                        await recorder.changed.wait()
                except TimeoutError:
                    if recorder.running == 0:
                        return recorder.recording(recorder.last_change)
        return recorder.recording(recorder.now())
    except TimeoutError:
        waiting = sorted(t.record.name for t in recorder.by_name.values() if t.record.finished is None)
        raise SimulationError(f"the live replay did not finish within {timeout_seconds:.0f}s: "
                              f"{recorder.finished} finished, {recorder.running} running, not finished: "
                              f"{', '.join(waiting)}") from None
    finally:
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(BaseException):
                await watcher
        await client.close()
