"""Pod Security admission's checks as a pure function: levels, reasons, details, order and wording."""

from __future__ import annotations

from typing import Any

import pytest

from kaiwo_sandbox.contracts import ApiError
from kaiwo_sandbox.semantics.builtin.pod_security import (
    ENFORCE_LABEL,
    ENFORCE_VERSION_LABEL,
    Policy,
    admit_pod,
    check_pod,
    enforced_policy,
    review_pod,
    review_pod_controller,
    violation_summary,
)

RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
RESTRICTED_POD = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}


def bare(*names: str, **spec: Any) -> dict[str, Any]:
    return {"containers": [{"name": name, "image": "busybox"} for name in names or ("c",)], **spec}


def hardened(**spec: Any) -> dict[str, Any]:
    return {"securityContext": dict(RESTRICTED_POD),
            "containers": [{"name": "c", "image": "busybox", "securityContext": dict(RESTRICTED_CONTAINER)}],
            **spec}


def namespace(**labels: str) -> dict[str, Any]:
    return {"metadata": {"name": "ns", "labels": labels}}


def test_a_bare_pod_breaks_four_restricted_rules_in_the_plugins_order_and_words() -> None:
    assert violation_summary(check_pod("restricted", bare("nginx"))) == (
        'allowPrivilegeEscalation != false (container "nginx" must set securityContext.allowPrivilegeEscalation=false), '
        'unrestricted capabilities (container "nginx" must set securityContext.capabilities.drop=["ALL"]), '
        'runAsNonRoot != true (pod or container "nginx" must set securityContext.runAsNonRoot=true), '
        'seccompProfile (pod or container "nginx" must set securityContext.seccompProfile.type to "RuntimeDefault" '
        'or "Localhost")')


def test_several_containers_are_named_together_in_plural() -> None:
    spec = bare("a", "b", initContainers=[{"name": "init", "image": "busybox"}])
    reasons = dict(check_pod("restricted", spec))
    assert reasons["allowPrivilegeEscalation != false"] == (
        'containers "init", "a", "b" must set securityContext.allowPrivilegeEscalation=false')
    assert reasons["runAsNonRoot != true"] == (
        'pod or containers "init", "a", "b" must set securityContext.runAsNonRoot=true')


def test_a_hardened_pod_passes_every_level() -> None:
    spec = hardened(volumes=[{"name": "dshm", "emptyDir": {"medium": "Memory"}},
                             {"name": "data", "persistentVolumeClaim": {"claimName": "d"}},
                             {"name": "s", "secret": {"secretName": "s"}}])
    for level in ("privileged", "baseline", "restricted"):
        assert check_pod(level, spec) == [], level


def test_container_level_fields_satisfy_the_pod_level_rules() -> None:
    spec = {"containers": [{"name": "c", "securityContext": {**RESTRICTED_CONTAINER, **RESTRICTED_POD}}]}
    assert check_pod("restricted", spec) == []


def test_explicit_root_and_unconfined_are_named_as_what_the_pod_must_not_set() -> None:
    spec = hardened()
    spec["securityContext"] = {"runAsNonRoot": False, "runAsUser": 0, "seccompProfile": {"type": "Unconfined"}}
    assert violation_summary(check_pod("restricted", spec)) == (
        "runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false), "
        "runAsUser=0 (pod must not set runAsUser=0), "
        'seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")')


def test_restricted_allows_adding_only_net_bind_service() -> None:
    spec = hardened()
    spec["containers"][0]["securityContext"]["capabilities"] = {"drop": ["ALL"], "add": ["NET_BIND_SERVICE", "CHOWN"]}
    assert check_pod("restricted", spec) == [
        ("unrestricted capabilities", 'container "c" must not include "CHOWN" in securityContext.capabilities.add')]
    assert check_pod("baseline", spec) == []  # CHOWN is in the runtime's default set


def test_baseline_refuses_host_access_and_privileges_only() -> None:
    spec = bare("c", hostNetwork=True, hostPID=True, volumes=[{"name": "root", "hostPath": {"path": "/"}}])
    spec["containers"][0]["securityContext"] = {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}}
    spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    assert violation_summary(check_pod("baseline", spec)) == (
        "host namespaces (hostNetwork=true, hostPID=true), "
        'hostPort (container "c" uses hostPort 8080), '
        'privileged (container "c" must not set securityContext.privileged=true), '
        'non-default capabilities (container "c" must not include "SYS_ADMIN" in securityContext.capabilities.add), '
        'hostPath volumes (volume "root")')
    assert check_pod("baseline", bare("c")) == []


