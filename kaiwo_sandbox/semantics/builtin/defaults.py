"""The defaulting a real apiserver applies to built-in kinds on every write, so a client reads back what it
would read from a cluster: the SetDefaults_* functions of pkg/apis/{core,apps,batch,...}/v1 plus the few
values set by create strategies and default-on admission plugins (Job selector and template labels,
Namespace finalizer and name label, Pod priority, service account and not-ready/unreachable tolerations,
Service cluster IP).

Everything here only fills what is absent, so applying the defaults twice changes nothing.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from decimal import ROUND_CEILING, Decimal
from functools import lru_cache
from typing import Any

import orjson

from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.semantics.builtin.apiservices import DEFAULTERS as APISERVICE_DEFAULTERS
from kaiwo_sandbox.semantics.builtin.rbac import DEFAULTERS as RBAC_DEFAULTERS
from kaiwo_sandbox.semantics.builtin.webhooks import DEFAULTERS as WEBHOOK_DEFAULTERS
from kaiwo_sandbox.semantics.qos import qos_class
from kaiwo_sandbox.semantics.quantity import format_quantity, parse_quantity, quantity_format

DEFAULT_MODE = 0o644  # 420: secret/configMap/projected/downwardAPI volume file mode


def _copy(obj: JsonObj) -> JsonObj:
    # A JSON round trip is faster than copy.deepcopy for wire-shaped data.
    copied: JsonObj = orjson.loads(orjson.dumps(obj))
    return copied


def _dict(parent: JsonObj, key: str) -> JsonObj:
    """parent[key] as a dict, created when absent or null (only ever on our own copy)."""
    value = parent.get(key)
    if not isinstance(value, dict):
        value = {}
        parent[key] = value
    return value


def _dicts(value: Any) -> list[JsonObj]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


# --- quantities ---------------------------------------------------------------------------------------

_MILLI = Decimal("0.001")


@lru_cache(maxsize=4096)
def canonical_quantity(value: str | int | float) -> str | None:
    """How the apiserver writes a resource.Quantity back: rounded up to milli units (SetDefaults_ResourceList),
    in its canonical spelling (`0.5` -> `500m`, `1024Mi` -> `1Gi`, `8` -> `"8"`). None when unparseable
    (validation reports it)."""
    try:
        amount = parse_quantity(value)
        fmt = quantity_format(value)
    except (ValueError, ArithmeticError):
        return None
    if amount != amount.quantize(_MILLI, rounding=ROUND_CEILING):
        amount = amount.quantize(_MILLI, rounding=ROUND_CEILING)
    return format_quantity(amount, fmt)


def _canonical_list(resources: Any) -> None:
    if not isinstance(resources, dict):
        return
    for name, value in list(resources.items()):
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            canonical = canonical_quantity(value)
            if canonical is not None:
                resources[name] = canonical


def _canonical_requirements(requirements: Any) -> None:
    if isinstance(requirements, dict):
        _canonical_list(requirements.get("limits"))
        _canonical_list(requirements.get("requests"))


# --- pod spec -----------------------------------------------------------------------------------------


def _image_pull_policy(image: str) -> str:
    """:latest or no tag -> Always, anything else (a tag or a digest) -> IfNotPresent."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return "Always"
    return "Always" if last.rsplit(":", 1)[1] == "latest" else "IfNotPresent"


def _default_probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    probe.setdefault("timeoutSeconds", 1)
    probe.setdefault("periodSeconds", 10)
    probe.setdefault("successThreshold", 1)
    probe.setdefault("failureThreshold", 3)
    http = probe.get("httpGet")
    if isinstance(http, dict):
        http.setdefault("path", "/")
        http.setdefault("scheme", "HTTP")
    grpc = probe.get("grpc")
    if isinstance(grpc, dict):
        grpc.setdefault("service", "")


def _default_lifecycle_handler(handler: Any) -> None:
    if isinstance(handler, dict):
        http = handler.get("httpGet")
        if isinstance(http, dict):
            http.setdefault("path", "/")
            http.setdefault("scheme", "HTTP")


def _default_container(c: JsonObj, *, host_network: bool) -> None:
    image = c.get("image")
    if isinstance(image, str) and image and "imagePullPolicy" not in c:
        c["imagePullPolicy"] = _image_pull_policy(image)
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    for port in _dicts(c.get("ports")):
        port.setdefault("protocol", "TCP")
        if host_network and "hostPort" not in port and "containerPort" in port:
            port["hostPort"] = port["containerPort"]
    for env in _dicts(c.get("env")):
        value_from = env.get("valueFrom")
        if isinstance(value_from, dict):
            field_ref = value_from.get("fieldRef")
            if isinstance(field_ref, dict):
                field_ref.setdefault("apiVersion", "v1")
    if "resources" not in c:
        c["resources"] = {}  # a non-pointer struct: the server always writes it, if only as {}
    _canonical_requirements(c.get("resources"))
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        _default_probe(c.get(probe))
    lifecycle = c.get("lifecycle")
    if isinstance(lifecycle, dict):
        _default_lifecycle_handler(lifecycle.get("postStart"))
        _default_lifecycle_handler(lifecycle.get("preStop"))


