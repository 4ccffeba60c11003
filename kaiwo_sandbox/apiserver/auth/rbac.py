"""RBAC evaluation, pure: (who, what) + the Roles/ClusterRoles and their bindings -> allowed or not, with
the rule matching of k8s.io/kubernetes/pkg/apis/rbac/v1/evaluation_helpers.go and the visiting order of
plugin/pkg/auth/authorizer/rbac (ClusterRoleBindings first, then the RoleBindings of the request's
namespace). Aggregated ClusterRoles (aggregationRule) are not expanded: only their own `rules` count.

The 403 wording is the apiserver's (`forbiddenMessage` + `errors.NewForbidden`), e.g.
`pods is forbidden: User "x" cannot list resource "pods" in API group "" in the namespace "y"`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kaiwo_sandbox.apiserver.auth.authn import UserInfo
from kaiwo_sandbox.contracts import ApiError, JsonObj

GROUP = "rbac.authorization.k8s.io"


@dataclass(frozen=True, slots=True)
class Attributes:
    """authorizer.Attributes: a resource request (group/resource/...) or a non-resource one (path)."""

    user: UserInfo
    verb: str
    resource_request: bool = True
    namespace: str = ""
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""  # non-resource requests only


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""


def _has(values: Iterable[str], wanted: str) -> bool:
    return any(v == "*" or v == wanted for v in values)


def _resource_matches(resources: Iterable[str], combined: str, subresource: str) -> bool:
    for rule_resource in resources:
        if rule_resource == "*" or rule_resource == combined:
            return True
        if subresource and rule_resource == f"*/{subresource}":
            return True
    return False


def _path_matches(urls: Iterable[str], path: str) -> bool:
    for url in urls:
        if url == "*" or url == path:
            return True
        if url.endswith("*") and path.startswith(url[:-1]):
            return True
    return False


def rule_allows(rule: JsonObj, attrs: Attributes) -> bool:
    verbs = rule.get("verbs") or []
    if not _has(verbs, attrs.verb):
        return False
    if not attrs.resource_request:
        return _path_matches(rule.get("nonResourceURLs") or [], attrs.path)
    if not _has(rule.get("apiGroups") or [], attrs.api_group):
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    if not _resource_matches(rule.get("resources") or [], combined, attrs.subresource):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def subject_applies(subject: JsonObj, user: UserInfo, binding_namespace: str) -> bool:
    kind = subject.get("kind")
    name = subject.get("name", "")
    if kind == "User":
        return bool(user.name == name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return bool(user.name == f"system:serviceaccount:{namespace}:{name}")
    return False


@dataclass(frozen=True, slots=True)
class Grant:
    """Rules one binding gives a user, and how a reason names them."""

    rules: tuple[JsonObj, ...]
    namespace: str  # "" for a ClusterRoleBinding: the rules apply everywhere
    describe: str


class Policy:
    """A snapshot of the RBAC objects, indexed for evaluation (rebuilt when any of them changes)."""

    def __init__(self, cluster_roles: Mapping[str, JsonObj], roles: Mapping[tuple[str, str], JsonObj],
                 cluster_role_bindings: Iterable[JsonObj], role_bindings: Iterable[JsonObj]) -> None:
        self.cluster_roles = cluster_roles
        self.roles = roles
        self.cluster_role_bindings = list(cluster_role_bindings)
        self.role_bindings: dict[str, list[JsonObj]] = {}
        self._cache: dict[tuple[str, tuple[str, ...], str], list[Grant]] = {}
        for binding in role_bindings:
            namespace = (binding.get("metadata") or {}).get("namespace", "")
            self.role_bindings.setdefault(namespace, []).append(binding)

    def _role_rules(self, role_ref: JsonObj, namespace: str) -> tuple[JsonObj, ...] | None:
        kind, name = role_ref.get("kind"), role_ref.get("name", "")
        role = self.cluster_roles.get(name) if kind == "ClusterRole" else self.roles.get((namespace, name))
        if role is None:
            return None
        return tuple(r for r in role.get("rules") or [] if isinstance(r, dict))

    def grants(self, user: UserInfo, namespace: str) -> Iterable[Grant]:
        """Every grant that applies to `user` for a request in `namespace` ("" = cluster scope), in the
        RBAC authorizer's order."""
        for binding in self.cluster_role_bindings:
            subject = _first_applying(binding, user, "")
            if subject is not None:
                ref = binding.get("roleRef") or {}
                rules = self._role_rules(ref, "")
                if rules is not None:
                    yield Grant(rules, "", f'ClusterRoleBinding "{binding["metadata"]["name"]}" of ClusterRole '
                                       f'"{ref.get("name", "")}" to {_describe_subject(subject, "")}')
        if not namespace:
            return
        for binding in self.role_bindings.get(namespace, ()):
            subject = _first_applying(binding, user, namespace)
            if subject is not None:
                ref = binding.get("roleRef") or {}
                rules = self._role_rules(ref, namespace)
                if rules is not None:
                    yield Grant(rules, namespace, f'RoleBinding "{binding["metadata"]["name"]}/{namespace}" of '
                                                  f'{ref.get("kind", "")} "{ref.get("name", "")}" to '
                                                  f'{_describe_subject(subject, namespace)}')

    def _grants_cached(self, user: UserInfo, namespace: str) -> list[Grant]:
        """`grants`, memoised per (user, namespace): a Policy lives until the next RBAC write, and an
        operator asks as the same user thousands of times in between."""
        key = (user.name, user.groups, namespace)
        found = self._cache.get(key)
        if found is None:
            if len(self._cache) > 4096:
                self._cache.clear()
            found = self._cache[key] = list(self.grants(user, namespace))
        return found

    def authorize(self, attrs: Attributes) -> Decision:
        namespace = attrs.namespace if attrs.resource_request else ""
        for grant in self._grants_cached(attrs.user, namespace):
            if any(rule_allows(rule, attrs) for rule in grant.rules):
                return Decision(True, f"RBAC: allowed by {grant.describe}")
        return Decision(False)

    def rules_for(self, user: UserInfo, namespace: str) -> list[JsonObj]:
        """What SelfSubjectRulesReview lists: the rules of every applicable binding."""
        return [rule for grant in self.grants(user, namespace) for rule in grant.rules]


