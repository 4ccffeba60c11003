"""Built-in kinds served beside registry.BUILTIN_RESOURCES, kept apart so the table there stays as it was:
RBAC and NetworkPolicy (stored; a NetworkPolicy is stored and served, not enforced: the sandbox has no
network), and the review kinds of authentication.k8s.io / authorization.k8s.io (create-only, never
stored: `reviews.py` answers them). Verbs, short names and scope as a v1.32 apiserver reports them.
"""

from __future__ import annotations

from typing import NamedTuple

ALL = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
CREATE_ONLY = ("create",)


class KindSpec(NamedTuple):
    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool = True
    short: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL
    subresources: tuple[str, ...] = ()


RBAC_GROUP = "rbac.authorization.k8s.io"
AUTHN_GROUP = "authentication.k8s.io"
AUTHZ_GROUP = "authorization.k8s.io"
NETWORKING_GROUP = "networking.k8s.io"
ADMISSION_GROUP = "admissionregistration.k8s.io"
APIREGISTRATION_GROUP = "apiregistration.k8s.io"

EXTRA_KINDS: tuple[KindSpec, ...] = (
    KindSpec(RBAC_GROUP, "v1", "roles", "Role"),
    KindSpec(RBAC_GROUP, "v1", "rolebindings", "RoleBinding"),
    KindSpec(RBAC_GROUP, "v1", "clusterroles", "ClusterRole", namespaced=False),
    KindSpec(RBAC_GROUP, "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
    KindSpec(NETWORKING_GROUP, "v1", "networkpolicies", "NetworkPolicy", short=("netpol",)),
    # Admission webhooks the API server calls (apiserver/webhooks/), and the Endpoints a selectorless
    # Service's owner writes by hand: where a webhook's Service reference leads when no pod backs it.
    KindSpec(ADMISSION_GROUP, "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
             namespaced=False, categories=("api-extensions",)),
    KindSpec(ADMISSION_GROUP, "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration",
             namespaced=False, categories=("api-extensions",)),
    KindSpec("", "v1", "endpoints", "Endpoints", short=("ep",)),
    # The aggregation layer's registrations (apiserver/aggregation/): a group/version served by a Service.
    KindSpec(APIREGISTRATION_GROUP, "v1", "apiservices", "APIService", namespaced=False,
             categories=("api-extensions",), subresources=("status",)),
    KindSpec(AUTHN_GROUP, "v1", "tokenreviews", "TokenReview", namespaced=False, verbs=CREATE_ONLY),
    KindSpec(AUTHN_GROUP, "v1", "selfsubjectreviews", "SelfSubjectReview", namespaced=False, verbs=CREATE_ONLY),
    KindSpec(AUTHZ_GROUP, "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False,
             verbs=CREATE_ONLY),
    KindSpec(AUTHZ_GROUP, "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", namespaced=False,
             verbs=CREATE_ONLY),
    KindSpec(AUTHZ_GROUP, "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", namespaced=False,
             verbs=CREATE_ONLY),
    KindSpec(AUTHZ_GROUP, "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview", verbs=CREATE_ONLY),
)

# Where these groups go in /apis (a real server lists them between the built-in groups; ours after them).
EXTRA_GROUP_ORDER = (APIREGISTRATION_GROUP, AUTHN_GROUP, AUTHZ_GROUP, NETWORKING_GROUP, RBAC_GROUP, ADMISSION_GROUP)

# Kinds never stored: POSTs to them are answered by reviews.py.
REVIEW_RESOURCES = frozenset((k.group, k.resource) for k in EXTRA_KINDS if k.verbs == CREATE_ONLY)
