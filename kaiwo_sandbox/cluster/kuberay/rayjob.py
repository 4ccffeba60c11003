"""KubeRay's RayJob reconciler, simulated (rayjob_controller.go): a RayCluster and a K8sJobMode submitter
Job, `jobDeploymentStatus`/`jobStatus` walked through KubeRay's values, TTL and shutdown after finishing.
No Ray runs: how long a job takes comes from its entrypoint or annotations
(see `objects.ray_job_run_annotations`)."""

from __future__ import annotations

from typing import Any

from kaiwo_sandbox.cluster.base import ClusterSettings
from kaiwo_sandbox.cluster.events import record_event
from kaiwo_sandbox.cluster.kuberay.base import KubeRayBase, meta_of, pod_running
from kaiwo_sandbox.cluster.kuberay.objects import (
    RAYJOB_FINALIZER,
    dashboard_address,
    random_suffix,
    ray_cluster_for,
    rayjob_cluster_name,
    submitter_job,
    with_go_struct_fields,
)
from kaiwo_sandbox.cluster.pods import as_int
from kaiwo_sandbox.contracts import JOBS, PODS, RAYCLUSTERS, RAYJOBS, Clock, JsonObj, Store

JOB_COMPONENT = "rayjob-controller"
TERMINAL_DEPLOYMENT = ("Complete", "Failed")