def test_restricted_names_the_volume_type_instead_of_the_baseline_hostpath_rule() -> None:
    spec = hardened(volumes=[{"name": "root", "hostPath": {"path": "/"}}, {"name": "n", "nfs": {"server": "x"}}])
    assert check_pod("restricted", spec) == [
        ("restricted volume types", 'volumes "root", "n" use restricted volume types "hostPath", "nfs"')]


def test_user_namespaces_relax_the_root_rules() -> None:
    spec = hardened(hostUsers=False)
    spec["securityContext"] = {"seccompProfile": {"type": "RuntimeDefault"}, "runAsUser": 0}
    assert check_pod("restricted", spec) == []


@pytest.mark.parametrize(("labels", "policy"), [
    ({}, Policy("privileged", "latest")),
    ({ENFORCE_LABEL: "baseline"}, Policy("baseline", "latest")),
    ({ENFORCE_LABEL: "restricted", ENFORCE_VERSION_LABEL: "v1.30"}, Policy("restricted", "v1.30")),
    ({ENFORCE_LABEL: "strict"}, Policy("restricted", "latest")),  # fails closed
    ({ENFORCE_LABEL: "baseline", ENFORCE_VERSION_LABEL: "1.30"}, Policy("baseline", "latest")),
])
def test_the_enforced_policy_comes_from_the_namespace_labels(labels: dict[str, str], policy: Policy) -> None:
    assert enforced_policy(labels) == policy


def test_admit_pod_refuses_with_403_and_the_real_message() -> None:
    pod = {"metadata": {"name": "web"}, "spec": bare("nginx")}
    with pytest.raises(ApiError) as refused:
        admit_pod(pod, namespace(**{ENFORCE_LABEL: "restricted"}))
    assert refused.value.code == 403
    assert refused.value.reason == "Forbidden"
    assert refused.value.message.startswith(
        'pods "web" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false '
        '(container "nginx" must set securityContext.allowPrivilegeEscalation=false), ')
    admit_pod(pod, namespace())  # unlabelled: privileged
    admit_pod(pod, None)  # cluster-scoped callers pass no namespace
    admit_pod({"metadata": {"name": "ok"}, "spec": hardened()}, namespace(**{ENFORCE_LABEL: "restricted"}))


def test_warn_and_audit_judge_a_cronjobs_template_and_enforce_alone_never_does() -> None:
    cronjob = {"spec": {"jobTemplate": {"spec": {"template": {"spec": bare("c", hostNetwork=True)}}}}}
    review = review_pod_controller("batch", "cronjobs", cronjob, namespace(**{
        "pod-security.kubernetes.io/warn": "baseline", "pod-security.kubernetes.io/warn-version": "v1.33",
        "pod-security.kubernetes.io/audit": "nonsense"}))  # an unparseable level fails closed: restricted
    assert review.denial is None
    assert review.warnings == ['would violate PodSecurity "baseline:v1.33": host namespaces (hostNetwork=true)']
    assert review.annotations["pod-security.kubernetes.io/audit-violations"].startswith(
        'would violate PodSecurity "restricted:latest": host namespaces (hostNetwork=true), allowPrivilegeEscalation')
    assert review_pod_controller("batch", "cronjobs", cronjob, namespace(**{ENFORCE_LABEL: "restricted"})) == \
        review_pod_controller("batch", "cronjobs", cronjob, namespace())  # nothing: no refusal, no notes
    assert review_pod_controller("", "configmaps", {"data": {}}, namespace(**{
        "pod-security.kubernetes.io/warn": "restricted"})).warnings == []
    refused = review_pod({"metadata": {"name": "p"}, "spec": bare("c")}, namespace(**{
        ENFORCE_LABEL: "baseline", "pod-security.kubernetes.io/warn": "restricted"}))
    assert refused.denial is None and len(refused.warnings) == 1  # baseline admits; restricted warns
