"""The admin API's own identity: ServiceAccount `kaiwo-system/kaiwo-ray-admin-api`, its role (reads, token
and access reviews, and `impersonate`: every write is the caller's), and a token Secret the token
controller fills in. deploy/base declares the same objects for a cluster (a test keeps `ADMIN_API_RULES`
equal to deploy/base/rbac-admin-api.yaml); `kaiwo-ray dev` provisions them in its sandbox with
`provision_local` and runs the admin API with a kubeconfig holding that account's token, so the sandbox's
RBAC and audit see the admin API as it is deployed, apart from the operator.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
from pathlib import Path
from typing import Any

import yaml

from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import AlreadyExists
from kaiwo_ray.kube.resources import NAMESPACES, SECRETS, Resource
from kaiwo_ray.permissions import Rule
from serve.auth import IMPERSONATED_EXTRA
from serve.state import AdminSettings

NAMESPACE, NAME = "kaiwo-system", "kaiwo-ray-admin-api"
TOKEN_SECRET = f"{NAME}-token"
USER = f"system:serviceaccount:{NAMESPACE}:{NAME}"
LABELS = {"app.kubernetes.io/name": "kaiwo-ray"}
RBAC = "rbac.authorization.k8s.io"
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", True)
CLUSTERROLES = Resource(RBAC, "v1", "clusterroles", "ClusterRole", False)
CLUSTERROLEBINDINGS = Resource(RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", False)
ROLEBINDINGS = Resource(RBAC, "v1", "rolebindings", "RoleBinding", True)

# The ClusterRole kaiwo-ray-admin-api, rule by rule: nothing here writes a workload.
ADMIN_API_RULES: tuple[Rule, ...] = (
    Rule(("kaiwo.silogen.ai",), ("kaiwojobs", "kaiwoservices"), ("get", "list", "watch")),
    Rule(("kaiwo.silogen.ai",), ("kaiwoqueueconfigs",), ("get",)),  # what the start-time forecast simulates
    Rule(("",), ("users", "groups", "serviceaccounts"), ("impersonate",)),
    Rule(("authentication.k8s.io",), ("uids", *(f"userextras/{key}" for key in IMPERSONATED_EXTRA)), ("impersonate",)),
    Rule(("",), ("events", "nodes", "persistentvolumeclaims", "pods"), ("list", "watch")),
    Rule(("",), ("pods/log",), ("get",)),
    Rule(("apps",), ("deployments",), ("list", "watch")),
    Rule(("batch",), ("jobs",), ("list", "watch")),
    Rule(("ray.io",), ("rayjobs",), ("list", "watch")),
    Rule(("workload.codeflare.dev",), ("appwrappers",), ("list", "watch")),
    Rule(("kueue.x-k8s.io",), ("clusterqueues", "localqueues", "workloads"), ("list", "watch")),
    Rule(("config.kaiwo.silogen.ai",), ("kaiwoconfigs",), ("list", "watch")),
    Rule(("authentication.k8s.io",), ("tokenreviews",), ("create",)),
    Rule(("authorization.k8s.io",), ("subjectaccessreviews",), ("create",)),
)
# The Role kaiwo-ray-admin-api-ledger-reader, in the ledger's namespace: its ConfigMaps (serve/usage.py).
LEDGER_RULES: tuple[Rule, ...] = (Rule(("",), ("configmaps",), ("list",)),)
ROLES = Resource(RBAC, "v1", "roles", "Role", True)


def _meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(LABELS), **extra}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _subject() -> list[dict[str, str]]:
    return [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]


def _rules(rules: tuple[Rule, ...]) -> list[dict[str, Any]]:
    return [{"apiGroups": list(r.groups), "resources": list(r.resources), "verbs": list(r.verbs)} for r in rules]


def objects(ledger_namespace: str = NAMESPACE) -> list[tuple[Resource, dict[str, Any]]]:
    """What gives the admin API its identity, in the order they are created (kustomize's order)."""
    rules = _rules(ADMIN_API_RULES)
    ledger = f"{NAME}-ledger-reader"

    def binding(kind: str, name: str, role_kind: str, role: str, namespace: str | None = None) -> dict[str, Any]:
        return {"apiVersion": f"{RBAC}/v1", "kind": kind, "metadata": _meta(name, namespace),
                "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role}, "subjects": _subject()}

    return [
        (SERVICEACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(NAME, NAMESPACE)}),
        (CLUSTERROLES, {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": _meta(NAME), "rules": rules}),
        (CLUSTERROLEBINDINGS, binding("ClusterRoleBinding", NAME, "ClusterRole", NAME)),
        (CLUSTERROLEBINDINGS, binding("ClusterRoleBinding", f"{NAME}:system:auth-delegator", "ClusterRole",
                                      "system:auth-delegator")),
        (ROLEBINDINGS, binding("RoleBinding", f"{NAME}-auth-reader", "Role",
                               "extension-apiserver-authentication-reader", "kube-system")),
        (ROLES, {"apiVersion": f"{RBAC}/v1", "kind": "Role", "metadata": _meta(ledger, ledger_namespace),
                 "rules": _rules(LEDGER_RULES)}),
        (ROLEBINDINGS, binding("RoleBinding", ledger, "Role", ledger, ledger_namespace)),
        (SECRETS, {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                   "metadata": _meta(TOKEN_SECRET, NAMESPACE,
                                     annotations={"kubernetes.io/service-account.name": NAME})}),
    ]


async def _token(client: KubeClient, timeout: float) -> str:
    """The token the token controller writes into the Secret."""
    async with asyncio.timeout(timeout):
        while True:
            secret = await client.get(SECRETS, TOKEN_SECRET, NAMESPACE)
            token = (secret.get("data") or {}).get("token")
            if token:
                return base64.b64decode(token).decode()
            await asyncio.sleep(0.1)


async def _provision(kubeconfig: str | None, timeout: float) -> str:
    client = await KubeClient.from_kubeconfig(kubeconfig)
    ledger_namespace = AdminSettings().ledger_namespace  # where this process's admin API reads the ledger
    try:
        for namespace in dict.fromkeys((NAMESPACE, ledger_namespace)):
            with contextlib.suppress(AlreadyExists):
                await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": namespace}})
        for res, body in objects(ledger_namespace):
            with contextlib.suppress(AlreadyExists):
                await client.create(res, body, body["metadata"].get("namespace"))
        return await _token(client, timeout)
    finally:
        await client.close()


def kubeconfig_as(source: Path, token: str, target: Path) -> Path:
    """`source` with every user's credentials replaced by `token` (mode 0600)."""
    config = yaml.safe_load(source.read_text())
    for user in config.get("users") or []:
        user["user"] = {"token": token}
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        yaml.safe_dump(config, out)
    return target


def provision_local(kubeconfig: Path, target: Path, *, timeout: float = 30.0) -> Path:
    """Create the admin API's identity in the cluster of `kubeconfig` and write a kubeconfig that
    authenticates as it to `target`."""
    token = asyncio.run(_provision(str(kubeconfig), timeout))
    return kubeconfig_as(kubeconfig, token, target)


async def admin_client(settings: AdminSettings) -> KubeClient:
    """The admin API's own client: in a pod, its own ServiceAccount's mounted token where one is given
    (deploy/base/serviceaccount.yaml), else the pod's; outside, the kubeconfig."""
    if not settings.in_cluster:
        return await KubeClient.from_kubeconfig(settings.kubeconfig)
    from kaiwo_ray.kube import incluster

    own = Path(settings.service_account_dir) if settings.service_account_dir else None
    return KubeClient.in_cluster(incluster.load(directory=own) if own is not None else None)
