"""Kueue scenarios against the sandbox with the official client: quota gating, pending messages,
priority preemption, queueing strategies, cohort borrowing, flavor node labels, queue status,
gated Deployment pods and Workload garbage collection."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest

from kaiwo_sandbox.testing import RunningSandbox

Clients = Any  # tests/sandbox/cluster/conftest.py: Clients (typed client APIs bound to one sandbox)
WaitFor = Callable[..., Any]

GPU = "amd.com/gpu"
KUEUE = ("kueue.x-k8s.io", "v1beta2")
CONTROLLERS = ("volume-binder", "scheduler", "kubelet", "job-controller", "deployment-controller", "kueue")


class Kueue:
    """Kueue objects through the official client's CustomObjectsApi."""

    def __init__(self, clients: Clients) -> None:
        self.clients = clients
        self.custom = kubernetes.client.CustomObjectsApi(clients.api)

    def flavor(self, name: str, labels: dict[str, str]) -> None:
        self.custom.create_cluster_custom_object(*KUEUE, "resourceflavors", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": {"nodeLabels": labels}})

    def cluster_queue(self, name: str, gpus: int, *, flavor: str = "mi300x", **spec: Any) -> None:
        body = {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["cpu", GPU],
            "flavors": [{"name": flavor, "resources": [{"name": "cpu", "nominalQuota": 64},
                                                       {"name": GPU, "nominalQuota": gpus}]}]}]}
        body.update(spec)
        self.custom.create_cluster_custom_object(*KUEUE, "clusterqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": body})

    def local_queue(self, name: str, cluster_queue: str, namespace: str = "default") -> None:
        self.custom.create_namespaced_custom_object(*KUEUE, namespace, "localqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cluster_queue}})

    def priority_class(self, name: str, value: int) -> None:
        self.custom.create_cluster_custom_object(*KUEUE, "workloadpriorityclasses", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": name},
            "value": value})

    def workloads(self, namespace: str = "default") -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.custom.list_namespaced_custom_object(*KUEUE, namespace, "workloads")["items"]
        return items

    def workload_of(self, job_name: str, namespace: str = "default") -> dict[str, Any] | None:
        for wl in self.workloads(namespace):
            owners = wl["metadata"].get("ownerReferences") or []
            if any(o["name"] == job_name for o in owners):
                return wl
        return None

    def status(self, plural: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        if namespace is None:
            obj = self.custom.get_cluster_custom_object(*KUEUE, plural, name)
        else:
            obj = self.custom.get_namespaced_custom_object(*KUEUE, namespace, plural, name)
        status: dict[str, Any] = obj.get("status") or {}
        return status


def condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == ctype:
            return dict(cond)
    return None


def is_true(obj: dict[str, Any] | None, ctype: str) -> bool:
    cond = condition(obj, ctype)
    return cond is not None and cond["status"] == "True"


def gpu_job(name: str, gpus: int, *, queue: str = "team", seconds: float = 20, priority: str | None = None,
            node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": queue}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [{
        "name": "train", "image": "busybox", "command": ["sleep", str(seconds)],
        "resources": {"requests": {"cpu": "1", GPU: str(gpus)}, "limits": {GPU: str(gpus)}}}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels},
            "spec": {"backoffLimit": 0, "template": {"spec": spec}}}


@pytest.fixture
def world(sandbox_factory: Callable[..., RunningSandbox], clients_factory: Callable[[RunningSandbox], Clients],
          make_node: Callable[..., dict[str, Any]]) -> Iterator[tuple[Clients, Kueue]]:
    nodes = [make_node(f"mi300x-{i}", cpu="64", gpus=8, labels={"pool": "mi300x"}) for i in range(4)]
    sandbox = sandbox_factory(nodes=nodes, cluster=CONTROLLERS, time_factor=0.01)
    clients = clients_factory(sandbox)
    kueue = Kueue(clients)
    kueue.flavor("mi300x", {"pool": "mi300x"})
    yield clients, kueue


def job_suspended(clients: Clients, name: str) -> bool:
    return bool(clients.batch.read_namespaced_job(name, "default").spec.suspend)


