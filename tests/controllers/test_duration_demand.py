"""Duration preemption's active-GPU-demand filter (spec/cluster.md §7.2): a RUNNING workload past
its duration is terminated for demand only by a PENDING GPU workload of the same ClusterQueue, the
same `gpuVendor`, created longer ago than `pendingThresholdForPreemption`. The controller's caches
are filled with real objects; the filter reads nothing else."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.controllers.workloads import WorkloadController
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.cache import ObjectCache

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
CONFIG = KaiwoConfigSpec.model_validate({"scheduling": {"pendingThresholdForPreemption": "5m"}})


def _cr(kind: str, name: str, phase: str, *, age: timedelta = timedelta(minutes=10), **spec: Any) -> dict[str, Any]:
    created = (NOW - age).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": kind,
            "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", "resourceVersion": "1",
                         "creationTimestamp": created},
            "spec": {"user": "u@example.com", **spec}, "status": {"status": phase}}


RUNNING = _cr("KaiwoJob", "old", "RUNNING", duration="1h", gpus=1, gpuVendor="nvidia")


def _controller(*others: dict[str, Any]) -> WorkloadController:
    controller = WorkloadController(None, "KaiwoJob")
    for res in (R.KAIWOJOBS, R.KAIWOSERVICES):
        controller.caches[res] = ObjectCache()
    controller.caches[R.KAIWOJOBS].upsert(RUNNING)
    for obj in others:
        controller.caches[R.KAIWOJOBS if obj["kind"] == "KaiwoJob" else R.KAIWOSERVICES].upsert(obj)
    return controller


def _demand(*others: dict[str, Any], running: dict[str, Any] = RUNNING) -> tuple[bool, bool]:
    return _controller(*others)._demand(running, CONFIG, "kaiwo", NOW)


def test_same_queue_vendor_and_old_enough_is_demand() -> None:
    assert _demand(_cr("KaiwoJob", "waiting", "PENDING", gpus=8, gpuVendor="nvidia")) == (True, True)
    # a pending KaiwoService counts as much as a KaiwoJob
    assert _demand(_cr("KaiwoService", "svc", "PENDING", gpus=2, gpuVendor="nvidia")) == (True, True)


@pytest.mark.parametrize("other, why", [
    (_cr("KaiwoJob", "amd", "PENDING", gpus=8, gpuVendor="amd"), "another vendor"),
    (_cr("KaiwoJob", "q", "PENDING", gpus=8, gpuVendor="nvidia", clusterQueue="other"), "another queue"),
    (_cr("KaiwoJob", "young", "PENDING", gpus=8, gpuVendor="nvidia", age=timedelta(minutes=4)), "too young"),
    (_cr("KaiwoJob", "cpu", "PENDING", gpus=0, gpuVendor="nvidia"), "no GPUs"),
])
def test_pending_workloads_that_do_not_qualify_are_only_pending(other: dict[str, Any], why: str) -> None:
    assert _demand(other) == (False, True), why


def test_vendor_defaults_to_amd_on_both_sides() -> None:
    running = _cr("KaiwoJob", "old", "RUNNING", duration="1h", gpus=1)
    assert _demand(_cr("KaiwoJob", "w", "PENDING", gpus=1), running=running) == (True, True)
    assert _demand(_cr("KaiwoJob", "w", "PENDING", gpus=1, gpuVendor="nvidia"), running=running) == (False, True)


def test_nothing_pending_or_not_a_timed_running_workload() -> None:
    assert _demand(_cr("KaiwoJob", "done", "COMPLETE", gpus=8, gpuVendor="nvidia")) == (False, False)
    untimed = _cr("KaiwoJob", "old", "RUNNING", gpus=1, gpuVendor="nvidia")
    assert _demand(_cr("KaiwoJob", "w", "PENDING", gpus=8, gpuVendor="nvidia"), running=untimed) == (False, False)
