"""The workload trace `kaiwo-ray simulate` replays (docs/simulate.md): JSON Lines, one workload per line.

Parsing is pure and strict: the first bad line stops it with a `TraceError` naming the line number
and the field, because a what-if answer computed from a silently skipped workload is wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kaiwo_ray.api.quantity import parse_quantity

GpuVendor = Literal["amd", "nvidia"]
Kind = Literal["job", "rayjob", "service"]
GPU_RESOURCE: dict[str, str] = {"amd": "amd.com/gpu", "nvidia": "nvidia.com/gpu"}
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class UtilizationSegment(BaseModel):
    """`percent` GPU utilization for `seconds` (None: until the workload ends)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    percent: float = Field(ge=0, le=100)
    seconds: float | None = Field(default=None, gt=0)


class TraceWorkload(BaseModel):
    """One workload of a trace. Times are seconds; `submit` counts from the trace's start."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    """The KaiwoJob's name (a DNS label); default `w-<line number>`."""
    submit: float = Field(ge=0)
    namespace: str = "default"
    user: str
    queue: str
    """The ClusterQueue (`spec.clusterQueue`)."""
    priority: str | None = None
    """A WorkloadPriorityClass name (`spec.priorityClass`)."""
    kind: Kind = "job"
    """`job`: a KaiwoJob's batch Job, `replicas` pods; `rayjob`: a KaiwoJob with `ray: true` (a RayJob), a
    head pod without GPUs and `replicas` workers; `service`: a KaiwoService (a Deployment of `replicas`
    pods, each its own Kueue Workload), deleted by its owner `duration` seconds after it started."""
    replicas: int = Field(default=1, ge=1, le=1000)
    """Pods of a `job` or `service`, workers of a `rayjob`; each has `gpus`, `cpu` and `memory`."""
    gpus: int = Field(default=0, ge=0)
    """GPUs of each pod (each worker of a `rayjob`)."""
    gpu_vendor: GpuVendor = "amd"
    cpu: str = "1"
    memory: str = "1Gi"
    duration: float | None = Field(default=None, gt=0)
    """How long the workload runs once started, in seconds; required but for a `service`, which without
    it runs until the simulation ends (a service never finishes by itself: its owner deletes it)."""
    declared_duration: float | None = Field(default=None, gt=0)
    """The KaiwoJob's `spec.duration` (seconds): after it, the workload may be preempted."""
    utilization: list[UtilizationSegment] = Field(default_factory=list)
    """GPU utilization over the run, in order; after the last timed segment 0 %. Empty: 0 % throughout."""

    @field_validator("name", "namespace")
    @classmethod
    def _dns_label(cls, value: str | None) -> str | None:
        if value is not None and not _DNS_LABEL.match(value):
            raise ValueError("must be a DNS label (lower-case letters, digits and '-', at most 63)")
        return value

    @field_validator("cpu", "memory", mode="before")
    @classmethod
    def _quantity(cls, value: object) -> str:
        text = str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
        if not isinstance(text, str):
            raise ValueError("must be a quantity such as 4, 500m or 16Gi")
        try:
            if parse_quantity(text) <= 0:
                raise ValueError("must be greater than 0")
        except (ValueError, ArithmeticError) as err:
            raise ValueError(f"{text!r} is not a quantity ({err})") from None
        return text

    @property
    def total_gpus(self) -> int:
        """GPUs of the whole workload: every pod's (a `rayjob`'s head has none)."""
        return self.gpus * self.replicas

    def utilization_annotation(self) -> str:
        """The sandbox's `sandbox.kaiwo-ray.dev/gpu-utilization` text for this profile."""
        parts = [f"{_number(s.percent)} for {_number(s.seconds)}s" if s.seconds is not None else _number(s.percent)
                 for s in self.utilization]
        return ", then ".join(parts) if parts else "0"

    def utilization_at(self, seconds: float) -> float:
        """Percent utilization `seconds` after the start (0 after the last timed segment)."""
        elapsed = 0.0
        for segment in self.utilization:
            if segment.seconds is None or seconds < elapsed + segment.seconds:
                return segment.percent
            elapsed += segment.seconds
        return 0.0

    def used_gpu_seconds(self, ran: float, pods: int = 0) -> float:
        """GPU-seconds of work done in its first `ran` seconds (utilization-weighted) by all the workload's
        GPUs, or by those of `pods` of its pods (a service's pods are admitted one by one)."""
        total, elapsed = 0.0, 0.0
        for segment in self.utilization:
            span = ran - elapsed if segment.seconds is None else min(segment.seconds, ran - elapsed)
            if span <= 0:
                break
            total += span * segment.percent / 100
            elapsed += span
        return total * (self.gpus * pods if pods else self.total_gpus)


def _number(value: float | None) -> str:
    return "" if value is None else (str(int(value)) if float(value).is_integer() else repr(value))


@dataclass(frozen=True, slots=True)
class TraceEntry:
    line: int
    workload: TraceWorkload

    @property
    def name(self) -> str:
        return self.workload.name or f"w-{self.line:05d}"


class TraceError(ValueError):
    """One bad line: `str()` is the line a CLI prints."""

    def __init__(self, line: int, field: str, message: str) -> None:
        super().__init__(f"line {line}: {field}: {message}" if field else f"line {line}: {message}")
        self.line = line
        self.field = field


