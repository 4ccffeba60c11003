"""Authentication and RBAC in the sandbox: service-account tokens, Roles/ClusterRoles and bindings evaluated
as Kubernetes does, the review APIs, and the apiserver's 403 wording, through kubectl and the kubernetes client."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from kaiwo_sandbox.contracts import ApiError
from kaiwo_sandbox.testing import RunningSandbox, start_sandbox

RBAC = "rbac.authorization.k8s.io"
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def rbac_sandbox() -> Iterator[RunningSandbox]:
    with start_sandbox(nodes=[], authorization="RBAC") as running:
        core = kubernetes.client.CoreV1Api(running.api_client())
        for namespace in ("team", "other"):
            core.create_namespace({"metadata": {"name": namespace}})
        core.create_namespaced_service_account("team", {"metadata": {"name": "bot"}})
        core.create_namespaced_pod("team", {"metadata": {"name": "web"},
                                            "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
        rbac = kubernetes.client.RbacAuthorizationV1Api(running.api_client())
        rbac.create_namespaced_role("team", {
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]},
                      {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
                       "resourceNames": ["allowed"]}]})
        rbac.create_namespaced_role_binding("team", {
            "metadata": {"name": "bot-reads-pods"},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "bot"}]})  # namespace: the binding's
        rbac.create_cluster_role({"metadata": {"name": "node-viewer"}, "rules": [
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
            {"apiGroups": ["apps"], "resources": ["*/scale"], "verbs": ["get"]},
            {"nonResourceURLs": ["/metrics", "/debug/*"], "verbs": ["get"]}]})
        rbac.create_cluster_role_binding({
            "metadata": {"name": "auditors-view-nodes"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "node-viewer"},
            "subjects": [{"kind": "Group", "name": "auditors"}]})
        # A ClusterRole bound by a RoleBinding grants its rules in that namespace only.
        rbac.create_cluster_role({"metadata": {"name": "secret-reader"}, "rules": [
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]})
        rbac.create_namespaced_role_binding("other", {
            "metadata": {"name": "alice-secrets"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "secret-reader"},
            "subjects": [{"kind": "User", "name": "alice"}]})
        yield running


@pytest.fixture(scope="module")
def bot_token(rbac_sandbox: RunningSandbox) -> str:
    return rbac_sandbox.service_account_token("team", "bot")


def _forbidden(call: Callable[[], Any]) -> dict[str, Any]:
    with pytest.raises(kubernetes.client.ApiException) as caught:
        call()
    assert caught.value.status == 403
    body: dict[str, Any] = json.loads(caught.value.body)
    return body


def test_a_service_account_token_is_granted_exactly_its_roles(rbac_sandbox: RunningSandbox, bot_token: str) -> None:
    bot = kubernetes.client.CoreV1Api(rbac_sandbox.api_client(token=bot_token))
    assert [p.metadata.name for p in bot.list_namespaced_pod("team").items] == ["web"]
    assert bot.read_namespaced_pod("web", "team").metadata.name == "web"
    status = _forbidden(lambda: bot.list_namespaced_pod("other"))
    assert status["message"] == ('pods is forbidden: User "system:serviceaccount:team:bot" cannot list resource '
                                 '"pods" in API group "" in the namespace "other"')
    assert status["reason"] == "Forbidden" and status["details"] == {"group": "", "kind": "pods"}
    status = _forbidden(lambda: bot.delete_namespaced_pod("web", "team"))
    assert status["message"] == ('pods "web" is forbidden: User "system:serviceaccount:team:bot" cannot delete '
                                 'resource "pods" in API group "" in the namespace "team"')
    status = _forbidden(lambda: bot.list_node())
    assert status["message"].endswith('cannot list resource "nodes" in API group "" at the cluster scope')
    # resourceNames: one ConfigMap by name, not the others, and never a list.
    _forbidden(lambda: bot.read_namespaced_config_map("denied", "team"))
    with pytest.raises(kubernetes.client.ApiException) as missing:
        bot.read_namespaced_config_map("allowed", "team")
    assert missing.value.status == 404  # allowed: it just does not exist
    _forbidden(lambda: bot.list_namespaced_config_map("team"))
    forbidden = rbac_sandbox.audit.records(user="system:serviceaccount:team:bot", resource="pods", namespace="other")
    assert [r.code for r in forbidden] == [403]


def test_groups_cluster_roles_subresources_and_role_binding_scope(rbac_sandbox: RunningSandbox) -> None:
    auditor = rbac_sandbox.api_client(token=rbac_sandbox.mint_token("carol", ["auditors"]))
    assert kubernetes.client.CoreV1Api(auditor).list_node().items == []
    status, _, body = rbac_sandbox.http("GET", "/metrics", token=rbac_sandbox.mint_token("carol", ["auditors"]))
    assert status == 404  # allowed by the nonResourceURLs rule; nothing is served there
    status, _, body = rbac_sandbox.http("GET", "/metrics", token=rbac_sandbox.mint_token("dave"))
    assert status == 403 and json.loads(body)["message"] == 'forbidden: User "dave" cannot get path "/metrics"'
    alice = kubernetes.client.CoreV1Api(rbac_sandbox.api_client(token=rbac_sandbox.mint_token("alice")))
    assert alice.list_namespaced_secret("other").items == []
    _forbidden(lambda: alice.list_namespaced_secret("team"))
    _forbidden(lambda: alice.list_secret_for_all_namespaces())


def test_access_reviews_and_token_reviews_through_the_client(rbac_sandbox: RunningSandbox, bot_token: str) -> None:
    authz = kubernetes.client.AuthorizationV1Api(rbac_sandbox.api_client())

    def allowed(verb: str, resource: str, namespace: str = "team", subresource: str = "", group: str = "",
                user: str = "system:serviceaccount:team:bot") -> bool:
        groups = ["system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"]
        review = authz.create_subject_access_review({"spec": {"user": user, "groups": groups, "resourceAttributes": {
            "verb": verb, "resource": resource, "namespace": namespace, "subresource": subresource, "group": group}}})
        return bool(review.status.allowed)

    assert allowed("get", "pods", subresource="log")
    assert not allowed("create", "pods", subresource="exec")
    assert not allowed("get", "pods", namespace="other")
    assert not allowed("get", "deployments", group="apps")
    review = authz.create_subject_access_review({"spec": {"user": "carol", "groups": ["auditors"],
                                                          "resourceAttributes": {"verb": "get", "group": "apps",
                                                                                 "resource": "deployments",
                                                                                 "subresource": "scale"}}})
    assert review.status.allowed
    assert review.status.reason == ('RBAC: allowed by ClusterRoleBinding "auditors-view-nodes" of ClusterRole '
                                    '"node-viewer" to Group "auditors"')
    with pytest.raises(kubernetes.client.ApiException) as invalid:
        authz.create_subject_access_review({"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}})
    assert invalid.value.status == 422 and "at least one of user or group must be specified" in invalid.value.body
    authn = kubernetes.client.AuthenticationV1Api(rbac_sandbox.api_client())
    answer = authn.create_token_review({"spec": {"token": bot_token}})
    assert answer.status.authenticated and answer.status.user.username == "system:serviceaccount:team:bot"
    assert answer.status.user.groups == ["system:serviceaccounts", "system:serviceaccounts:team",
                                         "system:authenticated"]
    assert not authn.create_token_review({"spec": {"token": "not-a-token"}}).status.authenticated
    # Reviews are answered, never stored; creating one needs the permission like any other create.
    bot = kubernetes.client.AuthenticationV1Api(rbac_sandbox.api_client(token=bot_token))
    status = _forbidden(lambda: bot.create_token_review({"spec": {"token": bot_token}}))
    assert 'cannot create resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope' \
        in status["message"]


def test_service_account_tokens_end_with_their_account_and_on_revocation(rbac_sandbox: RunningSandbox) -> None:
    core = kubernetes.client.CoreV1Api(rbac_sandbox.api_client())
    core.create_namespaced_service_account("team", {"metadata": {"name": "short-lived"}})
    first = rbac_sandbox.service_account_token("team", "short-lived")
    second = rbac_sandbox.service_account_token("team", "short-lived")
    assert rbac_sandbox.http("GET", "/api/v1", token=first)[0] == 200
    assert rbac_sandbox.revoke_token(first)
    assert rbac_sandbox.http("GET", "/api/v1", token=first)[0] == 401
    assert rbac_sandbox.http("GET", "/api/v1", token=second)[0] == 200
    core.delete_namespaced_service_account("short-lived", "team")
    core.create_namespaced_service_account("team", {"metadata": {"name": "short-lived"}})  # same name, new uid
    assert rbac_sandbox.http("GET", "/api/v1", token=second)[0] == 401
    with pytest.raises(ApiError) as missing:
        rbac_sandbox.service_account_token("team", "nobody")
    assert missing.value.code == 404 and missing.value.message == 'serviceaccounts "nobody" not found'


def test_rbac_objects_are_validated_and_role_ref_is_immutable(rbac_sandbox: RunningSandbox) -> None:
    rbac = kubernetes.client.RbacAuthorizationV1Api(rbac_sandbox.api_client())
    with pytest.raises(kubernetes.client.ApiException) as bad:
        rbac.create_namespaced_role("team", {"metadata": {"name": "bad"}, "rules": [
            {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}, {"apiGroups": [""], "verbs": []}]})
    causes = {c["field"]: c["message"] for c in json.loads(bad.value.body)["details"]["causes"]}
    assert causes == {
        "rules[0].nonResourceURLs": 'Invalid value: []string{"/metrics"}: namespaced rules cannot apply to '
                                    "non-resource URLs",
        "rules[1].verbs": "Required value: verbs must contain at least one value",
        "rules[1].resources": "Required value: resource rules must supply at least one resource"}
    with pytest.raises(kubernetes.client.ApiException) as bad:
        rbac.create_cluster_role_binding({"metadata": {"name": "bad"}, "roleRef": {
            "apiGroup": RBAC, "kind": "Role", "name": "x"}, "subjects": [{"kind": "ServiceAccount", "name": "bot"}]})
    assert bad.value.status == 422
    causes = {c["field"]: c["message"] for c in json.loads(bad.value.body)["details"]["causes"]}
    assert causes == {"roleRef.kind": 'Unsupported value: "Role": supported values: "ClusterRole"',
                      "subjects[0].namespace": "Required value"}
    binding = rbac.create_namespaced_role_binding("team", {
        "metadata": {"name": "defaults"}, "roleRef": {"kind": "Role", "name": "pod-reader"},
        "subjects": [{"kind": "User", "name": "erin"}]})
    assert binding.role_ref.api_group == RBAC and binding.subjects[0].api_group == RBAC  # defaulted
    with pytest.raises(kubernetes.client.ApiException) as immutable:
        rbac.patch_namespaced_role_binding("defaults", "team", {"roleRef": {"name": "other"}})
    assert immutable.value.status == 422 and "cannot change roleRef" in immutable.value.body


def test_control_endpoints_require_an_admin(rbac_sandbox: RunningSandbox, bot_token: str) -> None:
    for method, path in (("GET", "/sandbox/v1/audit"), ("POST", "/sandbox/v1/tokens"),
                         ("GET", "/sandbox/v1/faults")):
        status, _, body = rbac_sandbox.http(method, path, {"user": "mallory"}, token=bot_token)
        assert status == 403, (method, path)
        assert json.loads(body)["message"] == (f'forbidden: User "system:serviceaccount:team:bot" cannot '
                                               f'{method.lower()} path "{path}"')
    status, _, body = rbac_sandbox.http("POST", "/sandbox/v1/tokens", {"serviceAccount": "team/bot"})
    assert status == 201
    token = json.loads(body)["token"]
    assert kubernetes.client.CoreV1Api(rbac_sandbox.api_client(token=token)).list_namespaced_pod("team").items


def test_allow_all_is_the_default_and_still_guards_the_control_endpoints() -> None:
    with start_sandbox(nodes=[]) as sandbox:
        anyone = sandbox.mint_token("anyone")
        assert kubernetes.client.CoreV1Api(sandbox.api_client(token=anyone)).list_node().items == []
        assert sandbox.http("GET", "/sandbox/v1/audit", token=anyone)[0] == 403
        assert sandbox.http("GET", "/sandbox/v1/audit")[0] == 200
        names = {r.metadata.name for r in kubernetes.client.RbacAuthorizationV1Api(
            sandbox.api_client()).list_cluster_role().items}
        assert {"cluster-admin", "system:basic-user", "system:discovery"} <= names


# ---------------------------------------------------------------------------------------------- kubectl
@pytest.fixture
def kubectl_as(rbac_sandbox: RunningSandbox, kubectl_bin: str, tmp_path: Path) -> Callable[[str | None], Kubectl]:
    def for_token(token: str | None) -> Kubectl:
        config = rbac_sandbox.kubeconfig_path if token is None else \
            rbac_sandbox.kubeconfig_for(token, tmp_path / f"kubeconfig-{len(list(tmp_path.iterdir()))}")

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([kubectl_bin, "--kubeconfig", str(config), "--cache-dir", str(tmp_path / "cache"),
                                   *args], capture_output=True, text=True, timeout=60)

        return run

    return for_token


def test_kubectl_auth_can_i_whoami_and_a_forbidden_get(kubectl_as: Callable[[str | None], Kubectl],
                                                       bot_token: str) -> None:
    bot = kubectl_as(bot_token)
    result = bot("auth", "can-i", "list", "pods", "-n", "team")
    assert (result.returncode, result.stdout.strip()) == (0, "yes")
    result = bot("auth", "can-i", "get", "pods", "--subresource=log", "-n", "team")
    assert (result.returncode, result.stdout.strip()) == (0, "yes")
    result = bot("auth", "can-i", "delete", "pods", "-n", "team")
    assert (result.returncode, result.stdout.strip()) == (1, "no")
    result = bot("auth", "can-i", "list", "pods", "-n", "other")
    assert (result.returncode, result.stdout.strip()) == (1, "no")
    result = bot("get", "pods", "-n", "other")
    assert result.returncode == 1
    assert result.stderr.strip() == ('Error from server (Forbidden): pods is forbidden: User '
                                     '"system:serviceaccount:team:bot" cannot list resource "pods" in API group "" '
                                     'in the namespace "other"')
    result = bot("get", "pod", "web", "-n", "team", "-o", "name")
    assert (result.returncode, result.stdout.strip()) == (0, "pod/web")
    result = bot("auth", "whoami", "-o", "json")
    assert json.loads(result.stdout)["status"]["userInfo"]["username"] == "system:serviceaccount:team:bot"
    result = bot("auth", "can-i", "--list", "-n", "team")
    assert result.returncode == 0 and "pods/log" in result.stdout


def test_kubectl_create_token_and_impersonation(kubectl_as: Callable[[str | None], Kubectl]) -> None:
    admin = kubectl_as(None)
    result = admin("create", "token", "bot", "-n", "team")
    assert result.returncode == 0, result.stderr
    bot = kubectl_as(result.stdout.strip())
    assert bot("get", "pods", "-n", "team", "-o", "name").stdout.strip() == "pod/web"
    result = admin("auth", "can-i", "list", "pods", "-n", "other", "--as", "system:serviceaccount:team:bot")
    assert (result.returncode, result.stdout.strip()) == (1, "no")
    result = admin("auth", "can-i", "list", "secrets", "-n", "other", "--as", "alice")
    assert (result.returncode, result.stdout.strip()) == (0, "yes")
    result = bot("get", "pods", "-n", "team", "--as", "alice")
    assert result.returncode == 1 and 'cannot impersonate resource "users" in API group ""' in result.stderr


def test_impersonating_a_uid_and_extra_needs_its_own_rights_and_reaches_the_audit_log(
        rbac_sandbox: RunningSandbox, kubectl_as: Callable[[str | None], Kubectl]) -> None:
    """Impersonate-Uid and Impersonate-Extra-<key> (kubectl --as-uid; client-go's ImpersonationConfig.Extra)
    are authorized as `impersonate` on authentication.k8s.io `uids` and `userextras/<key>`, as
    kube-apiserver's impersonation filter does; the impersonated uid and extra are who the request is:
    in `kubectl auth whoami`, in SubjectAccessReviews, and in the audit log beside the impersonator."""
    sb = rbac_sandbox
    rbac = kubernetes.client.RbacAuthorizationV1Api(sb.api_client())
    rules = [{"apiGroups": [""], "resources": ["users"], "resourceNames": ["alice"], "verbs": ["impersonate"]}]
    rbac.create_cluster_role({"metadata": {"name": "as-alice"}, "rules": rules})
    rbac.create_cluster_role_binding({"metadata": {"name": "proxy-as-alice"}, "roleRef": {
        "apiGroup": RBAC, "kind": "ClusterRole", "name": "as-alice"},
        "subjects": [{"kind": "User", "name": "proxy", "apiGroup": RBAC}]})
    proxy_token = sb.mint_token("proxy")
    proxy = kubectl_as(proxy_token)
    refused = proxy("get", "--raw", "/api/v1/namespaces/team/pods", "--as", "alice", "--as-uid", "u-1")
    assert refused.returncode == 1
    assert 'cannot impersonate resource "uids" in API group "authentication.k8s.io"' in refused.stderr
    extra = {"Impersonate-User": "alice", "Impersonate-Extra-Team%2Fname": "a"}
    code, _, body = sb.http("GET", "/api/v1/namespaces/team/pods", headers=extra, token=proxy_token)
    assert code == 403 and 'cannot impersonate resource "userextras/team/name"' in json.loads(body)["message"]
    rules += [{"apiGroups": ["authentication.k8s.io"], "resources": ["uids"], "verbs": ["impersonate"]},
              {"apiGroups": ["authentication.k8s.io"], "resources": ["userextras/team/name"], "verbs": ["impersonate"]}]
    rbac.replace_cluster_role("as-alice", {"metadata": {"name": "as-alice"}, "rules": rules})
    sb.audit.clear()
    shown = proxy("auth", "whoami", "--as", "alice", "--as-uid", "u-1", "-o", "json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"]["userInfo"] == {"username": "alice", "uid": "u-1",
                                                             "groups": ["system:authenticated"]}
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    code, _, body = sb.http("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review, token=proxy_token,
                            headers={**extra, "Impersonate-Uid": "u-1"})
    assert code == 201, body
    assert json.loads(body)["status"]["userInfo"] == {"username": "alice", "uid": "u-1",
                                                      "groups": ["system:authenticated"], "extra": {"team/name": ["a"]}}
    [audited] = [r for r in sb.audit.records(resource="selfsubjectreviews") if r.extra]
    assert (audited.user, audited.uid, audited.extra, audited.impersonator) == ("alice", "u-1", {"team/name": ["a"]},
                                                                               "proxy")
    # a SubjectAccessReview about a user with a uid and extra answers for that user
    access = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": "alice", "uid": "u-1", "extra": {"team/name": ["a"]},
        "resourceAttributes": {"verb": "impersonate", "group": "authentication.k8s.io", "resource": "uids"}}}
    code, _, body = sb.http("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", access)
    assert code == 201 and json.loads(body)["status"]["allowed"] is False
    assert json.loads(body)["spec"]["extra"] == {"team/name": ["a"]}
