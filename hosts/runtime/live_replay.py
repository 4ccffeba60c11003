"""Replay a trace against a live cluster in real time (a sandbox with a time factor, e.g. `kaiwo-ray dev
--time-factor 0.1`), recording what `kaiwo-ray simulate` records, to measure how faithful the
simulation is (kaiwo_ray/simulation/faithful.py, benchmarks/simulate_faithful.py).

Each trace line becomes the KaiwoJob the simulator submits (`simulator.kaiwojob`), created at
`submit * time_factor` wall seconds after the first. The Kueue Workloads are watched, and the
simulator's own Recorder stamps their admissions, evictions and ends with this process's monotonic
clock divided by the time factor (the API's timestamps are whole seconds: too coarse at 0.1).

On a scaled clock (`kaiwo-ray dev --scaled-clock`, `clock` given) the sandbox and the operator both run
on the cluster's clock, 1/F times as fast as the wall clock: the trace's KaiwoJobs and KaiwoConfig go in
as they are, and the trace starts on a whole minute of that clock, as the simulation's does, so that
both round their whole-second timestamps the same way and the operator polls at the same moments.

Otherwise the sandbox scales what it simulates (run times, GPU utilization profiles) by its time factor
and the operator measures wall time, so what the operator times is scaled here (`scaled_kaiwojob`,
`scaled_kaiwo_config`): each KaiwoJob's `spec.duration`, and the KaiwoConfig's idle-GPU grace period and
pending threshold for duration preemption are `time_factor` times the trace's; timestamps stay whole
wall seconds (1/F simulated seconds each). The operator's GPU preemption polling interval is the live
cluster's setting (`kaiwo-ray dev --gpu-preemption-interval`). With idle-GPU preemption on, the trace's
namespaces are opted in, as the simulation does.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import dataclass
from datetime import timedelta

from hosts.runtime.simulator import (
    GPU_PREEMPTION_OPT_IN,
    TRACE_START,
    Features,
    Recorder,
    SimulationError,
    SimulationInputs,
    kaiwojob,
)
from kaiwo_ray.api.durations import parse_go_duration
from kaiwo_ray.clock import Scale
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import AlreadyExists
from kaiwo_ray.simulation.report import Recording
from kaiwo_ray.simulation.trace import TraceEntry
from kaiwo_sandbox.contracts import GVR, WORKLOADS, JsonObj, WatchEvent

# What the operator times, with the defaults it falls back on: (section, field, default).
TIMED_SETTINGS = (("scheduling", "pendingThresholdForPreemption", "5m"),
                  ("gpuPreemption", "defaultGracePeriod", "10m"))


@dataclass
class LiveRecorder(Recorder):
    """The simulator's Recorder on the wall clock: `now()` in simulated seconds since the trace's start."""

    time_factor: float = 1.0

    def now(self) -> float:
        return (time.monotonic() - self.origin) / self.time_factor


def _seconds(value: float) -> str:
    return f"{value:.3f}s"


def scaled_kaiwojob(entry: TraceEntry, time_factor: float) -> JsonObj:
    """The simulator's KaiwoJob, its declared duration in wall seconds."""
    body = kaiwojob(entry)
    declared = entry.workload.declared_duration
    if declared is not None:
        body["spec"]["duration"] = _seconds(declared * time_factor)
    return body


def scaled_kaiwo_config(body: JsonObj, time_factor: float) -> JsonObj:
    """The KaiwoConfig with what the operator times in wall seconds: the pending threshold for duration
    preemption, and with a `gpuPreemption` section its default grace period (defaults made explicit)."""
    spec = {key: dict(value) if isinstance(value, dict) else value for key, value in (body.get("spec") or {}).items()}
    for section, name, default in TIMED_SETTINGS:
        if section == "gpuPreemption" and not isinstance(spec.get(section), dict):
            continue
        part = spec.setdefault(section, {})
        simulated = parse_go_duration(str(part.get(name) or default)) / timedelta(seconds=1)
        part[name] = _seconds(simulated * time_factor)
    return {**body, "spec": spec}


async def _watch(client: KubeClient, res: R.Resource, recorder: LiveRecorder) -> None:
    """Feed the recorder one kind's changes (Kueue Workloads; the operator's KaiwoJobs and GpuWorkloads,
    whose conditions and phases tell why the operator ended a workload)."""
    gvr = WORKLOADS if res == R.WORKLOADS else GVR(res.group, res.version, res.plural)
    while True:
        listing = await client.list(res)
        for item in listing.get("items") or []:
            recorder.on_event(WatchEvent("ADDED", gvr, item))
        version = str((listing.get("metadata") or {}).get("resourceVersion") or "0")
        async for event in client.watch(res, resource_version=version, timeout_seconds=3600):
            kind = event.get("type")
            obj = event.get("object") or {}
            if kind == "ERROR":
                break  # relist
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                recorder.on_event(WatchEvent(kind, gvr, obj))


