"""kubectl against the sandbox, unchanged: the commands people type (skipped without kubectl)."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kaiwo_sandbox.contracts import LEASES, NODES
from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox

Kubectl = Callable[..., subprocess.CompletedProcess[str]]

CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {{app: demo}}
data:
  mode: "{mode}"
"""

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: app
        image: nginx:1.27
"""

RAYJOB = """apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: train
spec:
  entrypoint: python train.py
"""


@pytest.fixture
def kubectl(sandbox: RunningSandbox, kubectl_bin: str, tmp_path: Path) -> Kubectl:
    def run(*args: str, stdin: str | None = None, check: bool = True, timeout: float = 30) -> Any:
        command = [kubectl_bin, "--kubeconfig", str(sandbox.kubeconfig_path), "--cache-dir",
                   str(tmp_path / "cache"), *args]
        result = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr}")
        return result

    return run


def test_create_get_and_delete(kubectl: Kubectl) -> None:
    assert "configmap/settings created" in kubectl("create", "-f", "-", stdin=CONFIGMAP.format(mode="a")).stdout
    listed = kubectl("get", "configmaps").stdout.splitlines()
    assert listed[0].split() == ["NAME", "DATA", "AGE"]
    assert listed[1].split()[:2] == ["settings", "1"]
    as_json = json.loads(kubectl("get", "configmap", "settings", "-o", "json").stdout)
    assert as_json["data"] == {"mode": "a"}
    assert "mode: a" in kubectl("get", "cm", "settings", "-o", "yaml").stdout
    assert 'configmap "settings" deleted' in kubectl("delete", "cm", "settings").stdout
    missing = kubectl("get", "cm", "settings", check=False)
    assert missing.returncode != 0
    assert 'configmaps "settings" not found' in missing.stderr


def test_client_side_apply_twice(kubectl: Kubectl) -> None:
    assert "created" in kubectl("apply", "-f", "-", stdin=DEPLOYMENT.format(replicas=1)).stdout
    assert "configured" in kubectl("apply", "-f", "-", stdin=DEPLOYMENT.format(replicas=3)).stdout
    deployment = json.loads(kubectl("get", "deploy", "web", "-o", "json").stdout)
    assert deployment["spec"]["replicas"] == 3
    assert deployment["metadata"]["generation"] == 2
    assert "kubectl.kubernetes.io/last-applied-configuration" in deployment["metadata"]["annotations"]
    assert "unchanged" in kubectl("apply", "-f", "-", stdin=DEPLOYMENT.format(replicas=3)).stdout


def test_server_side_apply_conflict_between_managers(kubectl: Kubectl) -> None:
    kubectl("apply", "--server-side", "--field-manager=alice", "-f", "-", stdin=DEPLOYMENT.format(replicas=1))
    clash = kubectl("apply", "--server-side", "--field-manager=bob", "-f", "-",
                    stdin=DEPLOYMENT.format(replicas=2), check=False)
    assert clash.returncode != 0
    assert 'conflict with "alice"' in clash.stderr
    assert ".spec.replicas" in clash.stderr
    kubectl("apply", "--server-side", "--field-manager=bob", "--force-conflicts", "-f", "-",
            stdin=DEPLOYMENT.format(replicas=2))
    assert kubectl("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}").stdout == "2"


def test_patch_with_every_type(kubectl: Kubectl) -> None:
    kubectl("create", "-f", "-", stdin=DEPLOYMENT.format(replicas=1))
    kubectl("patch", "deploy", "web", "-p",
            '{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"busybox"}]}}}}')
    names = kubectl("get", "deploy", "web", "-o", "jsonpath={.spec.template.spec.containers[*].name}").stdout
    assert names == "side app" or names == "app side"  # strategic merge keeps both
    kubectl("patch", "deploy", "web", "--type=merge", "-p", '{"spec":{"replicas":4}}')
    kubectl("patch", "deploy", "web", "--type=json", "-p", '[{"op":"replace","path":"/spec/replicas","value":5}]')
    assert kubectl("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}").stdout == "5"


def test_get_wide_and_custom_resources(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=RAYJOB)
    header = kubectl("get", "rayjobs").stdout.splitlines()[0].split()
    assert header[:3] == ["NAME", "JOB", "STATUS"]
    kubectl("create", "-f", "-", stdin=DEPLOYMENT.format(replicas=1))
    wide = kubectl("get", "deploy", "-o", "wide").stdout.splitlines()[0]
    assert "CONTAINERS" in wide and "IMAGES" in wide


def test_get_watch_streams_changes(sandbox: RunningSandbox, kubectl_bin: str, kubectl: Kubectl,
                                   tmp_path: Path) -> None:
    watcher = subprocess.Popen([kubectl_bin, "--kubeconfig", str(sandbox.kubeconfig_path), "--cache-dir",
                                str(tmp_path / "cache2"), "get", "configmaps", "--watch", "-o", "name"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []

    def read() -> None:
        assert watcher.stdout is not None
        lines.extend(line.strip() for line in watcher.stdout)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        eventually(lambda: sandbox.open_watches >= 1, timeout=20)
        kubectl("create", "-f", "-", stdin=CONFIGMAP.format(mode="w"))
        kubectl("delete", "cm", "settings")
        eventually(lambda: lines.count("configmap/settings") >= 2, timeout=20)
    finally:
        watcher.terminate()
        watcher.communicate(timeout=10)


def test_wait_for_condition_and_delete(sandbox: RunningSandbox, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=RAYJOB)
    sandbox.http("PATCH", "/apis/ray.io/v1/namespaces/default/rayjobs/train/status",
                 json.dumps({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
                 headers={"Content-Type": "application/merge-patch+json"})
    assert "condition met" in kubectl("wait", "--for=condition=Ready", "rayjob/train", "--timeout=20s").stdout
    kubectl("create", "-f", "-", stdin=CONFIGMAP.format(mode="x"))
    waiter = subprocess.Popen([*_base(sandbox, kubectl), "wait", "--for=delete", "cm/settings", "--timeout=20s"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    kubectl("delete", "cm", "settings")
    _, err = waiter.communicate(timeout=30)
    assert waiter.returncode == 0, err


def _base(sandbox: RunningSandbox, kubectl: Kubectl) -> list[str]:
    import shutil

    return [shutil.which("kubectl") or "kubectl", "--kubeconfig", str(sandbox.kubeconfig_path)]


def test_cordon_uncordon_and_label(kubectl: Kubectl) -> None:
    kubectl("create", "-f", "-", stdin="apiVersion: v1\nkind: Node\nmetadata:\n  name: node-a\n")
    assert "cordoned" in kubectl("cordon", "node-a").stdout
    assert kubectl("get", "node", "node-a", "-o", "jsonpath={.spec.unschedulable}").stdout == "true"
    assert "SchedulingDisabled" in kubectl("get", "nodes").stdout
    assert "uncordoned" in kubectl("uncordon", "node-a").stdout
    assert kubectl("get", "node", "node-a", "-o", "jsonpath={.spec.unschedulable}").stdout == ""
    kubectl("label", "node", "node-a", "kaiwo/nodepool=pool-1")
    assert kubectl("get", "nodes", "-l", "kaiwo/nodepool=pool-1", "-o", "name").stdout.strip() == "node/node-a"


def test_seeded_nodes_have_the_lease_kubectl_describe_shows(kubectl_bin: str, tmp_path: Path) -> None:
    with start_sandbox(nodes=[{"metadata": {"name": "node-a"}}]) as sandbox:
        described = subprocess.run([kubectl_bin, "--kubeconfig", str(sandbox.kubeconfig_path), "--cache-dir",
                                    str(tmp_path / "cache"), "describe", "node", "node-a"],
                                   capture_output=True, text=True, timeout=30, check=True).stdout
        assert "Failed to get lease" not in described
        assert "HolderIdentity:  node-a" in described
        store = sandbox.store
        lease = sandbox.call(store.get, LEASES, "kube-node-lease", "node-a")
        node = sandbox.call(store.get, NODES, None, "node-a")
        assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
        sandbox.call(store.delete, NODES, None, "node-a")
        eventually(lambda: sandbox.call(store.find_ref, LEASES, "kube-node-lease", "node-a") is None)


def test_explain_reads_a_custom_kinds_schema(kubectl: Kubectl) -> None:
    explained = kubectl("explain", "kaiwojob.spec.replicas").stdout
    assert "KIND:       KaiwoJob" in explained
    assert "FIELD: replicas <integer>" in explained


def test_api_resources(kubectl: Kubectl) -> None:
    lines = kubectl("api-resources").stdout.splitlines()
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["pods"][1] == "po"
    assert rows["deployments"][1:3] == ["deploy", "apps/v1"]
    assert "kueue.x-k8s.io/v1beta2" in rows["workloads"]
    assert "ray.io/v1" in rows["rayjobs"]


def test_typed_generators_send_protobuf(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "team-a")
    kubectl("create", "configmap", "conf", "-n", "team-a", "--from-literal=a=b")
    kubectl("create", "secret", "generic", "pw", "--from-literal=pw=hunter2")
    assert kubectl("get", "cm", "conf", "-n", "team-a", "-o", "jsonpath={.data.a}").stdout == "b"
    assert kubectl("get", "secret", "pw", "-o", "jsonpath={.data.pw}").stdout == "aHVudGVyMg=="
    refused = kubectl("create", "cronjob", "c", "--image=busybox", "--schedule=* * * * *", check=False)
    assert refused.returncode != 0


@pytest.mark.parametrize("generator", [
    ["deployment", "web", "--image=nginx:1.27", "--replicas=2", "--port=80"],
    ["job", "once", "--image=busybox", "--", "sleep", "5"],
    ["service", "clusterip", "svc", "--tcp=80:8080"],
])
def test_protobuf_bodies_store_what_their_json_form_stores(kubectl: Kubectl, generator: list[str]) -> None:
    kubectl("create", "namespace", "via-protobuf")
    kubectl("create", "namespace", "via-json")
    flags = ["--dry-run=client", "-o", "json"]
    split = generator.index("--") if "--" in generator else len(generator)
    as_json = kubectl("create", *generator[:split], *flags, *generator[split:]).stdout
    kubectl("create", "-n", "via-protobuf", *generator)
    kubectl("create", "-n", "via-json", "-f", "-", stdin=as_json)
    resource = {"deployment": "deployments", "job": "jobs", "service": "services"}[generator[0]]
    stored = [json.loads(kubectl("get", resource, "-n", ns, "-o", "json").stdout)["items"][0]
              for ns in ("via-protobuf", "via-json")]
    for obj in stored:  # drop what differs between any two creates: identities and allocations
        for volatile in ("uid", "resourceVersion", "creationTimestamp", "namespace", "managedFields"):
            obj["metadata"].pop(volatile, None)
        if resource == "jobs":  # selectors and labels carry the job's uid
            obj["spec"].pop("selector", None)
            obj["metadata"].pop("labels", None)
            obj["spec"]["template"]["metadata"].pop("labels", None)
        if resource == "services":
            obj["spec"].pop("clusterIP", None)
            obj["spec"].pop("clusterIPs", None)
    assert stored[0]["spec"] == stored[1]["spec"]
    assert stored[0]["metadata"] == stored[1]["metadata"]


def test_unknown_custom_resource_fields_are_rejected(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=STRICT_CRD)
    kubectl("wait", "--for=condition=Established", "crd/gadgets.example.com", "--timeout=20s")
    typo = "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\nspec: {size: 1, sise: 2}\n"
    failed = kubectl("apply", "-f", "-", stdin=typo, check=False)
    assert failed.returncode != 0
    assert 'strict decoding error: unknown field "spec.sise"' in failed.stderr


STRICT_CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
"""


def test_drain_evicts_pods_from_a_cordoned_node(kubectl: Kubectl, core: Any) -> None:
    kubectl("create", "-f", "-", stdin="apiVersion: v1\nkind: Node\nmetadata:\n  name: node-a\n")
    core.create_namespaced_pod("default", {"metadata": {"name": "p"}, "spec": {
        "nodeName": "node-a", "containers": [{"name": "c", "image": "busybox"}]}})
    drained = kubectl("drain", "node-a", "--force", "--timeout=20s")
    assert "node/node-a drained" in drained.stdout
    assert kubectl("get", "pods", "-o", "name").stdout.strip() == ""
    assert "SchedulingDisabled" in kubectl("get", "node", "node-a").stdout
