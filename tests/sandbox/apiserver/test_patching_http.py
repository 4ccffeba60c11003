"""Patch semantics end to end: the official client and kubectl sending all four patch content
types to a running sandbox, as they would to a real apiserver."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import kubernetes

from kaiwo_sandbox.testing import RunningSandbox

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx
        env: [{name: A, value: "1"}, {name: B, value: "2"}]
      - {name: side, image: busybox}
"""


def _kubectl(kubectl_bin: str, sandbox: RunningSandbox, *args: str, stdin: str | None = None,
             check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([kubectl_bin, "--kubeconfig", str(sandbox.kubeconfig_path), *args],
                            capture_output=True, text=True, input=stdin, timeout=60, check=False,
                            env={**os.environ, **(env or {})})
    if check:
        assert result.returncode == 0, result.stderr
    return result


def _get(kubectl_bin: str, sandbox: RunningSandbox, *what: str) -> Any:
    return json.loads(_kubectl(kubectl_bin, sandbox, "get", *what, "-o", "json", "--show-managed-fields").stdout)


def _managers(obj: Any) -> set[str]:
    return {f"{e['manager']}/{e['operation']}" for e in obj["metadata"].get("managedFields", [])}


def test_kubectl_cordon_and_uncordon(sandbox: RunningSandbox, core: Any, kubectl_bin: str) -> None:
    core.create_node({"metadata": {"name": "gpu-1"}, "spec": {"podCIDR": "10.0.0.0/24"}})
    _kubectl(kubectl_bin, sandbox, "cordon", "gpu-1")
    assert core.read_node("gpu-1").spec.unschedulable is True
    _kubectl(kubectl_bin, sandbox, "uncordon", "gpu-1")
    node = core.read_node("gpu-1")
    assert not node.spec.unschedulable
    assert node.spec.pod_cidr == "10.0.0.0/24"


def test_kubectl_client_side_apply_edits_lists_by_key(sandbox: RunningSandbox, kubectl_bin: str) -> None:
    _kubectl(kubectl_bin, sandbox, "apply", "-f", "-", stdin=DEPLOYMENT)
    changed = DEPLOYMENT.replace('{name: B, value: "2"}', '{name: C, value: "3"}').replace(
        "image: nginx", "image: nginx:1.27")
    _kubectl(kubectl_bin, sandbox, "apply", "-f", "-", stdin=changed)
    deployment = _get(kubectl_bin, sandbox, "deployment", "web")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["app", "side"]
    assert containers[0]["image"] == "nginx:1.27"
    assert containers[0]["env"] == [{"name": "A", "value": "1"}, {"name": "C", "value": "3"}]
    assert "kubectl-client-side-apply/Update" in _managers(deployment)


def test_kubectl_label_annotate_and_patch_types(sandbox: RunningSandbox, kubectl_bin: str) -> None:
    _kubectl(kubectl_bin, sandbox, "apply", "-f", "-", stdin=DEPLOYMENT)
    _kubectl(kubectl_bin, sandbox, "label", "deployment", "web", "team=ml")
    _kubectl(kubectl_bin, sandbox, "annotate", "deployment", "web", "note=hi")
    _kubectl(kubectl_bin, sandbox, "patch", "deployment", "web", "--type", "merge", "-p", '{"spec":{"paused":true}}')
    _kubectl(kubectl_bin, sandbox, "patch", "deployment", "web", "-p",
             '{"spec":{"template":{"spec":{"containers":[{"name":"side","$patch":"delete"}]}}}}')
    _kubectl(kubectl_bin, sandbox, "patch", "deployment", "web", "--type", "json",
             "-p", '[{"op":"test","path":"/spec/replicas","value":2},{"op":"replace","path":"/spec/replicas","value":3}]')
    deployment = _get(kubectl_bin, sandbox, "deployment", "web")
    assert deployment["metadata"]["labels"]["team"] == "ml"
    assert deployment["metadata"]["annotations"]["note"] == "hi"
    assert deployment["spec"]["paused"] is True
    assert deployment["spec"]["replicas"] == 3
    assert [c["name"] for c in deployment["spec"]["template"]["spec"]["containers"]] == ["app"]
    assert {"kubectl-label/Update", "kubectl-annotate/Update", "kubectl-patch/Update"} <= _managers(deployment)
    _kubectl(kubectl_bin, sandbox, "label", "deployment", "web", "team-")
    assert "team" not in _get(kubectl_bin, sandbox, "deployment", "web")["metadata"].get("labels", {})

    failed = _kubectl(kubectl_bin, sandbox, "patch", "deployment", "web", "--type", "json",
                      "-p", '[{"op":"test","path":"/spec/replicas","value":99}]', check=False)
    assert failed.returncode != 0
    assert "the server rejected our request due to an error in our request" in failed.stderr


def test_kubectl_server_side_apply_conflicts_and_force(sandbox: RunningSandbox, kubectl_bin: str) -> None:
    _kubectl(kubectl_bin, sandbox, "apply", "--server-side", "-f", "-", stdin=DEPLOYMENT)
    _kubectl(kubectl_bin, sandbox, "apply", "--server-side", "--field-manager", "other", "--force-conflicts",
             "-f", "-", stdin=DEPLOYMENT.replace("replicas: 2", "replicas: 4"))
    conflict = _kubectl(kubectl_bin, sandbox, "apply", "--server-side", "-f", "-",
                        stdin=DEPLOYMENT.replace("replicas: 2", "replicas: 6"), check=False)
    assert conflict.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "other": .spec.replicas' in conflict.stderr
    _kubectl(kubectl_bin, sandbox, "apply", "--server-side", "--force-conflicts", "-f", "-",
             stdin=DEPLOYMENT.replace("replicas: 2", "replicas: 6"))
    deployment = _get(kubectl_bin, sandbox, "deployment", "web")
    assert deployment["spec"]["replicas"] == 6
    applier = next(e for e in deployment["metadata"]["managedFields"] if e["manager"] == "kubectl")
    assert applier["operation"] == "Apply"
    assert "f:replicas" in applier["fieldsV1"]["f:spec"]


def test_python_client_patch_content_types(api: Any, custom: Any) -> None:
    apps = kubernetes.client.AppsV1Api(api)
    apps.create_namespaced_deployment("default", {
        "metadata": {"name": "py"},
        "spec": {"selector": {"matchLabels": {"app": "py"}},
                 "template": {"metadata": {"labels": {"app": "py"}},
                              "spec": {"containers": [{"name": "a", "image": "x",
                                                       "env": [{"name": "A", "value": "1"}]}]}}}})
    # dict body on a typed API: strategic merge, env merged by name
    apps.patch_namespaced_deployment("py", "default", {"spec": {"template": {"spec": {"containers": [
        {"name": "a", "env": [{"name": "B", "value": "2"}]}]}}}})
    env = apps.read_namespaced_deployment("py", "default").spec.template.spec.containers[0].env
    assert {e.name for e in env} == {"A", "B"}
    # list body: JSON patch
    apps.patch_namespaced_deployment("py", "default", [{"op": "replace", "path": "/spec/replicas", "value": 2}])
    # server-side apply through the typed API
    applied = apps.patch_namespaced_deployment(
        "py", "default",
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "py", "labels": {"by": "ssa"}}},
        field_manager="kaiwo", force=True, _content_type="application/apply-patch+yaml")
    assert applied.metadata.labels == {"by": "ssa"}
    assert any(e.manager == "kaiwo" and e.operation == "Apply" for e in applied.metadata.managed_fields)