def parse_trace(lines: Iterable[str]) -> list[TraceEntry]:
    """The trace's workloads in file order; blank lines and lines starting with `#` are skipped."""
    entries: list[TraceEntry] = []
    names: dict[tuple[str, str], int] = {}
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise TraceError(number, "", f"not JSON: {err.msg} (column {err.colno})") from None
        if not isinstance(data, dict):
            raise TraceError(number, "", "expected a JSON object")
        try:
            workload = TraceWorkload.model_validate(data)
        except ValidationError as err:
            first = err.errors()[0]
            field = ".".join(str(part) for part in first["loc"])
            raise TraceError(number, field, first["msg"]) from None
        if workload.duration is None and workload.kind != "service":
            raise TraceError(number, "duration", "Field required (only a service may run without one)")
        entry = TraceEntry(number, workload)
        key = (workload.namespace, entry.name)
        if key in names:
            raise TraceError(number, "name", f"{entry.name!r} in namespace {workload.namespace!r} "
                                             f"is already line {names[key]}")
        names[key] = number
        entries.append(entry)
    return entries


@dataclass(frozen=True, slots=True)
class NodeRoom:
    """What one empty node can give a pod: its allocatable GPUs per vendor, CPU and memory."""

    gpus: Mapping[str, int]
    cpu: Decimal
    memory: Decimal


def check_feasible(entries: Iterable[TraceEntry], queues: Iterable[str],
                   node_gpus: Mapping[str, int], priorities: Iterable[str] = (),
                   gpus_per_node: Mapping[str, Sequence[int]] | None = None,
                   rooms: Sequence[NodeRoom] | None = None) -> None:
    """TraceError for the first workload naming a queue or priority class the configuration lacks,
    or with a pod asking for more GPUs of its vendor than any node has (`node_gpus`: vendor -> the
    most GPUs on one node); with `gpus_per_node` (vendor -> each node's GPUs), also a `rayjob` whose
    GPU workers cannot all be placed at once even on empty nodes (its Ray cluster would never be
    ready: admitted, it would hold its quota for ever). A workload whose pods fit the nodes but whose
    total exceeds its queue's quota is not refused: the simulation reports it as never started. With
    `rooms` (each node's), also a pod whose CPU or memory no node has beside its GPUs: Kueue would
    admit it on quota and its pod would wait for a node for ever."""
    known = set(queues)
    classes = set(priorities)
    for entry in entries:
        workload = entry.workload
        if workload.queue not in known:
            raise TraceError(entry.line, "queue", f"unknown queue {workload.queue!r} "
                                                  f"(the configuration has: {', '.join(sorted(known)) or 'none'})")
        if workload.priority is not None and workload.priority not in classes:
            raise TraceError(entry.line, "priority", f"unknown WorkloadPriorityClass {workload.priority!r} "
                                                     f"(the configuration has: {', '.join(sorted(classes)) or 'none'})")
        most = node_gpus.get(workload.gpu_vendor, 0)
        if workload.gpus > most:
            raise TraceError(entry.line, "gpus", f"{workload.gpus} {workload.gpu_vendor} GPUs in one pod, but no node "
                                                 f"has more than {most}")
        if rooms is not None:
            _check_room(entry, rooms)
        if workload.kind == "rayjob" and workload.gpus and gpus_per_node is not None:
            room = sum(size // workload.gpus for size in gpus_per_node.get(workload.gpu_vendor, ()))
            if workload.replicas > room:
                raise TraceError(entry.line, "replicas", f"{workload.replicas} Ray workers of {workload.gpus} "
                                                         f"{workload.gpu_vendor} GPUs must run together, but the nodes "
                                                         f"hold at most {room} such pods")


def _check_room(entry: TraceEntry, rooms: Sequence[NodeRoom]) -> None:
    """TraceError unless some node has room for one of the workload's pods (a Ray head asks for the
    same CPU and memory, without GPUs, so it fits wherever a worker does)."""
    workload = entry.workload
    cpu, memory, gpus = parse_quantity(workload.cpu), parse_quantity(workload.memory), workload.gpus
    if any(room.gpus.get(workload.gpu_vendor, 0) >= gpus and room.cpu >= cpu and room.memory >= memory
           for room in rooms):
        return
    most_cpu = max((room.cpu for room in rooms), default=Decimal(0))
    most_memory = max((room.memory for room in rooms), default=Decimal(0))
    if cpu > most_cpu:
        raise TraceError(entry.line, "cpu", f"{workload.cpu} CPU in one pod, but no node has more than {most_cpu:f}")
    if memory > most_memory:
        raise TraceError(entry.line, "memory", f"{workload.memory} of memory in one pod, but no node has more than "
                                               f"{_bytes(most_memory)}")
    raise TraceError(entry.line, "cpu", f"no node has {workload.cpu} CPU and {workload.memory} of memory "
                                        f"beside {gpus} {workload.gpu_vendor} GPUs")


def _bytes(amount: Decimal) -> str:
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if amount >= size:
            return f"{amount / size:.4g}{unit}"
    return f"{amount:f}"


def dump_line(workload: TraceWorkload) -> str:
    """One trace line (canonical: sorted keys, defaults left out)."""
    return json.dumps(workload.model_dump(mode="json", exclude_defaults=True), sort_keys=True,
                      separators=(",", ":"))
