"""KubeRay, simulated: the operator's three reconcilers behind one switch. RayClusters get a head
Service and head/worker pods (`raycluster`); RayJobs get a RayCluster and a K8sJobMode submitter Job
and walk `jobDeploymentStatus`/`jobStatus` through KubeRay's values (`rayjob`); RayServices get a
RayCluster, head and serve Services, and become Ready once their pods are (`rayservice`). What they
create is rendered in `objects`; the helpers they share are in `base`.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from kaiwo_sandbox.cluster.events import record_event
from kaiwo_sandbox.cluster.kuberay.base import REFUSED_REQUEUE_SECONDS, CreateRefused, meta_of
from kaiwo_sandbox.cluster.kuberay.objects import CLUSTER_LABEL
from kaiwo_sandbox.cluster.kuberay.raycluster import CLUSTER_COMPONENT, RayClusterReconciler
from kaiwo_sandbox.cluster.kuberay.rayjob import JOB_COMPONENT, RayJobReconciler
from kaiwo_sandbox.cluster.kuberay.rayservice import SERVICE_COMPONENT, RayServiceReconciler
from kaiwo_sandbox.cluster.pods import controller_of
from kaiwo_sandbox.contracts import JOBS, PODS, RAYCLUSTERS, RAYJOBS, RAYSERVICES, WatchEvent


class KubeRayController(RayClusterReconciler, RayJobReconciler, RayServiceReconciler):
    """One switch ("kuberay"), three reconcilers, as one KubeRay operator runs them: events map to
    (kind, namespace, name) keys and each kind's reconciler handles its own."""

    name = "kuberay"
    watches = (RAYCLUSTERS, RAYJOBS, RAYSERVICES, PODS, JOBS)

    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        obj = event.object
        meta = meta_of(obj)
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
