"""Uninstall as docs/install.md describes it: with the operator gone, a workload keeps running; deleting
its namespace waits on the workload finalizer (Terminating), and the documented escape hatch (patch the
finalizer away) lets the namespace and the workload's children go."""

from __future__ import annotations

import asyncio
import subprocess
import threading
from typing import Any

import kubernetes

from kaiwo_ray.controllers.manager import HostSettings, Operator
from kaiwo_ray.sandbox.testing import eventually, start_sandbox

KAIWO = ("kaiwo.silogen.ai", "v1alpha1")


def test_without_the_operator_workloads_run_and_the_escape_hatch_frees_their_namespace(kubectl_bin: str) -> None:
    with start_sandbox(cluster=True, time_factor=0.05) as sb:
        core = kubernetes.client.CoreV1Api(sb.api_client())
        custom: Any = kubernetes.client.CustomObjectsApi(sb.api_client())
        batch = kubernetes.client.BatchV1Api(sb.api_client())
        core.create_namespace({"metadata": {"name": "team"}})
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        operator = Operator(None, HostSettings(kubeconfig=str(sb.kubeconfig_path), lease=False))
        asyncio.run_coroutine_threadsafe(operator.start(), loop).result(60)
        try:
            custom.create_namespaced_custom_object(*KAIWO, "team", "kaiwojobs", {
                "apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob", "metadata": {"name": "long"},
                "spec": {"entrypoint": "sleep 36000", "image": "busybox"}})
            eventually(lambda: (custom.get_namespaced_custom_object(*KAIWO, "team", "kaiwojobs", "long")
                                .get("status") or {}).get("status") == "RUNNING", timeout=60, interval=0.1)
        finally:
            asyncio.run_coroutine_threadsafe(operator.stop(), loop).result(60)  # the operator is uninstalled
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
        # Its workload keeps running.
        assert batch.read_namespaced_job("long", "team").status.active == 1
        kubectl = [kubectl_bin, "--kubeconfig", str(sb.kubeconfig_path)]
        subprocess.run([*kubectl, "delete", "namespace", "team", "--wait=false"], check=True, capture_output=True)

        def stuck() -> bool:
            namespace = core.read_namespace("team")
            job = custom.get_namespaced_custom_object(*KAIWO, "team", "kaiwojobs", "long")
            return namespace.status.phase == "Terminating" and bool(job["metadata"].get("deletionTimestamp"))

        eventually(stuck, timeout=30, interval=0.1)
        assert custom.get_namespaced_custom_object(*KAIWO, "team", "kaiwojobs", "long")["metadata"]["finalizers"] == [
            "kaiwo.silogen.ai/finalizer"]
        # The escape hatch of docs/install.md.
        subprocess.run([*kubectl, "patch", "kaiwojob", "long", "-n", "team", "--type=merge", "-p",
                        '{"metadata":{"finalizers":null}}'], check=True, capture_output=True)

        def gone() -> bool:
            return "team" not in {n.metadata.name for n in core.list_namespace().items}

        eventually(gone, timeout=30, interval=0.1)
        assert not batch.list_job_for_all_namespaces(label_selector="kaiwo.silogen.ai/name=long").items
