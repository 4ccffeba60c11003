"""The trace shape of a KaiwoJob (pure): its kind, how many pods (a Ray job's GPU workers) and the GPUs
of each, read from its spec as the operator renders it. The forecast and `trace export` both use it,
and `hosts/runtime/simulator.kaiwojob` writes the inverse.

- A batch KaiwoJob runs Kaiwo's one-pod Job, or `spec.job` (its `parallelism`, at most `completions`,
  pods), each with `gpus`.
- A Ray KaiwoJob (`ray: true` or `spec.rayJob`) runs a head without GPUs and `replicas` workers of
  `gpusPerReplica` GPUs when those cover `gpus` (the operator keeps them); otherwise the operator splits
  `gpus` over the cluster's smallest GPU node, which a spec does not say: `ASSUMED_NODE_GPUS` stands in.
- A KaiwoService (not Ray) runs a Deployment of pods with the same arithmetic as a Ray KaiwoJob's
  workers (`replicas` x `gpusPerReplica`, else `gpus` split over `ASSUMED_NODE_GPUS`-GPU nodes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

ASSUMED_NODE_GPUS = 8
"""GPUs of the smallest node, assumed where a Ray KaiwoJob's split depends on it (the usual GPU node)."""


@dataclass(frozen=True, slots=True)
class Shape:
    kind: Literal["job", "rayjob", "service"]
    replicas: int  # pods of a job or service, GPU workers of a rayjob
    gpus: int  # of each of those pods


def uses_ray(spec: Mapping[str, Any]) -> bool:
    return bool(spec.get("ray")) or isinstance(spec.get("rayJob"), dict)


def kaiwojob_shape(spec: Mapping[str, Any]) -> Shape:
    gpus = _count(spec.get("gpus"), 0)
    if not uses_ray(spec):
        return Shape("job", _job_pods(spec), gpus)
    return _split("rayjob", spec, gpus)


def kaiwoservice_shape(spec: Mapping[str, Any]) -> Shape:
    """A (non-Ray) KaiwoService's Deployment: its pods and the GPUs of each."""
    return _split("service", spec, _count(spec.get("gpus"), 0))


def _split(kind: Literal["rayjob", "service"], spec: Mapping[str, Any], gpus: int) -> Shape:
    """The operator's replica arithmetic (workloads.md §3): `replicas` x `gpusPerReplica` when they
    cover `gpus`, else `gpus` split over nodes of `ASSUMED_NODE_GPUS`."""
    replicas = _count(spec.get("replicas"), 1)
    per_replica = _count(spec.get("gpusPerReplica"), 0)
    if per_replica and replicas * per_replica >= gpus:
        return Shape(kind, replicas, per_replica)
    if gpus == 0:
        return Shape(kind, replicas, 0)
    workers = -(-gpus // ASSUMED_NODE_GPUS)
    return Shape(kind, workers, -(-gpus // workers))


def _count(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def _job_pods(spec: Mapping[str, Any]) -> int:
    job = spec.get("job")
    job_spec = job.get("spec") if isinstance(job, dict) else None
    if not isinstance(job_spec, dict):
        return 1
    parallelism = _count(job_spec.get("parallelism"), 1)
    completions = job_spec.get("completions")
    return min(parallelism, completions) if isinstance(completions, int) and completions > 0 else parallelism
