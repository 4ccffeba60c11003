"""`kaiwo-ray doctor`'s reads: everything the checks judge, from the API server (and the admin API when a URL
is given). Read-only: the doctor writes nothing but access reviews and, where the admission webhooks are
installed, one dry-run Job create; neither is ever stored."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.controllers.manager import HostSettings, default_controller_names
from kaiwo_ray.doctor import checks
from kaiwo_ray.doctor.checks import Result
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.discovery import ClusterApis, detect
from kaiwo_ray.kube.errors import Forbidden, KubeError, NotFound
from kaiwo_ray.permissions import LEASE_RULES, OPERATOR_RULES, Rule

SAR_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
SSAR_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


@dataclass(slots=True)
class Options:
    namespace: str = "kaiwo-system"  # the operator's namespace (deploy/)
    service_account: str = "kaiwo-ray"
    admin_url: str | None = None
    controllers: list[str] = field(default_factory=lambda: default_controller_names(HostSettings()))


async def _get(client: KubeClient, res: R.Resource | None, name: str, namespace: str | None = None) -> JsonObj | None:
    if res is None:
        return None
    try:
        return await client.get(res, name, namespace)
    except NotFound:
        return None


async def _allowed(client: KubeClient, subject: tuple[str, list[str]] | None, atom: tuple[str, str, str],
                   namespace: str) -> bool:
    """SubjectAccessReview for the operator's account (SelfSubjectAccessReview when `subject` is None)."""
    group, resource, verb = atom
    resource, _, subresource = resource.partition("/")
    attributes = {"group": group, "resource": resource, "subresource": subresource, "verb": verb,
                  "namespace": namespace}
    spec: JsonObj = {"resourceAttributes": attributes}
    if subject is not None:
        spec.update(user=subject[0], groups=subject[1])
    answer = await client.request("POST", SAR_PATH if subject is not None else SSAR_PATH,
                                  body={"apiVersion": "authorization.k8s.io/v1", "spec": spec,
                                        "kind": "SubjectAccessReview" if subject else "SelfSubjectAccessReview"})
    return bool(((answer or {}).get("status") or {}).get("allowed"))


async def permissions(client: KubeClient, options: Options) -> list[Result]:
    user = f"system:serviceaccount:{options.namespace}:{options.service_account}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{options.namespace}", "system:authenticated"]
    subject: tuple[str, list[str]] | None = (user, groups)
    denied: dict[str, list[str]] = {}
    rules: list[tuple[Rule, str]] = [(r, "") for r in OPERATOR_RULES] + [(r, options.namespace) for r in LEASE_RULES]
    for rule, namespace in rules:
        missing = []
        for atom in rule.atoms():
            try:
                ok = await _allowed(client, subject, atom, namespace)
            except Forbidden:  # we may not review others: review ourselves (right when run as the operator)
                subject, user = None, "this kubeconfig's user"
                ok = await _allowed(client, subject, atom, namespace)
            if not ok:
                missing.append(f"{atom[2]} {atom[1]}")
        where = f" in {namespace}" if namespace else ""
        denied[rule.describe() + where] = missing
    return checks.check_permissions(user, denied)


async def _probe_admin(url: str) -> tuple[bool, str]:
    """Ray Serve's route table through the admin API's address: the admin app must be routed at /."""
    import aiohttp

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session, \
                session.get(url.rstrip("/") + "/-/routes") as response:
            if response.status != 200:
                return False, f"GET /-/routes answered {response.status}"
            routes = await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as err:
        return False, f"{type(err).__name__}: {err}"
    if "/" not in (routes or {}):
        return False, f"Serve routes {sorted(routes or {})} have no admin application at /"
    return True, f"Serve routes {', '.join(sorted(routes))}"