def _first_applying(binding: JsonObj, user: UserInfo, namespace: str) -> JsonObj | None:
    for subject in binding.get("subjects") or []:
        if isinstance(subject, dict) and subject_applies(subject, user, namespace):
            return subject
    return None


def _describe_subject(subject: JsonObj, binding_namespace: str) -> str:
    kind, name = subject.get("kind", ""), subject.get("name", "")
    if kind == "ServiceAccount":
        return f'{kind} "{name}/{subject.get("namespace") or binding_namespace}"'
    return f'{kind} "{name}"'


def forbidden_message(attrs: Attributes) -> str:
    """authorization's forbiddenMessage: what the user cannot do."""
    if not attrs.resource_request:
        return f'User "{attrs.user.name}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    return f'User "{attrs.user.name}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" {where}'


def forbidden(attrs: Attributes, reason: str = "") -> ApiError:
    """errors.NewForbidden(GroupResource, name, forbiddenMessage[: reason])."""
    message = forbidden_message(attrs)
    if reason:
        message = f"{message}: {reason}"
    if not attrs.resource_request:
        return ApiError(403, "Forbidden", f"forbidden: {message}", {})
    qualified = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    subject = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    details: JsonObj = {"group": attrs.api_group, "kind": attrs.resource}
    if attrs.name:
        details = {"name": attrs.name, **details}
    return ApiError(403, "Forbidden", f"{subject} is forbidden: {message}", details)
