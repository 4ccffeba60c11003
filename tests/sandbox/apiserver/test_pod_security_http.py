"""Pod Security admission over HTTP with the official client and kubectl: a namespace's `enforce` label
decides, `warn` and `audit` report."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import kubernetes
import pytest
import yaml
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


WARN_AND_AUDIT = {"pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/audit": "baseline"}
BARE_POD_VIOLATIONS = (
    'allowPrivilegeEscalation != false (container "nginx" must set securityContext.allowPrivilegeEscalation=false), '
    'unrestricted capabilities (container "nginx" must set securityContext.capabilities.drop=["ALL"]), '
    'runAsNonRoot != true (pod or container "nginx" must set securityContext.runAsNonRoot=true), '
    'seccompProfile (pod or container "nginx" must set securityContext.seccompProfile.type to "RuntimeDefault" '
    'or "Localhost")')
BARE_POD = """apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: nginx, image: "nginx:1.27"}]
"""
DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: nginx, image: "nginx:1.27", securityContext: {privileged: true}}]
"""


def _kubectl(sandbox: Any, kubectl_bin: str, tmp_path: Any, manifest: str, namespace: str) -> Any:
    return subprocess.run([kubectl_bin, "--kubeconfig", str(sandbox.kubeconfig_path), "--cache-dir",
                           str(tmp_path / "cache"), "-n", namespace, "create", "-f", "-"],
                          input=manifest, capture_output=True, text=True, timeout=30)


def test_warn_mode_warns_kubectl_about_pods_and_workload_templates(sandbox: Any, core: Any, kubectl_bin: str,
                                                                    tmp_path: Any) -> None:
    """`warn` admits and warns (kubectl prints `Warning:`); the pod template of a workload resource is
    judged too. `audit` puts its verdict in the audit log's annotations."""
    _namespace(core, "watched", WARN_AND_AUDIT)
    created = _kubectl(sandbox, kubectl_bin, tmp_path, BARE_POD, "watched")
    assert created.returncode == 0, created.stderr
    assert "pod/web created" in created.stdout
    assert created.stderr.strip() == (
        f'Warning: would violate PodSecurity "restricted:latest": {BARE_POD_VIOLATIONS}')
    (record,) = sandbox.audit.records(verb="create", resource="pods")
    assert record.annotations == {"pod-security.kubernetes.io/enforce-policy": "privileged:latest"}  # baseline: fine

    created = _kubectl(sandbox, kubectl_bin, tmp_path, DEPLOYMENT, "watched")
    assert created.returncode == 0, created.stderr
    assert "deployment.apps/web created" in created.stdout
    warning = created.stderr.strip()
    assert warning.startswith('Warning: would violate PodSecurity "restricted:latest": privileged '
                              '(container "nginx" must not set securityContext.privileged=true), ')
    (record,) = sandbox.audit.records(verb="create", resource="deployments")
    assert record.annotations == {"pod-security.kubernetes.io/audit-violations": (
        'would violate PodSecurity "baseline:latest": privileged '
        '(container "nginx" must not set securityContext.privileged=true)')}


def test_enforce_alone_never_judges_workload_resources_and_a_refused_pod_gets_no_warning(
        sandbox: Any, core: Any, kubectl_bin: str, tmp_path: Any) -> None:
    _namespace(core, "locked", {**RESTRICTED, "pod-security.kubernetes.io/warn": "restricted"})
    refused = _kubectl(sandbox, kubectl_bin, tmp_path, BARE_POD, "locked")
    assert refused.returncode != 0
    assert "Warning:" not in refused.stderr  # the plugin adds no warning to a request it rejects
    assert 'is forbidden: violates PodSecurity "restricted:latest"' in refused.stderr
    (record,) = sandbox.audit.records(verb="create", resource="pods")
    assert (record.code, record.annotations) == (403, {"pod-security.kubernetes.io/enforce-policy": "restricted:latest"})
    _namespace(core, "enforced", RESTRICTED)
    created = _kubectl(sandbox, kubectl_bin, tmp_path, DEPLOYMENT, "enforced")
    assert created.returncode == 0 and created.stderr == ""  # enforce judges pods only, not templates


def test_the_warning_header_is_quoted_as_the_apiserver_writes_it(sandbox: Any, core: Any) -> None:
    _namespace(core, "watched", WARN_AND_AUDIT)
    code, headers, _ = sandbox.http("POST", "/api/v1/namespaces/watched/pods", _pod("raw"))
    assert code == 201
    assert headers["warning"] == (
        '299 - "would violate PodSecurity \\"restricted:latest\\": '
        + BARE_POD_VIOLATIONS.replace('"', '\\"') + '"')
    # An update of a workload resource is judged again; a status write (a subresource) is not.
    kubernetes.client.AppsV1Api(core.api_client).create_namespaced_deployment("watched", yaml.safe_load(DEPLOYMENT))
    code, headers, _ = sandbox.http(
        "PATCH", "/apis/apps/v1/namespaces/watched/deployments/web", {"metadata": {"labels": {"x": "y"}}},
        headers={"Content-Type": "application/merge-patch+json"})
    assert code == 200 and "would violate PodSecurity" in headers["warning"]
    code, headers, _ = sandbox.http(
        "PATCH", "/apis/apps/v1/namespaces/watched/deployments/web/status", {"status": {"replicas": 0}},
        headers={"Content-Type": "application/merge-patch+json"})
    assert code == 200 and "warning" not in headers
