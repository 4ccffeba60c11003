"""Scenario tests for the simulated kube-scheduler, through the real `kubernetes` client."""

from __future__ import annotations

from typing import Any

import kubernetes

from kaiwo_sandbox.contracts import JsonObj

GPU = "amd.com/gpu"
GPU_TAINT = {"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoSchedule"}
FOREVER = {"sandbox.kaiwo-ray.dev/run-seconds": "forever"}


def pod(name: str, *, gpus: int = 0, cpu: str = "100m", scheduler: str | None = None,
        extra_spec: JsonObj | None = None, annotations: dict[str, str] | None = None) -> JsonObj:
    resources: JsonObj = {"requests": {"cpu": cpu}}
    if gpus:
        resources["limits"] = {GPU: str(gpus)}
    spec: JsonObj = {"restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "infinity"],
                                     "resources": resources}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    spec.update(extra_spec or {})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": dict(annotations or FOREVER)}, "spec": spec}


def scheduled_condition(core: Any, name: str) -> Any:
    status = core.read_namespaced_pod_status(name, "default").status
    return next((c for c in status.conditions or [] if c.type == "PodScheduled"), None)


def node_of(core: Any, name: str) -> str | None:
    node: str | None = core.read_namespaced_pod(name, "default").spec.node_name
    return node


def test_pod_that_fits_no_node_stays_pending_with_the_schedulers_message(
        sandbox_factory: Any, clients_factory: Any, make_node: Any, wait_for: Any) -> None:
    sb = sandbox_factory(nodes=[
        make_node("cpu-1", labels={"kaiwo/nodepool": "cpu"}),
        make_node("gpu-1", gpus=8, labels={"kaiwo/nodepool": "gpu"}),
        make_node("gpu-2", gpus=8, labels={"kaiwo/nodepool": "gpu"}),
        make_node("gpu-3", gpus=8, labels={"kaiwo/nodepool": "gpu"}, taints=[GPU_TAINT]),
    ], cluster=["scheduler"])
    c = clients_factory(sb)
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kaiwo/nodepool", "operator": "NotIn", "values": ["cpu"]}]}]}}}
    c.core.create_namespaced_pod("default", pod("big", gpus=16, extra_spec={"affinity": affinity}))

    expected = ("0/4 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                "1 node(s) had untolerated taint {kaiwo.silogen.ai/gpu: true}, 2 Insufficient amd.com/gpu. "
                "preemption: 0/4 nodes are available: 2 No preemption victims found for incoming pod, "
                "2 Preemption is not helpful for scheduling.")
    condition = wait_for(lambda: scheduled_condition(c.core, "big"), message="PodScheduled condition")
    assert (condition.status, condition.reason, condition.message) == ("False", "Unschedulable", expected)
    assert c.core.read_namespaced_pod("big", "default").status.phase == "Pending"
    events = wait_for(lambda: [e for e in c.events(name="big") if e.reason == "FailedScheduling"])
    assert events[0].type == "Warning"
    assert events[0].message == expected
    assert events[0].source.component == "default-scheduler"


def test_scheduled_pod_gets_condition_and_event(sandbox_factory: Any, clients_factory: Any, make_node: Any,
                                                wait_for: Any) -> None:
    sb = sandbox_factory(nodes=[make_node("only")], cluster=["scheduler"])
    c = clients_factory(sb)
    c.core.create_namespaced_pod("default", pod("p"))
    wait_for(lambda: node_of(c.core, "p") == "only")
    condition = wait_for(lambda: scheduled_condition(c.core, "p"))
    assert condition.status == "True"
    event = wait_for(lambda: [e for e in c.events(name="p") if e.reason == "Scheduled"])[0]
    assert event.message == "Successfully assigned default/p to only"
    assert event.source.component == "default-scheduler"