async def _create_or_replace(client: KubeClient, res: R.Resource, body: JsonObj) -> None:
    """A running operator made the default `kaiwo` KaiwoConfig and KaiwoQueueConfig at its start:
    the trace's replace their spec."""
    try:
        await client.create(res, body)
    except AlreadyExists:
        current = await client.get(res, str(body["metadata"]["name"]))
        await client.replace(res, {**current, "spec": body.get("spec") or {}})


async def _next_trace_start(clock: Scale) -> None:
    """Wait for the moment of the cluster's scaled clock a simulation's trace starts at: the next whole
    multiple of TRACE_START seconds."""
    cluster = clock.cluster(time.time())
    await asyncio.sleep(max(0.0, (math.ceil(cluster / TRACE_START) * TRACE_START - cluster) * clock.factor))


async def replay_live(kubeconfig: str, inputs: SimulationInputs, time_factor: float,
                      timeout_seconds: float, clock: Scale | None = None) -> Recording:
    """Submit the trace to the cluster behind `kubeconfig` in scaled real time; return the Recording
    (simulated seconds) once every workload finished, or, after `inputs.settle_seconds` simulated
    seconds without change with nothing running, with what never started; SimulationError after
    `timeout_seconds` of wall time. `clock`: the cluster's scaled clock, when it runs on one (its
    factor is `time_factor`)."""
    loop = asyncio.get_running_loop()
    recorder = LiveRecorder(loop, time_factor=time_factor)
    client = await KubeClient.from_kubeconfig(kubeconfig)
    watchers: list[asyncio.Task[None]] = []
    features = inputs.features if inputs.features is not None else Features.of(inputs.kaiwo_config)
    kaiwo_config = inputs.kaiwo_config
    if kaiwo_config is not None and clock is None:
        kaiwo_config = scaled_kaiwo_config(kaiwo_config, time_factor)
    try:
        for res, body in ((R.KAIWOCONFIGS, kaiwo_config), (R.KAIWOQUEUECONFIGS, inputs.queue_config)):
            if body is not None:
                await _create_or_replace(client, res, body)
        queues = {str(q.get("name")) for q in (inputs.queue_config.get("spec") or {}).get("clusterQueues") or []}
        async with asyncio.timeout(60.0):
            while not queues <= {o["metadata"]["name"] for o in (await client.list(R.CLUSTERQUEUES))["items"]}:
                await asyncio.sleep(0.1)
        opt_in = {GPU_PREEMPTION_OPT_IN: "true"} if features.gpu_preemption else {}
        for namespace in sorted({e.workload.namespace for e in inputs.trace}):
            with contextlib.suppress(AlreadyExists):
                await client.create(R.NAMESPACES, {"metadata": {"name": namespace, "annotations": opt_in}})
            if opt_in:  # the namespace may have been there already (default)
                await client.patch(R.NAMESPACES, namespace, {"metadata": {"annotations": opt_in}})
        for entry in inputs.trace:
            recorder.expect(entry)
        if clock is not None:
            await _next_trace_start(clock)
        recorder.origin = time.monotonic()
        watchers = [asyncio.ensure_future(_watch(client, res, recorder))
                    for res in (R.WORKLOADS, R.KAIWOJOBS, R.GPUWORKLOADS)]
        async with asyncio.timeout(timeout_seconds):
            for entry in sorted(inputs.trace, key=lambda e: (e.workload.submit, e.line)):
                due = recorder.origin + entry.workload.submit * time_factor
                if due > time.monotonic():
                    await asyncio.sleep(due - time.monotonic())
                recorder.submitted(entry)
                body = kaiwojob(entry) if clock is not None else scaled_kaiwojob(entry, time_factor)
                await client.create(R.KAIWOJOBS, body, entry.workload.namespace)
            total = len(inputs.trace)
            while recorder.finished + recorder.terminated < total:
                recorder.changed.clear()
                try:
                    async with asyncio.timeout(inputs.settle_seconds * time_factor):
                        await recorder.changed.wait()
                except TimeoutError:
                    if recorder.running == 0:
                        return recorder.recording(recorder.last_change)
        return recorder.recording(recorder.now())
    except TimeoutError:
        waiting = sorted(t.record.name for t in recorder.by_name.values()
                         if t.record.finished is None and t.record.terminated is None)
        raise SimulationError(f"the live replay did not finish within {timeout_seconds:.0f}s: "
                              f"{recorder.finished} finished, {recorder.running} running, not finished: "
                              f"{', '.join(waiting)}") from None
    finally:
        for watcher in watchers:
            watcher.cancel()
            with contextlib.suppress(BaseException):
                await watcher
        await client.close()
