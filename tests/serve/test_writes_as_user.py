"""Writes made as the user (issue 34): the admin API runs as deploy/'s ServiceAccount with deploy/'s
role, which may read workloads and impersonate but not create or delete them; a submit or delete through
the admin API is then the user's own at the API server: RBAC, the audit log and managedFields see them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from admin_support import RunningApp, kaiwojob, serve_app

from kaiwo_sandbox.testing import RunningSandbox, start_sandbox
from serve.state import AdminSettings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KAIWO = "kaiwo.silogen.ai"
SA = "system:serviceaccount:kaiwo-system:kaiwo-ray"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def _create(sb: RunningSandbox, obj: dict[str, Any]) -> None:
    plural = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings", "Role": "roles",
              "RoleBinding": "rolebindings"}[obj["kind"]]
    namespace = obj["metadata"].get("namespace")
    path = f"{RBAC}/namespaces/{namespace}/{plural}" if namespace else f"{RBAC}/{plural}"
    code, _, body = sb.http("POST", path, obj)
    assert code == 201, body


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningSandbox, RunningApp]]:
    with start_sandbox(nodes=[], authorization="RBAC") as sb:
        for ns in ("team-a", "kaiwo-system"):
            assert sb.http("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})[0] == 201
        assert sb.http("POST", "/api/v1/namespaces/kaiwo-system/serviceaccounts",
                       {"metadata": {"name": "kaiwo-ray"}})[0] == 201
        for source in (DEPLOY / "base" / "rbac-admin-api.yaml", DEPLOY / "components" / "aggregated-api" / "rbac.yaml"):
            for obj in yaml.safe_load_all(source.read_text()):
                _create(sb, obj)
        rules = [{"apiGroups": [KAIWO], "resources": ["kaiwojobs", "kaiwoservices"],
                  "verbs": ["get", "list", "watch", "create", "delete"]}]
        _create(sb, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                     "metadata": {"name": "submitter", "namespace": "team-a"}, "rules": rules})
        _create(sb, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                     "metadata": {"name": "reader", "namespace": "team-a"},
                     "rules": [{**rules[0], "verbs": ["get", "list", "watch"]}]})
        for user, role in (("alice", "submitter"), ("bob", "reader")):
            _create(sb, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                         "metadata": {"name": user, "namespace": "team-a"},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                         "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]})
        kubeconfig = sb.kubeconfig_for(sb.service_account_token("kaiwo-system", "kaiwo-ray"),
                                       tmp_path_factory.mktemp("admin-sa") / "kubeconfig")
        app = serve_app(AdminSettings(kubeconfig=str(kubeconfig), auth="kubernetes"))
        try:
            yield sb, app
        finally:
            app.stop()


def _as(app: RunningApp, sb: RunningSandbox, user: str) -> httpx.Client:
    return app.client(headers={"Authorization": f"Bearer {sb.mint_token(user)}"})


def _may(sb: RunningSandbox, verb: str) -> bool:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": SA, "groups": ["system:serviceaccounts", "system:serviceaccounts:kaiwo-system", "system:authenticated"],
        "resourceAttributes": {"verb": verb, "group": KAIWO, "resource": "kaiwojobs", "namespace": "team-a"}}}
    code, _, body = sb.http("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    assert code == 201, body
    return bool(json.loads(body)["status"]["allowed"])


def test_the_admin_apis_role_may_not_create_or_delete_workloads(world: tuple[RunningSandbox, RunningApp]) -> None:
    sb, _ = world
    assert _may(sb, "list") and _may(sb, "watch")
    assert not _may(sb, "create") and not _may(sb, "delete")


def test_a_submit_and_a_delete_are_the_users_own(world: tuple[RunningSandbox, RunningApp]) -> None:
    sb, app = world
    sb.audit.clear()
    with _as(app, sb, "alice") as alice:
        submitted = alice.post("/api/v1/workloads", json=kaiwojob("mine", "team-a"))
        assert submitted.status_code == 201, submitted.text
        code, _, body = sb.http("GET", f"/apis/{KAIWO}/v1alpha1/namespaces/team-a/kaiwojobs/mine")
        assert code == 200, body
        assert [m["manager"] for m in json.loads(body)["metadata"]["managedFields"]] == ["kaiwo-admin-api:alice"]
        deleted = alice.delete("/api/v1/namespaces/team-a/kaiwojobs/mine")
        assert deleted.status_code == 200, deleted.text
    writes = [(r.user, r.verb, r.code) for r in sb.audit.records(resource="kaiwojobs") if r.verb in ("create", "delete")]
    assert writes == [("alice", "create", 201), ("alice", "delete", 200)]


def test_a_user_the_cluster_would_refuse_is_refused(world: tuple[RunningSandbox, RunningApp]) -> None:
    sb, app = world
    with _as(app, sb, "bob") as bob:
        refused = bob.post("/api/v1/workloads", json=kaiwojob("his", "team-a"))
        assert refused.status_code == 403, refused.text
        assert 'User "bob" cannot create resource "kaiwojobs"' in refused.json()["message"]
    assert sb.http("GET", f"/apis/{KAIWO}/v1alpha1/namespaces/team-a/kaiwojobs/his")[0] == 404