class RayJobReconciler(KubeRayBase):
    def __init__(self, store: Store, clock: Clock, settings: ClusterSettings) -> None:
        super().__init__(store, clock, settings)
        self._finished_at: dict[tuple[str, str], float] = {}
        self._submitted_at: dict[tuple[str, str], float] = {}  # submitter pod first seen running

    def _reconcile_job(self, ns: str, name: str) -> float | None:
        rayjob = self._find(RAYJOBS, ns, name)
        if rayjob is None:
            self._finished_at.pop((ns, name), None)
            self._submitted_at.pop((ns, name), None)
            return None
        meta = meta_of(rayjob)
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            if RAYJOB_FINALIZER in finalizers:
                cluster = (rayjob.get("status") or {}).get("rayClusterName")
                if cluster:
                    self._delete(RAYCLUSTERS, ns, str(cluster))
                finalizers.remove(RAYJOB_FINALIZER)
                self.store.patch(RAYJOBS, ns, name, {"metadata": {"finalizers": finalizers or None}}, "merge")
            return None
        if RAYJOB_FINALIZER not in finalizers:
            # KubeRay adds it with an Update of its typed object (resourceVersion-checked), which also
            # writes the fields its Go structs always serialize.
            meta["finalizers"] = [*finalizers, RAYJOB_FINALIZER]
            cluster_spec = (rayjob.get("spec") or {}).get("rayClusterSpec")
            if isinstance(cluster_spec, dict):
                with_go_struct_fields(cluster_spec)
            self.store.update(RAYJOBS, rayjob, field_manager="kuberay-operator")
            return None
        spec = rayjob.get("spec") or {}
        status = dict(rayjob.get("status") or {})
        deployment = status.get("jobDeploymentStatus") or ""
        suspend = bool(spec.get("suspend"))
        if deployment in ("", "New"):
            if suspend:
                status["jobDeploymentStatus"] = "Suspended"
            else:
                status.update(self._initial_job_status(rayjob))
            self._write_status(RAYJOBS, rayjob, status)
            return None
        if deployment == "Suspended":
            if not suspend:
                status = {k: v for k, v in status.items() if k not in ("endTime", "reason", "message")}
                status.update(self._initial_job_status(rayjob))
                self._write_status(RAYJOBS, rayjob, status)
            return None
        if deployment in ("Initializing", "Running", "Retrying", "Waiting") and suspend:
            self._teardown(rayjob, status)
            status["jobDeploymentStatus"] = "Suspending"
            self._write_status(RAYJOBS, rayjob, status)
            return None
        if deployment == "Suspending":
            cluster_name = str(status.get("rayClusterName") or "")
            if cluster_name and self._find(RAYCLUSTERS, ns, cluster_name) is not None:
                return 0.1 * self.clock.time_factor + 0.01  # GC of the cluster is still running
            status = {k: v for k, v in status.items()
                      if k not in ("rayClusterName", "startTime", "endTime", "rayClusterStatus", "dashboardURL",
                                   "jobId")}
            status.update({"jobDeploymentStatus": "Suspended", "jobStatus": ""})
            self._write_status(RAYJOBS, rayjob, status)
            return None
        if deployment == "Initializing":
            return self._initialize(rayjob, status)
        if deployment == "Running":
            return self._follow(rayjob, status)
        if deployment in TERMINAL_DEPLOYMENT:
            return self._after_finish(rayjob, status)
        return None

    def _initial_job_status(self, rayjob: JsonObj) -> JsonObj:
        name = str(meta_of(rayjob).get("name", ""))
        ns = str(meta_of(rayjob).get("namespace", ""))
        cluster = rayjob_cluster_name(name)
        spec = rayjob.get("spec") or {}
        return {
            "jobDeploymentStatus": "Initializing",
            "jobStatus": "",
            "jobId": str(spec.get("jobId") or f"{name}-{random_suffix()}"),
            "rayClusterName": cluster,
            "dashboardURL": dashboard_address(cluster, ns),
            "startTime": self._now(),
            "observedGeneration": meta_of(rayjob).get("generation", 1),
        }

    def _teardown(self, rayjob: JsonObj, status: JsonObj) -> None:
        ns = str(meta_of(rayjob).get("namespace", ""))
        self._submitted_at.pop((ns, str(meta_of(rayjob).get("name", ""))), None)
        cluster_name = str(status.get("rayClusterName") or "")
        if cluster_name and self._delete(RAYCLUSTERS, ns, cluster_name):
            record_event(self.store, self.clock, rayjob, "Normal", "DeletedRayCluster",
                         f"Deleted RayCluster {ns}/{cluster_name}", JOB_COMPONENT)
        job_name = str(meta_of(rayjob).get("name", ""))
        if self._delete(JOBS, ns, job_name):
            record_event(self.store, self.clock, rayjob, "Normal", "DeletedRayJobSubmitter",
                         f"Deleted Kubernetes Job {ns}/{job_name}", JOB_COMPONENT)

    def _initialize(self, rayjob: JsonObj, status: JsonObj) -> float | None:
        ns = str(meta_of(rayjob).get("namespace", ""))
        cluster_name = str(status.get("rayClusterName") or "")
        cluster = self._find(RAYCLUSTERS, ns, cluster_name)
        if cluster is None:
            body = ray_cluster_for(rayjob, cluster_name, (rayjob.get("spec") or {}).get("rayClusterSpec") or {},
                                   "RayJob")
            if self._create(RAYCLUSTERS, body, ns):
                record_event(self.store, self.clock, rayjob, "Normal", "CreatedRayCluster",
                             f"Created RayCluster {ns}/{cluster_name}", JOB_COMPONENT)
            return None
        cluster_status = cluster.get("status") or {}
        status["rayClusterStatus"] = cluster_status
        if cluster_status.get("state") != "ready":
            self._write_status(RAYJOBS, rayjob, status)
            return None
        mode = (rayjob.get("spec") or {}).get("submissionMode") or "K8sJobMode"
        if mode == "K8sJobMode":
            job = submitter_job(rayjob, cluster_name, str(status.get("jobId", "")))
            if self._create(JOBS, job, ns):
                record_event(self.store, self.clock, rayjob, "Normal", "CreatedRayJobSubmitter",
                             f"Created Kubernetes Job {ns}/{job['metadata']['name']}", JOB_COMPONENT)
        status.update({"jobDeploymentStatus": "Running", "jobStatus": "PENDING"})
        self._write_status(RAYJOBS, rayjob, status)
        return None

    def _follow(self, rayjob: JsonObj, status: JsonObj) -> float | None:
        ns = str(meta_of(rayjob).get("namespace", ""))
        name = str(meta_of(rayjob).get("name", ""))
        cluster = self._find(RAYCLUSTERS, ns, str(status.get("rayClusterName") or ""))
        if cluster is not None:
            status["rayClusterStatus"] = cluster.get("status") or {}
        mode = (rayjob.get("spec") or {}).get("submissionMode") or "K8sJobMode"
        if mode != "K8sJobMode":
            status["jobStatus"] = "RUNNING"  # only K8sJobMode is simulated end to end; others run until deleted
            self._write_status(RAYJOBS, rayjob, status)
            return None
        job = self._find(JOBS, ns, name)
        if job is None:
            job_body = submitter_job(rayjob, str(status.get("rayClusterName") or ""), str(status.get("jobId", "")))
            self._create(JOBS, job_body, ns)
            return None
        conditions = {c.get("type"): c for c in (job.get("status") or {}).get("conditions") or []
                      if c.get("status") == "True"}
        now = self._now()
        if "Complete" in conditions or "SuccessCriteriaMet" in conditions:
            status.update({"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Complete", "endTime": now,
                           "succeeded": 1, "failed": 0, "message": "Job finished successfully"})
        elif "Failed" in conditions or "FailureTarget" in conditions:
            status.update({"jobStatus": "FAILED", "jobDeploymentStatus": "Failed", "endTime": now,
                           "succeeded": 0, "failed": 1, "reason": "AppFailed",
                           "message": self._failure_message(ns, name, conditions)})
        elif status.get("jobStatus") != "RUNNING" and as_int((job.get("status") or {}).get("active"), 0) > 0 \
                and self._submitter_running(ns, name):
            # `ray job submit` needs a moment before the dashboard reports the job RUNNING.
            started = self._submitted_at.setdefault((ns, name), self.clock.monotonic())
            remaining = started + self.settings.ray_submit_seconds * self.clock.time_factor - self.clock.monotonic()
            if remaining > 0:
                self._write_status(RAYJOBS, rayjob, status)
                return remaining
            status["jobStatus"] = "RUNNING"
        self._write_status(RAYJOBS, rayjob, status)
        if status.get("jobDeploymentStatus") in TERMINAL_DEPLOYMENT:
            self._finished_at[(ns, name)] = self.clock.monotonic()
            return self._after_finish(rayjob, status)
        return None

    def _submitter_running(self, ns: str, name: str) -> bool:
        pods, _ = self.store.list(PODS, ns, label_selector=f"batch.kubernetes.io/job-name={name}")
        if not pods:
            pods, _ = self.store.list(PODS, ns, label_selector=f"job-name={name}")
        return any(pod_running(p) for p in pods)

    def _failure_message(self, ns: str, name: str, conditions: dict[Any, JsonObj]) -> str:
        pods, _ = self.store.list(PODS, ns, label_selector=f"batch.kubernetes.io/job-name={name}")
        for pod in pods:
            for container in (pod.get("status") or {}).get("containerStatuses") or []:
                terminated = (container.get("state") or {}).get("terminated") or {}
                code = terminated.get("exitCode")
                if isinstance(code, int) and code != 0:
                    return f"Job entrypoint command failed with exit code {code}"
        failed = conditions.get("Failed") or conditions.get("FailureTarget") or {}
        return str(failed.get("message") or "Job entrypoint command failed")

    def _after_finish(self, rayjob: JsonObj, status: JsonObj) -> float | None:
        """shutdownAfterJobFinishes: delete the RayCluster ttlSecondsAfterFinished after the end."""
        spec = rayjob.get("spec") or {}
        ns = str(meta_of(rayjob).get("namespace", ""))
        name = str(meta_of(rayjob).get("name", ""))
        cluster_name = str(status.get("rayClusterName") or "")
        if not spec.get("shutdownAfterJobFinishes") or not cluster_name:
            return None
        if self._find(RAYCLUSTERS, ns, cluster_name) is None:
            return None
        ttl = max(0, as_int(spec.get("ttlSecondsAfterFinished"), 0)) * self.clock.time_factor
        finished = self._finished_at.setdefault((ns, name), self.clock.monotonic())
        remaining = finished + ttl - self.clock.monotonic()
        if remaining > 0:
            return remaining
        if self._delete(RAYCLUSTERS, ns, cluster_name):
            record_event(self.store, self.clock, rayjob, "Normal", "DeletedRayCluster",
                         f"Deleted RayCluster {ns}/{cluster_name}", JOB_COMPONENT)
        return None
