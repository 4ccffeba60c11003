"""`kaiwo-ray doctor`'s judgements, pure: what was read from the cluster -> one result per check, each with
the fix for a failure. gather.py reads the cluster; cli/doctor.py prints."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.kube.discovery import KUEUE, ClusterApis, missing_line

# TODO: a step the admin has yet to take (kaiwo-ray not installed yet): not a failure, the install is the fix.
Status = Literal["OK", "WARN", "FAIL", "SKIP", "TODO"]
GPU_RESOURCES = ("amd.com/gpu", "nvidia.com/gpu")
AMD_LABELS = ("amd.com/gpu.product-name", "beta.amd.com/gpu.family.AI", "feature.node.kubernetes.io/amd-gpu")
NVIDIA_LABELS = ("nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.present")
INSTALL = "kubectl apply -k deploy/ (or kubectl apply -f deploy/install.yaml)"


@dataclass(frozen=True, slots=True)
class Result:
    check: str
    status: Status
    message: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:<4}  {self.check}: {self.message}"
        if self.fix and self.status == "TODO":
            return f"{text} -> next: {self.fix}"
        return f"{text} -> fix: {self.fix}" if self.fix and self.status in ("FAIL", "WARN") else text


def _comparable(crd: Mapping[str, Any]) -> JsonObj:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    versions = [{"name": v.get("name"), "served": v.get("served", True), "storage": v.get("storage", False),
                 "schema": (v.get("schema") or {}).get("openAPIV3Schema")} for v in spec.get("versions") or ()]
    return {"group": spec.get("group"), "scope": spec.get("scope"), "kind": names.get("kind"),
            "plural": names.get("plural"), "versions": versions}


def check_crds(expected: Sequence[JsonObj], live: Mapping[str, JsonObj | None]) -> list[Result]:
    """Each of kaiwo-ray's CRDs is installed and equal to the one this version generates."""
    missing = [c["metadata"]["name"] for c in expected if live.get(c["metadata"]["name"]) is None]
    stale = [c["metadata"]["name"] for c in expected
             if (found := live.get(c["metadata"]["name"])) is not None and _comparable(found) != _comparable(c)]
    if missing:
        return [Result("crds", "FAIL", f"not installed: {', '.join(missing)}", INSTALL)]
    if stale:
        return [Result("crds", "FAIL", f"installed but not this version's: {', '.join(stale)}", INSTALL)]
    return [Result("crds", "OK", f"{len(expected)} Kaiwo CRDs installed and current")]


# The checks of what the install creates and runs: before the install they have nothing to judge.
INSTALLED_CHECKS = ("scheduler", "operator", "permissions", "queues", "telemetry", "admin-api", "webhooks")


def not_installed(expected: Sequence[JsonObj]) -> list[Result]:
    """Before the install (none of kaiwo-ray's CRDs exist): one line saying so, and each check of the
    install marked pending instead of failing (a wall of FAILs would hide the real problems, such as a
    missing dependency, that are worth fixing first)."""
    return [Result("install", "TODO", f"kaiwo-ray is not installed yet (none of its {len(expected)} CRDs exist)",
                   INSTALL),
            *(Result(check, "SKIP", "pending the install") for check in INSTALLED_CHECKS)]


def check_versions(apis: ClusterApis) -> list[Result]:
    results = []
    kueue = apis.kueue_version
    if kueue is None:
        results.append(Result("kueue", "FAIL", missing_line(KUEUE), "install Kueue (https://kueue.sigs.k8s.io)"))
    else:
        topology = apis.topology_version or "none (topologies are skipped)"
        results.append(Result("kueue", "OK" if kueue == "v1beta2" else "WARN",
                              f"kueue.x-k8s.io/{kueue}, Topology {topology}",
                              "" if kueue == "v1beta2" else "upgrade Kueue to >= 0.15 for v1beta2 (v1beta1 works)"))
    for dep in apis.missing():
        if dep.name != KUEUE.name:
            results.append(Result(dep.name.lower(), "FAIL", missing_line(dep), f"install {dep.name} {dep.supported}"))
    for name, api in (("kuberay", "ray.io/v1"), ("appwrapper", "workload.codeflare.dev/v1beta2")):
        if apis.serves(api):
            results.append(Result(name, "OK", f"{api} served"))
    return results


