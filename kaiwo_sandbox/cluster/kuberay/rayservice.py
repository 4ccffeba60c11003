"""KubeRay's RayService reconciler, simulated (rayservice_controller.go): a RayCluster, head and serve
Services, Ready once its pods are and its applications would serve."""

from __future__ import annotations

import yaml

from kaiwo_sandbox.cluster.conditions import set_condition
from kaiwo_sandbox.cluster.events import record_event
from kaiwo_sandbox.cluster.kuberay.base import KubeRayBase, meta_of, pod_running
from kaiwo_sandbox.cluster.kuberay.objects import (
    CLUSTER_LABEL,
    NODE_TYPE_LABEL,
    ORIGIN_CRD_LABEL,
    ORIGIN_NAME_LABEL,
    SERVE_LABEL,
    head_service,
    head_service_name,
    ray_cluster_for,
    rayservice_cluster_name,
    serve_service,
)
from kaiwo_sandbox.cluster.pods import is_ready
from kaiwo_sandbox.contracts import PODS, RAYCLUSTERS, RAYSERVICES, SERVICES, JsonObj

SERVICE_COMPONENT = "rayservice-controller"


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


class RayServiceReconciler(KubeRayBase):
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
                "numServeEndpoints": 0, "observedGeneration": meta_of(service).get("generation", 1)})
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
                               "observedGeneration": meta_of(service).get("generation", 1)}
        if active:
            new_status["activeServiceStatus"] = active
        if pending:
            new_status["pendingServiceStatus"] = pending
        self._write_status(RAYSERVICES, service, new_status)
        return None

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
