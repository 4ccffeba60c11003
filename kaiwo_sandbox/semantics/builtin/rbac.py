"""Validation and defaulting of the RBAC kinds (pkg/apis/rbac/validation, rbac/v1 defaults), with the
apiserver's field paths and wording. Plugged into builtin_validation / builtin_defaults by their tables.

Escalation prevention (a user may only grant what they hold, unless they have `escalate`/`bind`) is not
enforced: the sandbox's writers of RBAC objects are admins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.semantics import field_errors as fe
from kaiwo_sandbox.semantics.metadata import is_dns1123_subdomain

GROUP = "rbac.authorization.k8s.io"
Causes = list[JsonObj]


def _dicts(value: Any) -> list[JsonObj]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _rules(obj: JsonObj, *, namespaced: bool) -> Causes:
    causes: Causes = []
    for i, rule in enumerate(_dicts(obj.get("rules"))):
        path = f"rules[{i}]"
        if not rule.get("verbs"):
            causes.append(fe.required(f"{path}.verbs", "verbs must contain at least one value"))
        urls = rule.get("nonResourceURLs") or []
        if urls:
            if namespaced:
                causes.append(_invalid_strings(f"{path}.nonResourceURLs", urls,
                                               "namespaced rules cannot apply to non-resource URLs"))
            if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
                causes.append(_invalid_strings(f"{path}.nonResourceURLs", urls,
                                               "rules cannot apply to both regular resources and non-resource URLs"))
            continue
        if not rule.get("apiGroups"):
            causes.append(fe.required(f"{path}.apiGroups", "resource rules must supply at least one api group"))
        if not rule.get("resources"):
            causes.append(fe.required(f"{path}.resources", "resource rules must supply at least one resource"))
    return causes


def _invalid_strings(field: str, values: list[Any], detail: str) -> JsonObj:
    shown = "[]string{" + ", ".join(fe.go_quote(str(v)) for v in values) + "}"
    return fe.cause(fe.INVALID, field, f"Invalid value: {shown}: {detail}")


def _role(obj: JsonObj, old: JsonObj | None) -> Causes:
    return _rules(obj, namespaced=True)


def _cluster_role(obj: JsonObj, old: JsonObj | None) -> Causes:
    return _rules(obj, namespaced=False)


def _subjects(obj: JsonObj, *, namespaced: bool) -> Causes:
    causes: Causes = []
    for i, subject in enumerate(_dicts(obj.get("subjects"))):
        path = f"subjects[{i}]"
        name = subject.get("name") or ""
        kind = subject.get("kind")
        api_group = subject.get("apiGroup") or ""
        if not name:
            causes.append(fe.required(f"{path}.name"))
        if kind == "ServiceAccount":
            if name:
                causes.extend(fe.invalid(f"{path}.name", name, m) for m in is_dns1123_subdomain(str(name)))
            if api_group:
                causes.append(fe.not_supported(f"{path}.apiGroup", api_group, [""]))
            if not namespaced and not subject.get("namespace"):
                causes.append(fe.required(f"{path}.namespace"))
        elif kind in ("User", "Group"):
            if api_group != GROUP:
                causes.append(fe.not_supported(f"{path}.apiGroup", api_group, [GROUP]))
        else:
            causes.append(fe.not_supported(f"{path}.kind", kind or "", ["ServiceAccount", "User", "Group"]))
    return causes


def _role_ref(obj: JsonObj, old: JsonObj | None, kinds: list[str]) -> Causes:
    causes: Causes = []
    ref = obj.get("roleRef") if isinstance(obj.get("roleRef"), dict) else {}
    assert isinstance(ref, dict)
    if (ref.get("apiGroup") or "") != GROUP:
        causes.append(fe.not_supported("roleRef.apiGroup", ref.get("apiGroup") or "", [GROUP]))
    if ref.get("kind") not in kinds:
        causes.append(fe.not_supported("roleRef.kind", ref.get("kind") or "", kinds))
    name = ref.get("name") or ""
    if not name:
        causes.append(fe.required("roleRef.name"))
    elif "/" in name or "%" in name or name in (".", ".."):
        causes.append(fe.invalid("roleRef.name", name, "may not contain '/' or '%'"))
    if old is not None:
        before = old.get("roleRef") or {}
        if {k: before.get(k) for k in ("apiGroup", "kind", "name")} != {k: ref.get(k) for k in
                                                                         ("apiGroup", "kind", "name")}:
            shown = (f'rbac.RoleRef{{APIGroup:{fe.go_quote(str(ref.get("apiGroup") or ""))}, '
                     f'Kind:{fe.go_quote(str(ref.get("kind") or ""))}, Name:{fe.go_quote(str(name))}}}')
            causes.append(fe.cause(fe.INVALID, "roleRef", f"Invalid value: {shown}: cannot change roleRef"))
    return causes


def _role_binding(obj: JsonObj, old: JsonObj | None) -> Causes:
    return _role_ref(obj, old, ["Role", "ClusterRole"]) + _subjects(obj, namespaced=True)


def _cluster_role_binding(obj: JsonObj, old: JsonObj | None) -> Causes:
    return _role_ref(obj, old, ["ClusterRole"]) + _subjects(obj, namespaced=False)


VALIDATORS: dict[tuple[str, str], Callable[[JsonObj, JsonObj | None], Causes]] = {
    (GROUP, "Role"): _role,
    (GROUP, "ClusterRole"): _cluster_role,
    (GROUP, "RoleBinding"): _role_binding,
    (GROUP, "ClusterRoleBinding"): _cluster_role_binding,
}


def _default_binding(obj: JsonObj) -> None:
    """SetDefaults_{Cluster,}RoleBinding and SetDefaults_Subject: roleRef, User and Group subjects get the
    RBAC API group; ServiceAccount subjects keep "". """
    ref = obj.get("roleRef")
    if isinstance(ref, dict) and not ref.get("apiGroup"):
        ref["apiGroup"] = GROUP
    for subject in _dicts(obj.get("subjects")):
        if not subject.get("apiGroup") and subject.get("kind") in ("User", "Group"):
            subject["apiGroup"] = GROUP


DEFAULTERS: dict[tuple[str, str], Callable[[JsonObj], None]] = {
    (GROUP, "RoleBinding"): _default_binding,
    (GROUP, "ClusterRoleBinding"): _default_binding,
}