def check_scheduler(scheduler_name: str, deployment: JsonObj | None, lease: JsonObj | None,
                    now: datetime) -> list[Result]:
    """The scheduler every kaiwo pod names (KaiwoConfig scheduling.kubeSchedulerName) runs."""
    if scheduler_name == "default-scheduler":
        return [Result("scheduler", "OK", "pods use the default scheduler (KaiwoConfig)")]
    ready = int(((deployment or {}).get("status") or {}).get("readyReplicas") or 0)
    if ready > 0:
        return [Result("scheduler", "OK", f"{scheduler_name}: {ready} ready replica(s) in kube-system")]
    if lease is not None and _lease_fresh(lease, now):
        return [Result("scheduler", "OK", f"{scheduler_name} holds its leader Lease")]
    why = "its Deployment has no ready replica" if deployment is not None else "no Deployment or fresh Lease"
    return [Result("scheduler", "FAIL", f"{scheduler_name} is not running ({why}): every pod kaiwo-ray creates "
                   "names it and stays Pending", f"{INSTALL} with components/scheduler")]


def _lease_fresh(lease: JsonObj, now: datetime) -> bool:
    spec = lease.get("spec") or {}
    renewed = spec.get("renewTime")
    if not spec.get("holderIdentity") or not renewed:
        return False
    try:
        at = datetime.fromisoformat(str(renewed).replace("Z", "+00:00"))
    except ValueError:
        return False
    return now - at <= timedelta(seconds=2 * int(spec.get("leaseDurationSeconds") or 15))


def check_operator(controllers: Iterable[str], leases: Mapping[str, JsonObj | None], namespace: str,
                   now: datetime) -> list[Result]:
    """Each controller's Lease (kaiwo-ray-<controller>) is held and renewed: the operator runs."""
    stale = [c for c in controllers if (lease := leases.get(c)) is None or not _lease_fresh(lease, now)]
    if stale:
        return [Result("operator", "FAIL", f"no fresh Lease in {namespace} for: {', '.join(stale)}",
                       "is the kaiwo-ray RayService running? kubectl get rayservice,pods -n " + namespace)]
    holders = sorted({str((leases[c] or {}).get("spec", {}).get("holderIdentity")) for c in controllers})
    return [Result("operator", "OK", f"every controller holds its Lease in {namespace} ({', '.join(holders)})")]


def check_permissions(subject: str, denied: Mapping[str, list[str]]) -> list[Result]:
    """One result per rule: the rule's description -> the atoms the API server denied."""
    results = []
    for rule, atoms in denied.items():
        if atoms:
            results.append(Result("permissions", "FAIL", f"{subject} may not {', '.join(atoms)} ({rule})",
                                  f"{INSTALL}: ClusterRole kaiwo-ray-operator and its binding"))
        else:
            results.append(Result("permissions", "OK", f"{subject} may {rule}"))
    return results


def _is_gpu_node(node: JsonObj) -> str | None:
    labels = (node.get("metadata") or {}).get("labels") or {}
    if any(k in labels for k in AMD_LABELS):
        return "amd.com/gpu"
    if any(k in labels for k in NVIDIA_LABELS):
        return "nvidia.com/gpu"
    capacity = (node.get("status") or {}).get("capacity") or {}
    return next((r for r in GPU_RESOURCES if r in capacity), None)


def gpu_nodes(nodes: Iterable[JsonObj]) -> dict[str, str]:
    """GPU node name -> its GPU resource (by the vendors' node labels or its capacity)."""
    return {n["metadata"]["name"]: res for n in nodes if (res := _is_gpu_node(n)) is not None}


def check_gpus(nodes: Sequence[JsonObj]) -> list[Result]:
    found = gpu_nodes(nodes)
    if not found:
        return [Result("gpus", "WARN", "no GPU node (no vendor GPU labels or GPU capacity on any node)",
                       "install the AMD GPU operator or NVIDIA GPU operator (device plugin + node labeller)")]
    results = []
    by_name = {n["metadata"]["name"]: n for n in nodes}
    for name, resource in sorted(found.items()):
        allocatable = str(((by_name[name].get("status") or {}).get("allocatable") or {}).get(resource) or "0")
        if allocatable in ("0", ""):
            results.append(Result("gpus", "FAIL", f"node {name} is a GPU node but allocates no {resource}",
                                  f"the {resource.split('.')[0].upper()} device plugin is not running on {name}: "
                                  "check the GPU operator's DaemonSets"))
        else:
            results.append(Result("gpus", "OK", f"node {name}: {allocatable} {resource} allocatable"))
    return results


