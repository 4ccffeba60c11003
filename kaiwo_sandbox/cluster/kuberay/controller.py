"""KubeRay, simulated: RayClusters get a head Service and head/worker pods named and labelled as
the operator does; RayJobs get a RayCluster and a K8sJobMode submitter Job and walk
`jobDeploymentStatus`/`jobStatus` through KubeRay's values; RayServices get a RayCluster, head
and serve Services, and become Ready once their pods are. No Ray runs: how long a Ray job takes
comes from its entrypoint or annotations (see `kuberay_objects.ray_job_run_annotations`).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterable
from typing import Any

import yaml

from kaiwo_sandbox.cluster.base import ClusterSettings, Controller
from kaiwo_sandbox.cluster.conditions import find_condition, set_condition
from kaiwo_sandbox.cluster.events import record_event
from kaiwo_sandbox.cluster.kuberay.objects import (
    CLUSTER_LABEL,
    GROUP_LABEL,
    HEAD_GROUP,
    NODE_TYPE_LABEL,
    ORIGIN_CRD_LABEL,
    ORIGIN_NAME_LABEL,
    RAYJOB_FINALIZER,
    SERVE_LABEL,
    build_pod,
    dashboard_address,
    head_service,
    head_service_name,
    random_suffix,
    ray_cluster_for,
    rayjob_cluster_name,
    rayservice_cluster_name,
    serve_service,
    submitter_job,
)
from kaiwo_sandbox.cluster.pods import as_int, controller_of, is_ready, is_terminal
from kaiwo_sandbox.cluster.resources import pod_requests
from kaiwo_sandbox.contracts import (
    JOBS,
    PODS,
    RAYCLUSTERS,
    RAYJOBS,
    RAYSERVICES,
    SERVICES,
    ApiError,
    Clock,
    JsonObj,
    Store,
    WatchEvent,
    rfc3339,
)
from kaiwo_sandbox.semantics.quantity import QuantityError, format_milli

log = logging.getLogger(__name__)

CLUSTER_COMPONENT = "raycluster-controller"
JOB_COMPONENT = "rayjob-controller"
SERVICE_COMPONENT = "rayservice-controller"
TERMINAL_DEPLOYMENT = ("Complete", "Failed")
REFUSED_REQUEUE_SECONDS = 2.0  # KubeRay's DefaultRequeueDuration after a failed create


class CreateRefused(Exception):
    """The apiserver refused an object KubeRay builds (it would not retry sooner than its requeue)."""


def _meta(obj: JsonObj) -> JsonObj:
    meta: JsonObj = obj.get("metadata") or {}
    return meta


def desired_workers(group: JsonObj) -> int:
    """Replicas clamped to [minReplicas, maxReplicas], times hosts per replica; 0 when suspended."""
    if group.get("suspend"):
        return 0
    replicas = as_int(group.get("replicas"), as_int(group.get("minReplicas"), 0))
    replicas = max(replicas, as_int(group.get("minReplicas"), 0))
    maximum = group.get("maxReplicas")
    if isinstance(maximum, int) and not isinstance(maximum, bool):
        replicas = min(replicas, maximum)
    return replicas * max(1, as_int(group.get("numOfHosts"), 1))


def _running(pod: JsonObj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def serve_applications(serve_config: object) -> dict[str, list[str]]:
    """Application names (and their deployment names) from a RayService's serveConfigV2 YAML."""
    if not isinstance(serve_config, str) or not serve_config.strip():
        return {}
    try:
        parsed = yaml.safe_load(serve_config)
    except yaml.YAMLError:
        return {}
    apps: dict[str, list[str]] = {}
    declared = parsed.get("applications") if isinstance(parsed, dict) else None
    for app in declared if isinstance(declared, list) else []:
        if not isinstance(app, dict):
            continue
        deployments = [str(d.get("name")) for d in app.get("deployments") or [] if isinstance(d, dict) and d.get("name")]
        apps[str(app.get("name") or "default")] = deployments
    return apps


