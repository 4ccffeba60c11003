"""Upgrade and uninstall as docs/install.md describes them. Upgrade: re-applying a newer deploy/ leaves
running workloads alone. Uninstall: with the operator gone, a workload keeps running, and deleting its
namespace takes the workload and its children (no finalizer waits for an operator that is gone); a
workload that still carries an earlier version's finalizer needs the documented escape hatch."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import kubernetes
import yaml
from deploy_support import DEPLOY
from e2e_harness import in_process_operator

from kaiwo_ray.controllers.manager import HostSettings
from kaiwo_sandbox.testing import eventually, start_sandbox

KAIWO = ("kaiwo.silogen.ai", "v1alpha1")


def _long_running_job(custom: Any, namespace: str) -> None:
    """A KaiwoJob `long` that runs for hours, once it is RUNNING."""
    custom.create_namespaced_custom_object(*KAIWO, namespace, "kaiwojobs", {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob", "metadata": {"name": "long"},
        "spec": {"entrypoint": "sleep 36000", "image": "busybox"}})
    eventually(lambda: (custom.get_namespaced_custom_object(*KAIWO, namespace, "kaiwojobs", "long")
                        .get("status") or {}).get("status") == "RUNNING", timeout=60, interval=0.1)


def _uninstalled_with_a_running_job(sb: Any) -> tuple[Any, Any, Any]:
    """Namespace `team` with a RUNNING KaiwoJob `long`, and the operator that started it gone (it
    ran in-process until it returned): (core, custom objects, batch) API clients."""
    core = kubernetes.client.CoreV1Api(sb.api_client())
    custom: Any = kubernetes.client.CustomObjectsApi(sb.api_client())
    batch = kubernetes.client.BatchV1Api(sb.api_client())
    core.create_namespace({"metadata": {"name": "team"}})
    with in_process_operator(HostSettings(kubeconfig=str(sb.kubeconfig_path), lease=False)):
        _long_running_job(custom, "team")
    return core, custom, batch


def _delete_team_and_wait_gone(kubectl: list[str], core: Any, batch: Any, *, before_gone: Any = None) -> None:
    """`kubectl delete namespace team`, then (after `before_gone`, if any) wait until it and the
    workload's Job are gone."""
    subprocess.run([*kubectl, "delete", "namespace", "team", "--wait=false"], check=True, capture_output=True)
    if before_gone is not None:
        before_gone()
    eventually(lambda: "team" not in {n.metadata.name for n in core.list_namespace().items}, timeout=30,
               interval=0.1)
    assert not batch.list_job_for_all_namespaces(label_selector="kaiwo.silogen.ai/name=long").items


def test_without_the_operator_workloads_run_and_their_namespace_can_go(kubectl_bin: str) -> None:
    with start_sandbox(cluster=True, time_factor=0.05) as sb:
        core, custom, batch = _uninstalled_with_a_running_job(sb)
        # Its workload keeps running, and carries no finalizer that would wait for the operator.
        assert batch.read_namespaced_job("long", "team").status.active == 1
        assert not custom.get_namespaced_custom_object(*KAIWO, "team", "kaiwojobs", "long")["metadata"].get(
            "finalizers")
        _delete_team_and_wait_gone([kubectl_bin, "--kubeconfig", str(sb.kubeconfig_path)], core, batch)


def test_an_earlier_versions_finalizer_holds_its_namespace_until_the_escape_hatch(kubectl_bin: str) -> None:
    """A workload created by an earlier version carries `kaiwo.silogen.ai/finalizer`: with the operator
    gone, deleting its namespace waits on it, and patching the finalizer away (docs/install.md) lets
    the namespace and the workload's children go."""
    with start_sandbox(cluster=True, time_factor=0.05) as sb:
        core, custom, batch = _uninstalled_with_a_running_job(sb)
        # what the earlier version left on every workload
        custom.patch_namespaced_custom_object(*KAIWO, "team", "kaiwojobs", "long",
                                              {"metadata": {"finalizers": ["kaiwo.silogen.ai/finalizer"]}})
        kubectl = [kubectl_bin, "--kubeconfig", str(sb.kubeconfig_path)]

        def stuck_then_escape_hatch() -> None:
            def stuck() -> bool:
                namespace = core.read_namespace("team")
                job = custom.get_namespaced_custom_object(*KAIWO, "team", "kaiwojobs", "long")
                return namespace.status.phase == "Terminating" and bool(job["metadata"].get("deletionTimestamp"))

            eventually(stuck, timeout=30, interval=0.1)
            # The escape hatch of docs/install.md.
            subprocess.run([*kubectl, "patch", "kaiwojob", "long", "-n", "team", "--type=merge", "-p",
                            '{"metadata":{"finalizers":null}}'], check=True, capture_output=True)

        _delete_team_and_wait_gone(kubectl, core, batch, before_gone=stuck_then_escape_hatch)


def test_reapplying_a_newer_deploy_keeps_running_workloads(kubectl_bin: str, tmp_path: Path) -> None:
    """An upgrade is `kubectl apply -k` of the newer deploy/ (here: a new image): the RayService rolls, the
    CRDs are re-applied, and a running workload's objects are untouched."""
    with start_sandbox(cluster=True, time_factor=0.05) as sb:
        kubectl = [kubectl_bin, "--kubeconfig", str(sb.kubeconfig_path)]
        subprocess.run([*kubectl, "apply", "-k", str(DEPLOY), "--server-side"], check=True, capture_output=True)
        custom: Any = kubernetes.client.CustomObjectsApi(sb.api_client())
        batch = kubernetes.client.BatchV1Api(sb.api_client())
        with in_process_operator(HostSettings(kubeconfig=str(sb.kubeconfig_path), lease=False)):
            _long_running_job(custom, "default")
            before = batch.read_namespaced_job("long", "default")
            service = custom.get_namespaced_custom_object("ray.io", "v1", "kaiwo-system", "rayservices", "kaiwo-ray")
            newer = tmp_path / "v2"
            newer.mkdir()
            (newer / "kustomization.yaml").write_text(yaml.safe_dump({
                "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                "resources": [os.path.relpath(DEPLOY, newer)],
                "images": [{"name": "ghcr.io/silogen/kaiwo-ray", "newTag": "0.2.0"}]}))
            result = subprocess.run([*kubectl, "apply", "-k", str(newer), "--server-side"], capture_output=True,
                                    text=True)
            assert result.returncode == 0, result.stderr
            assert "rayservice.ray.io/kaiwo-ray serverside-applied" in result.stdout

            def rolled() -> bool:
                now = custom.get_namespaced_custom_object("ray.io", "v1", "kaiwo-system", "rayservices", "kaiwo-ray")
                head = now["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]
                return bool(now["metadata"]["generation"] > service["metadata"]["generation"]
                            and head["image"].endswith(":0.2.0"))

            eventually(rolled, timeout=30, interval=0.1)
            after = batch.read_namespaced_job("long", "default")
            assert (after.metadata.uid, after.metadata.resource_version) == (before.metadata.uid,
                                                                             before.metadata.resource_version)
            assert after.status.active == 1
            job = custom.get_namespaced_custom_object(*KAIWO, "default", "kaiwojobs", "long")
            assert job["status"]["status"] == "RUNNING"