def check_queue(default_queue: str, kqc: JsonObj | None, cluster_queue: JsonObj | None) -> list[Result]:
    if kqc is None:
        return [Result("queues", "FAIL", "KaiwoQueueConfig kaiwo does not exist",
                       "the operator creates it at start: is it running?")]
    phase = str((kqc.get("status") or {}).get("status") or "")
    if phase != "READY":
        return [Result("queues", "FAIL", f"KaiwoQueueConfig kaiwo is {phase or 'not reconciled yet'}",
                       "kubectl describe kaiwoqueueconfig kaiwo (its events name the failing step)")]
    if cluster_queue is None:
        return [Result("queues", "FAIL", f"the default ClusterQueue {default_queue} does not exist",
                       f"add {default_queue} to KaiwoQueueConfig kaiwo or set KaiwoConfig defaultClusterQueueName")]
    return [Result("queues", "OK", f"KaiwoQueueConfig kaiwo READY, default ClusterQueue {default_queue} exists")]


def check_telemetry(rayservice: JsonObj | None, running_workers: Mapping[str, str], gpu_node_names: Iterable[str],
                    namespace: str) -> list[Result]:
    """One telemetry worker on every GPU node (running_workers: node -> pod)."""
    if rayservice is None:
        return [Result("telemetry", "SKIP", f"no RayService kaiwo-ray in {namespace} (not installed from deploy/)")]
    groups = ((rayservice.get("spec") or {}).get("rayClusterConfig") or {}).get("workerGroupSpecs") or []
    if not any(g.get("groupName") == "gpu-telemetry" for g in groups):
        return [Result("telemetry", "SKIP", "the gpu-telemetry worker group is not installed (component left out)")]
    wanted = set(gpu_node_names)
    missing = sorted(wanted - set(running_workers))
    if missing:
        return [Result("telemetry", "FAIL", f"no telemetry worker on GPU node(s): {', '.join(missing)} "
                       f"({len(running_workers)} running for {len(wanted)} GPU nodes)",
                       f"set the gpu-telemetry group's replicas to {len(wanted)} in your deploy/ overlay")]
    return [Result("telemetry", "OK", f"a telemetry worker on each of the {len(wanted)} GPU node(s)")]


def serve_app_failures(rayservice: JsonObj) -> list[str]:
    """'<app> is <STATUS>: <Ray's message, first line>' for each Serve application of the active or the
    pending cluster that failed (DEPLOY_FAILED, UNHEALTHY)."""
    status = rayservice.get("status") or {}
    failures = []
    for side in ("activeServiceStatus", "pendingServiceStatus"):
        for name, app in sorted(((status.get(side) or {}).get("applicationStatuses") or {}).items()):
            state = str((app or {}).get("status") or "")
            if state in ("DEPLOY_FAILED", "UNHEALTHY"):
                message = str((app or {}).get("message") or "").strip().splitlines()
                failures.append(f"the {name} application is {state}" + (f": {message[-1][:300]}" if message else ""))
    return failures


def check_admin(rayservice: JsonObj | None, service: JsonObj | None, probe: tuple[bool, str] | None,
                namespace: str) -> list[Result]:
    """The admin API application runs (RayService status) and its Service exists; `probe`: an HTTP answer."""
    if rayservice is None:
        return [Result("admin-api", "SKIP", f"no RayService kaiwo-ray in {namespace}")]
    failing = serve_app_failures(rayservice)
    if failing:  # Ray's own word on why (an import that fails, a replica that crashes)
        return [Result("admin-api", "FAIL", "; ".join(failing), f"kubectl describe rayservice kaiwo-ray -n {namespace}")]
    apps = (((rayservice.get("status") or {}).get("activeServiceStatus") or {}).get("applicationStatuses") or {})
    state = str((apps.get("admin") or {}).get("status") or "not deployed")
    if state != "RUNNING":
        return [Result("admin-api", "FAIL", f"the admin application is {state}",
                       f"kubectl describe rayservice kaiwo-ray -n {namespace}")]
    if service is None:
        return [Result("admin-api", "FAIL", f"Service kaiwo-ray-admin is missing in {namespace}", INSTALL)]
    if probe is not None and not probe[0]:
        return [Result("admin-api", "FAIL", f"the admin API does not answer: {probe[1]}",
                       f"kubectl logs -n {namespace} -l app.kubernetes.io/component=ray-head")]
    answered = f", answered: {probe[1]}" if probe is not None else ""
    return [Result("admin-api", "OK", f"the admin application is RUNNING behind Service kaiwo-ray-admin{answered}")]


def _our_webhooks(config: JsonObj | None, service: str, namespace: str) -> list[JsonObj]:
    return [w for w in (config or {}).get("webhooks") or ()
            if ((w.get("clientConfig") or {}).get("service") or {}).get("name") == service
            and ((w.get("clientConfig") or {}).get("service") or {}).get("namespace") == namespace]


