"""Pod Security "restricted" for the pod templates the operator generates: fill what is absent.

Every generated template (the workload's Job/Deployment, Ray head and workers, the RayJob submitter,
the download Job) gets what the Pod Security Standard "restricted" asks for, so its pods are admitted
in namespaces labelled `pod-security.kubernetes.io/enforce: restricted`:

- pod `securityContext.runAsNonRoot: true` and `securityContext.seccompProfile: {type: RuntimeDefault}`;
- every container (init containers included) `securityContext.allowPrivilegeEscalation: false` and
  `securityContext.capabilities.drop: ["ALL"]`;
- pod `automountServiceAccountToken: false` (hardening beyond the standard: our workloads never call
  the API server).

Field-level merge: a field the user's template sets - at either level where Kubernetes reads it - is
never overridden, and a template that explicitly asks for root or privileges (`runAsUser: 0`,
`privileged: true`, `SYS_ADMIN`) gets nothing that would contradict it (the API server refuses
`allowPrivilegeEscalation: false` next to `privileged: true` or `CAP_SYS_ADMIN`; the kubelet refuses
`runAsNonRoot: true` next to `runAsUser: 0`). Such pods are then refused by a restricted namespace,
as they would be without us. `spec.dangerous: true` opts a workload out (the callers decide).

`runAsNonRoot: true` without a `runAsUser` makes the kubelet check the image: an image whose USER is
root (or a non-numeric name) is refused at container start ("container has runAsNonRoot and image
will run as root"). Kaiwo's default templates set `runAsUser: 1000`, so only user templates running
root images meet this; docs/compatibility.md says what to do.
"""

from __future__ import annotations

from typing import Any

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.render.errors import RenderError

# What kube-apiserver refuses next to allowPrivilegeEscalation=false (ValidateSecurityContext).
_NEEDS_ESCALATION = frozenset({"SYS_ADMIN", "CAP_SYS_ADMIN"})
RUNTIME_DEFAULT_SECCOMP = {"type": "RuntimeDefault"}


def harden_pod_template(template: JsonObj, field: str, *, service_account_token: bool = False) -> None:
    """Fill the restricted fields absent from `template` (mutated in place; a fresh render copy).

    `service_account_token`: leave `automountServiceAccountToken` alone (a Ray head running the
    in-tree autoscaler talks to the API server). A template naming a `serviceAccountName` keeps its
    token too: choosing an account is asking for its credentials.
    """
    pod = template.get("spec")
    if not isinstance(pod, dict):
        return  # pod_spec_of has refused such templates already
    path = f"{field}.spec"
    containers = [
        (f"{path}.{key}[{index}]", container)
        for key in ("initContainers", "containers")
        for index, container in enumerate(pod.get(key) or [])
        if isinstance(container, dict)
    ]
    pod_context = _map_at(pod, "securityContext", f"{path}.securityContext")
    contexts = [_map_at(container, "securityContext", f"{p}.securityContext") for p, container in containers]

    wants_root = _runs_as_root(pod_context) or any(_runs_as_root(c) for c in contexts)
    if not wants_root:
        pod_context.setdefault("runAsNonRoot", True)
    pod_context.setdefault("seccompProfile", dict(RUNTIME_DEFAULT_SECCOMP))
    pod["securityContext"] = pod_context

    for (container_path, container), context in zip(containers, contexts, strict=True):
        if context.get("privileged") is True:
            container["securityContext"] = context
            continue  # privileged is the user's explicit choice; nothing we add would restrict it
        capabilities = _map_at(context, "capabilities", f"{container_path}.securityContext.capabilities")
        added = capabilities.get("add")
        if added is not None and not isinstance(added, list):
            raise RenderError(f"{container_path}.securityContext.capabilities.add", "must be a list")
        if not _NEEDS_ESCALATION.intersection(str(cap) for cap in added or ()):
            context.setdefault("allowPrivilegeEscalation", False)
        capabilities.setdefault("drop", ["ALL"])
        context["capabilities"] = capabilities
        container["securityContext"] = context

    if not service_account_token and not (pod.get("serviceAccountName") or pod.get("serviceAccount")):
        pod.setdefault("automountServiceAccountToken", False)


def _map_at(parent: JsonObj, key: str, field: str) -> JsonObj:
    """A copy of `parent[key]` (a map) or a new one; RenderError when the user's value is not a map."""
    value: Any = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RenderError(field, "must be a map")
    return dict(value)


def _runs_as_root(context: JsonObj) -> bool:
    """The template explicitly asks for uid 0 or for no non-root check."""
    return context.get("runAsUser") == 0 or context.get("runAsNonRoot") is False
