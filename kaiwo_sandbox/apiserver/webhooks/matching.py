"""Which webhooks a request calls (pure): rules, scope, matchPolicy, then the namespace and object
selectors, as kube-apiserver 1.32's generic/webhook.go and predicates/* decide it.

Configurations are sorted by name (byte order) and webhooks keep their list order inside one; the
rules are checked first, from the request alone, so a write no rule matches costs nothing more.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kaiwo_sandbox.contracts import GVR, JsonObj
from kaiwo_sandbox.semantics.selectors import selector_from_dict

# Never intercepted: webhooks must not be able to lock the configuration that calls them.
EXEMPT_GROUPS = frozenset({"admissionregistration.k8s.io"})


@dataclass(frozen=True, slots=True)
class Request:
    """What the rules see: the write as the client sent it, and the other versions of its resource
    (one storage, so an Equivalent webhook registered for another version matches too)."""

    operation: str  # CREATE | UPDATE | DELETE
    gvr: GVR
    subresource: str
    namespaced: bool
    other_versions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Candidate:
    """One webhook whose rules matched: its configuration, itself, and the version it is called with."""

    configuration: str
    webhook: JsonObj
    gvr: GVR  # the matched version (differs from the request's under matchPolicy Equivalent)
    index: int  # position in the chain, for audit annotations

    @property
    def name(self) -> str:
        return str(self.webhook.get("name", ""))


def _resource_matches(entry: str, resource: str, subresource: str) -> bool:
    res, _, sub = entry.partition("/")
    if not subresource:
        return not sub and res in ("*", resource)
    return bool(sub) and res in ("*", resource) and sub in ("*", subresource)


def rule_matches(rule: JsonObj, operation: str, gvr: GVR, subresource: str, namespaced: bool) -> bool:
    operations = rule.get("operations") or []
    if operation not in operations and "*" not in operations:
        return False
    groups = rule.get("apiGroups") or []
    versions = rule.get("apiVersions") or []
    if gvr.group not in groups and "*" not in groups:
        return False
    if gvr.version not in versions and "*" not in versions:
        return False
    if not any(_resource_matches(str(entry), gvr.resource, subresource) for entry in rule.get("resources") or []):
        return False
    scope = rule.get("scope", "*")
    return bool(scope == "*" or (scope == "Namespaced") == namespaced)


def _matched_gvr(webhook: JsonObj, request: Request) -> GVR | None:
    rules = webhook.get("rules") or []
    if any(rule_matches(r, request.operation, request.gvr, request.subresource, request.namespaced) for r in rules):
        return request.gvr
    if webhook.get("matchPolicy", "Equivalent") != "Equivalent":
        return None
    for version in request.other_versions:
        other = GVR(request.gvr.group, version, request.gvr.resource)
        if any(rule_matches(r, request.operation, other, request.subresource, request.namespaced) for r in rules):
            return other
    return None


def by_rules(configurations: Iterable[JsonObj], request: Request) -> list[Candidate]:
    """The webhooks whose rules match `request`, in the order the apiserver calls them."""
    if request.gvr.group in EXEMPT_GROUPS:
        return []
    out: list[Candidate] = []
    for config in sorted(configurations, key=lambda c: str(c["metadata"]["name"]).encode()):
        for webhook in config.get("webhooks") or []:
            gvr = _matched_gvr(webhook, request)
            if gvr is not None:
                out.append(Candidate(str(config["metadata"]["name"]), webhook, gvr, len(out)))
    return out


def _labels(obj: JsonObj | None) -> Mapping[str, str]:
    if not obj:
        return {}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels if isinstance(labels, dict) else {}


def by_selectors(candidate: Candidate, *, obj: JsonObj | None, old: JsonObj | None,
                 namespace_labels: Mapping[str, str] | None) -> bool:
    """namespaceSelector (`namespace_labels` None: a cluster-scoped object, which always matches) and
    objectSelector (the new object's labels or the old one's)."""
    webhook = candidate.webhook
    if namespace_labels is not None and not selector_from_dict(
            webhook.get("namespaceSelector") or {}).matches(namespace_labels):
        return False
    selector = selector_from_dict(webhook.get("objectSelector") or {})
    return selector.matches(_labels(obj)) or (old is not None and selector.matches(_labels(old)))
