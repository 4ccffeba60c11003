"""deploy/components/aggregated-api: the APIService names a Service port that leads to the head's
aggregated listener, the admin API's service account gets what an aggregated server needs and nothing
broader, every viewer may read the group, and the head's environment turns the listener on."""

from __future__ import annotations

from typing import Any

from deploy_support import find

from serve.admin_identity import ADMIN_API_RULES, LEDGER_RULES
from serve.auth import IMPERSONATED_EXTRA
from serve.deployment import SERVICE_ACCOUNT_DIR_VARIABLE, AdminOptions

GROUP = "admin.kaiwo.silogen.ai"
SERVICE_ACCOUNT = {"kind": "ServiceAccount", "name": "kaiwo-ray-admin-api", "namespace": "kaiwo-system"}


def _head(rendered: list[dict[str, Any]]) -> dict[str, Any]:
    head: dict[str, Any] = find(rendered, "RayService", "kaiwo-ray")["spec"]["rayClusterConfig"]["headGroupSpec"]
    container: dict[str, Any] = head["template"]["spec"]["containers"][0]
    return container


def test_the_apiservice_leads_to_the_heads_listener(rendered: list[dict[str, Any]]) -> None:
    apiservice = find(rendered, "APIService", f"v1alpha1.{GROUP}")
    spec = apiservice["spec"]
    assert (spec["group"], spec["version"], spec["insecureSkipTLSVerify"]) == (GROUP, "v1alpha1", True)
    assert 1 <= spec["groupPriorityMinimum"] < 20000 and 1 <= spec["versionPriority"] < 1000
    service = find(rendered, "Service", spec["service"]["name"])
    assert service["metadata"]["namespace"] == spec["service"]["namespace"]
    port = next(p for p in service["spec"]["ports"] if p["port"] == spec["service"]["port"])
    container = _head(rendered)
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert named[port["targetPort"]] == 8443
    assert env["KAIWO_AGGREGATED_API_BIND_ADDRESS"] == ":8443"
    assert AdminOptions(in_cluster=True).settings(env).aggregated_bind == ":8443"  # what the replica reads
    assert AdminOptions(in_cluster=True).settings({}).aggregated_bind is None
    policy = find(rendered, "NetworkPolicy", "kaiwo-ray")
    open_to_all = [rule for rule in policy["spec"]["ingress"] if "from" not in rule]
    assert {p["port"] for rule in open_to_all for p in rule["ports"]} >= {8000, 8443}


def test_the_service_account_may_delegate_authn_and_read_the_requestheader_ca(rendered: list[dict[str, Any]]) -> None:
    delegator = find(rendered, "ClusterRoleBinding", "kaiwo-ray-admin-api:system:auth-delegator")
    assert delegator["roleRef"]["name"] == "system:auth-delegator"
    assert [{k: s[k] for k in SERVICE_ACCOUNT} for s in delegator["subjects"]] == [SERVICE_ACCOUNT]
    reader = find(rendered, "RoleBinding", "kaiwo-ray-admin-api-auth-reader")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert (reader["roleRef"]["kind"], reader["roleRef"]["name"]) == ("Role", "extension-apiserver-authentication-reader")
    assert [{k: s[k] for k in SERVICE_ACCOUNT} for s in reader["subjects"]] == [SERVICE_ACCOUNT]


def test_viewers_may_read_the_group_and_nothing_more(rendered: list[dict[str, Any]]) -> None:
    role = find(rendered, "ClusterRole", "kaiwo-ray-workload-summaries-reader")
    labels = role["metadata"]["labels"]
    assert all(labels[f"rbac.authorization.k8s.io/aggregate-to-{r}"] == "true" for r in ("view", "edit", "admin"))
    assert [(r["apiGroups"], sorted(r["verbs"])) for r in role["rules"]] == [([GROUP], ["get", "list", "watch"])]


