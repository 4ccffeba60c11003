"""`meta.k8s.io/v1` Table responses (`Accept: application/json;as=Table`), the form `kubectl get` prints.

Built-in kinds get the columns and cell values of pkg/printers/internalversion (paraphrased), always in the
server's "wide" form: columns with priority 1 are the ones kubectl shows only with `-o wide`.
Custom resources get NAME plus the CRD version's additionalPrinterColumns (AGE when it declares none), evaluated
like the apiextensions table convertor: `date` cells become a human duration, numbers stay numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson

from kaiwo_sandbox.apiserver import jsonpath
from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.semantics.times import parse_time

Row = list[Any]
Printer = Callable[[JsonObj, datetime], Row]

_NAME_DOC = "Name must be unique within a namespace."
_AGE_DOC = "CreationTimestamp is a timestamp representing the server time when this object was created."


def _col(name: str, type_: str = "string", *, priority: int = 0, fmt: str = "", description: str = "") -> JsonObj:
    return {"name": name, "type": type_, "format": fmt, "description": description, "priority": priority}


NAME_COLUMN = _col("Name", fmt="name", description=_NAME_DOC)
AGE_COLUMN = _col("Age", description=_AGE_DOC)


# --- durations ----------------------------------------------------------------------------------------


def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration: two significant units at most, coarser as time goes by."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def since(value: Any, now: datetime) -> str:
    """translateTimestampSince: `<unknown>` for a missing timestamp."""
    moment = parse_time(value)
    if moment is None:
        return "<unknown>"
    return human_duration((now - moment).total_seconds())


# --- helpers ------------------------------------------------------------------------------------------


def _d(value: Any) -> JsonObj:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _meta(obj: JsonObj) -> JsonObj:
    return _d(obj.get("metadata"))


def _name(obj: JsonObj) -> str:
    return str(_meta(obj).get("name", ""))


def _age(obj: JsonObj, now: datetime) -> str:
    return since(_meta(obj).get("creationTimestamp"), now)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _containers_cells(pod_spec: JsonObj) -> tuple[str, str]:
    containers = [c for c in _l(pod_spec.get("containers")) if isinstance(c, dict)]
    return (",".join(str(c.get("name", "")) for c in containers),
            ",".join(str(c.get("image", "")) for c in containers))


def _format_labels(labels: Any) -> str:
    if not isinstance(labels, dict) or not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def _selector_string(selector: Any) -> str:
    """metav1.LabelSelectorAsSelector(...).String()."""
    if not isinstance(selector, dict):
        return ""
    if selector and not {"matchLabels", "matchExpressions"} & selector.keys():
        return _format_labels(selector)  # a ReplicationController's plain label map
    parts: list[tuple[str, str]] = []
    for key, value in _d(selector.get("matchLabels")).items():
        parts.append((key, f"{key}={value}"))
    for expr in _l(selector.get("matchExpressions")):
        if not isinstance(expr, dict):
            continue
        key, op = str(expr.get("key", "")), expr.get("operator")
        values = ",".join(sorted(str(v) for v in _l(expr.get("values"))))
        text = {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key,
                "DoesNotExist": f"!{key}"}.get(str(op), key)
        parts.append((key, text))
    return ",".join(text for _, text in sorted(parts, key=lambda p: p[0]))


def _has_condition(obj: JsonObj, type_: str) -> bool:
    return any(isinstance(c, dict) and c.get("type") == type_ and c.get("status") == "True"
               for c in _l(_d(obj.get("status")).get("conditions")))


# --- pods ---------------------------------------------------------------------------------------------

POD_COLUMNS = [
    NAME_COLUMN,
    _col("Ready", description="The aggregate readiness state of this pod for accepting traffic."),
    _col("Status", description="The aggregate status of the containers in this pod."),
    _col("Restarts", description="The number of times the containers in this pod have been restarted and when "
                                 "the last container in this pod has restarted."),
    AGE_COLUMN,
    _col("IP", priority=1, description="IP address allocated to the pod. Routable at least within the cluster."),
    _col("Node", priority=1, description="NodeName is a request to schedule this pod onto a specific node."),
    _col("Nominated Node", priority=1, description="nominatedNodeName is set when this pod preempts other pods "
                                                   "on the node."),
    _col("Readiness Gates", priority=1, description="If specified, all readiness gates will be evaluated for pod "
                                                    "readiness."),
]


def _restartable(container: Any) -> bool:
    return isinstance(container, dict) and container.get("restartPolicy") == "Always"


def _later(a: datetime | None, b: Any) -> datetime | None:
    moment = parse_time(b)
    if moment is None:
        return a
    return moment if a is None or moment > a else a


def pod_status(pod: JsonObj) -> tuple[str, int, int, int, datetime | None]:
    """kubectl's STATUS column and the READY/RESTARTS figures:
    (reason, ready containers, total containers, restarts, last restart time)."""
    spec, status = _d(pod.get("spec")), _d(pod.get("status"))
    init_specs = {str(c.get("name")): c for c in _l(spec.get("initContainers")) if isinstance(c, dict)}
    total = len(_l(spec.get("containers"))) + sum(1 for c in init_specs.values() if _restartable(c))
    ready = 0
    restarts = 0
    sidecar_restarts = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or phase)
    for cond in _l(status.get("conditions")):
        if isinstance(cond, dict) and cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    initializing = False
    init_statuses = [s for s in _l(status.get("initContainerStatuses")) if isinstance(s, dict)]
    for i, cs in enumerate(init_statuses):
        restarts += _int(cs.get("restartCount"))
        terminated_last = _d(_d(cs.get("lastState")).get("terminated"))
        last_restart = _later(last_restart, terminated_last.get("finishedAt"))
        sidecar = _restartable(init_specs.get(str(cs.get("name"))))
        if sidecar:
            sidecar_restarts += _int(cs.get("restartCount"))
            last_sidecar_restart = _later(last_sidecar_restart, terminated_last.get("finishedAt"))
        state = _d(cs.get("state"))
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if isinstance(terminated, dict) and _int(terminated.get("exitCode")) == 0:
            continue
        if sidecar and cs.get("started") is True:
            if cs.get("ready"):
                ready += 1
            continue
        if isinstance(terminated, dict):
            if terminated.get("reason"):
                reason = f"Init:{terminated['reason']}"
            elif _int(terminated.get("signal")):
                reason = f"Init:Signal:{_int(terminated.get('signal'))}"
            else:
                reason = f"Init:ExitCode:{_int(terminated.get('exitCode'))}"
        elif isinstance(waiting, dict) and waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break

    initialized = any(isinstance(c, dict) and c.get("type") == "Initialized" and c.get("status") == "True"
                      for c in _l(status.get("conditions")))
    if not initializing or initialized:
        restarts = sidecar_restarts
        last_restart = last_sidecar_restart
        has_running = False
        for cs in reversed([s for s in _l(status.get("containerStatuses")) if isinstance(s, dict)]):
            restarts += _int(cs.get("restartCount"))
            last_restart = _later(last_restart, _d(_d(cs.get("lastState")).get("terminated")).get("finishedAt"))
            state = _d(cs.get("state"))
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if isinstance(waiting, dict) and waiting.get("reason"):
                reason = str(waiting["reason"])
            elif isinstance(terminated, dict) and terminated.get("reason"):
                reason = str(terminated["reason"])
            elif isinstance(terminated, dict):
                signal = _int(terminated.get("signal"))
                reason = f"Signal:{signal}" if signal else f"ExitCode:{_int(terminated.get('exitCode'))}"
            elif cs.get("ready") and isinstance(state.get("running"), dict):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if _has_condition(pod, "Ready") else "NotReady"

    if _meta(pod).get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"
    return reason, ready, total, restarts, last_restart


def _print_pod(pod: JsonObj, now: datetime) -> Row:
    reason, ready, total, restarts, last_restart = pod_status(pod)
    restarts_cell = str(restarts)
    if restarts and last_restart is not None:
        restarts_cell = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"
    spec, status = _d(pod.get("spec")), _d(pod.get("status"))
    pod_ips = [p for p in _l(status.get("podIPs")) if isinstance(p, dict)]
    ip = str(pod_ips[0].get("ip", "")) if pod_ips else str(status.get("podIP") or "")
    gates = [g for g in _l(spec.get("readinessGates")) if isinstance(g, dict)]
    gates_cell = "<none>"
    if gates:
        conditions = {str(c.get("type")): c.get("status") for c in _l(status.get("conditions")) if isinstance(c, dict)}
        true_count = sum(1 for g in gates if conditions.get(str(g.get("conditionType"))) == "True")
        gates_cell = f"{true_count}/{len(gates)}"
    return [_name(pod), f"{ready}/{total}", reason, restarts_cell, _age(pod, now), ip or "<none>",
            spec.get("nodeName") or "<none>", status.get("nominatedNodeName") or "<none>", gates_cell]


def _pod_row_conditions(pod: JsonObj) -> list[JsonObj] | None:
    phase = _d(pod.get("status")).get("phase")
    if phase == "Succeeded":
        return [{"type": "Completed", "status": "True", "reason": "Succeeded",
                 "message": "The pod has completed successfully."}]
    if phase == "Failed":
        return [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]
    return None


# --- workloads ----------------------------------------------------------------------------------------

_WIDE_TEMPLATE = [
    _col("Containers", priority=1, description="Names of each container in the template."),
    _col("Images", priority=1, description="Images referenced by each container in the template."),
    _col("Selector", priority=1, description="A label query over pods that should match the pod count."),
]

JOB_COLUMNS = [
    NAME_COLUMN,
    _col("Status", description="Status of the job."),
    _col("Completions", description="The desired number of successfully finished pods the job should be run "
                                     "with."),
    _col("Duration", description="Time required to complete the job."),
    AGE_COLUMN,
    *_WIDE_TEMPLATE,
]


def job_status(job: JsonObj) -> str:
    if _has_condition(job, "Complete"):
        return "Complete"
    if _has_condition(job, "Failed"):
        return "Failed"
    if _meta(job).get("deletionTimestamp"):
        return "Terminating"
    for condition in ("Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if _has_condition(job, condition):
            return condition
    return "Running"


def _print_job(job: JsonObj, now: datetime) -> Row:
    spec, status = _d(job.get("spec")), _d(job.get("status"))
    succeeded = _int(status.get("succeeded"))
    completions = spec.get("completions")
    if isinstance(completions, int):
        completions_cell = f"{succeeded}/{completions}"
    else:
        parallelism = _int(spec.get("parallelism"))
        completions_cell = f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"
    start, end = parse_time(status.get("startTime")), parse_time(status.get("completionTime"))
    duration = ""
    if start is not None:
        duration = human_duration(((end or now) - start).total_seconds())
    names, images = _containers_cells(_d(_d(spec.get("template")).get("spec")))
    return [_name(job), job_status(job), completions_cell, duration, _age(job, now), names, images,
            _selector_string(spec.get("selector"))]


DEPLOYMENT_COLUMNS = [
    NAME_COLUMN,
    _col("Ready", description="Number of the pod with ready state"),
    _col("Up-to-date", "integer", description="Total number of non-terminated pods targeted by this deployment "
                                              "that have the desired template spec."),
    _col("Available", "integer", description="Total number of available pods (ready for at least "
                                             "minReadySeconds) targeted by this deployment."),
    AGE_COLUMN,
    *_WIDE_TEMPLATE,
]


def _print_deployment(obj: JsonObj, now: datetime) -> Row:
    spec, status = _d(obj.get("spec")), _d(obj.get("status"))
    replicas = spec.get("replicas")
    desired = _int(replicas) if replicas is not None else 1
    names, images = _containers_cells(_d(_d(spec.get("template")).get("spec")))
    return [_name(obj), f"{_int(status.get('readyReplicas'))}/{desired}", _int(status.get("updatedReplicas")),
            _int(status.get("availableReplicas")), _age(obj, now), names, images,
            _selector_string(spec.get("selector"))]


REPLICASET_COLUMNS = [
    NAME_COLUMN,
    _col("Desired", "integer", description="Replicas is the number of desired replicas."),
    _col("Current", "integer", description="Replicas is the most recently observed number of replicas."),
    _col("Ready", "integer", description="readyReplicas is the number of pods targeted by this ReplicaSet with a "
                                         "Ready Condition."),
    AGE_COLUMN,
    *_WIDE_TEMPLATE,
]


def _print_replicaset(obj: JsonObj, now: datetime) -> Row:
    spec, status = _d(obj.get("spec")), _d(obj.get("status"))
    names, images = _containers_cells(_d(_d(spec.get("template")).get("spec")))
    replicas = spec.get("replicas")
    return [_name(obj), _int(replicas) if replicas is not None else 1, _int(status.get("replicas")),
            _int(status.get("readyReplicas")), _age(obj, now), names, images, _selector_string(spec.get("selector"))]


DAEMONSET_COLUMNS = [
    NAME_COLUMN,
    _col("Desired", "integer", description="The total number of nodes that should be running the daemon pod "
                                           "(including nodes correctly running the daemon pod)."),
    _col("Current", "integer", description="The number of nodes that are running at least 1 daemon pod and are "
                                           "supposed to run the daemon pod."),
    _col("Ready", "integer", description="The number of nodes that should be running the daemon pod and have one "
                                         "or more of the daemon pod running with a Ready Condition."),
    _col("Up-to-date", "integer", description="The total number of nodes that are running updated daemon pod"),
    _col("Available", "integer", description="The number of nodes that should be running the daemon pod and have "
                                             "one or more of the daemon pod running and available (ready for at "
                                             "least spec.minReadySeconds)"),
    _col("Node Selector", description="NodeSelector is a selector which must be true for the pod to fit on a node. "
                                      "Selector which must match a node's labels for the pod to be scheduled on that "
                                      "node. More info: https://kubernetes.io/docs/concepts/configuration/"
                                      "assign-pod-node/"),
    AGE_COLUMN,
    *_WIDE_TEMPLATE,
]


def _print_daemonset(obj: JsonObj, now: datetime) -> Row:
    spec, status = _d(obj.get("spec")), _d(obj.get("status"))
    pod_spec = _d(_d(spec.get("template")).get("spec"))
    names, images = _containers_cells(pod_spec)
    selector = ",".join(f"{k}={v}" for k, v in sorted(_d(pod_spec.get("nodeSelector")).items())) or "<none>"
    return [_name(obj), _int(status.get("desiredNumberScheduled")), _int(status.get("currentNumberScheduled")),
            _int(status.get("numberReady")), _int(status.get("updatedNumberScheduled")),
            _int(status.get("numberAvailable")), selector, _age(obj, now), names, images,
            _selector_string(spec.get("selector"))]


# --- nodes, namespaces, events ------------------------------------------------------------------------

NODE_COLUMNS = [
    NAME_COLUMN,
    _col("Status", description="The status of the node"),
    _col("Roles", description="The roles of the node"),
    AGE_COLUMN,
    _col("Version", description="Kubelet Version reported by the node."),
    _col("Internal-IP", priority=1, description="List of addresses reachable to the node."),
    _col("External-IP", priority=1, description="List of addresses reachable to the node."),
    _col("OS-Image", priority=1, description="OS Image reported by the node from /etc/os-release (e.g. Debian "
                                             "GNU/Linux 7 (wheezy))."),
    _col("Kernel-Version", priority=1, description="Kernel Version reported by the node from 'uname -r' (e.g. "
                                                   "3.16.0-0.bpo.4-amd64)."),
    _col("Container-Runtime", priority=1, description="ContainerRuntime Version reported by the node through "
                                                      "runtime remote API (e.g. containerd://1.4.2)."),
]


def node_status(node: JsonObj) -> str:
    conditions = {str(c.get("type")): c for c in _l(_d(node.get("status")).get("conditions")) if isinstance(c, dict)}
    parts: list[str] = []
    ready = conditions.get("Ready")
    if ready is not None:
        parts.append("Ready" if ready.get("status") == "True" else "NotReady")
    if not parts:
        parts.append("Unknown")
    if _d(node.get("spec")).get("unschedulable"):
        parts.append("SchedulingDisabled")
    return ",".join(parts)


def node_roles(node: JsonObj) -> str:
    roles: set[str] = set()
    for key, value in _d(_meta(node).get("labels")).items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key[len("node-role.kubernetes.io/"):]
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and value:
            roles.add(str(value))
    return ",".join(sorted(roles)) or "<none>"


def _address(node: JsonObj, type_: str) -> str:
    for address in _l(_d(node.get("status")).get("addresses")):
        if isinstance(address, dict) and address.get("type") == type_:
            return str(address.get("address", ""))
    return "<none>"


def _print_node(node: JsonObj, now: datetime) -> Row:
    info = _d(_d(node.get("status")).get("nodeInfo"))
    return [_name(node), node_status(node), node_roles(node), _age(node, now), str(info.get("kubeletVersion", "")),
            _address(node, "InternalIP"), _address(node, "ExternalIP"), info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>", info.get("containerRuntimeVersion") or "<unknown>"]


NAMESPACE_COLUMNS = [NAME_COLUMN, _col("Status", description="The status of the namespace"), AGE_COLUMN]


def _print_namespace(obj: JsonObj, now: datetime) -> Row:
    return [_name(obj), str(_d(obj.get("status")).get("phase", "")), _age(obj, now)]


EVENT_COLUMNS = [
    _col("Last Seen", description="The time at which the most recent occurrence of this event was recorded."),
    _col("Type", description="Type of this event (Normal, Warning), new types could be added in the future"),
    _col("Reason", description="This should be a short, machine understandable string that gives the reason for "
                               "the transition into the object's current status."),
    _col("Object", description="The object that this event is about."),
    _col("Subobject", priority=1, description="If referring to a piece of an object instead of an entire object, "
                                              "this string should contain a valid JSON/Go field access statement."),
    _col("Source", priority=1, description="The component reporting this event."),
    _col("Message", description="A human-readable description of the status of this operation."),
    _col("First Seen", priority=1, description="The time at which the event was first recorded."),
    _col("Count", "integer", priority=1, description="The number of times this event has occurred."),
    _col("Name", priority=1, fmt="name", description=_NAME_DOC),
]


def _print_event(ev: JsonObj, now: datetime) -> Row:
    # events.k8s.io/v1 renames the core fields; accept both spellings.
    involved = _d(ev.get("involvedObject") or ev.get("regarding"))
    first = ev.get("firstTimestamp") or ev.get("deprecatedFirstTimestamp")
    first_cell = since(first, now) if first else since(ev.get("eventTime"), now)
    last = ev.get("lastTimestamp") or ev.get("deprecatedLastTimestamp")
    last_cell = since(last, now) if last else first_cell
    series = _d(ev.get("series"))
    count = _int(ev.get("count") or ev.get("deprecatedCount"))
    if series:
        last_cell = since(series.get("lastObservedTime"), now)
        count = _int(series.get("count"))
    elif count == 0:
        count = 1
    kind, name = str(involved.get("kind", "")).lower(), str(involved.get("name", ""))
    target = f"{kind}/{name}" if name else kind
    source = _d(ev.get("source") or ev.get("deprecatedSource"))
    component = source.get("component") or ev.get("reportingController") or ""
    instance = source.get("host") or ev.get("reportingInstance") or ""
    source_cell = f"{component}, {instance}" if instance else str(component)
    message = str(ev.get("message") or ev.get("note") or "").strip()
    return [last_cell, str(ev.get("type", "")), str(ev.get("reason", "")), target,
            str(involved.get("fieldPath", "")), source_cell, message, first_cell, count, _name(ev)]


# --- config and networking ----------------------------------------------------------------------------

CONFIGMAP_COLUMNS = [NAME_COLUMN, _col("Data", "integer", description="Data contains the configuration data."),
                     AGE_COLUMN]
SECRET_COLUMNS = [NAME_COLUMN, _col("Type", description="Used to facilitate programmatic handling of secret data."),
                  _col("Data", "integer", description="Data contains the secret data."), AGE_COLUMN]
SERVICEACCOUNT_COLUMNS = [NAME_COLUMN, _col("Secrets", "integer", description="Secrets is a list of the secrets "
                                                                              "in the same namespace."), AGE_COLUMN]
LEASE_COLUMNS = [NAME_COLUMN, _col("Holder", description="holderIdentity contains the identity of the holder of "
                                                         "a current lease."), AGE_COLUMN]


def _print_configmap(obj: JsonObj, now: datetime) -> Row:
    return [_name(obj), len(_d(obj.get("data"))) + len(_d(obj.get("binaryData"))), _age(obj, now)]


def _print_secret(obj: JsonObj, now: datetime) -> Row:
    return [_name(obj), str(obj.get("type", "")), len(_d(obj.get("data"))), _age(obj, now)]


def _print_serviceaccount(obj: JsonObj, now: datetime) -> Row:
    return [_name(obj), len(_l(obj.get("secrets"))), _age(obj, now)]


def _print_lease(obj: JsonObj, now: datetime) -> Row:
    return [_name(obj), str(_d(obj.get("spec")).get("holderIdentity") or ""), _age(obj, now)]


SERVICE_COLUMNS = [
    NAME_COLUMN,
    _col("Type", description="type determines how the Service is exposed."),
    _col("Cluster-IP", description="clusterIP is the IP address of the service."),
    _col("External-IP", description="externalIPs is a list of IP addresses for which nodes in the cluster will "
                                    "also accept traffic for this service."),
    _col("Port(s)", description="The list of ports that are exposed by this service."),
    AGE_COLUMN,
    _col("Selector", priority=1, description="Route service traffic to pods with label keys and values matching "
                                             "this selector."),
]


def _print_service(obj: JsonObj, now: datetime) -> Row:
    spec = _d(obj.get("spec"))
    svc_type = str(spec.get("type", ""))
    cluster_ips = _l(spec.get("clusterIPs"))
    internal_ip = str(cluster_ips[0]) if cluster_ips else "<none>"
    external = [str(ip) for ip in _l(spec.get("externalIPs"))]
    if svc_type == "LoadBalancer":
        ingress = [str(i.get("ip") or i.get("hostname") or "")
                   for i in _l(_d(_d(obj.get("status")).get("loadBalancer")).get("ingress")) if isinstance(i, dict)]
        external_cell = ",".join(ingress + external) or "<pending>"
    elif svc_type == "ExternalName":
        external_cell = str(spec.get("externalName", ""))
    else:
        external_cell = ",".join(external) or "<none>"
    ports: list[str] = []
    for port in _l(spec.get("ports")):
        if not isinstance(port, dict):
            continue
        protocol = port.get("protocol", "TCP")
        if port.get("nodePort"):
            ports.append(f"{port.get('port')}:{port['nodePort']}/{protocol}")
        else:
            ports.append(f"{port.get('port')}/{protocol}")
    return [_name(obj), svc_type, internal_ip, external_cell, ",".join(ports) or "<none>", _age(obj, now),
            _format_labels(spec.get("selector"))]


PVC_COLUMNS = [
    NAME_COLUMN,
    _col("Status", description="phase represents the current phase of PersistentVolumeClaim."),
    _col("Volume", description="volumeName is the binding reference to the PersistentVolume backing this claim."),
    _col("Capacity", description="capacity represents the actual resources of the underlying volume."),
    _col("Access Modes", description="accessModes contains the actual access modes the volume backing the PVC "
                                     "has."),
    _col("StorageClass", description="StorageClass of the pvc"),
    _col("VolumeAttributesClass", description="VolumeAttributesClass of the pvc"),
    AGE_COLUMN,
    _col("VolumeMode", priority=1, description="volumeMode defines what type of volume is required by the claim."),
]

_ACCESS_MODES = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
                 "ReadWriteOncePod": "RWOP"}


def _print_pvc(obj: JsonObj, now: datetime) -> Row:
    spec, status = _d(obj.get("spec")), _d(obj.get("status"))
    phase = "Terminating" if _meta(obj).get("deletionTimestamp") else str(status.get("phase", ""))
    capacity = access = ""
    if spec.get("volumeName"):
        modes = [str(m) for m in _l(status.get("accessModes"))]
        access = ",".join(_ACCESS_MODES[m] for m in _ACCESS_MODES if m in modes)
        capacity = str(_d(status.get("capacity")).get("storage", ""))
    storage_class = spec.get("storageClassName") or _d(_meta(obj).get("annotations")).get(
        "volume.beta.kubernetes.io/storage-class", "")
    return [_name(obj), phase, str(spec.get("volumeName", "")), capacity, access, str(storage_class),
            spec.get("volumeAttributesClassName") or "<unset>", _age(obj, now), spec.get("volumeMode") or "<unset>"]


PRIORITYCLASS_COLUMNS = [
    NAME_COLUMN,
    _col("Value", "integer", description="value represents the integer value of this priority class."),
    _col("Global-Default", "boolean", description="globalDefault specifies whether this PriorityClass should be "
                                                  "considered as the default priority for pods that do not have "
                                                  "any priority class."),
    AGE_COLUMN,
    _col("PreemptionPolicy", description="preemptionPolicy is the Policy for preempting pods with lower "
                                          "priority."),
]


def _print_priorityclass(obj: JsonObj, now: datetime) -> Row:
    return [_name(obj), _int(obj.get("value")), bool(obj.get("globalDefault")), _age(obj, now),
            str(obj.get("preemptionPolicy") or "")]


STORAGECLASS_COLUMNS = [
    NAME_COLUMN,
    _col("Provisioner", description="provisioner indicates the type of the provisioner."),
    _col("ReclaimPolicy", description="reclaimPolicy controls the reclaimPolicy for dynamically provisioned "
                                      "PersistentVolumes of this storage class."),
    _col("VolumeBindingMode", description="volumeBindingMode indicates how PersistentVolumeClaims should be "
                                          "provisioned and bound."),
    _col("AllowVolumeExpansion", description="allowVolumeExpansion shows whether the storage class allow volume "
                                             "expand."),
    AGE_COLUMN,
]


def _print_storageclass(obj: JsonObj, now: datetime) -> Row:
    name = _name(obj)
    annotations = _d(_meta(obj).get("annotations"))
    if annotations.get("storageclass.kubernetes.io/is-default-class") == "true":
        name += " (default)"
    return [name, str(obj.get("provisioner", "")), str(obj.get("reclaimPolicy") or "Delete"),
            str(obj.get("volumeBindingMode") or "Immediate"), bool(obj.get("allowVolumeExpansion")), _age(obj, now)]


DEFAULT_COLUMNS = [NAME_COLUMN, _col("Created At", "date", description=_AGE_DOC)]


def _print_default(obj: JsonObj, now: datetime) -> Row:
    return [_name(obj), _meta(obj).get("creationTimestamp")]


_PRINTERS: dict[tuple[str, str], tuple[list[JsonObj], Printer]] = {
    ("", "Pod"): (POD_COLUMNS, _print_pod),
    ("", "Node"): (NODE_COLUMNS, _print_node),
    ("", "Namespace"): (NAMESPACE_COLUMNS, _print_namespace),
    ("", "Event"): (EVENT_COLUMNS, _print_event),
    ("events.k8s.io", "Event"): (EVENT_COLUMNS, _print_event),
    ("", "ConfigMap"): (CONFIGMAP_COLUMNS, _print_configmap),
    ("", "Secret"): (SECRET_COLUMNS, _print_secret),
    ("", "ServiceAccount"): (SERVICEACCOUNT_COLUMNS, _print_serviceaccount),
    ("", "Service"): (SERVICE_COLUMNS, _print_service),
    ("", "PersistentVolumeClaim"): (PVC_COLUMNS, _print_pvc),
    ("batch", "Job"): (JOB_COLUMNS, _print_job),
    ("apps", "Deployment"): (DEPLOYMENT_COLUMNS, _print_deployment),
    ("apps", "ReplicaSet"): (REPLICASET_COLUMNS, _print_replicaset),
    ("", "ReplicationController"): (REPLICASET_COLUMNS, _print_replicaset),
    ("apps", "DaemonSet"): (DAEMONSET_COLUMNS, _print_daemonset),
    ("coordination.k8s.io", "Lease"): (LEASE_COLUMNS, _print_lease),
    ("scheduling.k8s.io", "PriorityClass"): (PRIORITYCLASS_COLUMNS, _print_priorityclass),
    ("storage.k8s.io", "StorageClass"): (STORAGECLASS_COLUMNS, _print_storageclass),
}


# --- custom resources ---------------------------------------------------------------------------------


def _custom_columns(printer_columns: list[JsonObj]) -> list[JsonObj]:
    columns = printer_columns or [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp",
                                   "description": _AGE_DOC}]
    return columns


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return orjson.dumps(value).decode()


def _custom_cell(column: JsonObj, obj: JsonObj, now: datetime) -> Any:
    try:
        results = jsonpath.find(str(column.get("jsonPath", "")), obj)
    except jsonpath.JsonPathError:
        return None
    if not results or results[0] is None:
        return None
    value = results[0]
    kind = column.get("type", "string")
    if kind == "string":
        return _text(value)
    if kind == "integer":
        if isinstance(value, bool):
            return None
        return int(value) if isinstance(value, int | float) else None
    if kind == "number":
        if isinstance(value, bool):
            return None
        return float(value) if isinstance(value, int | float) else None
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if kind == "date":
        if not isinstance(value, str):
            return None
        moment = parse_time(value)
        return "<invalid>" if moment is None else human_duration((now - moment).total_seconds())
    return None


# --- table --------------------------------------------------------------------------------------------


def _row_object(obj: JsonObj, include_object: str) -> JsonObj | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": _meta(obj)}


def to_table(objects: list[JsonObj], *, kind: str, group: str, printer_columns: list[JsonObj] | None,
             now: datetime, include_object: str = "Metadata") -> JsonObj:
    """A Table for `objects` of one kind. `printer_columns` is the CRD version's additionalPrinterColumns for a
    custom resource (possibly empty) and None for built-in kinds. The caller adds metadata.resourceVersion and
    continue. `include_object`: "Metadata" (PartialObjectMetadata, the default), "Object" or "None"."""
    rows: list[JsonObj] = []
    if printer_columns is not None:
        custom = _custom_columns(printer_columns)
        columns = [NAME_COLUMN] + [
            _col(str(c.get("name", "")), str(c.get("type", "string")), priority=_int(c.get("priority")),
                 fmt=str(c.get("format", "")), description=str(c.get("description", "")))
            for c in custom
        ]
        for obj in objects:
            rows.append(_row([_name(obj)] + [_custom_cell(c, obj, now) for c in custom], obj, include_object))
    else:
        columns, printer = _PRINTERS.get((group, kind), (DEFAULT_COLUMNS, _print_default))
        for obj in objects:
            row = _row(printer(obj, now), obj, include_object)
            if (group, kind) == ("", "Pod"):
                conditions = _pod_row_conditions(obj)
                if conditions:
                    row["conditions"] = conditions
            rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
            "columnDefinitions": [dict(c) for c in columns], "rows": rows}


def _row(cells: Row, obj: JsonObj, include_object: str) -> JsonObj:
    row: JsonObj = {"cells": cells}
    embedded = _row_object(obj, include_object)
    if embedded is not None:
        row["object"] = embedded
    return row