def _default_volume(v: JsonObj) -> None:
    sources = set(v) - {"name"}
    if not sources:
        v["emptyDir"] = {}
    for kind in ("secret", "configMap", "downwardAPI", "projected"):
        source = v.get(kind)
        if isinstance(source, dict):
            source.setdefault("defaultMode", DEFAULT_MODE)
    for item in _dicts((v.get("downwardAPI") or {}).get("items") if isinstance(v.get("downwardAPI"), dict) else None):
        field_ref = item.get("fieldRef")
        if isinstance(field_ref, dict):
            field_ref.setdefault("apiVersion", "v1")
    host_path = v.get("hostPath")
    if isinstance(host_path, dict):
        host_path.setdefault("type", "")
    projected = v.get("projected")
    if isinstance(projected, dict):
        for src in _dicts(projected.get("sources")):
            token = src.get("serviceAccountToken")
            if isinstance(token, dict):
                token.setdefault("expirationSeconds", 3600)


def default_pod_spec(spec: JsonObj) -> None:
    """SetDefaults_PodSpec and the per-container/volume defaults (pods and pod templates alike)."""
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("schedulerName", "default-scheduler")
    if not isinstance(spec.get("securityContext"), dict):
        spec["securityContext"] = {}
    _canonical_requirements(spec.get("resources"))  # pod-level resources
    host_network = bool(spec.get("hostNetwork"))
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in _dicts(spec.get(key)):
            _default_container(c, host_network=host_network)
    for v in _dicts(spec.get("volumes")):
        _default_volume(v)


