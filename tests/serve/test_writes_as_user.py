"""Writes made as the user (issue 34): the admin API runs as its own ServiceAccount (kaiwo-ray-admin-api,
with the token the token controller writes into its Secret, as deploy/base mounts it) with deploy/'s role,
which may read workloads and impersonate but not create or delete them; a submit or delete through the
admin API is then the user's own at the API server: RBAC, the audit log (uid and extra included) and
managedFields see them. The operator's account holds no `impersonate`."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from admin_support import RunningApp, kaiwojob, serve_app

from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox
from serve.state import AdminSettings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KAIWO = "kaiwo.silogen.ai"
SA = "system:serviceaccount:kaiwo-system:kaiwo-ray-admin-api"
OPERATOR = "system:serviceaccount:kaiwo-system:kaiwo-ray"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
TOKEN = "kaiwo-ray-admin-api-token"


def _create(sb: RunningSandbox, obj: dict[str, Any]) -> None:
    plural = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings", "Role": "roles",
              "RoleBinding": "rolebindings", "ServiceAccount": "serviceaccounts", "Secret": "secrets"}[obj["kind"]]
    namespace = obj["metadata"].get("namespace")
    prefix = "/api/v1" if obj["apiVersion"] == "v1" else RBAC
    path = f"{prefix}/namespaces/{namespace}/{plural}" if namespace else f"{prefix}/{plural}"
    code, _, body = sb.http("POST", path, obj)
    assert code == 201, body


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningSandbox, RunningApp]]:
    with start_sandbox(nodes=[], authorization="RBAC", cluster=["token-controller"]) as sb:
        for ns in ("team-a", "kaiwo-system"):
            assert sb.http("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})[0] == 201
        for source in (DEPLOY / "base" / "serviceaccount.yaml", DEPLOY / "base" / "rbac-operator.yaml",
                       DEPLOY / "base" / "rbac-admin-api.yaml", DEPLOY / "components" / "aggregated-api" / "rbac.yaml"):
            for obj in yaml.safe_load_all(source.read_text()):
                _create(sb, obj)
        rules = [{"apiGroups": [KAIWO], "resources": ["kaiwojobs", "kaiwoservices"],
                  "verbs": ["get", "list", "watch", "create", "patch", "delete"]}]
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
        assert sb.http("POST", "/api/v1/namespaces/team-a/serviceaccounts", {"metadata": {"name": "ci"}})[0] == 201
        _create(sb, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                     "metadata": {"name": "ci", "namespace": "team-a"},
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "submitter"},
                     "subjects": [{"kind": "ServiceAccount", "name": "ci", "namespace": "team-a"}]})
        token = eventually(lambda: (json.loads(sb.http("GET", f"/api/v1/namespaces/kaiwo-system/secrets/{TOKEN}")[2])
                                    .get("data") or {}).get("token"), 30, "the token controller's token")
        kubeconfig = sb.kubeconfig_for(base64.b64decode(token).decode(),
                                       tmp_path_factory.mktemp("admin-sa") / "kubeconfig")
        app = serve_app(AdminSettings(kubeconfig=str(kubeconfig), auth="kubernetes"))
        try:
            yield sb, app
        finally:
            app.stop()


def _as(app: RunningApp, sb: RunningSandbox, user: str) -> httpx.Client:
    return app.client(headers={"Authorization": f"Bearer {sb.mint_token(user)}"})


def _may(sb: RunningSandbox, verb: str, *, user: str = SA, group: str = KAIWO, resource: str = "kaiwojobs",
         namespace: str = "team-a", subresource: str = "") -> bool:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": user, "groups": ["system:serviceaccounts", "system:serviceaccounts:kaiwo-system", "system:authenticated"],
        "resourceAttributes": {"verb": verb, "group": group, "resource": resource, "namespace": namespace,
                               "subresource": subresource}}}
    code, _, body = sb.http("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    assert code == 201, body
    return bool(json.loads(body)["status"]["allowed"])


def test_the_admin_apis_role_may_not_create_or_delete_workloads(world: tuple[RunningSandbox, RunningApp]) -> None:
    sb, _ = world
    assert _may(sb, "list") and _may(sb, "watch")
    assert not _may(sb, "create") and not _may(sb, "delete")
    for group, resource, sub in (("", "users", ""), ("", "groups", ""), ("authentication.k8s.io", "uids", ""),
                                 ("authentication.k8s.io", "userextras", "authentication.kubernetes.io/pod-name")):
        assert _may(sb, "impersonate", group=group, resource=resource, namespace="", subresource=sub)
        assert not _may(sb, "impersonate", user=OPERATOR, group=group, resource=resource, namespace="", subresource=sub)
    assert not _may(sb, "impersonate", group="authentication.k8s.io", resource="userextras", namespace="",
                    subresource="scopes")


def test_the_admin_api_acts_as_its_own_account(world: tuple[RunningSandbox, RunningApp]) -> None:
    sb, app = world
    sb.audit.clear()
    with _as(app, sb, "alice") as alice:
        assert alice.get("/api/v1/workloads", params={"namespace": "team-a"}).status_code == 200
    reviews = sb.audit.records(resource="subjectaccessreviews")
    assert reviews and {r.user for r in reviews} == {SA}


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
    writes = [(r.user, r.impersonator, r.verb, r.code) for r in sb.audit.records(resource="kaiwojobs")
              if r.verb in ("create", "delete")]
    assert writes == [("alice", SA, "create", 201), ("alice", SA, "delete", 200)]


def test_a_service_accounts_submit_carries_its_uid(world: tuple[RunningSandbox, RunningApp]) -> None:
    """A ServiceAccount's token authenticates with the account's uid and its credential-id extra: the
    write impersonates both (Impersonate-Uid, Impersonate-Extra-*), so the audit log names them."""
    sb, app = world
    uid = json.loads(sb.http("GET", "/api/v1/namespaces/team-a/serviceaccounts/ci")[2])["metadata"]["uid"]
    sb.audit.clear()
    token = sb.service_account_token("team-a", "ci")
    with app.client(headers={"Authorization": f"Bearer {token}"}) as ci:
        submitted = ci.post("/api/v1/workloads", json=kaiwojob("from-ci", "team-a"))
        assert submitted.status_code == 201, submitted.text
    [write] = [r for r in sb.audit.records(resource="kaiwojobs") if r.verb == "create"]
    assert (write.user, write.uid, write.impersonator) == ("system:serviceaccount:team-a:ci", uid, SA)
    # and its token's credential-id (extra), which the admin API's role may impersonate
    assert list(write.extra) == ["authentication.kubernetes.io/credential-id"]
    assert write.extra["authentication.kubernetes.io/credential-id"][0].startswith("JTI=")
    sb.http("DELETE", f"/apis/{KAIWO}/v1alpha1/namespaces/team-a/kaiwojobs/from-ci")


def test_a_user_the_cluster_would_refuse_is_refused(world: tuple[RunningSandbox, RunningApp]) -> None:
    sb, app = world
    with _as(app, sb, "bob") as bob:
        refused = bob.post("/api/v1/workloads", json=kaiwojob("his", "team-a"))
        assert refused.status_code == 403, refused.text
        assert 'User "bob" cannot create resource "kaiwojobs"' in refused.json()["message"]
    assert sb.http("GET", f"/apis/{KAIWO}/v1alpha1/namespaces/team-a/kaiwojobs/his")[0] == 404


def test_a_kaiwo_submit_through_the_kubernetes_api_is_the_users_own_too(
        world: tuple[RunningSandbox, RunningApp], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The other path: `kaiwo submit` applies through the Kubernetes API with the user's own kubeconfig
    (never the admin URL), under field manager `kaiwo-cli:<user>`, so the audit log and managedFields
    name the user as they do for a submit through the admin API."""
    from kaiwo_ray.cli.kaiwo import main

    sb, _ = world
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KAIWOCONFIG", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(sb.kubeconfig_for(sb.mint_token("alice"), tmp_path / "kubeconfig")))
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(kaiwojob("by-cli", "team-a")))
    sb.audit.clear()
    capsys.readouterr()
    assert main(["submit", "-f", str(manifest)]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip() == "kaiwojob.kaiwo.silogen.ai/by-cli created"
    code, _, body = sb.http("GET", f"/apis/{KAIWO}/v1alpha1/namespaces/team-a/kaiwojobs/by-cli")
    assert code == 200, body
    assert [m["manager"] for m in json.loads(body)["metadata"]["managedFields"]] == ["kaiwo-cli:alice"]
    writes = [(r.user, r.impersonator, r.verb, r.code) for r in sb.audit.records(resource="kaiwojobs")
              if r.verb not in ("get", "list", "watch")]
    assert writes == [("alice", "", "patch", 201)]
    assert not sb.audit.records(user=SA)  # the admin API took no part
    sb.http("DELETE", f"/apis/{KAIWO}/v1alpha1/namespaces/team-a/kaiwojobs/by-cli")


def test_impersonation_headers_carry_uid_and_extra_escaped_as_client_go_does() -> None:
    from serve.auth import User, impersonation

    user = User("alice", ("team", "system:authenticated"), "u-1",
                (("authentication.kubernetes.io/credential-id", ("JTI=x",)), ("scopes", ("a", "b"))))
    assert impersonation(user) == [
        ("Impersonate-User", "alice"), ("Impersonate-Group", "team"), ("Impersonate-Uid", "u-1"),
        ("Impersonate-Extra-authentication.kubernetes.io%2Fcredential-id", "JTI=x")]  # `scopes` is not granted
    account = User("system:serviceaccount:team-a:ci", ("system:serviceaccounts",), "u-2")
    assert impersonation(account) == [("Impersonate-User", "system:serviceaccount:team-a:ci"),
                                      ("Impersonate-Uid", "u-2")]