def job_complete(clients: Clients, name: str) -> bool:
    job = clients.batch.read_namespaced_job(name, "default")
    return any(c.type == "Complete" and c.status == "True" for c in job.status.conditions or [])


def test_third_8_gpu_job_waits_for_quota_then_runs(world: tuple[Clients, Kueue], wait_for: WaitFor) -> None:
    clients, kueue = world
    kueue.cluster_queue("cluster", 16)
    kueue.local_queue("team", "cluster")
    for name, seconds in (("a", 150), ("b", 3000), ("c", 30)):
        clients.batch.create_namespaced_job("default", gpu_job(name, 8, seconds=seconds))

    wait_for(lambda: all(kueue.workload_of(n) for n in "abc"), message="one Workload per Job")
    wait_for(lambda: not job_suspended(clients, "a") and not job_suspended(clients, "b"), message="a, b admitted")
    pending = wait_for(lambda: condition(kueue.workload_of("c"), "QuotaReserved"), message="c evaluated")
    assert job_suspended(clients, "c")
    assert (pending["status"], pending["reason"]) == ("False", "Pending")
    assert pending["message"] == ("couldn't assign flavors to pod set main: insufficient unused quota for "
                                  "amd.com/gpu in flavor mi300x, 8 more needed")
    # The ClusterQueue's status trails the admissions: wait for the settled counts, not the first status
    # that shows one pending Workload (one written before b was admitted also does).
    cq = wait_for(lambda: (s := kueue.status("clusterqueues", "cluster")).get("pendingWorkloads") == 1
                  and s.get("admittedWorkloads") == 2 and s, message="ClusterQueue: 2 admitted, 1 pending")
    gpu_usage = {r["name"]: r["total"] for r in cq["flavorsUsage"][0]["resources"]}
    assert gpu_usage[GPU] == "16"
    assert condition({"status": cq}, "Active")["reason"] == "Ready"  # type: ignore[index]

    # a finishes (30 simulated seconds); its quota goes to c.
    wait_for(lambda: job_complete(clients, "a"), timeout=10, message="a completes")
    wait_for(lambda: not job_suspended(clients, "c"), timeout=10, message="c admitted after a finished")
    assert is_true(kueue.workload_of("a"), "Finished")
    admitted = kueue.workload_of("c")
    assert admitted is not None
    assert admitted["status"]["admission"]["podSetAssignments"][0]["flavors"][GPU] == "mi300x"
    events = [(e.reason, e.message, e.source.component) for e in clients.events(name=admitted["metadata"]["name"])]
    assert ("Admitted", "Admitted by ClusterQueue cluster, wait time since reservation was 0s",
            "kueue-admission") in events
    assert any(r == "QuotaReserved" and m.startswith("Quota reserved in ClusterQueue cluster, wait time since "
                                                     "queued was") for r, m, _ in events)
    job_events = [(e.reason, e.message, e.source.component) for e in clients.events(name="c")]
    assert ("Started", "Admitted by clusterQueue cluster", "batch/job-kueue-controller") in job_events
    assert any(r == "CreatedWorkload" for r, _, _ in job_events)


def test_admission_injects_the_flavor_node_labels(world: tuple[Clients, Kueue], wait_for: WaitFor) -> None:
    clients, kueue = world
    kueue.cluster_queue("cluster", 16)
    kueue.local_queue("team", "cluster")
    clients.batch.create_namespaced_job("default", gpu_job("labelled", 1, seconds=1000))
    wait_for(lambda: not job_suspended(clients, "labelled"), message="admitted")
    job = clients.batch.read_namespaced_job("labelled", "default")
    assert job.spec.template.spec.node_selector == {"pool": "mi300x"}
    pod = wait_for(lambda: clients.core.list_namespaced_pod("default", label_selector="job-name=labelled").items)
    assert pod[0].spec.node_selector == {"pool": "mi300x"}
    wl = kueue.workload_of("labelled")
    assert wl is not None
    assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == job.metadata.uid
    assert wl["metadata"]["name"].startswith("job-labelled-")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("main", 1)]