def test_the_admin_apis_role_reads_workloads_and_impersonates_instead_of_writing(
        rendered: list[dict[str, Any]]) -> None:
    role = find(rendered, "ClusterRole", "kaiwo-ray-admin-api")
    kaiwo = [r for r in role["rules"] if "kaiwo.silogen.ai" in r["apiGroups"]]
    assert kaiwo and all(set(r["verbs"]) <= {"get", "list", "watch"} for r in kaiwo)
    impersonate = [r for r in role["rules"] if "impersonate" in r["verbs"]]
    assert impersonate == [{"apiGroups": [""], "resources": ["users", "groups", "serviceaccounts"],
                            "verbs": ["impersonate"]},
                           {"apiGroups": ["authentication.k8s.io"],
                            "resources": ["uids", *(f"userextras/{key}" for key in IMPERSONATED_EXTRA)],
                            "verbs": ["impersonate"]}]
    writes = {"create", "update", "patch", "delete", "deletecollection", "*"}
    assert [r for r in role["rules"] if writes & set(r["verbs"])] == [
        r for r in role["rules"] if r["apiGroups"] in (["authentication.k8s.io"], ["authorization.k8s.io"])
        and r["resources"] in (["tokenreviews"], ["subjectaccessreviews"])]
    assert role["rules"] == [{"apiGroups": list(r.groups), "resources": list(r.resources), "verbs": list(r.verbs)}
                             for r in ADMIN_API_RULES]  # what `kaiwo-ray dev` provisions (serve/admin_identity.py)


def test_the_admin_api_has_its_own_account_and_the_operators_none_of_its_rights(
        rendered: list[dict[str, Any]]) -> None:
    """kaiwo-ray-admin-api's role is bound to its own account only; its token Secret is mounted into the
    head, where the admin API's client (and nothing else) reads it."""
    binding = find(rendered, "ClusterRoleBinding", "kaiwo-ray-admin-api")
    assert [{k: s[k] for k in SERVICE_ACCOUNT} for s in binding["subjects"]] == [SERVICE_ACCOUNT]
    operator = {"kind": "ServiceAccount", "name": "kaiwo-ray", "namespace": "kaiwo-system"}
    bound = [o for o in rendered if o["kind"] in ("ClusterRoleBinding", "RoleBinding")
             and any({k: s.get(k) for k in operator} == operator for s in o.get("subjects") or [])]
    roles = {b["roleRef"]["name"] for b in bound}
    assert "kaiwo-ray-admin-api" not in roles and "system:auth-delegator" not in roles
    for name in roles - {"system:auth-delegator"}:
        role = next(o for o in rendered if o["kind"] in ("ClusterRole", "Role") and o["metadata"]["name"] == name)
        assert not [r for r in role["rules"] if "impersonate" in r["verbs"]], name
    ledger = find(rendered, "Role", "kaiwo-ray-admin-api-ledger-reader")
    assert ledger["metadata"]["namespace"] == "kaiwo-system"  # KAIWO_LEASE_NAMESPACE: where the ledger lives
    assert ledger["rules"] == [{"apiGroups": list(r.groups), "resources": list(r.resources), "verbs": list(r.verbs)}
                               for r in LEDGER_RULES]
    ledger_binding = find(rendered, "RoleBinding", "kaiwo-ray-admin-api-ledger-reader")
    assert [{k: s[k] for k in SERVICE_ACCOUNT} for s in ledger_binding["subjects"]] == [SERVICE_ACCOUNT]
    find(rendered, "ServiceAccount", "kaiwo-ray-admin-api")
    secret = find(rendered, "Secret", "kaiwo-ray-admin-api-token")
    assert secret["type"] == "kubernetes.io/service-account-token"
    assert secret["metadata"]["annotations"] == {"kubernetes.io/service-account.name": "kaiwo-ray-admin-api"}
    head = find(rendered, "RayService", "kaiwo-ray")["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]
    [volume] = [v for v in head["volumes"] if v.get("secret", {}).get("secretName") == "kaiwo-ray-admin-api-token"]
    container = _head(rendered)
    [mount] = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env[SERVICE_ACCOUNT_DIR_VARIABLE] == mount["mountPath"]
    assert AdminOptions(in_cluster=True).settings(env).service_account_dir == mount["mountPath"]