def desired_resources(cluster: JsonObj) -> dict[str, str]:
    """desiredCPU/Memory/GPU/TPU: what all head and worker pods request together."""
    spec = cluster.get("spec") or {}
    totals = {"cpu": 0, "memory": 0, "gpu": 0, "tpu": 0}
    groups = [(spec.get("headGroupSpec") or {}, 1)]
    groups += [(g, desired_workers(g)) for g in spec.get("workerGroupSpecs") or []]
    for group, count in groups:
        try:
            requests = pod_requests((group.get("template") or {}).get("spec") or {})
        except QuantityError:
            continue
        for name, amount in requests.items():
            key = "gpu" if name.endswith("gpu") else "tpu" if name.endswith("tpu") else name
            if key in totals:
                totals[key] += amount * count
    return {"desiredCPU": format_milli("cpu", totals["cpu"]),
            "desiredMemory": format_milli("memory", totals["memory"]),
            "desiredGPU": format_milli("gpu", totals["gpu"]),
            "desiredTPU": format_milli("tpu", totals["tpu"])}


class KubeRayController(Controller):
    name = "kuberay"
    watches = (RAYCLUSTERS, RAYJOBS, RAYSERVICES, PODS, JOBS)

    def __init__(self, store: Store, clock: Clock, settings: ClusterSettings) -> None:
        super().__init__(store, clock, settings)
        self._finished_at: dict[tuple[str, str], float] = {}
        self._submitted_at: dict[tuple[str, str], float] = {}  # submitter pod first seen running

    # ------------------------------------------------------------------ events -> keys
    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        obj = event.object
        meta = _meta(obj)
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        resource = event.gvr.resource
        if resource == PODS.resource:
            cluster = (meta.get("labels") or {}).get(CLUSTER_LABEL)
            return [("raycluster", ns, cluster)] if cluster else []
        if resource == JOBS.resource:
            owner = controller_of(obj)
            return [("rayjob", ns, owner["name"])] if owner and owner.get("kind") == "RayJob" else []
        if resource == RAYCLUSTERS.resource:
            keys: list[Hashable] = [("raycluster", ns, name)]
            owner = controller_of(obj)
            if owner and owner.get("kind") == "RayJob":
                keys.append(("rayjob", ns, owner["name"]))
            elif owner and owner.get("kind") == "RayService":
                keys.append(("rayservice", ns, owner["name"]))
            return keys
        if resource == RAYJOBS.resource:
            return [("rayjob", ns, name)]
        if resource == RAYSERVICES.resource:
            return [("rayservice", ns, name)]
        return []

    def reconcile(self, key: Hashable) -> float | None:
        assert isinstance(key, tuple)
        kind, ns, name = str(key[0]), str(key[1]), str(key[2])
        gvr, component, reconcile = {
            "raycluster": (RAYCLUSTERS, CLUSTER_COMPONENT, self._reconcile_cluster),
            "rayjob": (RAYJOBS, JOB_COMPONENT, self._reconcile_job),
            "rayservice": (RAYSERVICES, SERVICE_COMPONENT, self._reconcile_service),
        }[kind]
        try:
            return reconcile(ns, name)
        except CreateRefused as refused:
            owner = self._find(gvr, ns, name)
            if owner is not None:
                record_event(self.store, self.clock, owner, "Warning", "FailedToCreate", str(refused), component)
            return REFUSED_REQUEUE_SECONDS * max(self.clock.time_factor, 0.05)

    # ------------------------------------------------------------------ helpers
    def _now(self) -> str:
        return rfc3339(self.clock.now())

    def _find(self, gvr: Any, ns: str, name: str) -> JsonObj | None:
        try:
            return self.store.get(gvr, ns, name)
        except ApiError as err:
            if err.code == 404:
                return None
            raise

    def _create(self, gvr: Any, obj: JsonObj, ns: str) -> JsonObj | None:
        """Create; None when it already exists (another reconcile got there first). Any other
        refusal (an invalid template, say) raises CreateRefused for the caller to report."""
        try:
            return self.store.create(gvr, obj, namespace=ns)
        except ApiError as err:
            if err.code == 409:
                return None
            if err.code in (400, 403, 404, 422):
                raise CreateRefused(err.message) from err
            raise

    def _delete(self, gvr: Any, ns: str, name: str) -> bool:
        try:
            self.store.delete(gvr, ns, name, propagation_policy="Background")
        except ApiError as err:
            if err.code == 404:
                return False
            raise
        return True

    def _write_status(self, gvr: Any, obj: JsonObj, status: JsonObj) -> None:
        if (obj.get("status") or {}) == status:
            return
        meta = _meta(obj)
        body = {k: v for k, v in status.items()}
        removed = {k: None for k in (obj.get("status") or {}) if k not in status}
        body.update(removed)
        self.store.patch(gvr, meta.get("namespace"), str(meta.get("name", "")), {"status": body}, "merge",
                         subresource="status")

    # ------------------------------------------------------------------ RayCluster
    def _reconcile_cluster(self, ns: str, name: str) -> float | None:
        cluster = self._find(RAYCLUSTERS, ns, name)
        if cluster is None or _meta(cluster).get("deletionTimestamp"):
            return None
        pods, _ = self.store.list(PODS, ns, label_selector=f"{CLUSTER_LABEL}={name}")
        live = [p for p in pods if not _meta(p).get("deletionTimestamp")]
        spec = cluster.get("spec") or {}
        if spec.get("suspend"):
            for pod in live:
                self._delete(PODS, ns, str(_meta(pod)["name"]))
            self._write_status(RAYCLUSTERS, cluster, self._suspended_status(cluster))
            return None
        svc_name = head_service_name(name)
        if self._find(SERVICES, ns, svc_name) is None and self._create(SERVICES, head_service(cluster), ns):
            record_event(self.store, self.clock, cluster, "Normal", "CreatedService",
                         f"Created service {ns}/{svc_name}", CLUSTER_COMPONENT)
        for pod in live:
            if is_terminal(pod):  # KubeRay replaces Ray pods that exited
                self._delete(PODS, ns, str(_meta(pod)["name"]))
        live = [p for p in live if not is_terminal(p)]
        heads = [p for p in live if (_meta(p).get("labels") or {}).get(NODE_TYPE_LABEL) == "head"]
        if not heads:
            created = self._create(PODS, build_pod(cluster, "head", spec.get("headGroupSpec") or {}, HEAD_GROUP), ns)
            if created:
                heads.append(created)
                record_event(self.store, self.clock, cluster, "Normal", "CreatedHeadPod",
                             f"Created head Pod {ns}/{_meta(created)['name']}", CLUSTER_COMPONENT)
        workers: list[JsonObj] = []
        for group in spec.get("workerGroupSpecs") or []:
            group_name = str(group.get("groupName", ""))
            existing = [p for p in live if (_meta(p).get("labels") or {}).get(NODE_TYPE_LABEL) == "worker"
                        and (_meta(p).get("labels") or {}).get(GROUP_LABEL) == group_name]
            want = desired_workers(group)
            for _ in range(want - len(existing)):
                created = self._create(PODS, build_pod(cluster, "worker", group, group_name), ns)
                if created:
                    existing.append(created)
                    record_event(self.store, self.clock, cluster, "Normal", "CreatedWorkerPod",
                                 f"Created worker Pod {ns}/{_meta(created)['name']}", CLUSTER_COMPONENT)
            surplus = sorted(existing, key=lambda p: str(_meta(p).get("creationTimestamp", "")))[want:]
            for pod in surplus:
                self._delete(PODS, ns, str(_meta(pod)["name"]))
                record_event(self.store, self.clock, cluster, "Normal", "DeletedWorkerPod",
                             f"Deleted worker Pod {ns}/{_meta(pod)['name']}", CLUSTER_COMPONENT)
            workers.extend(p for p in existing if p not in surplus)
        self._write_status(RAYCLUSTERS, cluster, self._cluster_status(cluster, heads, workers))
        return None

    def _suspended_status(self, cluster: JsonObj) -> JsonObj:
        status = dict(cluster.get("status") or {})
        status.update({"state": "suspended", "readyWorkerReplicas": 0, "availableWorkerReplicas": 0})
        conditions = [dict(c) for c in status.get("conditions") or []]
        set_condition(conditions, "RayClusterSuspended", "True", "RayClusterSuspended",
                      "RayCluster is suspended", self._now())
        set_condition(conditions, "HeadPodReady", "False", "HeadPodNotFound", "Head Pod not found", self._now())
        status["conditions"] = conditions
        return status

    def _cluster_status(self, cluster: JsonObj, heads: list[JsonObj], workers: list[JsonObj]) -> JsonObj:
        spec = cluster.get("spec") or {}
        meta = _meta(cluster)
        old = cluster.get("status") or {}
        groups = spec.get("workerGroupSpecs") or []
        desired = sum(desired_workers(g) for g in groups)
        head = heads[0] if heads else None
        head_ready = head is not None and _running(head) and is_ready(head)
        ready_workers = sum(1 for p in workers if _running(p) and is_ready(p))
        available = sum(1 for p in workers if _running(p))
        all_ready = head_ready and ready_workers >= desired
        now = self._now()
        conditions = [dict(c) for c in old.get("conditions") or []]
        if head_ready:
            set_condition(conditions, "HeadPodReady", "True", "HeadPodRunningAndReady", "", now)
        elif head is None:
            set_condition(conditions, "HeadPodReady", "False", "HeadPodNotFound", "Head Pod not found", now)
        else:
            set_condition(conditions, "HeadPodReady", "False", "HeadPodNotReady", "Head Pod is not ready", now)
        provisioned = find_condition(conditions, "RayClusterProvisioned")
        if all_ready:
            set_condition(conditions, "RayClusterProvisioned", "True", "AllPodRunningAndReadyFirstTime",
                          "All Ray Pods are ready for the first time", now)
        elif provisioned is None or provisioned.get("status") != "True":
            set_condition(conditions, "RayClusterProvisioned", "False", "RayClusterPodsProvisioning",
                          "RayCluster Pods are being provisioned for first time", now)
        suspended = find_condition(conditions, "RayClusterSuspended")
        if suspended is not None:
            set_condition(conditions, "RayClusterSuspended", "False", "RayClusterSuspended", "", now)
        name = str(meta.get("name", ""))
        status: JsonObj = {
            "desiredWorkerReplicas": desired,
            "minWorkerReplicas": sum(as_int(g.get("minReplicas"), 0) * max(1, as_int(g.get("numOfHosts"), 1))
                                     for g in groups),
            "maxWorkerReplicas": sum(as_int(g.get("maxReplicas"), desired_workers(g)) *
                                     max(1, as_int(g.get("numOfHosts"), 1)) for g in groups),
            "readyWorkerReplicas": ready_workers,
            "availableWorkerReplicas": available,
            **desired_resources(cluster),
            "endpoints": {"client": "10001", "dashboard": "8265", "gcs-server": "6379", "metrics": "8080"},
            "head": {"serviceName": head_service_name(name), "podName": _meta(head).get("name", "") if head else "",
                     "podIP": (head.get("status") or {}).get("podIP", "") if head else ""},
            "observedGeneration": meta.get("generation", 1),
            "conditions": conditions,
        }
        state = "ready" if all_ready or old.get("state") == "ready" else ""
        if state:
            status["state"] = state
            status["stateTransitionTimes"] = old.get("stateTransitionTimes") or {"ready": now}
        comparable = {k: v for k, v in old.items() if k != "lastUpdateTime"}
        if comparable != status:
            status["lastUpdateTime"] = now
        else:
            status["lastUpdateTime"] = old.get("lastUpdateTime", now)
        return status

    # ------------------------------------------------------------------ RayJob
    def _reconcile_job(self, ns: str, name: str) -> float | None:
        rayjob = self._find(RAYJOBS, ns, name)
        if rayjob is None:
            self._finished_at.pop((ns, name), None)
            self._submitted_at.pop((ns, name), None)
            return None
        meta = _meta(rayjob)
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
            self.store.patch(RAYJOBS, ns, name, {"metadata": {"finalizers": [*finalizers, RAYJOB_FINALIZER]}},
                             "merge")
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
        name = str(_meta(rayjob).get("name", ""))
        ns = str(_meta(rayjob).get("namespace", ""))
        cluster = rayjob_cluster_name(name)
        spec = rayjob.get("spec") or {}
        return {
            "jobDeploymentStatus": "Initializing",
            "jobStatus": "",
            "jobId": str(spec.get("jobId") or f"{name}-{random_suffix()}"),
            "rayClusterName": cluster,
            "dashboardURL": dashboard_address(cluster, ns),
            "startTime": self._now(),
            "observedGeneration": _meta(rayjob).get("generation", 1),
        }

    def _teardown(self, rayjob: JsonObj, status: JsonObj) -> None:
        ns = str(_meta(rayjob).get("namespace", ""))
        self._submitted_at.pop((ns, str(_meta(rayjob).get("name", ""))), None)
        cluster_name = str(status.get("rayClusterName") or "")
        if cluster_name and self._delete(RAYCLUSTERS, ns, cluster_name):
            record_event(self.store, self.clock, rayjob, "Normal", "DeletedRayCluster",
                         f"Deleted RayCluster {ns}/{cluster_name}", JOB_COMPONENT)
        job_name = str(_meta(rayjob).get("name", ""))
        if self._delete(JOBS, ns, job_name):
            record_event(self.store, self.clock, rayjob, "Normal", "DeletedRayJobSubmitter",
                         f"Deleted Kubernetes Job {ns}/{job_name}", JOB_COMPONENT)

    def _initialize(self, rayjob: JsonObj, status: JsonObj) -> float | None:
        ns = str(_meta(rayjob).get("namespace", ""))
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
        ns = str(_meta(rayjob).get("namespace", ""))
        name = str(_meta(rayjob).get("name", ""))
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
        return any(_running(p) for p in pods)

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
        ns = str(_meta(rayjob).get("namespace", ""))
        name = str(_meta(rayjob).get("name", ""))
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

    # ------------------------------------------------------------------ RayService
    def _reconcile_service(self, ns: str, name: str) -> float | None:
        service = self._find(RAYSERVICES, ns, name)
        if service is None or _meta(service).get("deletionTimestamp"):
            return None
        spec = service.get("spec") or {}
        status = dict(service.get("status") or {})
        active = dict(status.get("activeServiceStatus") or {})
        pending = dict(status.get("pendingServiceStatus") or {})
        now = self._now()
        conditions = [dict(c) for c in status.get("conditions") or []]
        if spec.get("suspend"):
            for cluster_name in (active.get("rayClusterName"), pending.get("rayClusterName")):
                if cluster_name:
                    self._delete(RAYCLUSTERS, ns, str(cluster_name))
            set_condition(conditions, "Ready", "False", "Suspended", "RayService is suspended", now)
            set_condition(conditions, "Suspended", "True", "Suspended", "RayService is suspended", now)
            self._write_status(RAYSERVICES, service, {"conditions": conditions, "serviceStatus": "",
                                                      "numServeEndpoints": 0,
                                                      "observedGeneration": _meta(service).get("generation", 1)})
            return None
        cluster_name = str(active.get("rayClusterName") or pending.get("rayClusterName") or "")
        cluster = self._find(RAYCLUSTERS, ns, cluster_name) if cluster_name else None
        if cluster is None:
            cluster_name = rayservice_cluster_name(name)
            body = ray_cluster_for(service, cluster_name, spec.get("rayClusterConfig") or {}, "RayService")
            if self._create(RAYCLUSTERS, body, ns):
                record_event(self.store, self.clock, service, "Normal", "CreatedRayCluster",
                             f"Created the RayCluster {ns}/{cluster_name}", SERVICE_COMPONENT)
            active, pending = {}, {"rayClusterName": cluster_name}
            set_condition(conditions, "Ready", "False", "Initializing", "RayService is initializing", now)
            set_condition(conditions, "UpgradeInProgress", "False", "NoActiveCluster",
                          "The RayService has no active cluster", now)
            self._write_status(RAYSERVICES, service, {
                "pendingServiceStatus": pending, "conditions": conditions, "serviceStatus": "",
                "numServeEndpoints": 0, "observedGeneration": _meta(service).get("generation", 1)})
            return None
        self._ensure_service_svcs(service, cluster_name)
        cluster_status = cluster.get("status") or {}
        ready = cluster_status.get("state") == "ready"
        if pending and ready:
            active, pending = {"rayClusterName": cluster_name}, {}
        apps = serve_applications(spec.get("serveConfigV2"))
        target = active if active else pending
        target["rayClusterStatus"] = cluster_status
        if active:
            active["applicationStatuses"] = {
                app: {"status": "RUNNING",
                      "serveDeploymentStatuses": {d: {"status": "HEALTHY"} for d in deployments}}
                for app, deployments in apps.items()}
        endpoints = self._serve_endpoints(ns, cluster_name, bool(spec.get("excludeHeadPodFromServeSvc"))) \
            if active else 0
        if endpoints > 0:
            set_condition(conditions, "Ready", "True", "NonZeroServeEndpoints",
                          "Number of serve endpoints is greater than 0", now)
        elif active:
            set_condition(conditions, "Ready", "False", "ZeroServeEndpoints", "Number of serve endpoints dropped to 0",
                          now)
        if active:
            set_condition(conditions, "UpgradeInProgress", "False", "NoPendingCluster",
                          "The RayService has no pending cluster", now)
        new_status: JsonObj = {"conditions": conditions, "numServeEndpoints": endpoints,
                               "serviceStatus": "Running" if endpoints > 0 else "",
                               "observedGeneration": _meta(service).get("generation", 1)}
        if active:
            new_status["activeServiceStatus"] = active
        if pending:
            new_status["pendingServiceStatus"] = pending
        self._write_status(RAYSERVICES, service, new_status)
        return None

    def _ensure_service_svcs(self, service: JsonObj, cluster_name: str) -> None:
        ns = str(_meta(service).get("namespace", ""))
        name = str(_meta(service).get("name", ""))
        cluster_ref = {"metadata": {"name": cluster_name, "namespace": ns}}
        wanted = [head_service(cluster_ref, head_service_name(name), owner=service), serve_service(service, cluster_name)]
        for svc in wanted:
            svc["metadata"].setdefault("labels", {}).update({ORIGIN_CRD_LABEL: "RayService", ORIGIN_NAME_LABEL: name})
            existing = self._find(SERVICES, ns, svc["metadata"]["name"])
            if existing is None:
                if self._create(SERVICES, svc, ns):
                    record_event(self.store, self.clock, service, "Normal", "CreatedService",
                                 f"Created the service {ns}/{svc['metadata']['name']}", SERVICE_COMPONENT)
            elif (existing.get("spec") or {}).get("selector") != svc["spec"]["selector"]:
                self.store.patch(SERVICES, ns, svc["metadata"]["name"],
                                 {"spec": {"selector": svc["spec"]["selector"]}}, "merge")

    def _serve_endpoints(self, ns: str, cluster_name: str, exclude_head: bool) -> int:
        pods, _ = self.store.list(PODS, ns, label_selector=f"{CLUSTER_LABEL}={cluster_name},{SERVE_LABEL}=true")
        count = 0
        for pod in pods:
            if exclude_head and (_meta(pod).get("labels") or {}).get(NODE_TYPE_LABEL) == "head":
                continue
            if _running(pod) and is_ready(pod) and not _meta(pod).get("deletionTimestamp"):
                count += 1
        return count