def _default_template(obj: JsonObj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    template = spec.get("template")
    if isinstance(template, dict):
        template_spec = template.get("spec")
        if isinstance(template_spec, dict):
            default_pod_spec(template_spec)


_NOT_READY_TOLERATIONS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _requests_from_limits(c: JsonObj) -> None:
    """Requests default to limits for each resource with a limit but no request (Pods only, not templates)."""
    resources = c.get("resources")
    if isinstance(resources, dict):
        limits = resources.get("limits")
        if isinstance(limits, dict) and limits:
            requests = _dict(resources, "requests")
            for name, quantity in limits.items():
                requests.setdefault(name, quantity)


def _default_pod(obj: JsonObj) -> None:
    spec = _dict(obj, "spec")
    default_pod_spec(spec)
    for c in _dicts(spec.get("containers")) + _dicts(spec.get("initContainers")):
        _requests_from_limits(c)
    spec.setdefault("enableServiceLinks", True)
    # Admission plugins on by default: ServiceAccount, Priority, DefaultTolerationSeconds.
    if "serviceAccountName" not in spec:
        spec["serviceAccountName"] = spec.get("serviceAccount") or "default"
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    if not spec.get("priorityClassName") and "priority" not in spec:
        spec["priority"] = 0
    if "priority" in spec:
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    tolerations = spec.get("tolerations")
    if not isinstance(tolerations, list):
        tolerations = []
    for key in _NOT_READY_TOLERATIONS:
        covered = any(
            isinstance(t, dict) and t.get("effect") in ("NoExecute", None, "")
            and (t.get("key") == key or (not t.get("key") and t.get("operator") == "Exists"))
            for t in tolerations
        )
        if not covered:
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
    spec["tolerations"] = tolerations
    status = _dict(obj, "status")
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", qos_class(spec))




# --- workloads ----------------------------------------------------------------------------------------


def _default_job(obj: JsonObj) -> None:
    spec = _dict(obj, "spec")
    if "completions" not in spec and "parallelism" not in spec:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    if "backoffLimit" not in spec:
        spec["backoffLimit"] = 2147483647 if "backoffLimitPerIndex" in spec else 6
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("manualSelector", False)
    if "podReplacementPolicy" not in spec:
        spec["podReplacementPolicy"] = "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
    policy = spec.get("podFailurePolicy")
    if isinstance(policy, dict):
        for rule in _dicts(policy.get("rules")):
            for pattern in _dicts(rule.get("onPodConditions")):
                pattern.setdefault("status", "True")
    _default_template(obj)
    meta = _dict(obj, "metadata")
    template_meta = _dict(_dict(spec, "template"), "metadata")
    uid = meta.get("uid")
    # The Job strategy generates the selector on create (the uid is assigned before PrepareForCreate),
    # never on update: a create is the write without a resourceVersion.
    creating = not meta.get("resourceVersion")
    if uid and creating and not spec.get("manualSelector") and "selector" not in spec:
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        labels = _dict(template_meta, "labels")
        labels.setdefault("batch.kubernetes.io/controller-uid", uid)
        labels.setdefault("batch.kubernetes.io/job-name", meta.get("name", ""))
        labels.setdefault("controller-uid", uid)
        labels.setdefault("job-name", meta.get("name", ""))
    template_labels = template_meta.get("labels")
    if isinstance(template_labels, dict) and template_labels and not meta.get("labels"):
        meta["labels"] = dict(template_labels)


def _default_deployment(obj: JsonObj) -> None:
    spec = _dict(obj, "spec")
    spec.setdefault("replicas", 1)
    strategy = _dict(spec, "strategy")
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _dict(strategy, "rollingUpdate")
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _default_template(obj)


def _default_replicaset(obj: JsonObj) -> None:
    _dict(obj, "spec").setdefault("replicas", 1)
    _default_template(obj)


def _default_replicationcontroller(obj: JsonObj) -> None:
    """As the v1 defaulter: an empty selector and empty object labels take the template's labels."""
    _default_replicaset(obj)
    spec = _dict(obj, "spec")
    template = spec.get("template")
    template_labels = ((template.get("metadata") or {}).get("labels") or {}) if isinstance(template, dict) else {}
    if template_labels and isinstance(template_labels, dict):
        if not spec.get("selector"):
            spec["selector"] = dict(template_labels)
        meta = _dict(obj, "metadata")
        if not meta.get("labels"):
            meta["labels"] = dict(template_labels)


def _default_statefulset(obj: JsonObj) -> None:
    spec = _dict(obj, "spec")
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = _dict(spec, "updateStrategy")
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        _dict(strategy, "rollingUpdate").setdefault("partition", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    retention = _dict(spec, "persistentVolumeClaimRetentionPolicy")
    retention.setdefault("whenDeleted", "Retain")
    retention.setdefault("whenScaled", "Retain")
    for claim in _dicts(spec.get("volumeClaimTemplates")):
        _default_pvc(claim)
    _default_template(obj)


def _default_daemonset(obj: JsonObj) -> None:
    spec = _dict(obj, "spec")
    strategy = _dict(spec, "updateStrategy")
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _dict(strategy, "rollingUpdate")
        rolling.setdefault("maxUnavailable", 1)
        rolling.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    _default_template(obj)


def _default_cronjob(obj: JsonObj) -> None:
    spec = _dict(obj, "spec")
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    job_template = spec.get("jobTemplate")
    if isinstance(job_template, dict):
        _default_template(job_template)


# --- core objects -------------------------------------------------------------------------------------


def _stable_number(seed: str, modulo: int) -> int:
    return int.from_bytes(hashlib.blake2b(seed.encode(), digest_size=8).digest(), "big") % modulo


def _cluster_ip(namespace: str, name: str) -> str:
    """A stable address in the default service CIDR 10.96.0.0/12 (10.96.0.1 is the kubernetes service)."""
    n = 2 + _stable_number(f"{namespace}/{name}", (1 << 20) - 3)
    return f"10.{96 + (n >> 16)}.{(n >> 8) & 0xFF}.{n & 0xFF}"


def _default_service(obj: JsonObj) -> None:
    spec = _dict(obj, "spec")
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    svc_type = spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["sessionAffinity"] == "ClientIP":
        config = _dict(_dict(spec, "sessionAffinityConfig"), "clientIP")
        config.setdefault("timeoutSeconds", 10800)
    for port in _dicts(spec.get("ports")):
        port.setdefault("protocol", "TCP")
        if "targetPort" not in port and "port" in port:
            port["targetPort"] = port["port"]
        if svc_type in ("NodePort", "LoadBalancer") and "nodePort" not in port:
            seed = f"{meta.get('namespace', '')}/{meta.get('name', '')}/{port.get('port')}/{port['protocol']}"
            port["nodePort"] = 30000 + _stable_number(seed, 2768)
    if svc_type == "ExternalName":
        return
    spec.setdefault("internalTrafficPolicy", "Cluster")
    if svc_type in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if svc_type == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    if "clusterIP" not in spec:
        spec["clusterIP"] = _cluster_ip(str(meta.get("namespace", "")), str(meta.get("name", "")))
    if "clusterIPs" not in spec:
        spec["clusterIPs"] = [spec["clusterIP"]]
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")


def _default_pvc(obj: JsonObj) -> None:
    spec = _dict(obj, "spec")
    spec.setdefault("volumeMode", "Filesystem")
    _canonical_requirements(spec.get("resources"))


def _default_pvc_object(obj: JsonObj) -> None:
    _default_pvc(obj)
    status = _dict(obj, "status")
    status.setdefault("phase", "Pending")
    _canonical_list(status.get("capacity"))


def _default_namespace(obj: JsonObj) -> None:
    meta = _dict(obj, "metadata")
    name = meta.get("name")
    if isinstance(name, str) and name:
        labels = _dict(meta, "labels")
        labels["kubernetes.io/metadata.name"] = name
    spec = _dict(obj, "spec")
    if "finalizers" not in spec:
        spec["finalizers"] = ["kubernetes"]
    _dict(obj, "status").setdefault("phase", "Active")


def _default_node(obj: JsonObj) -> None:
    status = obj.get("status")
    if not isinstance(status, dict):
        return
    _canonical_list(status.get("capacity"))
    _canonical_list(status.get("allocatable"))
    if isinstance(status.get("capacity"), dict) and "allocatable" not in status:
        status["allocatable"] = dict(status["capacity"])


def _default_secret(obj: JsonObj) -> None:
    obj.setdefault("type", "Opaque")
    # Not defaulting but the v1 -> internal conversion, which runs on every write: stringData is
    # write-only, its entries overwrite data's (base64, as data is served) and it is never stored.
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        current = obj.get("data")
        data: JsonObj = current if isinstance(current, dict) else {}
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value if value is not None else "").encode()).decode()
        obj["data"] = data


