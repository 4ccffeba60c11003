"""What the KubeRay operator creates, rendered as plain dicts: names, the labels KubeRay puts on
RayCluster pods and services, head/worker pods from a RayCluster, the head and serve Services,
and the RayJob submitter Job. Pure: the controller decides when and writes.
"""

from __future__ import annotations

import copy
import math
import secrets

from kaiwo_sandbox.cluster.nodes.podsim import EXIT_CODE, RUN_SECONDS, script_behaviour
from kaiwo_sandbox.cluster.pods import owner_reference
from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.semantics.quantity import QuantityError, parse_quantity

# Label keys and values (ray-operator/controllers/ray/utils/constant.go).
CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
IS_RAY_NODE_LABEL = "ray.io/is-ray-node"
IDENTIFIER_LABEL = "ray.io/identifier"
SERVE_LABEL = "ray.io/serve"
ORIGIN_CRD_LABEL = "ray.io/originated-from-crd"
ORIGIN_NAME_LABEL = "ray.io/originated-from-cr-name"
APP_NAME_LABEL = "app.kubernetes.io/name"
CREATED_BY_LABEL = "app.kubernetes.io/created-by"
HEAD_GROUP = "headgroup"
RAYJOB_FINALIZER = "ray.io/rayjob-finalizer"

GCS_PORT, DASHBOARD_PORT, CLIENT_PORT, METRICS_PORT, SERVE_PORT = 6379, 8265, 10001, 8080, 8000
AGENT_PORT = 52365  # the dashboard agent (no Service port)
KUBERAY_VERSION = "v1.4.2"
HEAD_PORTS = (("gcs-server", GCS_PORT), ("dashboard", DASHBOARD_PORT), ("client", CLIENT_PORT),
              ("metrics", METRICS_PORT))

_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery rand.String


def random_suffix(length: int = 5) -> str:
    return "".join(secrets.choice(_NAME_ALPHABET) for _ in range(length))


def rayjob_cluster_name(rayjob_name: str) -> str:
    """`<rayjob>-<5 random>`, the job name trimmed so the result stays a valid label value."""
    return f"{rayjob_name[:63 - 6]}-{random_suffix()}"


def rayservice_cluster_name(service_name: str) -> str:
    return f"{service_name[:63 - 17]}-raycluster-{random_suffix()}"


def head_service_name(cluster_or_service: str) -> str:
    return f"{cluster_or_service}-head-svc"


def serve_service_name(service_name: str) -> str:
    return f"{service_name}-serve-svc"


def dashboard_address(cluster: str, namespace: str) -> str:
    return f"{head_service_name(cluster)}.{namespace}.svc.cluster.local:{DASHBOARD_PORT}"


def _meta(obj: JsonObj) -> JsonObj:
    meta: JsonObj = obj.get("metadata") or {}
    return meta


def cluster_labels(cluster: str, node_type: str, group: str) -> dict[str, str]:
    return {
        CLUSTER_LABEL: cluster,
        NODE_TYPE_LABEL: node_type,
        GROUP_LABEL: group,
        IS_RAY_NODE_LABEL: "yes",
        IDENTIFIER_LABEL: f"{cluster}-{node_type}",
        APP_NAME_LABEL: "kuberay",
        CREATED_BY_LABEL: "kuberay-operator",
    }


def _flags(params: dict[str, str]) -> str:
    """KubeRay's convertParamMap: keys sorted; `true` is a bare flag, `false` is dropped (except the
    two keys Ray reads as values), anything else `--key=value`; each flag padded with a space."""
    out = ""
    for key in sorted(params):
        value = str(params[key])
        if value.lower() == "true":
            out += f" --{key} "
        elif value.lower() == "false" and key not in ("log-color", "include-dashboard"):
            continue
        else:
            out += f" --{key}={value} "
    return out


def _ceil_quantity(raw: object) -> int | None:
    try:
        return math.ceil(parse_quantity(raw))  # type: ignore[arg-type]
    except (QuantityError, TypeError, ValueError):
        return None


