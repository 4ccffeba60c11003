"""`explain` on what the sandbox's kubelet reports for a workload whose pods name a Secret that does not
exist: the container's CreateContainerConfigError and the pod's FailedMount events, read through the
`kubernetes` client, name the missing Secret and the keys the pod needs from it."""

from __future__ import annotations

from typing import Any

import kubernetes

from kaiwo_ray.api.labels import LABEL_NAME
from kaiwo_ray.views.explain import ReasonCode, collect_world, explain
from kaiwo_sandbox.pytest_plugin import SandboxFactory
from kaiwo_sandbox.testing import eventually

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a", "labels": {"kubernetes.io/hostname": "node-a"}},
        "status": {"capacity": {"cpu": "8", "memory": "16Gi", "pods": "20"}}}
JOB = {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob",
       "metadata": {"name": "llama-finetune", "namespace": "default", "uid": "kj-1"}, "status": {"status": "STARTING"}}


def pod(name: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "workload", "image": "rocm/pytorch", "command": ["sleep", "infinity"],
                 **spec.pop("container", {})}
    return {"metadata": {"name": name, "labels": {LABEL_NAME: "llama-finetune"}},
            "spec": {"containers": [container], **spec}}


def test_explain_names_the_missing_secret_and_its_keys(sandbox_factory: SandboxFactory) -> None:
    sb = sandbox_factory(nodes=[NODE], cluster=["scheduler", "kubelet"], time_factor=0.01)
    core: Any = kubernetes.client.CoreV1Api(sb.api_client())
    core.create_namespaced_pod("default", pod("llama-finetune-env", container={"env": [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}]}))
    core.create_namespaced_pod("default", pod("llama-finetune-data", volumes=[
        {"name": "s3", "secret": {"secretName": "s3-credentials", "items": [{"key": "access-key-id", "path": "id"}]}}]))

    def explained() -> Any:
        api = core.api_client
        pods = [api.sanitize_for_serialization(p) for p in core.list_namespaced_pod("default").items]
        events = [api.sanitize_for_serialization(e) for e in core.list_namespaced_event("default").items]
        result = explain(collect_world(JOB, pods=pods, events=events))
        return result if len(result.reasons) == 2 else None

    result = eventually(explained, timeout=20, message="both pods held for their Secrets")
    assert [r.code for r in result.reasons] == [ReasonCode.CONTAINER_CONFIG] * 2
    messages = sorted(r.message for r in result.reasons)
    assert messages[0] == ("container workload of pod llama-finetune-env cannot start (CreateContainerConfigError: "
                           'secret "hf-token" not found): Secret hf-token does not exist (env HF_TOKEN needs its key '
                           "token)")
    assert messages[1] == ("pod llama-finetune-data cannot start: volume s3 needs Secret s3-credentials, which does "
                           "not exist (keys access-key-id)")
