"""One table of every resource kaiwo-ray reads or writes: group, version, plural, kind, scope.

Like lightkube's resource classes, a resource is declared in one line and knows its URL, so no
other module spells a group, version or plural by hand.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The REST path: /api/v1/namespaces/ns/pods/name/status and friends."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base

    def with_version(self, version: str) -> Resource:
        return Resource(self.group, version, self.plural, self.kind, self.namespaced)


# Built-in kinds.
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
NODES = Resource("", "v1", "nodes", "Node", False)
PODS = Resource("", "v1", "pods", "Pod", True)
EVENTS = Resource("", "v1", "events", "Event", True)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
SECRETS = Resource("", "v1", "secrets", "Secret", True)
PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True)
SERVICES = Resource("", "v1", "services", "Service", True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", True)
JOBS = Resource("batch", "v1", "jobs", "Job", True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)

# Kaiwo's own kinds.
KAIWOJOBS = Resource("kaiwo.silogen.ai", "v1alpha1", "kaiwojobs", "KaiwoJob", True)
KAIWOSERVICES = Resource("kaiwo.silogen.ai", "v1alpha1", "kaiwoservices", "KaiwoService", True)
GPUWORKLOADS = Resource("kaiwo.silogen.ai", "v1alpha1", "gpuworkloads", "GpuWorkload", True)
KAIWOQUEUECONFIGS = Resource("kaiwo.silogen.ai", "v1alpha1", "kaiwoqueueconfigs", "KaiwoQueueConfig", False)
KAIWOCONFIGS = Resource("config.kaiwo.silogen.ai", "v1alpha1", "kaiwoconfigs", "KaiwoConfig", False)
AIMNAMESPACECONFIGS = Resource("config.kaiwo.silogen.ai", "v1alpha1", "aimnamespaceconfigs",
                               "AIMNamespaceConfig", True)

# KubeRay, AppWrapper.
RAYJOBS = Resource("ray.io", "v1", "rayjobs", "RayJob", True)
RAYSERVICES = Resource("ray.io", "v1", "rayservices", "RayService", True)
RAYCLUSTERS = Resource("ray.io", "v1", "rayclusters", "RayCluster", True)
APPWRAPPERS = Resource("workload.codeflare.dev", "v1beta2", "appwrappers", "AppWrapper", True)

# Gateway API (optional: HTTPRoutes for KaiwoServices in namespaces whose AIMNamespaceConfig names a gateway).
GATEWAYS = Resource("gateway.networking.k8s.io", "v1", "gateways", "Gateway", True)
HTTPROUTES = Resource("gateway.networking.k8s.io", "v1", "httproutes", "HTTPRoute", True)

# Kueue (v1beta2 by default; `.with_version("v1beta1")` for older clusters). Topology is v1beta1.
CLUSTERQUEUES = Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", False)
LOCALQUEUES = Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue", True)
RESOURCEFLAVORS = Resource("kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor", False)
WORKLOADPRIORITYCLASSES = Resource("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses",
                                   "WorkloadPriorityClass", False)
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload", True)
PRIORITYCLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False)
TOPOLOGIES = Resource("kueue.x-k8s.io", "v1beta1", "topologies", "Topology", False)
# The admission webhooks' registrations (the webhook server keeps their caBundle current; doctor reads them).
MUTATINGWEBHOOKCONFIGURATIONS = Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                                         "MutatingWebhookConfiguration", False)
VALIDATINGWEBHOOKCONFIGURATIONS = Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
                                           "ValidatingWebhookConfiguration", False)
ENDPOINTS = Resource("", "v1", "endpoints", "Endpoints", True)

ALL: tuple[Resource, ...] = (
    NAMESPACES, NODES, PODS, EVENTS, CONFIGMAPS, SECRETS, PVCS, SERVICES, DEPLOYMENTS, JOBS, LEASES, CRDS,
    KAIWOJOBS, KAIWOSERVICES, KAIWOQUEUECONFIGS, KAIWOCONFIGS, AIMNAMESPACECONFIGS,
    RAYJOBS, RAYSERVICES, RAYCLUSTERS, APPWRAPPERS, GATEWAYS, HTTPROUTES,
    CLUSTERQUEUES, LOCALQUEUES, RESOURCEFLAVORS, WORKLOADPRIORITYCLASSES, WORKLOADS, TOPOLOGIES, PRIORITYCLASSES,
)

# The label Kueue puts on a Workload: the uid of the job (Job, RayJob, AppWrapper, pod) it queues.
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"

# What a workload owns. Its children (ownerReference with controller=true), by workload kind: what its
# controller renders, watches and reads back, storage after the main object as the controller lists them.
WORKLOAD_CHILDREN: dict[str, tuple[Resource, ...]] = {
    "KaiwoJob": (JOBS, RAYJOBS, PVCS, CONFIGMAPS),
    "KaiwoService": (DEPLOYMENTS, APPWRAPPERS, JOBS, PVCS, CONFIGMAPS, HTTPROUTES),
}
# Owned through a child: the RayService an AppWrapper makes, the RayCluster of a RayJob or RayService.
WORKLOAD_DESCENDANTS: tuple[Resource, ...] = (RAYSERVICES, RAYCLUSTERS)
# Every kind a workload of either kind owns, directly or through a child.
WORKLOAD_OWNED: tuple[Resource, ...] = (
    *dict.fromkeys(res for children in WORKLOAD_CHILDREN.values() for res in children), *WORKLOAD_DESCENDANTS)

_BY_KIND: dict[tuple[str, str], Resource] = {(r.group, r.kind): r for r in ALL}


def for_object(obj: dict[str, object]) -> Resource:
    """The resource of a manifest, keeping the manifest's version (so v1beta1 Kueue objects stay v1beta1)."""
    api_version = str(obj.get("apiVersion", ""))
    kind = str(obj.get("kind", ""))
    group, _, version = api_version.rpartition("/")
    resource = _BY_KIND.get((group, kind))
    if resource is None:
        raise KeyError(f"unknown resource kind {kind!r} in {api_version!r}")
    return resource if resource.version == version else resource.with_version(version)