def check_webhooks(mutating: JsonObj | None, validating: JsonObj | None, service: JsonObj | None,
                   secret: JsonObj | Literal["forbidden"] | None, dry_run: tuple[bool, str] | None,
                   now: datetime, namespace: str) -> list[Result]:
    """The admission webhooks (deploy/components/webhooks), when installed: both configurations call our
    Service with one caBundle, equal to the Secret's ca.crt, whose certificate is valid for a while yet;
    and a server-side dry run through the API server reached them (`dry_run`: answered, detail)."""
    from kaiwo_ray.admission import certs

    service_name, secret_name = "kaiwo-ray-webhooks", "kaiwo-ray-webhook-cert"
    fix_server = (f"is the webhook server running? kubectl logs -n {namespace} "
                  "-l app.kubernetes.io/component=ray-head | grep -i webhook")
    if mutating is None and validating is None:
        return [Result("webhooks", "SKIP", "not installed (deploy/components/webhooks left out)")]
    missing = [k for k, c in (("MutatingWebhookConfiguration", mutating), ("ValidatingWebhookConfiguration",
                                                                            validating)) if c is None]
    if missing:
        return [Result("webhooks", "FAIL", f"{', '.join(missing)} kaiwo-ray is missing",
                       f"{INSTALL} with components/webhooks")]
    hooks = _our_webhooks(mutating, service_name, namespace) + _our_webhooks(validating, service_name, namespace)
    if not hooks:
        return [Result("webhooks", "FAIL", f"no webhook of kaiwo-ray calls Service {service_name} in {namespace}",
                       f"{INSTALL} with components/webhooks")]
    if service is None:
        return [Result("webhooks", "FAIL", f"Service {service_name} is missing in {namespace}: every create the "
                       "webhooks match fails (failurePolicy Fail)", f"{INSTALL} with components/webhooks")]
    bundles = {str((w.get("clientConfig") or {}).get("caBundle") or "") for w in hooks}
    if "" in bundles:
        return [Result("webhooks", "FAIL", "a webhook has no caBundle yet (the webhook server writes it at start)",
                       fix_server)]
    if len(bundles) > 1:
        return [Result("webhooks", "FAIL", "the webhooks carry different caBundles", fix_server)]
    results: list[Result] = []
    if secret == "forbidden":
        results.append(Result("webhooks", "SKIP", f"Secret {secret_name}: not readable with these credentials "
                              "(certificate not checked)"))
    elif secret is None:
        return [Result("webhooks", "FAIL", f"Secret {secret_name} is missing in {namespace}", fix_server)]
    else:
        bundle = certs.from_secret_data(secret.get("data"))
        if bundle is None:
            return [Result("webhooks", "FAIL", f"Secret {secret_name} lacks tls.crt, tls.key or ca.crt", fix_server)]
        if bundle.ca_bundle() not in bundles:
            return [Result("webhooks", "FAIL", f"the caBundle is not Secret {secret_name}'s ca.crt: the API server "
                           "cannot verify the certificate it is served", fix_server)]
        try:
            found = certs.facts(bundle)
        except ValueError as err:
            return [Result("webhooks", "FAIL", f"Secret {secret_name}: unreadable certificate ({err})", fix_server)]
        left = found.not_after - now
        certificate = ((secret.get("metadata") or {}).get("annotations") or {}).get(certs.CERTIFICATE_NAME_ANNOTATION)
        keeper = (f"kept by cert-manager (Certificate {namespace}/{certificate})" if certificate
                  else "kept by the operator")
        if certificate:
            fix_server = (f"kubectl describe certificate -n {namespace} {certificate}; is cert-manager (and its "
                          "cainjector) running?")
        if not found.signed_by_bundle or left <= timedelta(0):
            why = "has expired" if left <= timedelta(0) else "is not signed by a CA of its ca.crt"
            return [Result("webhooks", "FAIL", f"the webhook certificate {why}", fix_server)]
        window = certs.warning_window(found, bool(certificate))
        if left <= window:
            ahead = f"{window.days} days" if window.days else f"{int(window.total_seconds() // 60)} minutes"
            results.append(Result("webhooks", "WARN", f"the webhook certificate expires at {found.not_after:%Y-%m-%d} "
                                  f"and was not rotated ({ahead} ahead), {keeper}", fix_server))
        else:
            results.append(Result("webhooks", "OK", f"certificate valid until {found.not_after:%Y-%m-%d}, "
                                  f"caBundle matches, {keeper}"))
    if dry_run is not None:
        answered, detail = dry_run
        results.append(Result("webhooks", "OK" if answered else "FAIL", detail,
                              "" if answered else fix_server))
    return results