def test_higher_priority_workload_preempts_a_lower_one(world: tuple[Clients, Kueue], wait_for: WaitFor) -> None:
    clients, kueue = world
    kueue.cluster_queue("cluster", 8, preemption={"withinClusterQueue": "LowerPriority"})
    kueue.local_queue("team", "cluster")
    kueue.priority_class("low", 10)
    kueue.priority_class("high", 1000)
    clients.batch.create_namespaced_job("default", gpu_job("low", 8, seconds=5000, priority="low"))
    wait_for(lambda: not job_suspended(clients, "low"), message="low admitted")
    clients.batch.create_namespaced_job("default", gpu_job("high", 8, seconds=5000, priority="high"))

    wait_for(lambda: not job_suspended(clients, "high"), timeout=10, message="high admitted by preemption")
    assert job_suspended(clients, "low")
    victim = kueue.workload_of("low")
    preemptor = kueue.workload_of("high")
    assert victim is not None and preemptor is not None
    assert preemptor["spec"]["priority"] == 1000
    assert preemptor["spec"]["priorityClassRef"] == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                     "name": "high"}
    evicted = condition(victim, "Evicted")
    assert evicted is not None and evicted["reason"] == "Preempted"
    assert evicted["message"].startswith(f"Preempted to accommodate a workload (UID: {preemptor['metadata']['uid']}")
    assert "due to prioritization in the ClusterQueue" in evicted["message"]
    assert condition(victim, "Preempted")["reason"] == "InClusterQueue"  # type: ignore[index]
    requeued = wait_for(lambda: (c := condition(kueue.workload_of("low"), "QuotaReserved")) and
                        c["status"] == "False" and c, message="victim back in the queue")
    assert requeued["reason"] == "Pending"
    # Kueue records the eviction message on the victim (preemptor and workload controller) and
    # the job reconciler repeats it when it stops the job.
    victim_events = {(e.reason, e.message) for e in clients.events(name=victim["metadata"]["name"])}
    assert {("Preempted", evicted["message"]), ("EvictedDueToPreempted", evicted["message"])} <= victim_events
    assert ("Stopped", evicted["message"]) in {(e.reason, e.message) for e in clients.events(name="low")}


def test_strict_fifo_blocks_behind_the_head(world: tuple[Clients, Kueue], wait_for: WaitFor) -> None:
    clients, kueue = world
    kueue.cluster_queue("strict", 8, queueingStrategy="StrictFIFO")
    kueue.local_queue("team", "strict")
    clients.batch.create_namespaced_job("default", gpu_job("running", 6, seconds=5000))
    wait_for(lambda: not job_suspended(clients, "running"))
    clients.batch.create_namespaced_job("default", gpu_job("big", 4, seconds=10))
    wait_for(lambda: condition(kueue.workload_of("big"), "QuotaReserved"), message="head evaluated")
    clients.batch.create_namespaced_job("default", gpu_job("small", 1, seconds=10))
    wait_for(lambda: kueue.workload_of("small"))
    wait_for(lambda: kueue.status("clusterqueues", "strict").get("pendingWorkloads") == 2)
    assert job_suspended(clients, "small"), "StrictFIFO must not let a later workload pass the head"


def test_best_effort_fifo_lets_smaller_later_workloads_in(world: tuple[Clients, Kueue], wait_for: WaitFor) -> None:
    clients, kueue = world
    kueue.cluster_queue("besteffort", 8, queueingStrategy="BestEffortFIFO")
    kueue.local_queue("team", "besteffort")
    clients.batch.create_namespaced_job("default", gpu_job("running", 6, seconds=5000))
    wait_for(lambda: not job_suspended(clients, "running"))
    clients.batch.create_namespaced_job("default", gpu_job("big", 4, seconds=10))
    wait_for(lambda: condition(kueue.workload_of("big"), "QuotaReserved"), message="head evaluated")
    clients.batch.create_namespaced_job("default", gpu_job("small", 1, seconds=5000))
    wait_for(lambda: not job_suspended(clients, "small"), message="small passes the blocked head")
    assert job_suspended(clients, "big")


