"""The duration sweep reads an index of PENDING workloads (issue 14, item 7): RUNNING workloads with a
duration are woken only by events that change that set (or by a pending GPU workload's age crossing
the preemption threshold), and their rules read the caches' phase index instead of scanning every CR."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.controllers.workloads import WorkloadController
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.cache import ObjectCache

TIMED = ("ns", "long")


def controller(threshold: str = "5m") -> WorkloadController:
    """A KaiwoJob controller with empty caches (no client: only the event mapping is exercised)."""
    ctl = WorkloadController(None, "KaiwoJob")
    for watch in ctl.watches():
        ctl.caches[watch.resource] = ObjectCache(label_keys=watch.index_labels)
    # (parsed configs are memoized by uid and resourceVersion: one per threshold)
    ctl.caches[R.KAIWOCONFIGS].upsert({"metadata": {"name": "kaiwo", "uid": f"c-{threshold}", "resourceVersion": "1"},
                                      "spec": {"scheduling": {"pendingThresholdForPreemption": threshold}}})
    ctl._timed_running.add(TIMED)
    return ctl


def service(name: str, phase: str, *, gpus: int = 0, age: timedelta = timedelta(0), rv: str = "1") -> dict[str, Any]:
    created = (datetime.now(UTC) - age).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"kind": "KaiwoService", "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv,
                                                  "creationTimestamp": created},
            "spec": {"gpus": gpus, "gpuVendor": "amd"}, "status": {"status": phase}}


def test_only_changes_to_the_pending_set_wake_running_workloads() -> None:
    ctl = controller()
    # a RUNNING service's routine update (its Deployment's status, say) says nothing new
    assert ctl._other_keys("MODIFIED", service("web", "RUNNING", rv="2"), service("web", "RUNNING")) == []
    assert ctl._other_keys("ADDED", service("done", "COMPLETE"), None) == []
    # one turning PENDING, and one leaving PENDING, do
    assert ctl._other_keys("MODIFIED", service("web", "PENDING", rv="3"), service("web", "RUNNING", rv="2")) == [TIMED]
    assert ctl._other_keys("MODIFIED", service("web", "STARTING", rv="4"), service("web", "PENDING", rv="3")) == [TIMED]


def test_demand_is_read_from_the_caches_phase_index() -> None:
    ctl = controller()
    services = ctl.caches[R.KAIWOSERVICES]
    for n in range(200):  # RUNNING ones are not even looked at: the cache hands out PENDING ones only
        services.upsert(service(f"busy-{n}", "RUNNING", gpus=1, age=timedelta(hours=1)))
    now = datetime.now(UTC)
    running = {"kind": "KaiwoJob", "metadata": {"name": "long", "namespace": "ns"},
               "spec": {"duration": "1m", "gpuVendor": "amd"}, "status": {"status": "RUNNING"}}
    assert ctl._demand(running, KaiwoConfigSpec(), "kaiwo", now) == (False, False)
    services.upsert(service("young", "PENDING", gpus=1, age=timedelta(minutes=1)))
    assert ctl._demand(running, KaiwoConfigSpec(), "kaiwo", now) == (False, True)  # pending, not old enough
    old = service("old", "PENDING", gpus=2, age=timedelta(minutes=10))
    services.upsert(old)
    assert ctl._demand(running, KaiwoConfigSpec(), "kaiwo", now) == (True, True)
    assert ctl._demand(running, KaiwoConfigSpec(), "other-queue", now) == (False, True)
    services.remove(old)
    services.upsert(service("young", "RUNNING", rv="2"))
    assert ctl._demand(running, KaiwoConfigSpec(), "kaiwo", now) == (False, False)
    assert services.in_phase("PENDING") == []


def test_a_pending_gpu_workload_crossing_the_threshold_wakes_running_ones() -> None:
    async def body() -> None:
        ctl = controller(threshold="3s")  # creationTimestamp has whole seconds: crossing in 2-3 s
        assert ctl._other_keys("ADDED", service("waiting", "PENDING", gpus=1), None) == [TIMED]
        assert ctl.queue.pending_keys() == []  # the mapper returns keys; the timer is what adds them
        began = time.monotonic()
        while TIMED not in ctl.queue.pending_keys():
            assert time.monotonic() - began < 8, "no wake-up when the pending workload crossed the threshold"
            await asyncio.sleep(0.02)
        assert time.monotonic() - began >= 1.5

    asyncio.run(body())
