"""Pod Security enforce mode and the controllers that create pods: a Job is accepted (the plugin only
judges pods), its controller's pod is refused and the Job records FailedCreate with the plugin's message."""

from __future__ import annotations

from typing import Any

from kaiwo_sandbox.contracts import JsonObj

WORKLOADS = ["volume-binder", "scheduler", "kubelet", "job-controller"]
RESTRICTED_POD = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def job(name: str, *, hardened: bool) -> JsonObj:
    container: JsonObj = {"name": "main", "image": "busybox", "command": ["sleep", "1"]}
    pod: JsonObj = {"restartPolicy": "Never", "containers": [container]}
    if hardened:
        container["securityContext"] = dict(RESTRICTED_CONTAINER)
        pod["securityContext"] = dict(RESTRICTED_POD)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {"spec": pod}}}


def test_a_jobs_pods_are_refused_in_a_restricted_namespace_with_a_failedcreate_event(
        sandbox_factory: Any, clients_factory: Any, wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    c.core.create_namespace({"metadata": {"name": "locked",
                                          "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    c.batch.create_namespaced_job("locked", job("bare", hardened=False))
    c.batch.create_namespaced_job("locked", job("hardened", hardened=True))

    def failed_create() -> Any:
        return next((e for e in c.events("locked", "bare") if e.reason == "FailedCreate"), None)

    event = wait_for(failed_create)
    assert event.type == "Warning"
    assert event.message.startswith('Error creating: pods "bare-')
    assert '" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false ' \
           '(container "main" must set securityContext.allowPrivilegeEscalation=false)' in event.message
    # The hardened Job runs to completion next to it.
    wait_for(lambda: (c.batch.read_namespaced_job_status("hardened", "locked").status.succeeded or 0) == 1)
    pods = {p.metadata.labels["job-name"] for p in c.core.list_namespaced_pod("locked").items}
    assert pods == {"hardened"}