def ray_start_params(node_type: str, group_spec: JsonObj, container: JsonObj, head_address: str) -> dict[str, str]:
    """rayStartParams with what KubeRay fills in when absent (setMissingRayStartParams,
    generateRayStartCommand): the head's dashboard host, the worker's address, the metrics and agent
    ports, `block`, and num-cpus / memory / num-gpus from the container's resources."""
    params = {str(k): str(v) for k, v in (group_spec.get("rayStartParams") or {}).items()}
    if node_type == "head":
        params.setdefault("dashboard-host", "0.0.0.0")
    else:
        params.setdefault("address", head_address)
    params.setdefault("metrics-export-port", str(METRICS_PORT))
    params["block"] = "true"
    params.setdefault("dashboard-agent-listen-port", str(AGENT_PORT))
    resources = container.get("resources") or {}
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    cpu = _ceil_quantity(limits.get("cpu", requests.get("cpu"))) if ("cpu" in limits or "cpu" in requests) else None
    if "num-cpus" not in params and cpu is not None:
        params["num-cpus"] = str(cpu)
    memory = _ceil_quantity(limits["memory"]) if "memory" in limits else None
    if "memory" not in params and memory is not None:
        params["memory"] = str(memory)
    gpu_key = next((k for k in limits if str(k).endswith("gpu")), None)
    if "num-gpus" not in params and gpu_key is not None:
        gpus = _ceil_quantity(limits[gpu_key])
        if gpus:
            params["num-gpus"] = str(gpus)
    return params


def ray_start_command(node_type: str, params: dict[str, str]) -> str:
    return f"ray start{' --head ' if node_type == 'head' else ' '}{_flags(params)}"


def _ray_env(cluster: JsonObj, node_type: str, start: str, head_fqdn: str, head_port: int,
             crd: str) -> list[JsonObj]:
    """The variables KubeRay puts into the Ray container (setContainerEnvVars)."""
    env: list[JsonObj] = []
    if node_type == "worker":
        env += [{"name": "FQ_RAY_IP", "value": head_fqdn}, {"name": "RAY_IP", "value": head_fqdn.split(".", 1)[0]}]
    env += [
        {"name": "RAY_CLUSTER_NAME", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{CLUSTER_LABEL}']"}}},
        {"name": "RAY_CLUSTER_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "RAY_CLOUD_INSTANCE_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "RAY_NODE_TYPE_NAME", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{GROUP_LABEL}']"}}},
        {"name": "KUBERAY_GEN_RAY_START_CMD", "value": start},
    ]
    if_absent = {"RAY_PORT": str(head_port),
                 "RAY_ADDRESS": f"127.0.0.1:{head_port}" if node_type == "head" else f"{head_fqdn}:{head_port}",
                 "RAY_USAGE_STATS_KUBERAY_IN_USE": "1", "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE": "1"}
    if node_type == "head":
        if_absent["RAY_USAGE_STATS_EXTRA_TAGS"] = f"kuberay_version={KUBERAY_VERSION};kuberay_crd={crd}"
    if crd == "RayService":
        if_absent.update({"RAY_timeout_ms_task_wait_for_death_info": "0",
                          "RAY_gcs_server_request_timeout_seconds": "5", "RAY_SERVE_KV_TIMEOUT_S": "5"})
    env += [{"name": k, "value": v} for k, v in if_absent.items()]
    return env


def _wget_health(timeout: int, port: int, path: str) -> str:
    return f"wget -T {timeout} -q -O- http://localhost:{port}/{path} | grep success"


def ray_probes(node_type: str, crd: str) -> tuple[JsonObj, JsonObj]:
    """The readiness and liveness probes KubeRay 1.4 gives a Ray container that has none of its own
    (`initLivenessAndReadinessProbe`): the raylet's health through the dashboard agent, the head's GCS
    through the dashboard, and for a RayService's workers also the Serve proxy's health, failing at once.
    The GCS check's `-T 10` is KubeRay's (it passes the failure threshold where a timeout belongs)."""
    command = _wget_health(2, AGENT_PORT, "api/local_raylet_healthz")
    if node_type == "head":
        command += " && " + _wget_health(10, DASHBOARD_PORT, "api/gcs_healthz")
    ready_command, ready_failures = command, 10
    if node_type == "worker" and crd == "RayService":
        ready_command, ready_failures = command + " && " + _wget_health(10, SERVE_PORT, "-/healthz"), 1
    liveness: JsonObj = {"exec": {"command": ["bash", "-c", command]}, "initialDelaySeconds": 30,
                         "timeoutSeconds": 2, "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 120}
    readiness: JsonObj = {"exec": {"command": ["bash", "-c", ready_command]}, "initialDelaySeconds": 10,
                          "timeoutSeconds": 2, "periodSeconds": 5, "successThreshold": 1,
                          "failureThreshold": ready_failures}
    return readiness, liveness


def build_pod(cluster: JsonObj, node_type: str, group_spec: JsonObj, group: str) -> JsonObj:
    """A head or worker pod the way KubeRay builds it from the group's template: Ray labels, owner
    reference, and the Ray container running `ray start ... --block` (an endless process)."""
    name = str(_meta(cluster).get("name", ""))
    namespace = str(_meta(cluster).get("namespace", ""))
    template = copy.deepcopy(group_spec.get("template") or {})
    tmeta = template.get("metadata") or {}
    labels = dict(tmeta.get("labels") or {})
    labels.update(cluster_labels(name, node_type, group))
    labels[SERVE_LABEL] = "true"  # every Ray node may serve; RayService narrows with its selector
    annotations = dict(tmeta.get("annotations") or {})
    annotations.setdefault("ray.io/ft-enabled", "false")
    suffix = "head" if node_type == "head" else f"{group}-worker"
    spec = template.get("spec") or {}
    spec.setdefault("restartPolicy", "Always")
    containers = spec.get("containers") or [{"name": "ray-" + node_type, "image": "rayproject/ray"}]
    spec["containers"] = containers
    ray_container = containers[0]
    head_params = (((cluster.get("spec") or {}).get("headGroupSpec") or {}).get("rayStartParams") or {})
    head_port = int(str(head_params.get("port") or GCS_PORT))
    head_fqdn = f"{head_service_name(name)}.{namespace}.svc.cluster.local"
    params = ray_start_params(node_type, group_spec, ray_container, f"{head_fqdn}:{head_port}")
    start = ray_start_command(node_type, params)
    user_argv = " ".join(str(a) for a in [*(ray_container.get("command") or []), *(ray_container.get("args") or [])])
    if annotations.get("ray.io/overwrite-container-cmd") != "true" and "ray start" not in user_argv:
        ray_container["command"] = ["/bin/bash", "-c", "--"]
        prefix = f"{user_argv} && " if user_argv else ""
        ray_container["args"] = [f"{prefix}ulimit -n 65536; {start}"]
    crd = str((_meta(cluster).get("labels") or {}).get(ORIGIN_CRD_LABEL) or "RayCluster")
    user_env = list(ray_container.get("env") or [])
    user_names = {e.get("name") for e in user_env}
    injected = [e for e in _ray_env(cluster, node_type, start, head_fqdn, head_port, crd)
                if e["name"] not in user_names]
    ray_container["env"] = user_env + injected
    readiness, liveness = ray_probes(node_type, crd)
    ray_container.setdefault("readinessProbe", readiness)  # each only where the user set none, as KubeRay does
    ray_container.setdefault("livenessProbe", liveness)
    if node_type == "head" and not ray_container.get("ports"):
        ray_container["ports"] = [{"name": pname, "containerPort": port, "protocol": "TCP"}
                                  for pname, port in HEAD_PORTS]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{name}-{suffix}-",
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(cluster)],
        },
        "spec": spec,
    }


