"""CustomResourceDefinitions of the operators the simulated cluster runs, which the sandbox preinstalls:
KubeRay, AppWrapper, Kueue, the Prometheus operator's PodMonitor, ServiceMonitor and PrometheusRule (so that
deploy/'s monitoring component applies to the sandbox as to a cluster running kube-prometheus;
nothing scrapes), and the Gateway API's GatewayClass, Gateway and HTTPRoute (stored and served; no
gateway controller programs them). The product under test passes its own in `SandboxConfig.extra_crds`. Schemas
are deliberately loose (unknown fields preserved) — the operators that own these kinds validate
them, and the sandbox only needs to store, serve and print them — but names, scopes, short names,
subresources and printer columns are the upstream ones, because that is what users and `kubectl
get` see.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kaiwo_sandbox.contracts import JsonObj

_LOOSE_OBJECT: JsonObj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_AGE: JsonObj = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def _schema(spec: JsonObj | None = None, status: JsonObj | None = None) -> JsonObj:
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec or dict(_LOOSE_OBJECT),
            "status": status or dict(_LOOSE_OBJECT),
        },
        "x-kubernetes-preserve-unknown-fields": True,
    }


def _loose(properties: JsonObj) -> JsonObj:
    """An object that keeps every field but declares `properties` (for their defaults)."""
    return {**_LOOSE_OBJECT, "properties": properties}


def _int(default: int) -> JsonObj:
    return {"type": "integer", "format": "int32", "default": default}


def _list_of(item: JsonObj) -> JsonObj:
    return {"type": "array", "items": item}


def _string(default: str) -> JsonObj:
    return {"type": "string", "default": default}


# The `default:` markers the core types put in a PodTemplateSpec embedded in a CRD (controller-gen
# copies them from k8s.io/api): every container list's ports, env/envFrom references, probes, and the
# volume sources that declare one. `file_key_ref`: the k8s.io/api the CRD was built with has
# `env[].valueFrom.fileKeyRef` (1.34+; Kueue >= 0.16 yes, KubeRay 1.4.2 no).
_NAMED_REF: JsonObj = _loose({"name": _string("")})
_PROBE: JsonObj = _loose({"grpc": _loose({"service": _string("")})})
_VALUE_FROM: JsonObj = _loose({"configMapKeyRef": _NAMED_REF, "secretKeyRef": _NAMED_REF})
_ENV: JsonObj = _list_of(_loose({"valueFrom": _VALUE_FROM}))
_ENV_FROM: JsonObj = _list_of(_loose({"configMapRef": _NAMED_REF, "secretRef": _NAMED_REF}))
_VOLUME: JsonObj = _loose({
    "azureDisk": _loose({"fsType": _string("ext4"), "readOnly": {"type": "boolean", "default": False}}),
    "cephfs": _loose({"secretRef": _NAMED_REF}),
    "cinder": _loose({"secretRef": _NAMED_REF}),
    "configMap": _NAMED_REF,
    "csi": _loose({"nodePublishSecretRef": _NAMED_REF}),
    "flexVolume": _loose({"secretRef": _NAMED_REF}),
    "iscsi": _loose({"iscsiInterface": _string("default"), "secretRef": _NAMED_REF}),
    "projected": _loose({"sources": _list_of(_loose({"configMap": _NAMED_REF, "secret": _NAMED_REF}))}),
    "rbd": _loose({"keyring": _string("/etc/ceph/keyring"), "pool": _string("rbd"), "secretRef": _NAMED_REF,
                   "user": _string("admin")}),
    "scaleIO": _loose({"fsType": _string("xfs"), "secretRef": _NAMED_REF,
                       "storageMode": _string("ThinProvisioned")}),
    "storageos": _loose({"secretRef": _NAMED_REF}),
})


def _pod_template(*, file_key_ref: bool) -> JsonObj:
    value_from = _VALUE_FROM
    if file_key_ref:
        value_from = _loose({**_VALUE_FROM["properties"],
                             "fileKeyRef": _loose({"optional": {"type": "boolean", "default": False}})})
    container = _loose({
        "ports": _list_of(_loose({"protocol": _string("TCP")})),
        "env": _list_of(_loose({"valueFrom": value_from})), "envFrom": _ENV_FROM,
        "livenessProbe": _PROBE, "readinessProbe": _PROBE, "startupProbe": _PROBE,
    })
    return _loose({"spec": _loose({
        "containers": _list_of(container), "initContainers": _list_of(container),
        "ephemeralContainers": _list_of(container), "imagePullSecrets": _list_of(_NAMED_REF),
        "volumes": _list_of(_VOLUME),
    })})


# The `default:` markers of KubeRay v1.4.2's CRDs (ray-operator/config/crd/bases/ray.io_*.yaml), the
# version the reference cluster runs; outside them the schema stays loose.
_TCP_PORTS: JsonObj = _loose({"ports": _list_of(_loose({"protocol": {"type": "string", "default": "TCP"}}))})
_RAY_POD_TEMPLATE = _pod_template(file_key_ref=False)
_REDIS_CREDENTIAL: JsonObj = _loose({"valueFrom": _VALUE_FROM})
_RAYCLUSTER_SPEC: JsonObj = _loose({
    "autoscalerOptions": _loose({"env": _ENV, "envFrom": _ENV_FROM}),
    "gcsFaultToleranceOptions": _loose({"redisPassword": _REDIS_CREDENTIAL, "redisUsername": _REDIS_CREDENTIAL}),
    "headGroupSpec": _loose({"headService": _loose({"spec": _TCP_PORTS}), "template": _RAY_POD_TEMPLATE}),
    "workerGroupSpecs": _list_of(_loose({"maxReplicas": _int(2147483647), "minReplicas": _int(0),
                                         "numOfHosts": _int(1), "replicas": _int(0),
                                         "template": _RAY_POD_TEMPLATE})),
})
_RAYJOB_SPEC: JsonObj = _loose({
    "backoffLimit": _int(0),
    "submissionMode": {"type": "string", "default": "K8sJobMode"},
    "ttlSecondsAfterFinished": _int(0),
    "rayClusterSpec": _RAYCLUSTER_SPEC,
    "submitterPodTemplate": _RAY_POD_TEMPLATE,
})
_RAYJOB_STATUS: JsonObj = _loose({"failed": _int(0), "succeeded": _int(0)})
_RAYSERVICE_SPEC: JsonObj = _loose({"rayClusterConfig": _RAYCLUSTER_SPEC, "serveService": _loose({"spec": _TCP_PORTS})})


# The `default:` markers of Kueue's CRDs (config/components/crd/bases/kueue.x-k8s.io_*.yaml), the same
# in every release from v0.16 (v1beta2 stored) to v0.19.2 for both served versions, except where noted.
# Kueue's mutating webhooks add no field defaults (ClusterQueue/ResourceFlavor: a finalizer, not
# simulated; Workload: drops minCount without PartialAdmission). ResourceFlavor, WorkloadPriorityClass
# and Topology declare none. `namespaceSelector` has no default (null selects no namespace).
_FAIR_SHARING: JsonObj = _loose({"weight": {"x-kubernetes-int-or-string": True, "default": 1}})
_CLUSTER_QUEUE_SPEC: JsonObj = _loose({
    "fairSharing": _FAIR_SHARING,
    "flavorFungibility": {**_loose({"whenCanBorrow": _string("MayStopSearch"),
                                    "whenCanPreempt": _string("TryNextFlavor")}), "default": {}},
    "preemption": {**_loose({
        "borrowWithinCohort": {**_loose({"policy": _string("Never")}), "default": {}},
        "reclaimWithinCohort": _string("Never"),
        "withinClusterQueue": _string("Never"),
    }), "default": {}},
    "queueingStrategy": _string("BestEffortFIFO"),
    "stopPolicy": _string("None"),
})
_LOCAL_QUEUE_SPEC: JsonObj = _loose({"fairSharing": _FAIR_SHARING, "stopPolicy": _string("None")})
_WORKLOAD_SPEC: JsonObj = _loose({
    "active": {"type": "boolean", "default": True},
    "podSets": _list_of(_loose({"count": _int(1), "name": _string("main"),
                                "template": _pod_template(file_key_ref=True)})),
})
# v1beta1 only: the priority's source, replaced by `priorityClassRef` in v1beta2.
_WORKLOAD_SPEC_V1BETA1: JsonObj = _loose({**_WORKLOAD_SPEC["properties"],
                                          "priorityClassSource": _string("")})
_WORKLOAD_STATUS: JsonObj = _loose({
    "admission": _loose({"podSetAssignments": _list_of(_loose({"name": _string("main")}))}),
})


def _column(name: str, path: str, kind: str = "string", priority: int = 0, description: str = "") -> JsonObj:
    column: JsonObj = {"name": name, "type": kind, "jsonPath": path}
    if priority:
        column["priority"] = priority
    if description:
        column["description"] = description
    return column


def crd(group: str, kind: str, plural: str, *, versions: Sequence[tuple[str, bool]],
        columns: Iterable[JsonObj] = (), scope: str = "Namespaced", short_names: Sequence[str] = (),
        categories: Sequence[str] = (), per_version_columns: dict[str, list[JsonObj]] | None = None,
        deprecated: Sequence[str] = (), spec: JsonObj | None = None, status: JsonObj | None = None,
        per_version_spec: dict[str, JsonObj] | None = None) -> JsonObj:
    """A CRD with a loose schema and a status subresource. `versions`: (name, is_storage); `spec` and
    `status`: schemas for those (loose ones declaring the upstream defaults), `per_version_spec` where
    a version's differs."""
    names: JsonObj = {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()}
    if short_names:
        names["shortNames"] = list(short_names)
    if categories:
        names["categories"] = list(categories)
    default_columns = list(columns)
    version_specs: list[Any] = []
    for name, storage in versions:
        version: JsonObj = {
            "name": name, "served": True, "storage": storage,
            "schema": {"openAPIV3Schema": _schema((per_version_spec or {}).get(name, spec), status)},
            "subresources": {"status": {}},
        }
        version_columns = (per_version_columns or {}).get(name, default_columns)
        if version_columns:
            version["additionalPrinterColumns"] = version_columns
        if name in deprecated:
            version["deprecated"] = True
        version_specs.append(version)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "names": names, "scope": scope, "versions": version_specs},
    }


