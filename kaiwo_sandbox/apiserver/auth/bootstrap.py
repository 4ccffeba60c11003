"""The default RBAC objects every cluster starts with (plugin/pkg/auth/authorizer/rbac/bootstrappolicy),
the subset that matters here: cluster-admin for system:masters, discovery and self-review for every
authenticated user, public info for everyone, the roles a second kube-scheduler binds to, and what an
aggregated API server binds to (system:auth-delegator, the extension-apiserver-authentication reader). admin/edit/view are aggregated roles upstream; they are not
seeded (aggregation is not implemented). Labelled `kubernetes.io/bootstrapping: rbac-defaults` as upstream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaiwo_sandbox.contracts import JsonObj

if TYPE_CHECKING:
    from kaiwo_sandbox.storage.store import ObjectStore

BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
RBAC = "rbac.authorization.k8s.io"
READ = ["get", "list", "watch"]


def _rule(groups: list[str], resources: list[str], verbs: list[str], names: list[str] | None = None) -> JsonObj:
    rule: JsonObj = {"apiGroups": groups, "resources": resources, "verbs": verbs}
    if names:
        rule["resourceNames"] = names
    return rule


def _cluster_role(name: str, rules: list[JsonObj]) -> JsonObj:
    return {"metadata": {"name": name, "labels": dict(BOOTSTRAP_LABELS),
                         "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
            "rules": rules}


def _binding(name: str, role: str, subjects: list[JsonObj]) -> JsonObj:
    return {"metadata": {"name": name, "labels": dict(BOOTSTRAP_LABELS),
                         "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role}, "subjects": subjects}


def _group(name: str) -> JsonObj:
    return {"apiGroup": RBAC, "kind": "Group", "name": name}


def _user(name: str) -> JsonObj:
    return {"apiGroup": RBAC, "kind": "User", "name": name}


DISCOVERY_URLS = ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz",
                  "/version", "/version/"]
PUBLIC_URLS = ["/healthz", "/livez", "/readyz", "/version", "/version/"]


def cluster_roles() -> list[JsonObj]:
    return [
        _cluster_role("cluster-admin", [_rule(["*"], ["*"], ["*"]), {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        _cluster_role("system:discovery", [{"nonResourceURLs": DISCOVERY_URLS, "verbs": ["get"]}]),
        _cluster_role("system:public-info-viewer", [{"nonResourceURLs": PUBLIC_URLS, "verbs": ["get"]}]),
        _cluster_role("system:basic-user", [
            _rule(["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], ["create"]),
            _rule(["authentication.k8s.io"], ["selfsubjectreviews"], ["create"])]),
        _cluster_role("system:kube-scheduler", [
            _rule(["", "events.k8s.io"], ["events"], ["create", "patch", "update"]),
            _rule(["coordination.k8s.io"], ["leases"], ["create"]),
            _rule(["coordination.k8s.io"], ["leases"], ["get", "update"], ["kube-scheduler"]),
            _rule([""], ["endpoints"], ["create"]),
            _rule([""], ["endpoints"], ["get", "update"], ["kube-scheduler"]),
            _rule([""], ["nodes"], READ),
            _rule([""], ["pods"], ["delete", *READ]),
            _rule([""], ["bindings", "pods/binding"], ["create"]),
            _rule([""], ["pods/status"], ["patch", "update"]),
            _rule([""], ["replicationcontrollers", "services"], READ),
            _rule(["apps", "extensions"], ["replicasets"], READ),
            _rule(["apps"], ["statefulsets"], READ),
            _rule(["policy"], ["poddisruptionbudgets"], READ),
            _rule([""], ["persistentvolumeclaims", "persistentvolumes"], READ),
            _rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
            _rule(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"]),
            _rule(["storage.k8s.io"], ["csinodes"], READ),
            _rule([""], ["namespaces"], READ),
            _rule(["storage.k8s.io"], ["csidrivers", "csistoragecapacities"], READ),
            _rule(["resource.k8s.io"], ["resourceclaims", "resourceslices", "deviceclasses"], READ),
        ]),
        _cluster_role("system:auth-delegator", [  # delegated authn/authz of aggregated API servers
            _rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
            _rule(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"])]),
        _cluster_role("system:volume-scheduler", [
            _rule([""], ["persistentvolumes"], ["get", "list", "patch", "update", "watch"]),
            _rule(["storage.k8s.io"], ["storageclasses"], READ),
            _rule([""], ["persistentvolumeclaims"], ["get", "list", "patch", "update", "watch"]),
        ]),
    ]


def cluster_role_bindings() -> list[JsonObj]:
    return [
        _binding("cluster-admin", "cluster-admin", [_group("system:masters")]),
        _binding("system:discovery", "system:discovery", [_group("system:authenticated")]),
        _binding("system:basic-user", "system:basic-user", [_group("system:authenticated")]),
        _binding("system:public-info-viewer", "system:public-info-viewer",
                 [_group("system:authenticated"), _group("system:unauthenticated")]),
        _binding("system:kube-scheduler", "system:kube-scheduler", [_user("system:kube-scheduler")]),
        _binding("system:volume-scheduler", "system:volume-scheduler", [_user("system:kube-scheduler")]),
    ]


def namespaced_roles() -> list[JsonObj]:
    return [{"metadata": {"name": "extension-apiserver-authentication-reader", "namespace": "kube-system",
                          "labels": dict(BOOTSTRAP_LABELS)},
             "rules": [_rule([""], ["configmaps"], READ, ["extension-apiserver-authentication"])]}]


def seed(store: ObjectStore) -> None:
    """Create the default RBAC objects that are missing (a restored --state keeps its own)."""
    from kaiwo_sandbox.apiserver.auth.authz import CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, ROLES

    for gvr, objects in ((CLUSTER_ROLES, cluster_roles()), (CLUSTER_ROLE_BINDINGS, cluster_role_bindings()),
                         (ROLES, namespaced_roles())):
        for obj in objects:
            meta = obj["metadata"]
            if store.find_ref(gvr, meta.get("namespace"), meta["name"]) is None:
                store.create_owned(gvr, obj, managed=False, admit=False)