def test_strategic_merge_on_a_custom_resource_is_415(sandbox: RunningSandbox, custom: Any,
                                                     kubectl_bin: str) -> None:
    custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayjobs", {
        "apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "rj"}, "spec": {"entrypoint": "python x.py"}})
    refused = _kubectl(kubectl_bin, sandbox, "patch", "rayjob", "rj", "--type", "strategic",
                       "-p", '{"spec":{"entrypoint":"y"}}', check=False)
    assert refused.returncode != 0
    assert "the body of the request was in an unknown format" in refused.stderr
    _kubectl(kubectl_bin, sandbox, "patch", "rayjob", "rj", "--type", "merge", "-p", '{"spec":{"entrypoint":"y"}}')
    assert custom.get_namespaced_custom_object("ray.io", "v1", "default", "rayjobs", "rj")["spec"]["entrypoint"] == "y"


def test_kubectl_edit_and_scale(sandbox: RunningSandbox, kubectl_bin: str) -> None:
    _kubectl(kubectl_bin, sandbox, "apply", "-f", "-", stdin=DEPLOYMENT)
    # kubectl edit sends a strategic merge patch of what the editor changed
    _kubectl(kubectl_bin, sandbox, "edit", "deployment", "web",
             env={"KUBE_EDITOR": "sed -i -e s/busybox/busybox:1.36/", "EDITOR": ""})
    _kubectl(kubectl_bin, sandbox, "scale", "deployment", "web", "--replicas=4")
    deployment = _get(kubectl_bin, sandbox, "deployment", "web")
    assert deployment["spec"]["replicas"] == 4
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("app", "nginx"), ("side", "busybox:1.36")]
    assert "kubectl-edit/Update" in _managers(deployment)