def _default_priorityclass(obj: JsonObj) -> None:
    obj.setdefault("preemptionPolicy", "PreemptLowerPriority")


def _default_storageclass(obj: JsonObj) -> None:
    obj.setdefault("reclaimPolicy", "Delete")
    obj.setdefault("volumeBindingMode", "Immediate")


def _default_crd(obj: JsonObj) -> None:
    spec = _dict(obj, "spec")
    names = _dict(spec, "names")
    kind = names.get("kind")
    if isinstance(kind, str) and kind:
        names.setdefault("singular", kind.lower())
        names.setdefault("listKind", kind + "List")
    conversion = _dict(spec, "conversion")
    conversion.setdefault("strategy", "None")
    webhook = conversion.get("webhook")
    if isinstance(webhook, dict):
        client_config = webhook.get("clientConfig")
        service = client_config.get("service") if isinstance(client_config, dict) else None
        if isinstance(service, dict):
            service.setdefault("port", 443)


def _default_event(obj: JsonObj) -> None:
    # The core Event type carries a reportingComponent that the server fills as "" when absent.
    obj.setdefault("reportingComponent", "")
    obj.setdefault("reportingInstance", "")


_DEFAULTERS: dict[tuple[str, str], Callable[[JsonObj], None]] = {
    ("", "Pod"): _default_pod,
    ("", "PodTemplate"): lambda o: default_pod_spec(_dict(_dict(o, "template"), "spec")),
    ("", "ReplicationController"): _default_replicationcontroller,
    ("", "Service"): _default_service,
    ("", "PersistentVolumeClaim"): _default_pvc_object,
    ("", "Namespace"): _default_namespace,
    ("", "Node"): _default_node,
    ("", "Secret"): _default_secret,
    ("", "Event"): _default_event,
    ("apps", "Deployment"): _default_deployment,
    ("apps", "ReplicaSet"): _default_replicaset,
    ("apps", "StatefulSet"): _default_statefulset,
    ("apps", "DaemonSet"): _default_daemonset,
    ("batch", "Job"): _default_job,
    ("batch", "CronJob"): _default_cronjob,
    ("scheduling.k8s.io", "PriorityClass"): _default_priorityclass,
    ("storage.k8s.io", "StorageClass"): _default_storageclass,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _default_crd,
}


_DEFAULTERS.update(RBAC_DEFAULTERS)
_DEFAULTERS.update(WEBHOOK_DEFAULTERS)
_DEFAULTERS.update(APISERVICE_DEFAULTERS)


def has_builtin_defaults(group: str, kind: str) -> bool:
    return (group, kind) in _DEFAULTERS


def apply_builtin_defaults(group: str, kind: str, obj: JsonObj) -> JsonObj:
    """A defaulted copy of `obj` (the input is left untouched). Kinds without defaults come back as a copy."""
    result = _copy(obj)
    default_in_place(group, kind, result)
    return result


def default_in_place(group: str, kind: str, obj: JsonObj) -> None:
    """`apply_builtin_defaults` on an object the caller owns outright, sharing nothing (no copy)."""
    defaulter = _DEFAULTERS.get((group, kind))
    if defaulter is not None:
        defaulter(obj)