async def run_checks(client: KubeClient, options: Options) -> list[Result]:
    try:
        apis: ClusterApis = await detect(client)
    except KubeError as err:
        return [Result("api-server", "FAIL", f"discovery failed: {err}", "check the kubeconfig and the credentials")]
    results = [Result("api-server", "OK", "reachable")]
    from kaiwo_ray.api.crd import CRDS, crd_for

    expected = [crd_for(info) for info in CRDS]
    live = {c["metadata"]["name"]: await _get(client, R.CRDS, c["metadata"]["name"]) for c in expected}
    if not any(live.values()):  # before the install: say so once, judge only the prerequisites
        results += checks.not_installed(expected)
        results += checks.check_versions(apis)
        results += checks.check_gpus((await client.list(R.NODES)).get("items") or [])
        return results
    results += checks.check_crds(expected, live)
    results += checks.check_versions(apis)
    config = await _get(client, R.KAIWOCONFIGS, "kaiwo") or {}
    spec = config.get("spec") or {}
    scheduler = str((spec.get("scheduling") or {}).get("kubeSchedulerName") or "kaiwo-scheduler")
    default_queue = str(spec.get("defaultClusterQueueName") or "kaiwo")
    now = datetime.now(UTC)
    results += checks.check_scheduler(scheduler, await _get(client, R.DEPLOYMENTS, scheduler, "kube-system"),
                                      await _get(client, R.LEASES, scheduler, "kube-system"), now)
    leases = {c: await _get(client, R.LEASES, f"kaiwo-ray-{c}", options.namespace) for c in options.controllers}
    results += checks.check_operator(options.controllers, leases, options.namespace, now)
    results += await permissions(client, options)
    nodes = (await client.list(R.NODES)).get("items") or []
    results += checks.check_gpus(nodes)
    results += checks.check_queue(default_queue, await _get(client, R.KAIWOQUEUECONFIGS, "kaiwo"),
                                  await _get(client, apis.served(R.CLUSTERQUEUES), default_queue))
    rayservice = await _get(client, apis.served(R.RAYSERVICES), "kaiwo-ray", options.namespace)
    pods = (await client.list(R.PODS, options.namespace, label_selector="app.kubernetes.io/component=gpu-telemetry"))
    running = {str(p["spec"].get("nodeName")): p["metadata"]["name"] for p in pods.get("items") or ()
               if (p.get("status") or {}).get("phase") == "Running" and p["spec"].get("nodeName")}
    results += checks.check_telemetry(rayservice, running, checks.gpu_nodes(nodes), options.namespace)
    probe = await _probe_admin(options.admin_url) if options.admin_url else None
    results += checks.check_admin(rayservice, await _get(client, R.SERVICES, "kaiwo-ray-admin", options.namespace),
                                  probe, options.namespace)
    results += await webhooks(client, options.namespace, now)
    return results


WEBHOOK_PROBE_NAMESPACE = "default"


async def _dry_run_through_webhooks(client: KubeClient) -> tuple[bool, str]:
    """A labelled Job created with dryRun=All in `default`: the API server calls the webhooks as for any
    create (TLS verified against the caBundle), the dry run stores nothing, and the webhooks have no side
    effects (sideEffects None). The queue label in the answer is the mutating webhook's work."""
    from kaiwo_ray.api.labels import LABEL_MANAGED, LABEL_QUEUE

    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"generateName": "kaiwo-ray-doctor-", "labels": {LABEL_MANAGED: "true"}},
           "spec": {"template": {"spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "probe", "image": "busybox"}]}}}}
    try:
        answer = await client.request("POST", R.JOBS.path(WEBHOOK_PROBE_NAMESPACE), body=job,
                                      query={"dryRun": "All"})
    except Forbidden:
        return True, f"(not probed: these credentials may not create Jobs in {WEBHOOK_PROBE_NAMESPACE})"
    except KubeError as err:
        return False, f"a dry-run Job create in {WEBHOOK_PROBE_NAMESPACE} failed: {err}"
    labels = ((answer or {}).get("metadata") or {}).get("labels") or {}
    if LABEL_QUEUE not in labels:
        return False, f"a dry-run Job create in {WEBHOOK_PROBE_NAMESPACE} passed without the mutating webhook's queue label"
    return True, f"the API server reached them: a dry-run labelled Job in {WEBHOOK_PROBE_NAMESPACE} was mutated"


async def webhooks(client: KubeClient, namespace: str, now: datetime) -> list[Result]:
    mutating = await _get(client, R.MUTATINGWEBHOOKCONFIGURATIONS, "kaiwo-ray")
    validating = await _get(client, R.VALIDATINGWEBHOOKCONFIGURATIONS, "kaiwo-ray")
    if mutating is None and validating is None:
        return checks.check_webhooks(None, None, None, None, None, now, namespace)
    secret: JsonObj | Literal["forbidden"] | None
    try:
        secret = await _get(client, R.SECRETS, "kaiwo-ray-webhook-cert", namespace)
    except Forbidden:
        secret = "forbidden"
    service = await _get(client, R.SERVICES, "kaiwo-ray-webhooks", namespace)
    dry_run = await _dry_run_through_webhooks(client) if mutating is not None else None
    return checks.check_webhooks(mutating, validating, service, secret, dry_run, now, namespace)