def kuberay_crds() -> list[JsonObj]:
    group = "ray.io"
    v1 = [("v1", True)]
    return [
        crd(group, "RayJob", "rayjobs", versions=v1, categories=("all",), spec=_RAYJOB_SPEC, status=_RAYJOB_STATUS,
            columns=[
            _column("job status", ".status.jobStatus"),
            _column("deployment status", ".status.jobDeploymentStatus"),
            _column("ray cluster name", ".status.rayClusterName"),
            _column("start time", ".status.startTime"),
            _column("end time", ".status.endTime"),
            {"name": "age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ]),
        crd(group, "RayService", "rayservices", versions=v1, categories=("all",), spec=_RAYSERVICE_SPEC, columns=[
            _column("service status", ".status.serviceStatus"),
            _column("num serve endpoints", ".status.numServeEndpoints"),
        ]),
        crd(group, "RayCluster", "rayclusters", versions=v1, categories=("all",), spec=_RAYCLUSTER_SPEC, columns=[
            _column("desired workers", ".status.desiredWorkerReplicas", "integer"),
            _column("available workers", ".status.availableWorkerReplicas", "integer"),
            _column("cpus", ".status.desiredCPU"),
            _column("memory", ".status.desiredMemory"),
            _column("gpus", ".status.desiredGPU"),
            _column("tpus", ".status.desiredTPU", priority=1),
            _column("status", ".status.state"),
            {"name": "age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            _column("head pod IP", ".status.head.podIP", priority=1),
            _column("head service IP", ".status.head.serviceIP", priority=1),
        ]),
    ]


def appwrapper_crds() -> list[JsonObj]:
    return [crd("workload.codeflare.dev", "AppWrapper", "appwrappers", versions=[("v1beta2", True)],
                short_names=("aw",), columns=[
                    _column("Status", ".status.phase"),
                    _column("Quota Reserved", ".status.conditions[?(@.type==\"QuotaReserved\")].status"),
                    _column("Resources Deployed", ".status.conditions[?(@.type==\"ResourcesDeployed\")].status"),
                    _column("Unhealthy", ".status.conditions[?(@.type==\"Unhealthy\")].status"),
                    _AGE,
                ])]


def kueue_crds() -> list[JsonObj]:
    """Kueue: v1beta2 is served and stored, v1beta1 still served (deprecated); Topology is v1beta1."""
    group = "kueue.x-k8s.io"
    both = [("v1beta2", True), ("v1beta1", False)]
    cq_columns = [
        _column("Cohort", ".spec.cohortName", description="Cohort that this ClusterQueue belongs to"),
        _column("Strategy", ".spec.queueingStrategy", priority=1,
                description="The queueing strategy used to prioritize workloads"),
        _column("Pending Workloads", ".status.pendingWorkloads", "integer",
                description="Number of pending workloads"),
        _column("Admitted Workloads", ".status.admittedWorkloads", "integer", priority=1,
                description="Number of admitted workloads that haven't finished yet"),
    ]
    cq_v1beta1 = [dict(c) for c in cq_columns]
    cq_v1beta1[0]["jsonPath"] = ".spec.cohort"
    lq_columns = [
        _column("ClusterQueue", ".spec.clusterQueue", description="Backing ClusterQueue"),
        _column("Pending Workloads", ".status.pendingWorkloads", "integer",
                description="Number of pending workloads"),
        _column("Admitted Workloads", ".status.admittedWorkloads", "integer",
                description="Number of admitted workloads that haven't finished yet."),
    ]
    workload_columns = [
        _column("Queue", ".spec.queueName", description="Name of the queue this workload was submitted to"),
        _column("Reserved in", ".status.admission.clusterQueue",
                description="Name of the ClusterQueue where the workload is reserving quota"),
        _column("Admitted", ".status.conditions[?(@.type=='Admitted')].status",
                description="Admission status"),
        _column("Finished", ".status.conditions[?(@.type=='Finished')].status",
                description="Workload finished"),
        _AGE,
    ]
    return [
        crd(group, "ClusterQueue", "clusterqueues", versions=both, scope="Cluster", short_names=("cq",),
            spec=_CLUSTER_QUEUE_SPEC, columns=cq_columns, per_version_columns={"v1beta1": cq_v1beta1}, deprecated=("v1beta1",)),
        crd(group, "LocalQueue", "localqueues", versions=both, short_names=("queue", "queues", "lq"),
            spec=_LOCAL_QUEUE_SPEC, columns=lq_columns, deprecated=("v1beta1",)),
        crd(group, "ResourceFlavor", "resourceflavors", versions=both, scope="Cluster", short_names=("flavor",
            "flavors", "rf"), deprecated=("v1beta1",)),
        crd(group, "WorkloadPriorityClass", "workloadpriorityclasses", versions=both, scope="Cluster",
            short_names=("wpc",), columns=[_column("Value", ".value", "integer",
                                                   description="Value of workloadPriorityClass's Priority"),
                                           _AGE], deprecated=("v1beta1",)),
        crd(group, "Workload", "workloads", versions=both, short_names=("wl", "kwl"), columns=workload_columns,
            deprecated=("v1beta1",), spec=_WORKLOAD_SPEC, status=_WORKLOAD_STATUS,
            per_version_spec={"v1beta1": _WORKLOAD_SPEC_V1BETA1}),
        crd(group, "Topology", "topologies", versions=[("v1beta1", True)], scope="Cluster"),
    ]


def monitoring_crds() -> list[JsonObj]:
    group = "monitoring.coreos.com"
    v1 = [("v1", True)]
    return [
        crd(group, "PodMonitor", "podmonitors", versions=v1, short_names=("pmon",),
            categories=("prometheus-operator",)),
        crd(group, "ServiceMonitor", "servicemonitors", versions=v1, short_names=("smon",),
            categories=("prometheus-operator",)),
        crd(group, "PrometheusRule", "prometheusrules", versions=v1, short_names=("promrule",),
            categories=("prometheus-operator",)),
    ]


# HTTPRoute's CRD defaults (gateway-api apis/v1 httproute_types.go, shared_types.go): a parentRef's group
# and kind, a backendRef's group, kind and weight, and a rule without matches matching PathPrefix "/".
_PARENT_REF: JsonObj = _loose({"group": _string("gateway.networking.k8s.io"), "kind": _string("Gateway")})
_HTTP_ROUTE_SPEC: JsonObj = _loose({
    "parentRefs": _list_of(_PARENT_REF),
    "rules": {**_list_of(_loose({
        "matches": {**_list_of(_loose({"path": _loose({"type": _string("PathPrefix"), "value": _string("/")})})),
                    "default": [{"path": {"type": "PathPrefix", "value": "/"}}]},
        "backendRefs": _list_of(_loose({"group": _string(""), "kind": _string("Service"), "weight": _int(1)})),
    })), "default": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}]}]},
})