def head_service(cluster: JsonObj, name: str | None = None, owner: JsonObj | None = None) -> JsonObj:
    """The head Service `<cluster>-head-svc` (headless, as KubeRay creates it by default)."""
    cluster_name = str(_meta(cluster).get("name", ""))
    namespace = str(_meta(cluster).get("namespace", ""))
    labels = {CLUSTER_LABEL: cluster_name, NODE_TYPE_LABEL: "head", IDENTIFIER_LABEL: f"{cluster_name}-head",
              APP_NAME_LABEL: "kuberay", CREATED_BY_LABEL: "kuberay-operator"}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name or head_service_name(cluster_name), "namespace": namespace,
                     "labels": labels, "ownerReferences": [owner_reference(owner or cluster)]},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {CLUSTER_LABEL: cluster_name, NODE_TYPE_LABEL: "head"},
            "ports": [{"name": pname, "port": port, "targetPort": port, "protocol": "TCP",
                       "appProtocol": "tcp"} for pname, port in HEAD_PORTS],
        },
    }


def serve_service(service: JsonObj, cluster_name: str) -> JsonObj:
    """A RayService's `<svc>-serve-svc`, selecting the serving pods of its active cluster."""
    name = str(_meta(service).get("name", ""))
    namespace = str(_meta(service).get("namespace", ""))
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": serve_service_name(name), "namespace": namespace,
                     "labels": {ORIGIN_CRD_LABEL: "RayService", ORIGIN_NAME_LABEL: name,
                                CLUSTER_LABEL: cluster_name, SERVE_LABEL: "true",
                                APP_NAME_LABEL: "kuberay", CREATED_BY_LABEL: "kuberay-operator"},
                     "ownerReferences": [owner_reference(service)]},
        "spec": {
            "selector": {CLUSTER_LABEL: cluster_name, SERVE_LABEL: "true"},
            "ports": [{"name": "serve", "port": SERVE_PORT, "targetPort": SERVE_PORT, "protocol": "TCP"}],
        },
    }


