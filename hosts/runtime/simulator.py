"""The engine of `kaiwo-ray simulate`: a private sandbox (simulated scheduler, kubelets, Kueue) and the
operator's real controllers in one process, on one `VirtualTimeLoop`, replaying a trace.

The trace's workloads are created as KaiwoJobs (and KaiwoServices) over HTTP at their submit times, as a
user would; the operator renders them, Kueue admits, preempts and requeues them, the kubelets run their
pods for the trace's duration (a service's until the simulation, as its owner, deletes it). A recorder
reads what happened from the sandbox's store as it is committed, stamped with the loop's virtual time:
when each Kueue Workload was admitted, evicted (and why) and finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import math
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from hosts.runtime.controller_host import Operator
from hosts.runtime.virtual_loop import LoopClock, VirtualTimeLoop
from kaiwo_ray import clock as operator_clock
from kaiwo_ray.api.crd import all_crds
from kaiwo_ray.api.quantity import parse_quantity
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import AlreadyExists, KubeError
from kaiwo_ray.simulation.refusal import queue_config_refusal
from kaiwo_ray.simulation.report import IDLE_GPU_PREEMPTION, Interval, Recording, WorkloadRecord
from kaiwo_ray.simulation.trace import GPU_RESOURCE, NodeRoom, TraceEntry
from kaiwo_sandbox.cluster.base import ClusterSettings
from kaiwo_sandbox.contracts import CLUSTERQUEUES, EVENTS, GVR, PODS, WORKLOADS, JsonObj, WatchEvent
from kaiwo_sandbox.instance import Sandbox, SandboxConfig

log = logging.getLogger(__name__)

# Virtual time 0 is this instant: fixed, so that timestamps (and thus every output) repeat run to run.
EPOCH = datetime(2026, 1, 5, tzinfo=UTC)
# The operator's controllers a what-if needs: configuration, queues and KaiwoJobs (and, for a trace with
# services, KaiwoServices).
CONTROLLERS = ["kaiwoconfig", "kaiwoqueueconfig", "kaiwojob"]
SERVICE_CONTROLLER = "kaiwoservice"
# A service's pods, as the operator labels them: Kueue admits each as a Workload of its own (its pod
# integration; the Workload's pod set keeps the pod's labels), which these name back to the KaiwoService.
TYPE_LABEL = "kaiwo.silogen.ai/type"
NAME_LABEL = "kaiwo.silogen.ai/name"
# Watches that outlast the run: the operator's informers' default (a 55 s watch, reopened; a 60 s
# silence taken for a dead connection) guards against real networks, and would reopen every watch a
# thousand times a simulated day. The sandbox's bookmarks (one an hour) keep a quiet stream alive.
WATCH_SECONDS = 30 * 86400
BOOKMARK_SECONDS = 3600.0
RUN_SECONDS = "sandbox.kaiwo-ray.dev/run-seconds"
START_SECONDS = "sandbox.kaiwo-ray.dev/start-seconds"
READY_SECONDS = "sandbox.kaiwo-ray.dev/ready-seconds"
GPU_UTILIZATION = "sandbox.kaiwo-ray.dev/gpu-utilization"
# Pods start at once: those of the trace's KaiwoJobs (start-seconds 0) and those made for them that
# carry none of their annotations (KubeRay's submitter pod), so a workload runs its `duration` from
# its admission.
POD_START_SECONDS = 0.0
TRACE_START = 60.0  # the trace starts on a whole multiple of this many seconds of the cluster's clock
TRACE_LINE = "simulate.kaiwo-ray.dev/trace-line"
# GPU preemption is opt-in per namespace or workload (spec/cluster.md §8.2): with it on, the trace's
# namespaces carry this annotation, as an admin opting a team in would set it.
GPU_PREEMPTION_OPT_IN = "kaiwo.silogen.ai/gpu-preemption.enabled"
GPUWORKLOAD_PREEMPTING = frozenset({"Preempting", "Preempted"})
# The cyclic garbage collector's thresholds during a run (Python's default: 700, 10, 10). A simulation
# allocates millions of short-lived objects (decoded JSON, copies of stored objects) while it holds
# hundreds of thousands of long-lived ones (the store, the caches); at the defaults the collector's
# passes over them were about 15 % of the CPU of a 300-workload run, and more as the store grows.
GC_THRESHOLDS = (50_000, 50, 100)
KAIWOQUEUECONFIGS_GVR = GVR(R.KAIWOQUEUECONFIGS.group, R.KAIWOQUEUECONFIGS.version, R.KAIWOQUEUECONFIGS.plural)


@dataclass(frozen=True, slots=True)
class Features:
    """The opt-in controllers a KaiwoConfig switches on in a simulation: a `gpuPreemption` section in
    it turns on idle-GPU preemption, a `resourceMonitoring` section the resource monitor (in a
    deployment both are environment switches of the operator; a what-if states them in the file)."""

    gpu_preemption: bool = False
    resource_monitoring: bool = False
    # Simulated seconds between idle-GPU preemption polls (the operator's GPU_PREEMPTION_POLLING_INTERVAL).
    gpu_preemption_polling: float = 15.0
    # Simulated seconds between the telemetry actors' GPU samples (`--telemetry-interval`): the readings
    # the controllers get are those of the latest sample.
    telemetry_interval: float = 1.0

    @staticmethod
    def of(kaiwo_config: JsonObj | None) -> Features:
        spec = (kaiwo_config or {}).get("spec") or {}
        return Features(isinstance(spec.get("gpuPreemption"), dict), isinstance(spec.get("resourceMonitoring"), dict))


class SimulationError(Exception):
    """The simulation could not run: `bad_input` when an input was refused (the message says which)."""

    def __init__(self, message: str, bad_input: bool = False) -> None:
        super().__init__(message)
        self.bad_input = bad_input


@dataclass(slots=True)
class SimulationInputs:
    trace: list[TraceEntry]
    nodes: list[JsonObj]
    queue_config: JsonObj
    kaiwo_config: JsonObj | None = None
    # With every workload submitted and none running, how long nothing may change before the
    # still pending ones are declared never to start (simulated seconds).
    settle_seconds: float = 600.0
    horizon_seconds: float | None = None  # stop here even if workloads still run (None: no limit)
    # The opt-in controllers to run; None: as the KaiwoConfig's sections say (Features.of).
    features: Features | None = None

    @property
    def has_services(self) -> bool:
        return any(entry.workload.kind == "service" for entry in self.trace)


@dataclass(slots=True)
class _Tracked:
    record: WorkloadRecord
    admitted_at: float | None = None
    # A service's: its admitted pod Workloads (name -> admission time), its lifetime (None: to the run's
    # end), whether all its pods have been admitted at once yet, and whether the simulation deleted it.
    service: bool = False
    lifetime: float | None = None
    pods: dict[str, float] = field(default_factory=dict)
    started: bool = False
    deleted: bool = False


@dataclass
class Recorder:
    """Workload lifecycles from the store's committed changes, stamped with the loop's time."""

    loop: asyncio.AbstractEventLoop
    by_name: dict[tuple[str, str], _Tracked] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    running: int = 0  # admitted job Workloads, and services with all their pods admitted
    finished: int = 0  # jobs finished, and services deleted by the simulation after their duration
    terminated: int = 0  # ended for good without finishing (idle preemption, resource monitor, duration)
    serving: int = 0  # services without a duration that have started: they run until the run's end
    # What the run waits for while nothing else changes: admitted job Workloads, and started services
    # whose deletion is due.
    awaited: int = 0
    # Called with a service's (namespace, name) and duration when it has started (all pods admitted once).
    on_service_start: Callable[[tuple[str, str], float], None] | None = None
    # (namespace, KaiwoJob) -> why the operator is ending it: "IdleGpuPreemption" (its GpuWorkload
    # tracker went Preempting) or its WorkloadTerminatedEarly reason (GpuUtilizationLow, DurationExceeded...)
    ending: dict[tuple[str, str], str] = field(default_factory=dict)
    origin: float = 0.0  # the loop time the trace's time 0 stands for
    last_change: float = 0.0  # trace time of the last submission, admission or end

    def now(self) -> float:
        return self.loop.time() - self.origin

    @property
    def done(self) -> int:
        """Workloads the run no longer waits for: finished, terminated, or serving until the end."""
        return self.finished + self.terminated + self.serving

    def expect(self, entry: TraceEntry) -> None:
        workload = entry.workload
        service = workload.kind == "service"
        record = WorkloadRecord(entry.line, entry.name, replicas=workload.replicas if service else 0)
        self.by_name[(workload.namespace, entry.name)] = _Tracked(record, service=service, lifetime=workload.duration)

    def service_deleted(self, key: tuple[str, str]) -> None:
        """The simulation deletes the service now (its duration is over): that is its end."""
        tracked = self.by_name[key]
        if tracked.deleted or tracked.record.terminated is not None:
            return
        tracked.deleted = True
        tracked.record.finished = self.last_change = self.now()
        self.finished += 1
        self.awaited -= 1
        self.running -= 1
        self.changed.set()

    def submitted(self, entry: TraceEntry) -> None:
        self.by_name[(entry.workload.namespace, entry.name)].record.submitted = self.last_change = self.now()

    def on_event(self, event: WatchEvent) -> None:
        if event.gvr.group == "kaiwo.silogen.ai" and event.type != "DELETED":
            self._on_operator_object(event.gvr.resource, event.object)
            return
        if event.gvr.resource != WORKLOADS.resource or event.gvr.group != WORKLOADS.group:
            return
        obj = event.object
        meta = obj.get("metadata") or {}
        owner_ref: JsonObj = next(iter(meta.get("ownerReferences") or []), {})
        owner = owner_ref.get("name")
        if owner_ref.get("kind") == "Pod":  # Kueue's pod integration: one pod of a service (or another pod)
            labels = (((obj.get("spec") or {}).get("podSets") or [{}])[0].get("template") or {}).get(
                "metadata", {}).get("labels") or {}
            if labels.get(TYPE_LABEL) != "service":
                return
            owner = labels.get(NAME_LABEL)
        tracked = self.by_name.get((meta.get("namespace", ""), owner or ""))
        if tracked is None or tracked.service != (owner_ref.get("kind") == "Pod"):
            return
        now = self.now()
        conditions = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}
        admitted = (conditions.get("Admitted") or {}).get("status") == "True" and event.type != "DELETED"
        finished = (conditions.get("Finished") or {}).get("status") == "True"
        record = tracked.record
        if tracked.service:
            self._on_service_pod(tracked, (meta.get("namespace", ""), owner or ""), str(meta.get("name") or ""),
                                 admitted and not finished, conditions)
            return
        if admitted and not finished and tracked.admitted_at is None and record.finished is None:
            tracked.admitted_at = now
            self.running += 1
            self.awaited += 1
            self.last_change = now
            self.changed.set()
        elif tracked.admitted_at is not None and (finished or not admitted):
            cause = ""
            ending = self.ending.get((meta.get("namespace", ""), owner or ""))
            if not finished:
                preempted = conditions.get("Preempted") or {}
                evicted = conditions.get("Evicted") or {}
                cause = ending or str(preempted.get("reason") if preempted.get("status") == "True"
                                      else evicted.get("reason") or "Evicted")
            record.intervals.append(Interval(tracked.admitted_at, now, cause))
            tracked.admitted_at = None
            self.running -= 1
            self.awaited -= 1
            if finished:
                record.finished = now
                self.finished += 1
            elif ending is not None:  # its KaiwoJob is deleted or terminated: it never runs again
                record.terminated = now
                self.terminated += 1
            self.last_change = now
            self.changed.set()

    def _on_service_pod(self, tracked: _Tracked, key: tuple[str, str], workload: str, admitted: bool,
                        conditions: dict[Any, JsonObj]) -> None:
        """One pod Workload of a service admitted, or its admission ended (evicted, or the pod gone)."""
        now = self.now()
        record = tracked.record
        over = tracked.deleted or record.terminated is not None
        if admitted and workload not in tracked.pods and not over:
            tracked.pods[workload] = now
            if not tracked.started and len(tracked.pods) >= record.replicas:
                tracked.started = True
                self.running += 1
                if tracked.lifetime is None:
                    self.serving += 1
                else:
                    self.awaited += 1
                    if self.on_service_start is not None:
                        self.on_service_start(key, tracked.lifetime)
        elif not admitted and workload in tracked.pods:
            since = tracked.pods.pop(workload)
            ending = self.ending.get(key)
            cause = ""
            if not tracked.deleted:
                preempted = conditions.get("Preempted") or {}
                evicted = conditions.get("Evicted") or {}
                cause = ending or str(preempted.get("reason") if preempted.get("status") == "True"
                                      else evicted.get("reason") or "Evicted")
            record.intervals.append(Interval(since, now, cause, pods=1))
            if ending is not None and not over:  # the operator ended the service: it never runs again
                record.terminated = now
                self.terminated += 1
                if tracked.started:
                    self.running -= 1
                    if tracked.lifetime is None:
                        self.serving -= 1
                    else:
                        self.awaited -= 1
        else:
            return
        self.last_change = now
        self.changed.set()

    def _on_operator_object(self, resource: str, obj: JsonObj) -> None:
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace", "")
        status = obj.get("status") or {}
        if resource == R.GPUWORKLOADS.plural:
            ref = (obj.get("spec") or {}).get("workloadRef") or {}
            if ref.get("kind") in ("KaiwoJob", "KaiwoService") and status.get("phase") in GPUWORKLOAD_PREEMPTING:
                self.ending.setdefault((namespace, str(ref.get("name") or "")), IDLE_GPU_PREEMPTION)
        elif resource in (R.KAIWOJOBS.plural, R.KAIWOSERVICES.plural):
            early = next((c for c in status.get("conditions") or [] if c.get("type") == "WorkloadTerminatedEarly"),
                         None)
            if early is not None:
                self.ending.setdefault((namespace, str(meta.get("name") or "")),
                                       str(early.get("reason") or "EarlyTermination"))

    def recording(self, ended: float) -> Recording:
        records = []
        for tracked in self.by_name.values():
            record = tracked.record
            if tracked.admitted_at is not None:  # still running when the simulation stopped
                record.intervals.append(Interval(tracked.admitted_at, ended, ""))
            record.intervals.extend(Interval(since, ended, "", pods=1) for since in tracked.pods.values())
            tracked.pods.clear()
            records.append(record)
        return Recording(sorted(records, key=lambda r: r.line), ended)


def kaiwojob(entry: TraceEntry) -> JsonObj:
    """The KaiwoJob a trace line submits, running `duration` seconds with the trace's GPU profile.

    - `job`: a batch Job of `replicas` pods (`parallelism` = `completions` = `replicas`, through
      `spec.job` when there are several: Kaiwo's own Job is one pod), each with `gpus`; Kueue admits
      it as one pod set of `replicas` pods. Every pod runs `duration` (the `run-seconds` annotation,
      which the KaiwoJob's annotations carry to its pods).
    - `rayjob`: `ray: true`, `replicas` workers of `gpus` each (`gpusPerReplica`) and a head; Kueue
      admits the RayJob as one Workload (head, workers, and KubeRay's submitter pod sets). The Ray
      pods run until KubeRay deletes the cluster; the run is the entrypoint, `sleep <duration>`,
      which the simulated KubeRay's submitter pod runs for that long once the cluster is ready (at
      once: pods start and turn ready without delay in a simulation). No `run-seconds` here: on the
      KaiwoJob it would reach the head and workers too and end them.
    """
    workload = entry.workload
    spec: JsonObj = {
        "user": workload.user, "image": "simulated", "clusterQueue": workload.queue,
        "resources": {"requests": {"cpu": workload.cpu, "memory": workload.memory},
                      "limits": {"cpu": workload.cpu, "memory": workload.memory}},
        "entrypoint": "simulated",
    }
    if workload.gpus:
        spec["gpus"] = workload.gpus
        spec["gpuVendor"] = workload.gpu_vendor
    if workload.priority is not None:
        spec["priorityClass"] = workload.priority
    if workload.declared_duration is not None:
        spec["duration"] = f"{workload.declared_duration:g}s"
    annotations = {RUN_SECONDS: f"{workload.duration or 0:g}", START_SECONDS: "0",
                   GPU_UTILIZATION: workload.utilization_annotation(), TRACE_LINE: str(entry.line)}
    if workload.kind == "rayjob":
        del annotations[RUN_SECONDS]
        annotations[READY_SECONDS] = "0"  # Ray pods are ready at once (KubeRay's probes would wait 10 s)
        spec.update(ray=True, replicas=workload.replicas, entrypoint=f"sleep {_seconds_text(workload.duration or 0)}")
        if workload.gpus:
            spec.update(gpus=workload.total_gpus, gpusPerReplica=workload.gpus)
    elif workload.replicas > 1:
        pods = workload.replicas
        spec["job"] = {"spec": {"parallelism": pods, "completions": pods, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "workload", "image": "simulated"}]}}}}
    return {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob",
            "metadata": {"name": entry.name, "namespace": workload.namespace, "annotations": annotations},
            "spec": spec}


def kaiwoservice(entry: TraceEntry) -> JsonObj:
    """The KaiwoService a `service` line submits: a Deployment of `replicas` pods of `gpus` each
    (`replicas` x `gpusPerReplica`, which the operator keeps), with the trace's GPU profile. Its pods
    run until deleted (restartPolicy Always, no `run-seconds`): the simulation deletes the KaiwoService
    `duration` seconds after it started. Kueue's pod integration admits each pod as a Workload of its own."""
    workload = entry.workload
    spec: JsonObj = {
        "user": workload.user, "image": "simulated", "clusterQueue": workload.queue,
        "resources": {"requests": {"cpu": workload.cpu, "memory": workload.memory},
                      "limits": {"cpu": workload.cpu, "memory": workload.memory}},
        "entrypoint": "simulated", "replicas": workload.replicas,
    }
    if workload.gpus:
        spec.update(gpus=workload.total_gpus, gpusPerReplica=workload.gpus, gpuVendor=workload.gpu_vendor)
    if workload.priority is not None:
        spec["priorityClass"] = workload.priority
    if workload.declared_duration is not None:
        spec["duration"] = f"{workload.declared_duration:g}s"
    annotations = {START_SECONDS: "0", GPU_UTILIZATION: workload.utilization_annotation(), TRACE_LINE: str(entry.line)}
    return {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoService",
            "metadata": {"name": entry.name, "namespace": workload.namespace, "annotations": annotations},
            "spec": spec}


def _seconds_text(seconds: float) -> str:
    """`seconds` as `sleep` reads it: plain decimals, never an exponent."""
    return f"{seconds:.3f}".rstrip("0").rstrip(".")


def node_gpus(nodes: list[JsonObj]) -> dict[str, int]:
    """vendor -> the most GPUs one node has (allocatable, else capacity; 0 where no node has any)."""
    sizes = gpus_per_node(nodes)
    return {vendor: max(sizes.get(vendor, [0])) for vendor in GPU_RESOURCE} if nodes else {}


def node_rooms(nodes: list[JsonObj]) -> list[NodeRoom]:
    """What each node can give one pod (allocatable, else capacity); a node with an unreadable amount
    offers none of it."""
    rooms = []
    for node in nodes:
        status = node.get("status") or {}
        amounts = status.get("allocatable") or status.get("capacity") or {}
        gpus = {vendor: count for vendor, count in node_gpus([node]).items() if count}
        try:
            cpu, memory = parse_quantity(str(amounts.get("cpu", 0))), parse_quantity(str(amounts.get("memory", 0)))
        except ValueError:
            cpu = memory = Decimal(0)
        rooms.append(NodeRoom(gpus, cpu, memory))
    return rooms


def gpus_per_node(nodes: list[JsonObj]) -> dict[str, list[int]]:
    """vendor -> the GPUs of each node that has any of that vendor's (allocatable, else capacity)."""
    sizes: dict[str, list[int]] = {}
    for node in nodes:
        status = node.get("status") or {}
        amounts = status.get("allocatable") or status.get("capacity") or {}
        for vendor, resource in GPU_RESOURCE.items():
            try:
                count = int(str(amounts.get(resource, 0)))
            except ValueError:
                count = 0
            if count > 0:
                sizes.setdefault(vendor, []).append(count)
    return sizes


def total_gpus(nodes: list[JsonObj]) -> int:
    total = 0
    for node in nodes:
        status = node.get("status") or {}
        amounts = status.get("allocatable") or status.get("capacity") or {}
        for resource in GPU_RESOURCE.values():
            try:
                total += int(str(amounts.get(resource, 0)))
            except ValueError:
                continue
    return total


@dataclass(slots=True)
class PodStarts:
    """When each pod started running (pod uid -> seconds since the epoch, on the simulated clock), from the
    store's changes: what the telemetry actors' samples would have shown (`_telemetry`)."""

    clock: Callable[[], float]
    started: dict[str, float] = field(default_factory=dict)

    def on_event(self, event: WatchEvent) -> None:
        if event.gvr != PODS or event.type == "DELETED":
            return
        if (event.object.get("status") or {}).get("phase") == "Running":
            self.started.setdefault(str(event.object["metadata"].get("uid") or ""), self.clock())


def _telemetry(client: KubeClient, features: Features, pods: PodStarts) -> Any:
    """GPU readings as the telemetry actors give them live: the sandbox's simulated GPUs, sampled every
    `telemetry_interval` (kaiwo_ray.telemetry.sources.SamplingSource)."""
    from kaiwo_ray.telemetry.aggregator import Aggregator
    from kaiwo_ray.telemetry.sampler import SandboxSampler
    from kaiwo_ray.telemetry.sources import SamplingSource

    return SamplingSource(SandboxSampler(client), Aggregator(stale_after=60.0), interval=features.telemetry_interval,
                          started=pods.started)


def controller_options(features: Features, client: KubeClient, pods: PodStarts,
                       services: bool = False) -> dict[str, dict[str, Any]]:
    """The operator's controllers for a run and their options: the configuration, queue and KaiwoJob
    controllers always, the KaiwoService one for a trace with `services`; GPU preemption and the resource monitor as `features` say, each reading GPU
    utilization as `kaiwo-ray dev` does (the sandbox's simulated GPUs, through the sandbox telemetry
    backend and the aggregator's core), in this process and sampled when asked (no Ray, no timers)."""
    from kaiwo_ray.controllers.gpupreemption import GpuPreemptionSettings
    from kaiwo_ray.controllers.monitoring import MonitorSettings
    from kaiwo_ray.kube.informer import InformerSettings

    informers = {"informer_settings": InformerSettings(watch_timeout_seconds=WATCH_SECONDS,
                                                       watch_idle_seconds=WATCH_SECONDS + BOOKMARK_SECONDS)}
    options: dict[str, dict[str, Any]] = {name: dict(informers) for name in CONTROLLERS}
    if services:
        options[SERVICE_CONTROLLER] = dict(informers)
    if features.gpu_preemption:
        options["gpuworkload"] = {**informers, "settings": GpuPreemptionSettings(
            enabled=True, polling_interval=features.gpu_preemption_polling),
                                  "source": _telemetry(client, features, pods)}
    if features.resource_monitoring:
        options["resourcemonitor"] = {**informers, "settings": MonitorSettings(enabled=True),
                                      "source": _telemetry(client, features, pods)}
    return options


async def _create(client: KubeClient, res: R.Resource, body: JsonObj, namespace: str | None = None) -> None:
    with contextlib.suppress(AlreadyExists):
        await client.create(res, body, namespace)


async def _until(check: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll in virtual time (costs nothing while idle) until `check()`; RuntimeError after `seconds`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not check():
        if loop.time() >= deadline:
            raise SimulationError(f"the simulated cluster did not get ready within {seconds:.0f} simulated seconds: "
                                  f"{what} (is the configuration one the operator accepts?)")
        await asyncio.sleep(1.0)


async def _queues_ready(sandbox: Sandbox, queue_config: JsonObj) -> None:
    """Wait until the configuration's ClusterQueues exist and the operator has synced it (READY or
    FAILED); a refusal it reported (Kueue's webhook or CRD rules, an unusable KaiwoQueueConfig) stops
    the run at once with Kueue's reason (`kaiwo_ray.simulation.refusal`)."""
    queues = {q.get("name") for q in (queue_config.get("spec") or {}).get("clusterQueues") or []}
    name = str((queue_config.get("metadata") or {}).get("name") or "")

    def refusal() -> str | None:
        return queue_config_refusal(sandbox.store.refs(EVENTS), name)

    def synced() -> bool:
        stored = next((o for o in sandbox.store.refs(KAIWOQUEUECONFIGS_GVR) if o["metadata"]["name"] == name), None)
        status = ((stored or {}).get("status") or {}).get("status")
        return status in ("READY", "FAILED") and queues <= {o["metadata"]["name"] for o in sandbox.store.refs(CLUSTERQUEUES)}

    await _until(lambda: refusal() is not None or synced(), 600.0,
                 f"ClusterQueues {', '.join(sorted(str(q) for q in queues))}")
    reason = refusal()
    if reason is not None:
        raise SimulationError(f"--queue-config: {reason}", bad_input=True)


async def simulate(inputs: SimulationInputs, progress: Callable[[Recorder], None] | None = None,
                   recorder: Recorder | None = None) -> Recording:
    """Replay the trace; must run on a VirtualTimeLoop (`run_simulation`)."""
    loop = asyncio.get_running_loop()
    recorder = recorder or Recorder(loop)
    sim_clock = LoopClock(loop, EPOCH)
    with tempfile.TemporaryDirectory(prefix="kaiwo-simulate-") as scratch, operator_clock.use(sim_clock.now):
        kubeconfig = Path(scratch) / "kubeconfig"
        sandbox = Sandbox(SandboxConfig(
            nodes=inputs.nodes, cluster=True, clock=sim_clock, extra_crds=list(all_crds()), tls=False,
            kubeconfig_path=kubeconfig, event_ttl=3600.0, aggregator_interval=86400.0, bookmark_interval=BOOKMARK_SECONDS,
            cluster_settings=ClusterSettings(pod_start_seconds=POD_START_SECONDS)))
        await sandbox.start()
        unsubscribe = sandbox.store.subscribe(recorder.on_event)
        pods = PodStarts(lambda: sim_clock.now().timestamp())
        unsubscribe_pods = sandbox.store.subscribe(pods.on_event)
        operator: Operator | None = None
        client = await KubeClient.from_kubeconfig(str(kubeconfig))
        deletions: list[asyncio.Task[None]] = []  # services' owners, deleting them when their duration is over
        try:
            for res, body, what in ((R.KAIWOCONFIGS, inputs.kaiwo_config, "--kaiwoconfig"),
                                    (R.KAIWOQUEUECONFIGS, inputs.queue_config, "--queue-config")):
                if body is None:
                    continue
                try:
                    await _create(client, res, body)
                except KubeError as err:
                    raise SimulationError(f"{what}: the API server refused it: {err}", bad_input=True) from None
            from kaiwo_ray.controllers.manager import HostSettings

            features = inputs.features if inputs.features is not None else Features.of(inputs.kaiwo_config)
            options = controller_options(features, client, pods, inputs.has_services)
            # No leader election (one operator), and no coalescing window (requeues within it would only
            # add passes; the simulation reacts to every child event).
            operator = Operator(list(options), HostSettings(
                kubeconfig=str(kubeconfig), lease=False, coalesce_seconds=0.0, controller_options=options))
            await operator.start()
            await _queues_ready(sandbox, inputs.queue_config)
            opt_in = {GPU_PREEMPTION_OPT_IN: "true"} if features.gpu_preemption else {}
            for namespace in sorted({e.workload.namespace for e in inputs.trace}):
                await _create(client, R.NAMESPACES, {"metadata": {"name": namespace, "annotations": opt_in}})
                if opt_in:  # the namespace may have been there already (default)
                    await client.patch(R.NAMESPACES, namespace, {"metadata": {"annotations": opt_in}})
            for entry in inputs.trace:
                recorder.expect(entry)
            # The trace starts on a whole minute of the cluster's clock (EPOCH is one): a live replay on a
            # scaled clock starts on one too, so that both round their whole-second timestamps the same
            # way and the operator's polls (at multiples of their interval) fall at the same moments.
            await asyncio.sleep(math.ceil(loop.time() / TRACE_START) * TRACE_START - loop.time())
            start = recorder.origin = loop.time()
            recorder.on_service_start = lambda key, seconds: deletions.append(
                loop.create_task(_delete_service(client, recorder, key, seconds)))
            settled = await _replay(inputs, client, recorder, start, progress)
            # Settled: what was pending never started; the run ended with its last change, not after
            # the quiet time that showed it.
            return recorder.recording(recorder.last_change if settled else recorder.now())
        finally:
            recorder.on_service_start = None
            for task in deletions:
                task.cancel()
            await asyncio.gather(*deletions, return_exceptions=True)
            unsubscribe()
            unsubscribe_pods()
            if operator is not None:
                await operator.stop()
            await client.close()
            await sandbox.stop()


def _kind(entry: TraceEntry) -> str:
    return "KaiwoService" if entry.workload.kind == "service" else "KaiwoJob"


async def _delete_service(client: KubeClient, recorder: Recorder, key: tuple[str, str], seconds: float) -> None:
    """As the service's owner: delete the KaiwoService `seconds` after it started (its Deployment, and
    with it its pods and their Workloads, go by garbage collection, as `kubectl delete` leaves them)."""
    await asyncio.sleep(seconds)
    recorder.service_deleted(key)
    namespace, name = key
    try:
        await client.delete(R.KAIWOSERVICES, name, namespace)
    except KubeError as err:
        if err.code != 404:  # already gone (ended by the operator) is fine
            raise


async def _replay(inputs: SimulationInputs, client: KubeClient, recorder: Recorder, start: float,
                  progress: Callable[[Recorder], None] | None) -> bool:
    """Submit the trace and wait for it to finish; True when it stopped because nothing changed any more."""
    loop = asyncio.get_running_loop()
    horizon = None if inputs.horizon_seconds is None else start + inputs.horizon_seconds
    for entry in sorted(inputs.trace, key=lambda e: (e.workload.submit, e.line)):
        due = start + entry.workload.submit
        if horizon is not None and due > horizon:
            return False
        if due > loop.time():
            await asyncio.sleep(due - loop.time())
        recorder.submitted(entry)
        try:
            if entry.workload.kind == "service":
                await client.create(R.KAIWOSERVICES, kaiwoservice(entry), entry.workload.namespace)
            else:
                await client.create(R.KAIWOJOBS, kaiwojob(entry), entry.workload.namespace)
        except KubeError as err:
            raise SimulationError(f"trace line {entry.line}: the API server refused its {_kind(entry)}: {err}",
                                  bad_input=True) from None
        if progress is not None:
            progress(recorder)
    total = len(inputs.trace)
    while recorder.done < total:
        recorder.changed.clear()
        wait = inputs.settle_seconds
        if horizon is not None:
            wait = min(wait, horizon - loop.time())
            if wait <= 0:
                return False
        try:
            async with asyncio.timeout(wait):
                await recorder.changed.wait()
        except TimeoutError:
            if recorder.awaited == 0:
                # Nothing runs that will end (services without a duration hold their GPUs to the end)
                # and nothing changed: what is still pending never starts.
                return True
        if progress is not None:
            progress(recorder)
    return False


def run_simulation(inputs: SimulationInputs, progress: Callable[[Recorder], None] | None = None) -> Recording:
    """Run `simulate` on a fresh VirtualTimeLoop (in this thread) and close it. Interrupted (Ctrl-C),
    it returns what was recorded so far, marked `interrupted`, and leaves the sandbox and operator to
    the process's end (they live in this process only)."""
    loop = VirtualTimeLoop()
    recorder = Recorder(loop)
    with _fewer_collections():
        try:
            recording = loop.run_until_complete(simulate(inputs, progress, recorder))
        except KeyboardInterrupt:
            recording = recorder.recording(recorder.now())
            recording.interrupted = True
            _wind_down(loop)
            return recording
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    return recording


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """Collect garbage less often during a run (`GC_THRESHOLDS`), and never look again at what existed
    before it (modules, schemas: `gc.freeze`); the process's settings come back afterwards."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _wind_down(loop: asyncio.AbstractEventLoop) -> None:
    """After an interrupt: cancel what still runs on the loop (the simulation's own `finally` blocks
    then stop the operator and the sandbox, and give the operator its wall clock back) and close it."""
    loop.set_exception_handler(lambda _loop, _context: None)  # what the interrupt cut short is no error
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    with contextlib.suppress(BaseException):  # a second Ctrl-C leaves the rest to the process's end
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()

