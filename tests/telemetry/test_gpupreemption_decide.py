"""GPU preemption's pure parts (spec §8): opt-in, settings resolution, GPU counting, one tracker's
phase, and the cluster-wide matching (Example F), with unknown never read as idle."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kaiwo_ray.api.config import GpuPreemptionConfig
from kaiwo_ray.reconcile.gpupreemption import (
    PREFIX,
    Resolved,
    TrackerWorld,
    decide_tracker,
    evaluate,
    opted_in,
    pod_spec_gpus,
    preemption_annotations,
    resolve,
    spec_overrides,
    tracker_name,
)

NOW = datetime(2026, 6, 1, 10, 16, 0, tzinfo=UTC)


def _at(minute: int) -> str:
    return (NOW.replace(minute=0) + timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_opt_in_by_any_key_namespace_overlaid_by_root_and_false_opts_out() -> None:
    merged = preemption_annotations({PREFIX + "enabled": "true", PREFIX + "threshold": "20", "other": "x"},
                                    {PREFIX + "threshold": "7"})
    assert merged == {PREFIX + "enabled": "true", PREFIX + "threshold": "7"} and opted_in(merged)
    assert opted_in({PREFIX + "grace-period": "1m"})
    assert not opted_in({PREFIX + "enabled": "False"})  # upstream would opt in here
    assert not opted_in({})


def test_overrides_ignore_invalid_values() -> None:
    annotations = {PREFIX + "threshold": "250", PREFIX + "grace-period": "15s", PREFIX + "policy": "Never",
                   PREFIX + "aggregation": "Avg", PREFIX + "ttl": "soon"}
    assert spec_overrides(annotations) == {"gracePeriod": "15s", "aggregationPolicy": "Avg"}
    assert spec_overrides({PREFIX + "threshold": "nan"}) == {}


def test_fractional_thresholds_are_kept_and_whole_ones_stay_integers() -> None:
    assert spec_overrides({PREFIX + "threshold": "2.5"}) == {"utilizationThreshold": 2.5}
    assert spec_overrides({PREFIX + "threshold": "0"}) == {"utilizationThreshold": 0}


def test_resolution_order_spec_config_env_builtin() -> None:
    config = GpuPreemptionConfig(default_threshold=20, default_policy="Always")
    env = {"GPU_PREEMPTION_DEFAULT_GRACE_PERIOD": "2m", "GPU_PREEMPTION_DEFAULT_THRESHOLD": "30"}
    resolved = resolve({"aggregationPolicy": "Min"}, config, env)
    assert resolved == Resolved(threshold=20, grace=timedelta(minutes=2), policy="Always", aggregation="Min",
                                ttl=timedelta(hours=24))
    assert resolve({}, GpuPreemptionConfig(), {}) == Resolved()


def test_gpu_count_raises_sum_to_larger_limit_or_init_request() -> None:
    spec = {"containers": [{"resources": {"requests": {"amd.com/gpu": "2"}, "limits": {"amd.com/gpu": "2"}}},
                           {"resources": {"requests": {"amd.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "4"}}}],
            "initContainers": [{"resources": {"requests": {"amd.com/gpu": "5"}}}]}
    assert pod_spec_gpus(spec) == {"amd.com/gpu": 5, "nvidia.com/gpu": 4}
    assert tracker_name("Job", "train", "0123456789abcdef") == "job-train-01234567"


def _tracker(name: str, phase: str, gpus: int, *, idle_since: str | None = None, created: str = "",
             res: str = "amd.com/gpu", preempted_for: str | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ml", "creationTimestamp": created or _at(0)},
            "spec": {"workloadRef": {"kind": "Job", "name": name, "uid": "u"}, "gpuResources": {res: gpus}},
            "status": {"phase": phase, "idleSince": idle_since, "preemptedFor": preempted_for}}


GRACE = Resolved(grace=timedelta(minutes=10))


def test_example_f_two_idle_workloads_make_room_for_one_pending() -> None:
    trackers = [(_tracker("job-train", "Idle", 4, idle_since=_at(0)), GRACE),
                (_tracker("deployment-nb", "Idle", 4, idle_since=_at(5)), GRACE),
                (_tracker("job-infer", "PendingGpu", 8, created=_at(15)), GRACE)]
    decisions = evaluate(trackers, NOW)
    assert [(d.name, d.preempted_for) for d in decisions] == [("job-train", "job-infer"), ("deployment-nb", "job-infer")]
    assert decisions[0].reason == "GPU pressure: pending workload job-infer needs 8 amd.com/gpu GPUs"
    # no-fit: 12 needed, 8 idle -> nothing at all
    trackers[2] = (_tracker("job-infer", "PendingGpu", 12), GRACE)
    assert evaluate(trackers, NOW) == []
    # within grace (nb idle for 11 min, train for 16; grace 15m): only one idle, not enough
    strict = Resolved(grace=timedelta(minutes=15))
    assert evaluate([(c, strict) for c, _ in trackers[:2]] + [(_tracker("i", "PendingGpu", 8), strict)], NOW) == []


def test_in_flight_preemptions_count_and_vendors_do_not_mix() -> None:
    trackers = [(_tracker("a", "Preempting", 4, preempted_for="p"), GRACE),
                (_tracker("b", "Idle", 4, idle_since=_at(0)), GRACE),
                (_tracker("c", "Idle", 8, idle_since=_at(0), res="nvidia.com/gpu"), GRACE),
                (_tracker("p", "PendingGpu", 4), GRACE)]
    assert evaluate(trackers, NOW) == []  # a's 4 GPUs are already on their way to p
    trackers[3] = (_tracker("p", "PendingGpu", 8), GRACE)
    assert [d.name for d in evaluate(trackers, NOW)] == ["b"]  # never c: another vendor


def test_always_policy_needs_no_pressure() -> None:
    always = Resolved(grace=timedelta(seconds=15), policy="Always")
    (decision,) = evaluate([(_tracker("a", "Idle", 1, idle_since=_at(15)), always)], NOW)
    assert decision.preempted_for == "" and decision.reason.startswith("Policy is Always")


def _pod(name: str, phase: str = "Running", conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"phase": phase, "conditions": conditions or []},
            "spec": {"containers": [{"resources": {"limits": {"amd.com/gpu": "2"}}}]}}


ROOT = {"metadata": {"uid": "u"}}


def _world(phase: str, readings: dict[str, list[float | None]], pods: list[dict[str, Any]] | None = None,
           root: dict[str, Any] | None = ROOT) -> TrackerWorld:
    cr = _tracker("job-x", phase, 2)
    return TrackerWorld(cr, root, pods if pods is not None else [_pod("x-0")], None, readings, Resolved(), NOW)


def test_tracker_idle_active_and_unknown() -> None:
    idle = decide_tracker(_world("Active", {"x-0": [0.0, 3.0]}))
    assert idle.status is not None and idle.status["phase"] == "Idle" and idle.status["idleSince"] == "2026-06-01T10:16:00Z"
    assert idle.status["aggregatedUtilization"] == 1.5 and idle.evaluate
    assert ("Normal", "WorkloadIdle", "GPU utilization fell below the threshold") in idle.events
    active = decide_tracker(_world("Idle", {"x-0": [40.0, 3.0]}))
    assert active.status is not None and active.status["phase"] == "Active" and active.status["idleSince"] is None
    for readings in ({}, {"x-0": [None, 0.0]}):  # no reading / one GPU unknown
        kept = decide_tracker(_world("Active", readings))
        assert kept.status is None or kept.status["phase"] == "Active"


@pytest.mark.parametrize("pod, phase", [
    (_pod("x-0", "Pending", [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                              "message": "0/4 nodes are available: 4 Insufficient amd.com/gpu."}]), "PendingGpu"),
    (_pod("x-0", "Pending", [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                              "message": "0/4 nodes are available: 4 Insufficient memory."}]), "PendingOther"),
])
def test_pending_pods(pod: dict[str, Any], phase: str) -> None:
    plan = decide_tracker(_world("", {}, pods=[pod]))
    assert plan.status is not None and plan.status["phase"] == phase


def test_root_gone_and_ttl() -> None:
    gone = decide_tracker(_world("Active", {}, root=None))
    assert gone.status is not None and gone.status["phase"] == "Deleted" and gone.status["finishedAt"]
    finished = _world("Preempted", {})
    finished.cr["status"]["finishedAt"] = _at(0)
    assert decide_tracker(finished).requeue_after == pytest.approx((timedelta(hours=24) - timedelta(minutes=16)).total_seconds())
    finished.settings = Resolved(ttl=timedelta(minutes=10))
    assert decide_tracker(finished).delete_cr
    finished.settings = Resolved(ttl=timedelta(0))
    assert not decide_tracker(finished).delete_cr and decide_tracker(finished).requeue_after is None