def gateway_crds() -> list[JsonObj]:
    """The Gateway API kinds kaiwo-ray reads and writes (standard channel v1; no controller programs them)."""
    group = "gateway.networking.k8s.io"
    v1 = [("v1", True)]
    return [
        crd(group, "GatewayClass", "gatewayclasses", versions=v1, scope="Cluster", short_names=("gc",),
            categories=("gateway-api",), columns=[_column("Controller", ".spec.controllerName"), _AGE]),
        crd(group, "Gateway", "gateways", versions=v1, short_names=("gtw",), categories=("gateway-api",),
            columns=[_column("Class", ".spec.gatewayClassName"), _column("Address", ".status.addresses[*].value"),
                     _column("Programmed", ".status.conditions[?(@.type==\"Programmed\")].status"), _AGE]),
        crd(group, "HTTPRoute", "httproutes", versions=v1, categories=("gateway-api",), spec=_HTTP_ROUTE_SPEC,
            columns=[_column("Hostnames", ".spec.hostnames"), _AGE]),
    ]


def cert_manager_crds() -> list[JsonObj]:
    """cert-manager.io/v1 Certificate, Issuer and ClusterIssuer (installed only with the opt-in
    `cert-manager` controller: discovery then shows cert-manager.io, as on a cluster running it)."""
    group = "cert-manager.io"
    v1 = [("v1", True)]
    ready = _column("Ready", ".status.conditions[?(@.type==\"Ready\")].status")
    message = _column("Status", ".status.conditions[?(@.type==\"Ready\")].message", priority=1)
    return [
        crd(group, "Certificate", "certificates", versions=v1, short_names=("cert", "certs"),
            categories=("cert-manager",), columns=[
                ready, _column("Secret", ".spec.secretName"), _column("Issuer", ".spec.issuerRef.name", priority=1),
                message, {**_AGE, "description": "CreationTimestamp is a timestamp representing the server time "
                                                 "when this object was created."}]),
        crd(group, "Issuer", "issuers", versions=v1, categories=("cert-manager",), columns=[ready, message, _AGE]),
        crd(group, "ClusterIssuer", "clusterissuers", versions=v1, scope="Cluster", categories=("cert-manager",),
            columns=[ready, message, _AGE]),
    ]


def preinstalled_crds() -> list[JsonObj]:
    return kuberay_crds() + appwrapper_crds() + kueue_crds() + monitoring_crds() + gateway_crds()