def with_go_struct_fields(cluster_spec: JsonObj) -> JsonObj:
    """A RayCluster spec as KubeRay's Go types serialize it: every worker group carries
    `scaleStrategy: {}` (a struct field, which `omitempty` never drops). KubeRay writes whole typed
    objects (the RayCluster it creates, the RayJob it updates to add its finalizer), so they show it."""
    groups = cluster_spec.get("workerGroupSpecs")
    if isinstance(groups, list):
        for group in groups:
            if isinstance(group, dict) and not isinstance(group.get("scaleStrategy"), dict):
                group["scaleStrategy"] = {}
    return cluster_spec


def ray_cluster_for(owner: JsonObj, name: str, cluster_spec: JsonObj, crd: str) -> JsonObj:
    """The RayCluster a RayJob or RayService creates: the owner's labels plus the origin labels."""
    meta = _meta(owner)
    labels = dict(meta.get("labels") or {})
    labels.update({ORIGIN_NAME_LABEL: str(meta.get("name", "")), ORIGIN_CRD_LABEL: crd})
    spec = with_go_struct_fields(copy.deepcopy(cluster_spec))
    spec.pop("suspend", None)
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": meta.get("namespace", ""), "labels": labels,
                     "ownerReferences": [owner_reference(owner)]},
        "spec": spec,
    }


def _head_image(rayjob: JsonObj) -> str:
    head = (((rayjob.get("spec") or {}).get("rayClusterSpec") or {}).get("headGroupSpec") or {})
    containers = ((head.get("template") or {}).get("spec") or {}).get("containers") or []
    return str(containers[0].get("image", "rayproject/ray")) if containers else "rayproject/ray"


def default_submitter_template(rayjob: JsonObj) -> JsonObj:
    """KubeRay's GetDefaultSubmitterTemplate: one `ray-job-submitter` container on the head image."""
    return {
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "ray-job-submitter",
                "image": _head_image(rayjob),
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"},
                              "requests": {"cpu": "500m", "memory": "200Mi"}},
            }],
        },
    }


def ray_job_run_annotations(rayjob: JsonObj) -> dict[str, str]:
    """How long the simulated Ray job runs and how it exits, for the submitter pod: the RayJob's own
    `sandbox.kaiwo-ray.dev/run-seconds`/`exit-code` annotations win; else the entrypoint read
    with the kubelet's rules (`sleep N`, endless loops, `exit N`); else nothing (kubelet default)."""
    annotations = _meta(rayjob).get("annotations") or {}
    result = {key: str(annotations[key]) for key in (RUN_SECONDS, EXIT_CODE) if key in annotations}
    if RUN_SECONDS in result:
        return result
    entrypoint = str((rayjob.get("spec") or {}).get("entrypoint") or "")
    behaviour = script_behaviour(entrypoint)
    if behaviour.known:
        result[RUN_SECONDS] = "infinity" if behaviour.run_seconds is None else f"{behaviour.run_seconds:g}"
        result.setdefault(EXIT_CODE, str(behaviour.exit_code))
    return result


def submitter_job(rayjob: JsonObj, cluster_name: str, job_id: str) -> JsonObj:
    """The K8sJobMode submitter: a batch Job named like the RayJob running `ray job submit`."""
    meta = _meta(rayjob)
    name = str(meta.get("name", ""))
    namespace = str(meta.get("namespace", ""))
    spec = rayjob.get("spec") or {}
    template = copy.deepcopy(spec.get("submitterPodTemplate") or default_submitter_template(rayjob))
    tmeta = template.setdefault("metadata", {})
    annotations = dict(tmeta.get("annotations") or {})
    for key, value in ray_job_run_annotations(rayjob).items():
        annotations.setdefault(key, value)
    tmeta["annotations"] = annotations
    pod_spec = template.setdefault("spec", {})
    pod_spec.setdefault("restartPolicy", "Never")
    containers = pod_spec.get("containers") or [{"name": "ray-job-submitter", "image": _head_image(rayjob)}]
    pod_spec["containers"] = containers
    if not containers[0].get("command"):
        address = f"http://{dashboard_address(cluster_name, namespace)}"
        containers[0]["command"] = ["ray", "job", "submit", "--address", address, "--no-wait",
                                    "--submission-id", job_id, "--", str(spec.get("entrypoint") or "")]
    backoff = ((spec.get("submitterConfig") or {}).get("backoffLimit"))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {ORIGIN_CRD_LABEL: "RayJob", ORIGIN_NAME_LABEL: name,
                                CREATED_BY_LABEL: "kuberay-operator"},
                     "ownerReferences": [owner_reference(rayjob)]},
        "spec": {"backoffLimit": backoff if isinstance(backoff, int) else 2, "template": template},
    }
