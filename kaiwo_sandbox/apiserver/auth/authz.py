"""Authorization for the sandbox's HTTP server, in one of two modes (kube-apiserver --authorization-mode):

- `AlwaysAllow` (the default, what the sandbox always did): every authenticated request is allowed;
- `RBAC`: Roles/ClusterRoles and their bindings decide (`rbac.Policy`), as on a real cluster.

In both modes members of `system:masters` may do anything (kube-apiserver's privileged-group authorizer),
and the sandbox's own control endpoint (`/sandbox/v1/...`: faults, audit, tokens) is evaluated by RBAC as
non-resource URLs: only admins (or subjects granted `/sandbox/v1/*`) may use it.

The policy is rebuilt from the store after any RBAC object changes (a watcher on the four storages drops it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from kaiwo_sandbox.apiserver.auth.authn import MASTERS, UserInfo
from kaiwo_sandbox.apiserver.auth.rbac import Attributes, Decision, Policy, forbidden
from kaiwo_sandbox.apiserver.routes import ApiPath
from kaiwo_sandbox.contracts import GVR, JsonObj, WatchEvent
from kaiwo_sandbox.storage.store import ObjectStore

AuthorizationMode = Literal["AlwaysAllow", "RBAC"]
MODES: dict[str, AuthorizationMode] = {"allow-all": "AlwaysAllow", "alwaysallow": "AlwaysAllow", "rbac": "RBAC"}

RBAC_GROUP = "rbac.authorization.k8s.io"
ROLES = GVR(RBAC_GROUP, "v1", "roles")
CLUSTER_ROLES = GVR(RBAC_GROUP, "v1", "clusterroles")
ROLE_BINDINGS = GVR(RBAC_GROUP, "v1", "rolebindings")
CLUSTER_ROLE_BINDINGS = GVR(RBAC_GROUP, "v1", "clusterrolebindings")
EVERYTHING: JsonObj = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}
EVERY_URL: JsonObj = {"verbs": ["*"], "nonResourceURLs": ["*"]}


def parse_mode(value: str) -> AuthorizationMode:
    mode = MODES.get(value.lower())
    if mode is None:
        raise ValueError(f"unknown authorization mode {value!r}: use rbac or allow-all")
    return mode


def request_attributes(user: UserInfo, verb: str, path: ApiPath, query: Mapping[str, str]) -> Attributes:
    """The attributes of a resource request. A list/watch selecting one name by field selector is
    authorized for that name (as the apiserver's RequestInfoFactory does), so `resourceNames` rules allow
    `kubectl get pod X -w`."""
    name = path.name
    if not name and verb in ("list", "watch"):
        selector = query.get("fieldSelector") or ""
        if selector.startswith("metadata.name=") and "," not in selector:
            name = selector[len("metadata.name="):].lstrip("=")
    return Attributes(user, verb, namespace=path.namespace, api_group=path.group, resource=path.resource,
                      subresource=path.subresource, name=name)


class Authorizer:
    def __init__(self, store: ObjectStore, mode: AuthorizationMode = "AlwaysAllow") -> None:
        self.store = store
        self.mode: AuthorizationMode = mode
        self._policy: Policy | None = None
        for gvr in (ROLES, CLUSTER_ROLES, ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS):
            store.fanout.add_watcher((gvr.group, gvr.resource), self._changed)

    def _changed(self, event: WatchEvent) -> None:
        self._policy = None

    def policy(self) -> Policy:
        if self._policy is None:
            store = self.store
            cluster_roles = {o["metadata"]["name"]: o for o in store.list_page(CLUSTER_ROLES).items}
            roles = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in store.list_page(ROLES).items}
            self._policy = Policy(cluster_roles, roles, store.list_page(CLUSTER_ROLE_BINDINGS).items,
                                  store.list_page(ROLE_BINDINGS).items)
        return self._policy

    def authorize(self, attrs: Attributes) -> Decision:
        if MASTERS in attrs.user.groups or self.mode == "AlwaysAllow":
            return Decision(True)
        return self.policy().authorize(attrs)

    def check(self, attrs: Attributes) -> None:
        """Raise the apiserver's 403 when `attrs` is not allowed."""
        if not self.authorize(attrs).allowed:
            raise forbidden(attrs)

    def check_control(self, user: UserInfo, method: str, path: str) -> None:
        """The control endpoint: admins only, whatever the mode (RBAC on the non-resource URL)."""
        attrs = Attributes(user, method.lower(), resource_request=False, path=path)
        if MASTERS not in user.groups and not self.policy().authorize(attrs).allowed:
            raise forbidden(attrs)

    def rules(self, user: UserInfo, namespace: str) -> tuple[list[JsonObj], list[JsonObj]]:
        """(resourceRules, nonResourceRules) for SelfSubjectRulesReview."""
        if self.mode == "AlwaysAllow":
            return [dict(EVERYTHING)], [dict(EVERY_URL)]
        resource_rules: list[JsonObj] = []
        url_rules: list[JsonObj] = []
        for rule in self.policy().rules_for(user, namespace):
            if rule.get("nonResourceURLs"):
                url_rules.append({"verbs": list(rule.get("verbs") or []),
                                  "nonResourceURLs": list(rule["nonResourceURLs"])})
            else:
                entry: JsonObj = {"verbs": list(rule.get("verbs") or []),
                                  "apiGroups": list(rule.get("apiGroups") or []),
                                  "resources": list(rule.get("resources") or [])}
                if rule.get("resourceNames"):
                    entry["resourceNames"] = list(rule["resourceNames"])
                resource_rules.append(entry)
        return resource_rules, url_rules
