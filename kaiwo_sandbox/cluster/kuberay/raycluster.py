"""KubeRay's RayCluster reconciler, simulated (raycluster_controller.go): a head Service and head/worker
pods named and labelled as the operator does, suspension, and the status it reports."""

from __future__ import annotations

from kaiwo_sandbox.cluster.conditions import find_condition, set_condition
from kaiwo_sandbox.cluster.events import record_event
from kaiwo_sandbox.cluster.kuberay.base import KubeRayBase, meta_of, pod_running
from kaiwo_sandbox.cluster.kuberay.objects import (
    CLUSTER_LABEL,
    GROUP_LABEL,
    HEAD_GROUP,
    NODE_TYPE_LABEL,
    build_pod,
    head_service,
    head_service_name,
)
from kaiwo_sandbox.cluster.pods import as_int, is_ready, is_terminal
from kaiwo_sandbox.cluster.resources import spec_requests_milli
from kaiwo_sandbox.contracts import PODS, RAYCLUSTERS, SERVICES, JsonObj
from kaiwo_sandbox.semantics.quantity import QuantityError, format_milli

CLUSTER_COMPONENT = "raycluster-controller"


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


def desired_resources(cluster: JsonObj) -> dict[str, str]:
    """desiredCPU/Memory/GPU/TPU: what all head and worker pods request together."""
    spec = cluster.get("spec") or {}
    totals = {"cpu": 0, "memory": 0, "gpu": 0, "tpu": 0}
    groups = [(spec.get("headGroupSpec") or {}, 1)]
    groups += [(g, desired_workers(g)) for g in spec.get("workerGroupSpecs") or []]
    for group, count in groups:
        try:
            requests = spec_requests_milli((group.get("template") or {}).get("spec") or {})
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


class RayClusterReconciler(KubeRayBase):
    def _reconcile_cluster(self, ns: str, name: str) -> float | None:
        cluster = self._find(RAYCLUSTERS, ns, name)
        if cluster is None or meta_of(cluster).get("deletionTimestamp"):
            return None
        pods, _ = self.store.list(PODS, ns, label_selector=f"{CLUSTER_LABEL}={name}")
        live = [p for p in pods if not meta_of(p).get("deletionTimestamp")]
        spec = cluster.get("spec") or {}
        if spec.get("suspend"):
            for pod in live:
                self._delete(PODS, ns, str(meta_of(pod)["name"]))
            self._write_status(RAYCLUSTERS, cluster, self._suspended_status(cluster))
            return None
        svc_name = head_service_name(name)
        if self._find(SERVICES, ns, svc_name) is None and self._create(SERVICES, head_service(cluster), ns):
            record_event(self.store, self.clock, cluster, "Normal", "CreatedService",
                         f"Created service {ns}/{svc_name}", CLUSTER_COMPONENT)
        for pod in live:
            if is_terminal(pod):  # KubeRay replaces Ray pods that exited
                self._delete(PODS, ns, str(meta_of(pod)["name"]))
        live = [p for p in live if not is_terminal(p)]
        heads = [p for p in live if (meta_of(p).get("labels") or {}).get(NODE_TYPE_LABEL) == "head"]
        if not heads:
            created = self._create(PODS, build_pod(cluster, "head", spec.get("headGroupSpec") or {}, HEAD_GROUP), ns)
            if created:
                heads.append(created)
                record_event(self.store, self.clock, cluster, "Normal", "CreatedHeadPod",
                             f"Created head Pod {ns}/{meta_of(created)['name']}", CLUSTER_COMPONENT)
        workers: list[JsonObj] = []
        for group in spec.get("workerGroupSpecs") or []:
            group_name = str(group.get("groupName", ""))
            existing = [p for p in live if (meta_of(p).get("labels") or {}).get(NODE_TYPE_LABEL) == "worker"
                        and (meta_of(p).get("labels") or {}).get(GROUP_LABEL) == group_name]
            want = desired_workers(group)
            for _ in range(want - len(existing)):
                created = self._create(PODS, build_pod(cluster, "worker", group, group_name), ns)
                if created:
                    existing.append(created)
                    record_event(self.store, self.clock, cluster, "Normal", "CreatedWorkerPod",
                                 f"Created worker Pod {ns}/{meta_of(created)['name']}", CLUSTER_COMPONENT)
            surplus = sorted(existing, key=lambda p: str(meta_of(p).get("creationTimestamp", "")))[want:]
            for pod in surplus:
                self._delete(PODS, ns, str(meta_of(pod)["name"]))
                record_event(self.store, self.clock, cluster, "Normal", "DeletedWorkerPod",
                             f"Deleted worker Pod {ns}/{meta_of(pod)['name']}", CLUSTER_COMPONENT)
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
        meta = meta_of(cluster)
        old = cluster.get("status") or {}
        groups = spec.get("workerGroupSpecs") or []
        desired = sum(desired_workers(g) for g in groups)
        head = heads[0] if heads else None
        head_ready = head is not None and pod_running(head) and is_ready(head)
        ready_workers = sum(1 for p in workers if pod_running(p) and is_ready(p))
        available = sum(1 for p in workers if pod_running(p))
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
            "head": {"serviceName": head_service_name(name), "podName": meta_of(head).get("name", "") if head else "",
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
