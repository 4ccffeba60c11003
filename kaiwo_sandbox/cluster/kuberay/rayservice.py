"""KubeRay's RayService reconciler, simulated (rayservice_controller.go): a RayCluster, head and serve
Services, Ready once its pods are and its applications would serve."""

from __future__ import annotations

import base64
import copy
import hashlib
import json

import yaml

from kaiwo_sandbox.cluster.conditions import set_condition
from kaiwo_sandbox.cluster.events import record_event
from kaiwo_sandbox.cluster.kuberay.base import KubeRayBase, meta_of, pod_running
from kaiwo_sandbox.cluster.kuberay.dashboard import DashboardCalls
from kaiwo_sandbox.cluster.kuberay.objects import (
    CLUSTER_LABEL,
    DASHBOARD_PORT,
    NODE_TYPE_LABEL,
    ORIGIN_CRD_LABEL,
    ORIGIN_NAME_LABEL,
    SERVE_LABEL,
    SERVE_PORT,
    head_service,
    head_service_name,
    ray_cluster_for,
    rayservice_cluster_name,
    serve_service,
)
from kaiwo_sandbox.cluster.pods import is_ready
from kaiwo_sandbox.contracts import PODS, RAYCLUSTERS, RAYSERVICES, SERVICES, JsonObj
from kaiwo_sandbox.runtime.podspec import runs_locally

SERVICE_COMPONENT = "rayservice-controller"
REAL_REQUEUE_SECONDS = 2.0  # ServiceDefaultRequeueDuration: a real cluster's Serve status is polled this often


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


HASH_ANNOTATION = "ray.io/hash-without-replicas-and-workers-to-delete"


def cluster_config_hash(config: JsonObj) -> str:
    """KubeRay's hash of a rayClusterConfig without what changes in place (worker replicas and
    workersToDelete): base32hex of the sha1 of its JSON."""
    trimmed = copy.deepcopy(config)
    for group in trimmed.get("workerGroupSpecs") or []:
        if isinstance(group, dict):
            for key in ("replicas", "minReplicas", "maxReplicas"):
                group[key] = None
            if isinstance(group.get("scaleStrategy"), dict):
                group["scaleStrategy"]["workersToDelete"] = None
    digest = hashlib.sha1(json.dumps(trimmed, sort_keys=True).encode()).digest()  # KubeRay's choice of hash
    return base64.b32hexencode(digest).decode()


def _outdated(cluster: JsonObj, wanted_hash: str) -> bool:
    """Whether a cluster was made for another rayClusterConfig (one without the annotation, made before
    it was written, is taken as current)."""
    stored = (meta_of(cluster).get("annotations") or {}).get(HASH_ANNOTATION)
    return bool(stored) and stored != wanted_hash


def application_statuses(answer: object) -> dict[str, JsonObj]:
    """`applicationStatuses` from Ray's GET /api/serve/applications/ (app "" is stored as "default")."""
    apps = answer.get("applications") if isinstance(answer, dict) else None
    statuses: dict[str, JsonObj] = {}
    for app_name, app in (apps or {}).items() if isinstance(apps, dict) else ():
        if not isinstance(app, dict):
            continue
        deployments = {str(d): {"status": str(v.get("status", "")), "message": str(v.get("message") or "")}
                       for d, v in (app.get("deployments") or {}).items() if isinstance(v, dict)}
        statuses[str(app_name) or "default"] = {"status": str(app.get("status", "")),
                                                "message": str(app.get("message") or ""),
                                                "serveDeploymentStatuses": deployments}
    return statuses


