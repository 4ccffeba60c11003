"""`kubectl apply -k deploy/` against the sandbox with RBAC enforced: server-side dry run accepts every
object, the real apply brings the RayService to Ready in the simulated KubeRay, re-applying changes
nothing, the service account can do what the operator needs and not more, and a broken object is
refused by server-side validation."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_support import DEPLOY

from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox

Kubectl = Callable[..., subprocess.CompletedProcess[str]]
SA = "system:serviceaccount:kaiwo-system:kaiwo-ray"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[RunningSandbox]:
    with start_sandbox(cluster=True, time_factor=0.05, authorization="RBAC") as running:
        yield running


@pytest.fixture(scope="module")
def kubectl(sandbox: RunningSandbox, kubectl_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    cache = tmp_path_factory.mktemp("kubectl-cache")

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([kubectl_bin, "--kubeconfig", str(sandbox.kubeconfig_path), "--cache-dir", str(cache),
                                 *args], capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {result.stderr}")
        return result

    return run


def _get(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def test_server_dry_run_accepts_every_object_and_stores_nothing(kubectl: Kubectl, rendered: list[Any]) -> None:
    kubectl("create", "namespace", "kaiwo-system")  # a dry run cannot create the namespace its objects go in
    result = kubectl("apply", "-k", str(DEPLOY), "--server-side", "--dry-run=server")
    lines = result.stdout.strip().splitlines()
    assert len(lines) == len(rendered)
    assert all(line.endswith("serverside-applied (server dry run)") for line in lines), result.stdout
    assert kubectl("get", "rayservice", "kaiwo-ray", "-n", "kaiwo-system", check=False).returncode == 1


def test_apply_brings_the_rayservice_to_ready(kubectl: Kubectl, rendered: list[Any]) -> None:
    result = kubectl("apply", "-k", str(DEPLOY), "--server-side")
    assert len(result.stdout.strip().splitlines()) == len(rendered)

    def ready() -> dict[str, Any] | None:
        service: dict[str, Any] = _get(kubectl, "rayservice", "kaiwo-ray", "-n", "kaiwo-system")
        conditions = {c["type"]: c for c in service.get("status", {}).get("conditions", [])}
        return service if conditions.get("Ready", {}).get("status") == "True" else None

    service = eventually(ready, timeout=60, interval=0.2)
    assert service["status"]["serviceStatus"] == "Running"
    pods = _get(kubectl, "pods", "-n", "kaiwo-system", "-l", "app.kubernetes.io/part-of=kaiwo-ray")["items"]
    by_role = {p["metadata"]["labels"]["app.kubernetes.io/component"]: p for p in pods}
    assert set(by_role) == {"ray-head", "gpu-telemetry"}
    assert {p["spec"]["serviceAccountName"] for p in pods} == {"kaiwo-ray"}
    node = _get(kubectl, "node", by_role["gpu-telemetry"]["spec"]["nodeName"])
    assert {"amd.com/gpu.product-name", "nvidia.com/gpu.count"} & set(node["metadata"]["labels"])
    # The admin API's Service selects the head (Serve's proxy).
    admin = _get(kubectl, "service", "kaiwo-ray-admin", "-n", "kaiwo-system")
    labels = by_role["ray-head"]["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in admin["spec"]["selector"].items())
    scheduler = _get(kubectl, "deployment", "kaiwo-scheduler", "-n", "kube-system")
    eventually(lambda: _get(kubectl, "deployment", "kaiwo-scheduler", "-n", "kube-system")
               .get("status", {}).get("readyReplicas") == 1, timeout=30, interval=0.2)
    assert scheduler["spec"]["template"]["spec"]["serviceAccountName"] == "kaiwo-scheduler"


def test_reapplying_changes_nothing(kubectl: Kubectl) -> None:
    before = _get(kubectl, "rayservice", "kaiwo-ray", "-n", "kaiwo-system")["metadata"]["generation"]
    roles = _get(kubectl, "clusterrole", "kaiwo-ray-operator")["metadata"]["resourceVersion"]
    kubectl("apply", "-k", str(DEPLOY), "--server-side")
    assert _get(kubectl, "rayservice", "kaiwo-ray", "-n", "kaiwo-system")["metadata"]["generation"] == before
    assert _get(kubectl, "clusterrole", "kaiwo-ray-operator")["metadata"]["resourceVersion"] == roles


@pytest.mark.parametrize(("verb", "resource", "namespace", "allowed"), [
    ("patch", "kaiwojobs.kaiwo.silogen.ai/status", "team", True),
    ("patch", "jobs.batch", "team", True),
    ("watch", "workloads.kueue.x-k8s.io", "", True),
    ("update", "leases.coordination.k8s.io", "kaiwo-system", True),
    ("update", "leases.coordination.k8s.io", "kube-system", False),
    ("get", "secrets", "team", False),
    ("delete", "nodes", "", False),
    ("create", "clusterroles.rbac.authorization.k8s.io", "", False),
    # the admin API, under its own account (below), holds impersonate and the reviews; the operator not
    ("create", "kaiwojobs.kaiwo.silogen.ai", "team", False),
    ("create", "kaiwoservices.kaiwo.silogen.ai", "team", False),
    ("impersonate", "users", "", False),
    ("create", "subjectaccessreviews.authorization.k8s.io", "", False),
])
def test_the_service_account_may_do_what_the_operator_needs(kubectl: Kubectl, verb: str, resource: str,
                                                            namespace: str, allowed: bool) -> None:
    where = ["-n", namespace] if namespace else []
    result = kubectl("auth", "can-i", verb, resource, *where, "--as", SA, check=False)
    assert result.stdout.strip() == ("yes" if allowed else "no"), result.stderr


ADMIN_SA = "system:serviceaccount:kaiwo-system:kaiwo-ray-admin-api"


@pytest.mark.parametrize(("verb", "resource", "namespace", "allowed"), [
    ("create", "kaiwojobs.kaiwo.silogen.ai", "team", False),
    ("delete", "kaiwojobs.kaiwo.silogen.ai", "team", False),
    ("create", "kaiwoservices.kaiwo.silogen.ai", "team", False),
    ("delete", "kaiwoservices.kaiwo.silogen.ai", "team", False),
    ("patch", "kaiwojobs.kaiwo.silogen.ai", "team", False),
    ("create", "jobs.batch", "team", False),
    ("delete", "rayjobs.ray.io", "team", False),
    ("list", "kaiwojobs.kaiwo.silogen.ai", "team", True),
    ("impersonate", "users", "", True),
    ("impersonate", "groups", "", True),
    ("create", "tokenreviews.authentication.k8s.io", "", True),
    ("create", "subjectaccessreviews.authorization.k8s.io", "", True),
    ("get", "configmaps", "kube-system", False),  # only extension-apiserver-authentication, by name
    ("list", "configmaps", "kaiwo-system", True),  # the GPU ledger's
    ("list", "configmaps", "team", False),
    ("create", "configmaps", "kaiwo-system", False),
])
def test_the_admin_apis_account_reads_impersonates_and_writes_no_workload(
        kubectl: Kubectl, verb: str, resource: str, namespace: str, allowed: bool) -> None:
    where = ["-n", namespace] if namespace else []
    result = kubectl("auth", "can-i", verb, resource, *where, "--as", ADMIN_SA, check=False)
    assert result.stdout.strip() == ("yes" if allowed else "no"), result.stderr


@pytest.mark.parametrize(("resource", "subresource"), [
    ("uids", ""), ("userextras", "authentication.kubernetes.io/pod-name"),
    ("userextras", "authentication.kubernetes.io/credential-id")])
def test_the_admin_apis_account_may_impersonate_uids_and_extra(sandbox: RunningSandbox, resource: str,
                                                               subresource: str) -> None:
    """(kubectl auth can-i resolves a resource through discovery, which names no `uids`: a review instead.)"""
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": ADMIN_SA, "groups": ["system:serviceaccounts", "system:serviceaccounts:kaiwo-system"],
        "resourceAttributes": {"verb": "impersonate", "group": "authentication.k8s.io", "resource": resource,
                               "subresource": subresource}}}
    for user, allowed in ((ADMIN_SA, True), (SA, False)):
        review["spec"]["user"] = user
        code, _, body = sandbox.http("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
        assert code == 201 and json.loads(body)["status"]["allowed"] is allowed, body


def test_the_token_controller_fills_the_admin_apis_token_secret(sandbox: RunningSandbox) -> None:
    """The Secret the head mounts authenticates as the admin API's account (TokenReview)."""
    def token() -> str | None:
        code, _, body = sandbox.http("GET", "/api/v1/namespaces/kaiwo-system/secrets/kaiwo-ray-admin-api-token")
        assert code == 200, body
        return (json.loads(body).get("data") or {}).get("token")

    encoded = eventually(token, 30, "the token controller's token")
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
              "spec": {"token": base64.b64decode(encoded).decode()}}
    code, _, body = sandbox.http("POST", "/apis/authentication.k8s.io/v1/tokenreviews", review)
    assert code == 201, body
    assert json.loads(body)["status"]["user"]["username"] == ADMIN_SA


