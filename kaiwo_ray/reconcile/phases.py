"""What each child object says about the workload's phase (spec/workloads.md §7.2, child table).

Phases are the WorkloadStatus strings. Each function is total: unknown or missing status maps to
the phase that makes the reconciler wait (STARTING/PENDING), never raises.
"""

from __future__ import annotations

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.workloads import WorkloadPhase
from kaiwo_ray.reconcile.conditions import Cond, is_true

# Short names for the phases (StrEnum members compare equal to the stored strings).
NEW, DOWNLOADING, PENDING = WorkloadPhase.NEW, WorkloadPhase.DOWNLOADING, WorkloadPhase.PENDING
STARTING, RUNNING, COMPLETE = WorkloadPhase.STARTING, WorkloadPhase.RUNNING, WorkloadPhase.COMPLETE
ERROR, FAILED = WorkloadPhase.ERROR, WorkloadPhase.FAILED
TERMINATING, TERMINATED = WorkloadPhase.TERMINATING, WorkloadPhase.TERMINATED
TERMINAL = frozenset(p for p in WorkloadPhase if p.is_terminal)
ACTIVE = frozenset(p for p in WorkloadPhase if p.is_active)


def batch_job_phase(job: JsonObj | None, previous: str = NEW) -> str:
    """batch/v1 Job. Accepts `Complete` as well as `SuccessCriteriaMet` (upstream only reads the
    latter, so on servers < 1.31 its jobs never complete)."""
    if job is None:
        return NEW
    status = job.get("status") or {}
    for cond in status.get("conditions") or ():
        if cond.get("status") != "True":
            continue
        ctype = cond.get("type")
        if ctype in ("SuccessCriteriaMet", "Complete"):
            return COMPLETE
        if ctype == "Failed":
            return FAILED
        if ctype == "Suspended":
            return PENDING
    if (status.get("failed") or 0) > 0:
        return FAILED
    if (status.get("ready") or 0) > 0:
        return RUNNING
    if previous == RUNNING:
        return RUNNING
    if (status.get("active") or 0) > 0:
        return STARTING
    return PENDING


def download_job_condition(phase: str) -> tuple[str, Cond]:
    """Overlay of the download Job: (storage phase, DownloadJobSucceeded condition)."""
    if phase == COMPLETE:
        return COMPLETE, Cond.of(True, "DownloadJobSucceeded", "JobCompleted", "Download job succeeded")
    if phase == FAILED:
        return FAILED, Cond.of(False, "DownloadJobSucceeded", "JobFailed", "Download job failed")
    if phase == RUNNING:
        return RUNNING, Cond.of(False, "DownloadJobSucceeded", "JobInProgress", "Download job in progress")
    if phase == STARTING:
        return RUNNING, Cond.of(False, "DownloadJobSucceeded", "JobInProgress", "Download job starting")
    return RUNNING, Cond.of(False, "DownloadJobSucceeded", "JobPending", "Download job pending")


def pvc_phase(pvc: JsonObj | None) -> tuple[str, Cond | None]:
    """PVC: Bound -> COMPLETE, Lost -> FAILED, anything else (incl. empty) -> PENDING."""
    if pvc is None:
        return NEW, None
    phase = (pvc.get("status") or {}).get("phase") or "Pending"
    if phase == "Bound":
        return COMPLETE, Cond.of(True, "PvcReady", "Bound")
    if phase == "Lost":
        return FAILED, Cond.of(False, "PvcReady", "Lost")
    return PENDING, Cond.of(False, "PvcReady", "Pending")


def rayjob_phase(rayjob: JsonObj | None) -> str:
    """RayJob: read jobStatus, and jobDeploymentStatus for the failures jobStatus never shows
    (SubmissionFailed/ValidationFailed leave jobStatus empty; upstream reports STARTING forever)."""
    if rayjob is None:
        return NEW
    status = rayjob.get("status") or {}
    deployment = status.get("jobDeploymentStatus") or ""
    job_status = status.get("jobStatus") or ""
    if deployment in ("Failed", "ValidationFailed") and job_status not in ("SUCCEEDED", "STOPPED"):
        return FAILED
    return {
        "": STARTING, "PENDING": STARTING, "RUNNING": RUNNING, "FAILED": FAILED,
        "SUCCEEDED": COMPLETE, "STOPPED": TERMINATED,
    }.get(job_status, STARTING)


def deployment_phase(deployment: JsonObj | None) -> str:
    if deployment is None:
        return NEW
    status = deployment.get("status") or {}
    for cond in status.get("conditions") or ():
        if (cond.get("type") == "Progressing" and cond.get("status") == "False"
                and cond.get("reason") == "ProgressDeadlineExceeded"):
            return ERROR
    generation = (deployment.get("metadata") or {}).get("generation") or 0
    if (status.get("observedGeneration") or 0) < generation:
        return STARTING
    desired = (deployment.get("spec") or {}).get("replicas")
    desired = 1 if desired is None else desired
    if (status.get("availableReplicas") or 0) < desired:
        return STARTING
    return RUNNING


def rayservice_phase(rayservice: JsonObj | None) -> str:
    """RayService (created by the AppWrapper once admitted): absent -> STARTING."""
    if rayservice is None:
        return STARTING
    status = rayservice.get("status") or {}
    apps = ((status.get("activeServiceStatus") or {}).get("applicationStatuses") or {})
    if any((app or {}).get("status") in ("UNHEALTHY", "DEPLOY_FAILED") for app in apps.values()):
        return FAILED
    if is_true(status.get("conditions"), "Ready"):
        return RUNNING
    return STARTING


def kueue_admitted(workloads: list[JsonObj]) -> bool:
    """Admitted iff at least one Kueue Workload exists and every one has `Admitted` not False."""
    if not workloads:
        return False
    for wl in workloads:
        conds = (wl.get("status") or {}).get("conditions") or []
        admitted = next((c for c in conds if c.get("type") == "Admitted"), None)
        if admitted is None or admitted.get("status") == "False":
            return False
    return True
