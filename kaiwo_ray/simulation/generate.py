"""Synthetic traces for capacity planning (`kaiwo-ray trace generate`), pure and seeded: the same
`GeneratorSettings` give the same trace, line for line.

Arrivals are a Poisson process (`rate_per_hour`); each workload's GPU count is drawn from
`gpu_sizes` (weighted by `gpu_weights`), its duration from a log-normal distribution with median
`duration_median` seconds and shape `duration_sigma` (clipped to `duration_min`..`duration_max`),
and its queue and user uniformly from `queues` and `users` users. With probability
`idle_fraction` a workload idles its GPUs (0 % utilization) for its whole run; the others use
them at a steady level drawn from 50..100 %. A share `rayjob_share` of workloads are `rayjob`s; each
workload has `replicas` pods (workers of a `rayjob`) drawn from `replica_counts` (weighted by
`replica_weights`), each pod with the drawn GPUs. Kinds and replica counts come from a random stream
of their own, so a trace with rayjobs or several replicas has the same arrivals, sizes, durations
and utilizations as the one without (and the defaults give the traces they always gave). A share
`service_share` of workloads are `service`s (KaiwoServices, deleted after the drawn duration), drawn
from a third stream: with it, the other workloads keep their kinds and replicas too.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from kaiwo_ray.simulation.trace import GpuVendor, TraceWorkload, UtilizationSegment


@dataclass(frozen=True, slots=True)
class GeneratorSettings:
    workloads: int = 100
    rate_per_hour: float = 60.0
    queues: tuple[str, ...] = ("kaiwo",)
    users: int = 4
    namespace: str = "default"
    gpu_vendor: GpuVendor = "amd"
    gpu_sizes: tuple[int, ...] = (1, 2, 4, 8)
    gpu_weights: tuple[float, ...] = field(default=(4.0, 3.0, 2.0, 1.0))
    cpu_per_gpu: int = 4
    memory_gi_per_gpu: int = 16
    duration_median: float = 1800.0
    duration_sigma: float = 1.0
    duration_min: float = 60.0
    duration_max: float = 86400.0
    idle_fraction: float = 0.1
    rayjob_share: float = 0.0
    service_share: float = 0.0
    replica_counts: tuple[int, ...] = (1,)
    replica_weights: tuple[float, ...] = (1.0,)
    seed: int = 0

    def problems(self) -> list[str]:
        """What is wrong with the settings (empty: nothing), one short sentence each."""
        found = []
        if self.workloads < 0:
            found.append("--workloads must be 0 or more")
        if not self.rate_per_hour > 0:
            found.append("--rate must be greater than 0")
        if not self.queues or any(not q for q in self.queues):
            found.append("--queues needs at least one name")
        if self.users < 1:
            found.append("--users must be 1 or more")
        if not self.gpu_sizes or any(size < 0 for size in self.gpu_sizes):
            found.append("--gpus needs one or more GPU counts of 0 or more")
        if len(self.gpu_weights) != len(self.gpu_sizes) or any(w <= 0 for w in self.gpu_weights):
            found.append("--gpu-weights needs one positive weight per --gpus size")
        if not 0 < self.duration_min <= self.duration_median <= self.duration_max:
            found.append("durations must satisfy 0 < --duration-min <= --duration-median <= --duration-max")
        if self.duration_sigma < 0:
            found.append("--duration-sigma must be 0 or more")
        if not 0 <= self.idle_fraction <= 1:
            found.append("--idle-fraction must be between 0 and 1")
        if not 0 <= self.rayjob_share <= 1:
            found.append("--rayjob-share must be between 0 and 1")
        if not 0 <= self.service_share <= 1:
            found.append("--service-share must be between 0 and 1")
        if not self.replica_counts or any(count < 1 for count in self.replica_counts):
            found.append("--replicas needs one or more counts of 1 or more")
        if len(self.replica_weights) != len(self.replica_counts) or any(w <= 0 for w in self.replica_weights):
            found.append("--replica-weights needs one positive weight per --replicas count")
        return found


def generate(settings: GeneratorSettings) -> Iterator[TraceWorkload]:
    rng = random.Random(settings.seed)
    shapes = random.Random(f"{settings.seed}/kinds")  # kinds and replicas: a stream of their own
    services = random.Random(f"{settings.seed}/services")  # which are services: another
    clock = 0.0
    for index in range(settings.workloads):
        clock += rng.expovariate(settings.rate_per_hour / 3600.0)
        gpus = rng.choices(settings.gpu_sizes, weights=settings.gpu_weights)[0]
        duration = math.exp(math.log(settings.duration_median) + settings.duration_sigma * rng.gauss(0.0, 1.0))
        duration = min(max(duration, settings.duration_min), settings.duration_max)
        idle = rng.random() < settings.idle_fraction
        busy = rng.uniform(50.0, 100.0)
        ray = settings.rayjob_share > 0 and shapes.random() < settings.rayjob_share
        replicas = shapes.choices(settings.replica_counts, weights=settings.replica_weights)[0] \
            if len(settings.replica_counts) > 1 else settings.replica_counts[0]
        service = settings.service_share > 0 and services.random() < settings.service_share
        yield TraceWorkload(
            name=f"w-{index + 1:06d}",
            submit=round(clock, 1),
            namespace=settings.namespace,
            user=f"user-{rng.randrange(settings.users) + 1}",
            queue=settings.queues[rng.randrange(len(settings.queues))],
            kind="service" if service else "rayjob" if ray else "job",
            replicas=replicas,
            gpus=gpus,
            gpu_vendor=settings.gpu_vendor,
            cpu=str(max(1, gpus * settings.cpu_per_gpu)),
            memory=f"{max(1, gpus * settings.memory_gi_per_gpu)}Gi",
            duration=round(duration, 1),
            utilization=[UtilizationSegment(percent=0.0 if idle else round(busy, 1))] if gpus else [],
        )