def test_cohort_borrowing_uses_a_peers_unused_quota(world: tuple[Clients, Kueue], wait_for: WaitFor) -> None:
    clients, kueue = world
    kueue.cluster_queue("research", 8, cohortName="lab")
    kueue.cluster_queue("prod", 8, cohortName="lab")
    kueue.local_queue("research", "research")
    clients.batch.create_namespaced_job("default", gpu_job("wide", 4, seconds=5000, queue="research"))
    clients.batch.create_namespaced_job("default", gpu_job("wider", 8, seconds=5000, queue="research"))
    wait_for(lambda: not job_suspended(clients, "wide") and not job_suspended(clients, "wider"),
             message="12 GPUs admitted on an 8-GPU queue by borrowing")
    status = wait_for(lambda: (s := kueue.status("clusterqueues", "research")).get("admittedWorkloads") == 2 and s)
    gpu = next(r for r in status["flavorsUsage"][0]["resources"] if r["name"] == GPU)
    assert (gpu["total"], gpu["borrowed"]) == ("12", "4")


def test_unknown_local_queue_stays_pending_with_the_reason(world: tuple[Clients, Kueue], wait_for: WaitFor) -> None:
    clients, kueue = world
    clients.batch.create_namespaced_job("default", gpu_job("lost", 1, queue="nowhere"))
    reserved = wait_for(lambda: condition(kueue.workload_of("lost"), "QuotaReserved"))
    assert (reserved["status"], reserved["reason"], reserved["message"]) == (
        "False", "Inadmissible", "LocalQueue nowhere doesn't exist")
    assert job_suspended(clients, "lost")
    # Creating the queue later lets it run, as in Kueue.
    kueue.cluster_queue("cluster", 8)
    kueue.local_queue("nowhere", "cluster")
    wait_for(lambda: not job_suspended(clients, "lost"), message="admitted once the LocalQueue exists")


def test_missing_flavor_makes_the_cluster_queue_inactive(world: tuple[Clients, Kueue], wait_for: WaitFor) -> None:
    clients, kueue = world
    kueue.cluster_queue("broken", 8, flavor="typo")
    kueue.local_queue("team", "broken")
    clients.batch.create_namespaced_job("default", gpu_job("stuck", 1))
    reserved = wait_for(lambda: condition(kueue.workload_of("stuck"), "QuotaReserved"))
    assert reserved["message"] == "ClusterQueue broken is inactive"
    active = wait_for(lambda: condition({"status": kueue.status("clusterqueues", "broken")}, "Active"))
    assert (active["status"], active["reason"]) == ("False", "FlavorNotFound")
    assert active["message"] == "Can't admit new workloads: references missing ResourceFlavor(s): typo."


def test_deployment_pods_are_gated_then_admitted_one_workload_each(world: tuple[Clients, Kueue], wait_for: WaitFor) -> None:
    clients, kueue = world
    kueue.cluster_queue("cluster", 2)
    kueue.local_queue("team", "cluster")
    labels = {"app": "serve", "kueue.x-k8s.io/queue-name": "team"}
    clients.apps.create_namespaced_deployment("default", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "serve"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "serve"}}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "s", "image": "nginx", "resources": {
                "requests": {"cpu": "1", GPU: "1"}, "limits": {GPU: "1"}}}]}}}})
    pods = wait_for(lambda: len(p := clients.core.list_namespaced_pod("default", label_selector="app=serve").items) == 3
                    and p)
    assert all(p.metadata.labels.get("kueue.x-k8s.io/managed") == "true" for p in pods)

    def gates() -> list[bool]:
        items = clients.core.list_namespaced_pod("default", label_selector="app=serve").items
        return sorted(bool(p.spec.scheduling_gates) for p in items)

    wait_for(lambda: gates() == [False, False, True], message="two pods admitted, one still gated")
    workloads = wait_for(lambda: len(w := [x for x in kueue.workloads() if x["metadata"]["name"].startswith("pod-")])
                         == 3 and w)
    assert sorted(is_true(w, "Admitted") for w in workloads) == [False, True, True]
    running = wait_for(lambda: [p for p in clients.core.list_namespaced_pod("default", label_selector="app=serve").items
                                if p.status.phase == "Running"], message="admitted pods run")
    assert running[0].spec.node_selector == {"pool": "mi300x"}


