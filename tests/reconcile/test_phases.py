"""Child object -> phase mapping (spec/workloads.md §7.2)."""

from __future__ import annotations

from typing import Any

import pytest

from kaiwo_ray.reconcile import phases as c
from kaiwo_ray.reconcile.conditions import Cond, same_conditions, set_conditions


def job(**status: Any) -> dict[str, Any]:
    return {"status": status}


@pytest.mark.parametrize(
    ("status", "previous", "expected"),
    [
        ({"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}, "", c.COMPLETE),
        ({"conditions": [{"type": "Complete", "status": "True"}]}, "", c.COMPLETE),  # pre-1.31 servers
        ({"conditions": [{"type": "Failed", "status": "True"}]}, "", c.FAILED),
        ({"conditions": [{"type": "Suspended", "status": "True"}]}, "", c.PENDING),
        ({"conditions": [{"type": "Suspended", "status": "False"}], "active": 1}, "", c.STARTING),
        ({"failed": 1}, c.RUNNING, c.FAILED),
        ({"ready": 1, "active": 1}, "", c.RUNNING),
        ({"active": 1}, c.RUNNING, c.RUNNING),  # pod went unready: keep RUNNING
        ({"active": 1}, c.PENDING, c.STARTING),
        ({}, "", c.PENDING),
    ],
)
def test_batch_job_phase(status: dict[str, Any], previous: str, expected: str) -> None:
    assert c.batch_job_phase(job(**status), previous) == expected


def test_missing_children() -> None:
    assert c.batch_job_phase(None) == c.NEW
    assert c.rayjob_phase(None) == c.NEW
    assert c.deployment_phase(None) == c.NEW
    assert c.rayservice_phase(None) == c.STARTING
    assert c.pvc_phase(None) == (c.NEW, None)


def test_pvc_empty_phase_is_pending_not_invalid() -> None:
    phase, cond = c.pvc_phase({"status": {}})
    assert phase == c.PENDING
    assert cond == Cond("PvcReady", "False", "Pending")


@pytest.mark.parametrize(
    ("job_status", "deployment", "expected"),
    [
        ("", "Initializing", c.STARTING), ("PENDING", "Running", c.STARTING), ("RUNNING", "Running", c.RUNNING),
        ("SUCCEEDED", "Complete", c.COMPLETE), ("FAILED", "Failed", c.FAILED), ("STOPPED", "", c.TERMINATED),
        ("", "Failed", c.FAILED),  # SubmissionFailed: jobStatus never set
        ("", "ValidationFailed", c.FAILED),
    ],
)
def test_rayjob_phase(job_status: str, deployment: str, expected: str) -> None:
    obj = {"status": {"jobStatus": job_status, "jobDeploymentStatus": deployment}}
    assert c.rayjob_phase(obj) == expected


def test_deployment_phase() -> None:
    base: dict[str, Any] = {"metadata": {"generation": 2}, "spec": {"replicas": 2}}
    assert c.deployment_phase({**base, "status": {"observedGeneration": 1, "availableReplicas": 2}}) == c.STARTING
    assert c.deployment_phase({**base, "status": {"observedGeneration": 2, "availableReplicas": 1}}) == c.STARTING
    assert c.deployment_phase({**base, "status": {"observedGeneration": 2, "availableReplicas": 2}}) == c.RUNNING
    stuck = {"observedGeneration": 2, "conditions": [
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}
    assert c.deployment_phase({**base, "status": stuck}) == c.ERROR


def test_rayservice_phase() -> None:
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert c.rayservice_phase(ready) == c.RUNNING
    broken = {"status": {"activeServiceStatus": {"applicationStatuses": {"app": {"status": "DEPLOY_FAILED"}}}}}
    assert c.rayservice_phase(broken) == c.FAILED
    assert c.rayservice_phase({"status": {}}) == c.STARTING


def test_kueue_admitted_needs_every_workload_admitted() -> None:
    admitted = {"status": {"conditions": [{"type": "Admitted", "status": "True"}]}}
    pending = {"status": {"conditions": [{"type": "QuotaReserved", "status": "False"}]}}
    assert c.kueue_admitted([admitted])
    assert not c.kueue_admitted([])
    assert not c.kueue_admitted([admitted, pending])


def test_download_overlay() -> None:
    assert c.download_job_condition(c.COMPLETE) == (c.COMPLETE, Cond("DownloadJobSucceeded", "True", "JobCompleted",
                                                                     "Download job succeeded"))
    assert c.download_job_condition(c.PENDING)[1].reason == "JobPending"
    assert c.download_job_condition(c.STARTING)[1].message == "Download job starting"


def test_set_conditions_moves_transition_time_only_on_flip_and_keeps_foreign() -> None:
    stored = [
        {"type": "Admitted", "status": "False", "reason": "Pending", "message": "m", "lastTransitionTime": "T0"},
        {"type": "ResourceUnderutilization", "status": "True", "reason": "GpuUtilizationLow",
         "lastTransitionTime": "T0"},
    ]
    same = set_conditions(stored, [Cond("Admitted", "False", "Pending", "m2")], "T1", owned_types=["Admitted"])
    assert same[0]["lastTransitionTime"] == "T0" and same[0]["message"] == "m2"
    assert same[1]["type"] == "ResourceUnderutilization"  # foreign condition kept
    flipped = set_conditions(stored, [Cond("Admitted", "True", "Admitted")], "T2", owned_types=["Admitted"])
    assert flipped[0]["lastTransitionTime"] == "T2"
    assert same_conditions(flipped, [Cond("Admitted", "True", "Admitted")], ["Admitted"])
    assert not same_conditions(flipped, [Cond("Admitted", "False", "Pending")], ["Admitted"])
