"""Pod Security enforce mode and the controllers that create pods: a Job or Deployment is accepted (the
plugin only judges pods), its controller's pods are refused, FailedCreate carries the plugin's message,
and the refused creates are retried after a pause."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kaiwo_sandbox.cluster.workloads.jobs import api_backoff
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


@pytest.mark.timeout(60)  # a hot loop saturates the sandbox: every call then starves
def test_a_deployments_refused_pods_are_retried_after_a_pause_not_in_a_hot_loop(
        sandbox_factory: Any, clients_factory: Any, wait_for: Any) -> None:
    # The refusal names the generated pod, so each attempt changes the ReplicaSet's ReplicaFailure
    # condition; that status write must not trigger the next attempt at once (it did: ~500 writes/s).
    sb = sandbox_factory(cluster=["scheduler", "kubelet", "deployment-controller"], time_factor=0.01)
    c = clients_factory(sb)
    c.core.create_namespace({"metadata": {"name": "locked",
                                          "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    template = {"metadata": {"labels": {"app": "web"}}, "spec": job("web", hardened=False)["spec"]["template"]["spec"]}
    template["spec"]["restartPolicy"] = "Always"
    c.apps.create_namespaced_deployment("locked", {"metadata": {"name": "web"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": template}})

    def replica_failure() -> Any:
        (rs,) = c.apps.list_namespaced_replica_set("locked").items or [None]
        conditions = (rs.status.conditions or []) if rs is not None else []
        return next((cond for cond in conditions if cond.type == "ReplicaFailure"), None)

    failure = wait_for(replica_failure)
    assert failure.reason == "FailedCreate"
    assert 'is forbidden: violates PodSecurity "restricted:latest"' in failure.message
    writes: list[str] = []
    unsubscribe = sb.call(lambda: sb.store.subscribe(lambda event: writes.append(event.gvr.resource)))
    time.sleep(1.0)  # a measuring window: retries come every 10 simulated seconds (0.1 s here)
    sb.call(unsubscribe)
    assert writes.count("replicasets") <= 30, f"{writes.count('replicasets')} ReplicaSet writes in 1 s"
    assert c.core.list_namespaced_pod("locked").items == []


def test_a_refused_job_pod_is_retried_with_the_api_back_off_and_created_once_allowed(
        sandbox_factory: Any, clients_factory: Any) -> None:
    """The real Job controller's work queue retries a sync whose pod create was refused after 1 s,
    2 s, 4 s ... (at most 1 min), a FailedCreate each time; once the namespace allows the pod, the
    next retry creates it. On a manual clock: the retry times are exact."""
    sb = sandbox_factory(cluster=WORKLOADS, manual_clock=True, time_factor=1.0)
    c = clients_factory(sb)
    c.core.create_namespace({"metadata": {"name": "locked",
                                          "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    c.batch.create_namespaced_job("locked", job("bare", hardened=False))

    def failed_creates() -> int:
        return sum(1 for e in c.events("locked", "bare") if e.reason == "FailedCreate")

    sb.advance(0)
    assert failed_creates() == 1
    for wait, expected in ((0.9, 1), (0.1, 2), (1.9, 2), (0.1, 3), (3.9, 3), (0.1, 4)):
        sb.advance(wait)
        assert failed_creates() == expected, (wait, expected)
    c.core.patch_namespace("locked", {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}})
    sb.advance(7.9)  # the namespace is not watched: nothing happens before the next retry (8 s)
    assert c.core.list_namespaced_pod("locked").items == []
    sb.advance(0.1)
    assert [p.metadata.labels["job-name"] for p in c.core.list_namespaced_pod("locked").items] == ["bare"]
    assert any(e.reason == "SuccessfulCreate" for e in c.events("locked", "bare"))
    assert failed_creates() == 4


def test_the_job_api_back_off_doubles_up_to_a_minute() -> None:
    assert [api_backoff(n) for n in (1, 2, 3, 6, 7, 8, 10_000)] == [1, 2, 4, 32, 60, 60, 60]