def test_deleting_a_job_removes_its_workload(world: tuple[Clients, Kueue], wait_for: WaitFor) -> None:
    clients, kueue = world
    kueue.cluster_queue("cluster", 8)
    kueue.local_queue("team", "cluster")
    clients.batch.create_namespaced_job("default", gpu_job("doomed", 8, seconds=5000))
    wait_for(lambda: is_true(kueue.workload_of("doomed"), "Admitted"))
    clients.batch.delete_namespaced_job("doomed", "default", propagation_policy="Background")
    wait_for(lambda: kueue.workload_of("doomed") is None, message="Workload garbage-collected with its Job")
    wait_for(lambda: kueue.status("clusterqueues", "cluster").get("admittedWorkloads") == 0,
             message="quota released")


def test_deactivating_an_admitted_workload_evicts_it(world: tuple[Clients, Kueue], wait_for: WaitFor) -> None:
    clients, kueue = world
    kueue.cluster_queue("cluster", 8)
    kueue.local_queue("team", "cluster")
    clients.batch.create_namespaced_job("default", gpu_job("paused", 8, seconds=5000))
    wait_for(lambda: not job_suspended(clients, "paused"))
    name = kueue.workload_of("paused")["metadata"]["name"]  # type: ignore[index]
    kueue.custom.patch_namespaced_custom_object(*KUEUE, "default", "workloads", name, {"spec": {"active": False}})
    wait_for(lambda: job_suspended(clients, "paused"), message="job stopped")
    wl = wait_for(lambda: (w := kueue.workload_of("paused")) and not (w.get("status") or {}).get("admission") and w,
                  message="admission cleared")
    assert condition(wl, "Evicted")["reason"] == "Deactivated"  # type: ignore[index]
    assert condition(wl, "Requeued")["status"] == "False"  # type: ignore[index]
    clients.batch.create_namespaced_job("default", gpu_job("next", 8, seconds=5000))
    wait_for(lambda: not job_suspended(clients, "next"), message="the freed quota is used")
    assert job_suspended(clients, "paused"), "a deactivated Workload is not admitted again"