class RayServiceReconciler(KubeRayBase):
    _dashboard: DashboardCalls | None = None
    _submitted: dict[tuple[str, str, str, str], str]  # (ns, service, cluster, head uid) -> serveConfigV2 Ray accepted
    _putting: dict[tuple[str, str, str, str], str]  # the config a PUT in flight carries

    def _real_head(self, ns: str, cluster_name: str) -> JsonObj | None:
        """The head pod of a cluster whose Ray runs for real (`--local-image`), else None."""
        runtime = self.settings.local_runtime
        if runtime is None:
            return None
        heads, _ = self.store.list(PODS, ns, label_selector=f"{CLUSTER_LABEL}={cluster_name},{NODE_TYPE_LABEL}=head")
        live = [p for p in heads if not meta_of(p).get("deletionTimestamp")]
        return next((p for p in live if runs_locally(p, runtime.images)), None)

    def _real_applications(self, service: JsonObj, cluster_name: str, head: JsonObj) -> dict[str, JsonObj]:
        """Submit serveConfigV2 to the real head as KubeRay does (PUT when Ray has none, or another
        config than the spec's) and read back each application's status."""
        runtime = self.settings.local_runtime
        assert runtime is not None
        if self._dashboard is None:
            self._dashboard, self._submitted, self._putting = DashboardCalls(), {}, {}
        calls = self._dashboard
        ns, name = str(meta_of(service).get("namespace", "")), str(meta_of(service).get("name", ""))
        # per head pod: a new head (the old one deleted) starts with no applications and no answers
        key = (ns, name, cluster_name, str(meta_of(head).get("uid", "")))
        local = runtime.pod(key[3])
        if local is None or not is_ready(head):
            return {}
        base = f"http://{local.ip}:{DASHBOARD_PORT}/api/serve/applications/"
        self._label_serving_head(head, local.ip, ("healthz", *key))
        put = calls.result(("put", *key))
        if put is not None and key in self._putting:
            config = self._putting.pop(key)
            calls.forget(("put", *key))
            if put.ok:
                self._submitted[key] = config
            else:
                record_event(self.store, self.clock, service, "Warning", "FailedToUpdateServeApplications",
                             f"UpdateDeployments fail: {put.status} {put.body[:1000]}", SERVICE_COMPONENT)
        answer = calls.result(("get", *key))
        calls.start(("get", *key), "GET", base)
        applications = answer.json() if answer is not None and answer.ok else None
        statuses = application_statuses(applications) if applications is not None else {}
        config = str((service.get("spec") or {}).get("serveConfigV2") or "")
        stale = self._submitted.get(key) != config or (applications is not None and not statuses)
        if config and stale and key not in self._putting:
            try:
                body = json.dumps(yaml.safe_load(config)).encode()
            except yaml.YAMLError as err:
                record_event(self.store, self.clock, service, "Warning", "InvalidServeConfig",
                             f"serveConfigV2 is not valid YAML: {err}", SERVICE_COMPONENT)
                return statuses
            self._putting[key] = config
            calls.start(("put", *key), "PUT", base, body)
        return statuses

    def _label_serving_head(self, head: JsonObj, ip: str, key: tuple[str, ...]) -> None:
        """`ray.io/serve` on the head: true while its Serve proxy answers /-/healthz (KubeRay polls it)."""
        assert self._dashboard is not None
        answer = self._dashboard.result(key)
        self._dashboard.start(key, "GET", f"http://{ip}:{SERVE_PORT}/-/healthz")
        if answer is None:
            return
        wanted = "true" if answer.status == 200 else "false"
        if (meta_of(head).get("labels") or {}).get(SERVE_LABEL) != wanted:
            self.store.patch(PODS, meta_of(head).get("namespace"), str(meta_of(head).get("name", "")),
                             {"metadata": {"labels": {SERVE_LABEL: wanted}}}, "merge")

    def _reconcile_service(self, ns: str, name: str) -> float | None:
        service = self._find(RAYSERVICES, ns, name)
        if service is None or meta_of(service).get("deletionTimestamp"):
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
                                                      "observedGeneration": meta_of(service).get("generation", 1)})
            return None
        config = spec.get("rayClusterConfig") or {}
        wanted_hash = cluster_config_hash(config)
        active_name, pending_name = str(active.get("rayClusterName") or ""), str(pending.get("rayClusterName") or "")
        active_cluster = self._find(RAYCLUSTERS, ns, active_name) if active_name else None
        pending_cluster = self._find(RAYCLUSTERS, ns, pending_name) if pending_name else None
        active = active if active_cluster is not None else {}
        pending = pending if pending_cluster is not None else {}
        if pending_cluster is not None and _outdated(pending_cluster, wanted_hash):
            self._delete(RAYCLUSTERS, ns, pending_name)  # the spec moved on again: prepare its newest form
            pending_cluster, pending = None, {}
        outdated = active_cluster is not None and _outdated(active_cluster, wanted_hash)
        zero_downtime = ((spec.get("upgradeStrategy") or {}).get("type") or "NewCluster") != "None"
        if pending_cluster is None and (active_cluster is None or (outdated and zero_downtime)):
            # A first cluster, or a zero-downtime upgrade (shouldPrepareNewCluster): a new pending cluster
            # that takes over once it serves.
            pending_name = rayservice_cluster_name(name)
            body = ray_cluster_for(service, pending_name, config, "RayService")
            body["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = wanted_hash
            if self._create(RAYCLUSTERS, body, ns):
                record_event(self.store, self.clock, service, "Normal", "CreatedRayCluster",
                             f"Created the RayCluster {ns}/{pending_name}", SERVICE_COMPONENT)
            pending = {"rayClusterName": pending_name}
            if active_cluster is None:
                set_condition(conditions, "Ready", "False", "Initializing", "RayService is initializing", now)
                set_condition(conditions, "UpgradeInProgress", "False", "NoActiveCluster",
                              "The RayService has no active cluster", now)
                self._write_status(RAYSERVICES, service, {
                    "pendingServiceStatus": pending, "conditions": conditions, "serviceStatus": "",
                    "numServeEndpoints": 0, "observedGeneration": meta_of(service).get("generation", 1)})
                return None
            pending_cluster = self._find(RAYCLUSTERS, ns, pending_name)
        elif active_cluster is not None and not outdated:
            self._update_in_place(active_cluster, config)  # replicas only: the same cluster scales
        real = False
        for target, cluster in ((active, active_cluster), (pending, pending_cluster)):
            if cluster is None:
                continue
            cluster_name = str(meta_of(cluster).get("name", ""))
            cluster_status = cluster.get("status") or {}
            target["rayClusterName"] = cluster_name
            target["rayClusterStatus"] = cluster_status
            head = self._real_head(ns, cluster_name)
            if head is not None:
                real = True
                target["applicationStatuses"] = self._real_applications(service, cluster_name, head)
            elif cluster_status.get("state") == "ready":
                target["applicationStatuses"] = {
                    app: {"status": "RUNNING",
                          "serveDeploymentStatuses": {d: {"status": "HEALTHY"} for d in deployments}}
                    for app, deployments in serve_applications(spec.get("serveConfigV2")).items()}
        if pending_cluster is not None:
            statuses = pending.get("applicationStatuses") or {}
            serving = bool(statuses) and all(s.get("status") == "RUNNING" for s in statuses.values())
            # KubeRay promotes a pending cluster once its applications run, whether or not every worker is
            # up yet (an upgrade's new workers may wait for the old cluster's nodes, as anti-affinity does).
            if serving:
                # Promotion: the Services move to the new cluster, which becomes active; the old one goes.
                if active_cluster is not None:
                    self._delete(RAYCLUSTERS, ns, str(meta_of(active_cluster).get("name", "")))
                    record_event(self.store, self.clock, service, "Normal", "DeletedRayCluster",
                                 f"Deleted the RayCluster {ns}/{meta_of(active_cluster).get('name', '')} "
                                 "(replaced by the upgrade)", SERVICE_COMPONENT)
                active, pending = pending, {}
        serving_name = str(active.get("rayClusterName") or pending.get("rayClusterName") or "")
        self._ensure_service_svcs(service, serving_name)
        endpoints = self._serve_endpoints(ns, serving_name, bool(spec.get("excludeHeadPodFromServeSvc"))) \
            if active else 0
        if endpoints > 0:
            set_condition(conditions, "Ready", "True", "NonZeroServeEndpoints",
                          "Number of serve endpoints is greater than 0", now)
        elif active:
            set_condition(conditions, "Ready", "False", "ZeroServeEndpoints", "Number of serve endpoints dropped to 0",
                          now)
        if active and pending:
            set_condition(conditions, "UpgradeInProgress", "True", "BothActivePendingClustersExist",
                          "Both active and pending Ray clusters exist", now)
        elif active:
            set_condition(conditions, "UpgradeInProgress", "False", "NoPendingCluster",
                          "The RayService has no pending cluster", now)
        new_status: JsonObj = {"conditions": conditions, "numServeEndpoints": endpoints,
                               "serviceStatus": "Running" if endpoints > 0 else "",
                               "observedGeneration": meta_of(service).get("generation", 1)}
        if active:
            new_status["activeServiceStatus"] = active
        if pending:
            new_status["pendingServiceStatus"] = pending
        self._write_status(RAYSERVICES, service, new_status)
        return REAL_REQUEUE_SECONDS if real or pending else None

    def _update_in_place(self, cluster: JsonObj, config: JsonObj) -> None:
        """Worker replica counts follow the RayService's (the hash leaves them out: no new cluster)."""
        groups = (cluster.get("spec") or {}).get("workerGroupSpecs") or []
        wanted = config.get("workerGroupSpecs") or []
        if len(groups) != len(wanted):
            return
        changed = [dict(g) for g in groups]
        for group, desired in zip(changed, wanted, strict=True):
            for key in ("replicas", "minReplicas", "maxReplicas"):
                if key in desired and group.get(key) != desired[key]:
                    group[key] = desired[key]
        if changed != groups:
            meta = meta_of(cluster)
            self.store.patch(RAYCLUSTERS, meta.get("namespace"), str(meta.get("name", "")),
                             {"spec": {"workerGroupSpecs": changed}}, "merge")

    def _ensure_service_svcs(self, service: JsonObj, cluster_name: str) -> None:
        ns = str(meta_of(service).get("namespace", ""))
        name = str(meta_of(service).get("name", ""))
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
            if exclude_head and (meta_of(pod).get("labels") or {}).get(NODE_TYPE_LABEL) == "head":
                continue
            if pod_running(pod) and is_ready(pod) and not meta_of(pod).get("deletionTimestamp"):
                count += 1
        return count
