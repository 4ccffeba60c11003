"""The operator's scenarios, on the sandbox and (with `-m cluster`) on a real cluster."""

from __future__ import annotations

from e2e_scenarios import (
    is_subsequence,
    scenario_deletion,
    scenario_invalid_input,
    scenario_job_updates,
    scenario_kaiwoconfig_live,
    scenario_queueing,
    scenario_service_updates,
)
from e2e_support import Target


def test_second_gpu_job_waits_for_quota_then_runs(target: Target) -> None:
    first, second = scenario_queueing(target)
    assert is_subsequence(["RUNNING", "COMPLETE"], first), first
    assert is_subsequence(["PENDING", "RUNNING", "COMPLETE"], second), second
    assert second[-1] == "COMPLETE"


def test_label_change_reaches_job_and_frozen_change_is_reported(target: Target) -> None:
    scenario_job_updates(target)


def test_service_replicas_and_image_reach_deployment(target: Target) -> None:
    scenario_service_updates(target)


def test_deletion_removes_children_then_the_workload(target: Target) -> None:
    scenario_deletion(target)


def test_invalid_workloads_error_with_reason_and_others_still_run(target: Target) -> None:
    bad = scenario_invalid_input(target)
    assert set(bad) == {"ray-without-cluster", "unknown-queue", "too-many-gpus"}


def test_kaiwoconfig_head_memory_is_read_live(target: Target) -> None:
    before, after = scenario_kaiwoconfig_live(target)
    assert after == ("3Gi", "3Gi")
    assert before != after