def test_kueue_crds_apply_their_upstream_defaults(sandbox_factory: Callable[..., RunningSandbox],
                                                  clients_factory: Callable[[RunningSandbox], Clients]) -> None:
    """Kueue's CRDs (v0.16-v0.19.2, config/components/crd/bases) declare defaults; what the sandbox
    stores carries them, as a real API server's structural defaulting does, and a value given is kept."""
    kueue = Kueue(clients_factory(sandbox_factory(cluster=())))  # the API server alone: what the schemas do
    custom = kueue.custom
    custom.create_cluster_custom_object(*KUEUE, "clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "bare"},
        "spec": {"resourceGroups": [], "fairSharing": {}}})
    spec = custom.get_cluster_custom_object(*KUEUE, "clusterqueues", "bare")["spec"]
    assert spec["queueingStrategy"] == "BestEffortFIFO"
    assert spec["stopPolicy"] == "None"
    assert spec["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    assert spec["preemption"] == {"borrowWithinCohort": {"policy": "Never"}, "reclaimWithinCohort": "Never",
                                  "withinClusterQueue": "Never"}
    assert spec["fairSharing"] == {"weight": 1}
    assert "namespaceSelector" not in spec  # no default: null selects no namespace
    kueue.cluster_queue("given", 8, queueingStrategy="StrictFIFO", preemption={"withinClusterQueue": "LowerPriority"})
    given = custom.get_cluster_custom_object(*KUEUE, "clusterqueues", "given")["spec"]
    assert given["queueingStrategy"] == "StrictFIFO"
    assert given["preemption"]["withinClusterQueue"] == "LowerPriority"
    assert given["preemption"]["reclaimWithinCohort"] == "Never"
    assert given["namespaceSelector"] == {}

    kueue.local_queue("team", "given")
    lq = custom.get_namespaced_custom_object(*KUEUE, "default", "localqueues", "team")["spec"]
    assert lq == {"clusterQueue": "given", "stopPolicy": "None"}

    template = {"spec": {"containers": [{"name": "c", "image": "busybox", "ports": [{"containerPort": 80}]}]}}
    custom.create_namespaced_custom_object(*KUEUE, "default", "workloads", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "wl"},
        "spec": {"queueName": "team", "podSets": [{"template": template}]}})
    wl = custom.get_namespaced_custom_object(*KUEUE, "default", "workloads", "wl")["spec"]
    assert wl["active"] is True
    assert (wl["podSets"][0]["name"], wl["podSets"][0]["count"]) == ("main", 1)
    assert wl["podSets"][0]["template"]["spec"]["containers"][0]["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert "priorityClassSource" not in wl  # a v1beta1-only field


def test_the_workload_kueue_creates_carries_the_defaults(world: tuple[Clients, Kueue], wait_for: WaitFor) -> None:
    clients, kueue = world
    kueue.cluster_queue("cq", 8)
    kueue.local_queue("team", "cq")
    clients.batch.create_namespaced_job("default", gpu_job("train", 1))
    wl = wait_for(lambda: kueue.workload_of("train"), timeout=30, message="the Job's Workload")
    assert wl["spec"]["active"] is True
    cq = kueue.custom.get_cluster_custom_object(*KUEUE, "clusterqueues", "cq")["spec"]
    assert cq["preemption"]["borrowWithinCohort"] == {"policy": "Never"}


def test_the_resource_in_use_finalizer_holds_a_used_queue_and_flavor(world: tuple[Clients, Kueue],
                                                                      wait_for: WaitFor) -> None:
    """Kueue's webhooks add `kueue.x-k8s.io/resource-in-use` to ClusterQueues and ResourceFlavors; a
    deleted one stays Terminating while a Workload reserves quota in it (the queue) or a ClusterQueue
    names it (the flavor), and goes once that ends."""
    clients, kueue = world
    kueue.cluster_queue("cq", 8)
    kueue.local_queue("team", "cq")
    finalizer = "kueue.x-k8s.io/resource-in-use"

    def get(plural: str, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = kueue.custom.get_cluster_custom_object(*KUEUE, plural, name)
        except kubernetes.client.ApiException as err:
            if err.status == 404:
                return None
            raise
        return obj

    assert (get("clusterqueues", "cq") or {})["metadata"]["finalizers"] == [finalizer]
    assert (get("resourceflavors", "mi300x") or {})["metadata"]["finalizers"] == [finalizer]
    clients.batch.create_namespaced_job("default", gpu_job("train", 1, seconds=3600))
    wait_for(lambda: is_true(kueue.workload_of("train"), "Admitted"), timeout=30, message="admitted")

    kueue.custom.delete_cluster_custom_object(*KUEUE, "resourceflavors", "mi300x")
    kueue.custom.delete_cluster_custom_object(*KUEUE, "clusterqueues", "cq")
    # Kueue has seen the deletion (it reports the queue Terminating) and still holds both.
    wait_for(lambda: (condition(get("clusterqueues", "cq"), "Active") or {}).get("reason") == "Terminating",
             timeout=30, message="the queue reported Terminating")
    assert is_true(kueue.workload_of("train"), "Admitted")
    assert (get("clusterqueues", "cq") or {})["metadata"].get("deletionTimestamp")
    assert (get("resourceflavors", "mi300x") or {})["metadata"].get("deletionTimestamp")
    clients.batch.delete_namespaced_job("train", "default", propagation_policy="Background")
    wait_for(lambda: get("clusterqueues", "cq") is None, timeout=30, message="queue gone once unused")
    wait_for(lambda: get("resourceflavors", "mi300x") is None, timeout=30, message="flavor gone with its queue")