def test_node_selector_affinity_and_tolerations_steer_pods(sandbox_factory: Any, clients_factory: Any,
                                                           make_node: Any, wait_for: Any) -> None:
    sb = sandbox_factory(nodes=[
        make_node("a", labels={"zone": "a", "rank": "3"}),
        make_node("b", labels={"zone": "b", "rank": "7"}),
        make_node("t", labels={"zone": "t"}, taints=[GPU_TAINT]),
    ], cluster=["scheduler"])
    c = clients_factory(sb)
    c.core.create_namespaced_pod("default", pod("by-selector", extra_spec={"nodeSelector": {"zone": "b"}}))
    c.core.create_namespaced_pod("default", pod("by-gt", extra_spec={"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "rank", "operator": "Gt", "values": ["5"]}]}]}}}}))
    c.core.create_namespaced_pod("default", pod("by-doesnotexist", extra_spec={"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "rank", "operator": "DoesNotExist"}]}]}}},
        "tolerations": [{"key": "kaiwo.silogen.ai/gpu", "operator": "Exists", "effect": "NoSchedule"}]}))
    wait_for(lambda: node_of(c.core, "by-selector") == "b")
    wait_for(lambda: node_of(c.core, "by-gt") == "b")
    wait_for(lambda: node_of(c.core, "by-doesnotexist") == "t")


def test_cordoned_node_is_skipped_until_uncordoned(sandbox_factory: Any, clients_factory: Any, make_node: Any,
                                                   wait_for: Any) -> None:
    sb = sandbox_factory(nodes=[make_node("only", unschedulable=True)], cluster=["scheduler"])
    c = clients_factory(sb)
    c.core.create_namespaced_pod("default", pod("waiting"))
    condition = wait_for(lambda: scheduled_condition(c.core, "waiting"))
    assert condition.message == ("0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/1 nodes "
                                 "are available: 1 Preemption is not helpful for scheduling.")
    c.core.patch_node("only", {"spec": {"unschedulable": False}})
    wait_for(lambda: node_of(c.core, "waiting") == "only", message="scheduled after uncordon")


def test_not_ready_node_repels_pods_with_the_not_ready_taint(sandbox_factory: Any, clients_factory: Any,
                                                              make_node: Any, wait_for: Any) -> None:
    sb = sandbox_factory(nodes=[make_node("sick", ready=False)], cluster=["scheduler"])
    c = clients_factory(sb)
    c.core.create_namespaced_pod("default", pod("p"))
    condition = wait_for(lambda: scheduled_condition(c.core, "p"))
    assert "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }" in condition.message


def test_kaiwo_scheduler_packs_gpus_while_default_scheduler_spreads(sandbox_factory: Any, clients_factory: Any,
                                                                    make_node: Any, wait_for: Any) -> None:
    sb = sandbox_factory(nodes=[make_node("gpu-a", gpus=8), make_node("gpu-b", gpus=8)], cluster=["scheduler"])
    c = clients_factory(sb)
    # Occupy 4 GPUs of gpu-b (pinned by selector), leaving gpu-a empty.
    c.core.create_namespaced_pod("default", pod("seed", gpus=4, extra_spec={
        "nodeSelector": {"kubernetes.io/hostname": "gpu-b"}}))
    wait_for(lambda: node_of(c.core, "seed") == "gpu-b")
    c.core.create_namespaced_pod("default", pod("packed", gpus=2, scheduler="kaiwo-scheduler"))
    wait_for(lambda: node_of(c.core, "packed") == "gpu-b", message="kaiwo-scheduler bin-packs")
    c.core.create_namespaced_pod("default", pod("spread", gpus=2, cpu="4"))
    wait_for(lambda: node_of(c.core, "spread") == "gpu-a", message="default-scheduler spreads")
    event = wait_for(lambda: [e for e in c.events(name="packed") if e.reason == "Scheduled"])[0]
    assert event.source.component == "kaiwo-scheduler"


def test_unknown_scheduler_name_is_left_alone(sandbox_factory: Any, clients_factory: Any, make_node: Any,
                                              wait_for: Any) -> None:
    sb = sandbox_factory(nodes=[make_node("only")], cluster=["scheduler"])
    c = clients_factory(sb)
    c.core.create_namespaced_pod("default", pod("other", scheduler="volcano"))
    c.core.create_namespaced_pod("default", pod("mine"))
    wait_for(lambda: node_of(c.core, "mine") == "only")
    assert node_of(c.core, "other") is None
    assert scheduled_condition(c.core, "other") is None


def test_gated_pod_waits_until_gates_are_removed(sandbox_factory: Any, clients_factory: Any, make_node: Any,
                                                 wait_for: Any) -> None:
    sb = sandbox_factory(nodes=[make_node("only")], cluster=["scheduler"])
    c = clients_factory(sb)
    c.core.create_namespaced_pod("default", pod("gated", extra_spec={
        "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}))
    condition = wait_for(lambda: scheduled_condition(c.core, "gated"))
    assert (condition.status, condition.reason) == ("False", "SchedulingGated")
    assert node_of(c.core, "gated") is None
    c.core.patch_namespaced_pod("gated", "default", [{"op": "remove", "path": "/spec/schedulingGates"}])
    wait_for(lambda: node_of(c.core, "gated") == "only", message="scheduled once ungated")


def test_pending_pod_is_placed_when_a_running_pod_frees_its_gpus(sandbox_factory: Any, clients_factory: Any,
                                                                 make_node: Any, wait_for: Any) -> None:
    sb = sandbox_factory(nodes=[make_node("gpu", gpus=8)], cluster=["scheduler", "kubelet"])
    c = clients_factory(sb)
    c.core.create_namespaced_pod("default", pod("first", gpus=8, annotations={
        "sandbox.kaiwo-ray.dev/run-seconds": "100"}))  # one real second: time to see "second" wait
    wait_for(lambda: node_of(c.core, "first") == "gpu")
    c.core.create_namespaced_pod("default", pod("second", gpus=8))
    condition = wait_for(lambda: scheduled_condition(c.core, "second"))
    assert "1 Insufficient amd.com/gpu" in condition.message
    wait_for(lambda: c.core.read_namespaced_pod("first", "default").status.phase == "Succeeded")
    wait_for(lambda: node_of(c.core, "second") == "gpu", message="second pod placed after first finished")


def test_freed_room_goes_to_the_higher_priority_pod_first(sandbox_factory: Any, clients_factory: Any,
                                                          make_node: Any, wait_for: Any) -> None:
    sb = sandbox_factory(nodes=[make_node("gpu", gpus=8)], cluster=["scheduler"])
    c = clients_factory(sb)
    c.core.create_namespaced_pod("default", pod("blocker", gpus=8))
    wait_for(lambda: node_of(c.core, "blocker") == "gpu")
    kubernetes.client.SchedulingV1Api(c.api).create_priority_class({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "urgent"},
        "value": 1000})
    c.core.create_namespaced_pod("default", pod("low", gpus=8))
    c.core.create_namespaced_pod("default", pod("high", gpus=8, extra_spec={"priorityClassName": "urgent"}))
    wait_for(lambda: scheduled_condition(c.core, "low") and scheduled_condition(c.core, "high"))
    c.core.delete_namespaced_pod("blocker", "default")
    wait_for(lambda: node_of(c.core, "high") == "gpu", message="the higher-priority pod is placed")
    assert node_of(c.core, "low") is None


def test_node_usage_follows_pods_through_status_changes_and_deletion(sandbox_factory: Any, clients_factory: Any,
                                                                     make_node: Any, wait_for: Any) -> None:
    """Usage is kept per node from pod events: a running pod's status updates do not charge it
    twice, a second pod fills the rest, a third waits, and deleting the first makes room."""
    sb = sandbox_factory(nodes=[make_node("gpu", gpus=8)], cluster=["scheduler", "kubelet"])
    c = clients_factory(sb)
    c.core.create_namespaced_pod("default", pod("a", gpus=4))
    wait_for(lambda: c.core.read_namespaced_pod("a", "default").status.phase == "Running")
    for n in range(3):  # more status writes on the bound pod
        c.core.patch_namespaced_pod_status("a", "default", {"metadata": {"annotations": {"touch": str(n)}}})
    c.core.create_namespaced_pod("default", pod("b", gpus=4))
    wait_for(lambda: node_of(c.core, "b") == "gpu", message="the rest of the node goes to b")
    c.core.create_namespaced_pod("default", pod("c", gpus=4))
    condition = wait_for(lambda: scheduled_condition(c.core, "c"))
    assert "1 Insufficient amd.com/gpu" in condition.message
    c.core.delete_namespaced_pod("a", "default", grace_period_seconds=0)
    wait_for(lambda: node_of(c.core, "c") == "gpu", message="c placed once a is gone")


def test_pods_alike_share_a_verdict_only_until_a_placement_changes_the_nodes(
        sandbox_factory: Any, clients_factory: Any, make_node: Any, wait_for: Any) -> None:
    """One pass over four waiting pods in name order (they were all refused for want of a node;
    the node's arrival tries them together): `a`, `c` and `d` are shaped alike and do not fit;
    `b` takes the node's CPU between them, so `c`'s and `d`'s messages name the CPU too, as a walk
    over the nodes for each would have found."""
    sb = sandbox_factory(nodes=[], cluster=["scheduler"])
    c = clients_factory(sb)
    for name, gpus, cpu in (("a", 16, "1"), ("b", 0, "4"), ("c", 16, "1"), ("d", 16, "1")):
        c.core.create_namespaced_pod("default", pod(name, gpus=gpus, cpu=cpu))
    for name in "abcd":
        wait_for(lambda name=name: scheduled_condition(c.core, name), message=f"{name} refused without nodes")
    c.core.create_node(make_node("gpu", gpus=8, cpu="4"))
    wait_for(lambda: node_of(c.core, "b") == "gpu", message="b placed once the node is there")
    cpu_too = "0/1 nodes are available: 1 Insufficient amd.com/gpu, 1 Insufficient cpu. "

    def messages() -> dict[str, str]:
        return {name: scheduled_condition(c.core, name).message for name in "acd"}
    wait_for(lambda: messages()["d"].startswith(cpu_too), message="d's verdict after b's placement")
    assert messages()["a"].startswith("0/1 nodes are available: 1 Insufficient amd.com/gpu. ")
    assert messages()["c"] == messages()["d"]
