"""Pod Security admission over HTTP with the official client: a namespace's `enforce` label decides."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client import ApiException

RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


def _pod(name: str, **pod_spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}], **pod_spec}}


def _hardened(name: str) -> dict[str, Any]:
    return _pod(name, securityContext={"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                containers=[{"name": "nginx", "image": "nginx:1.27",
                             "securityContext": {"allowPrivilegeEscalation": False,
                                                 "capabilities": {"drop": ["ALL"]}}}])


def _namespace(core: Any, name: str, labels: dict[str, str] | None = None) -> None:
    core.create_namespace({"metadata": {"name": name, "labels": labels or {}}})


def test_a_restricted_namespace_refuses_a_bare_pod_with_403_and_the_plugins_message(core: Any) -> None:
    _namespace(core, "locked", RESTRICTED)
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod("locked", _pod("web"))
    assert refused.value.status == 403
    body = json.loads(refused.value.body)
    assert body["reason"] == "Forbidden"
    assert body["details"] == {"name": "web", "kind": "pods"}
    assert body["message"] == (
        'pods "web" is forbidden: violates PodSecurity "restricted:latest": '
        'allowPrivilegeEscalation != false (container "nginx" must set securityContext.allowPrivilegeEscalation=false), '
        'unrestricted capabilities (container "nginx" must set securityContext.capabilities.drop=["ALL"]), '
        'runAsNonRoot != true (pod or container "nginx" must set securityContext.runAsNonRoot=true), '
        'seccompProfile (pod or container "nginx" must set securityContext.seccompProfile.type to "RuntimeDefault" '
        'or "Localhost")')
    assert core.list_namespaced_pod("locked").items == []
    # A pod that meets the standard is admitted there.
    assert core.create_namespaced_pod("locked", _hardened("web")).metadata.name == "web"


def test_an_unlabelled_namespace_admits_the_same_pod(core: Any) -> None:
    _namespace(core, "open")
    assert core.create_namespaced_pod("open", _pod("web")).metadata.name == "web"


def test_baseline_refuses_host_paths_but_not_a_bare_pod_and_labels_act_at_once(core: Any) -> None:
    _namespace(core, "base", {"pod-security.kubernetes.io/enforce": "baseline",
                              "pod-security.kubernetes.io/enforce-version": "v1.30"})
    core.create_namespaced_pod("base", _pod("bare"))
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod("base", _pod("host", volumes=[{"name": "root", "hostPath": {"path": "/"}}]))
    assert refused.value.status == 403
    assert json.loads(refused.value.body)["message"] == (
        'pods "host" is forbidden: violates PodSecurity "baseline:v1.30": hostPath volumes (volume "root")')
    # Relabelled restricted: the next pod is judged by the new level (existing pods stay).
    core.patch_namespace("base", {"metadata": {"labels": RESTRICTED}})
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod("base", _pod("bare-2"))
    assert refused.value.status == 403
    assert [p.metadata.name for p in core.list_namespaced_pod("base").items] == ["bare"]


def test_dry_run_is_judged_too_and_an_invalid_pod_is_422_before_403(core: Any) -> None:
    _namespace(core, "locked", RESTRICTED)
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod("locked", _pod("web"), dry_run="All")
    assert refused.value.status == 403
    with pytest.raises(ApiException) as invalid:
        core.create_namespaced_pod("locked", _pod("Bad_Name"))
    assert invalid.value.status == 422