def test_the_aggregated_group_is_registered_and_says_why_it_is_unavailable(sandbox: RunningSandbox) -> None:
    """The APIService applies; with no admin API pod behind its Service, the aggregator's check says so."""
    def condition() -> dict[str, Any] | None:
        code, _, body = sandbox.http("GET", "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.admin.kaiwo.silogen.ai")
        assert code == 200, body
        found = [c for c in (json.loads(body).get("status") or {}).get("conditions") or [] if c["type"] == "Available"]
        return found[0] if found else None

    available = eventually(condition, 30, "the APIService's Available condition")
    assert (available["status"], available["reason"]) == ("False", "EndpointsNotFound"), available
    assert available["message"] == 'cannot find endpoints for service/kaiwo-ray-admin in "kaiwo-system"'


def test_a_broken_object_is_refused_by_server_side_validation(kubectl: Kubectl, tmp_path: Path) -> None:
    overlay = tmp_path / "broken"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(DEPLOY / "base", overlay)],
        "patches": [{"target": {"kind": "ClusterRoleBinding", "name": "kaiwo-ray-operator"},
                     "patch": yaml.safe_dump([{"op": "remove", "path": "/subjects/0/namespace"}])}]}))
    result = kubectl("apply", "-k", str(overlay), "--server-side", "--dry-run=server", check=False)
    assert result.returncode == 1
    # No admin API runs behind the applied APIService here: kubectl's discovery says so, as it would on a
    # cluster where the admin API is not up yet. The refusal is the rest.
    unavailable = "couldn't get resource list for admin.kaiwo.silogen.ai/v1alpha1: the server is currently unable"
    stderr = "".join(line for line in result.stderr.splitlines(keepends=True) if unavailable not in line)
    assert stderr == ('The ClusterRoleBinding "kaiwo-ray-operator" is invalid: subjects[0].namespace: '
                             "Required value\n")
