"""Scenario tests for the simulated Deployment/ReplicaSet controllers, through the real client."""

from __future__ import annotations

from typing import Any

from kaiwo_sandbox.cluster.workloads.rollout import (
    Budget,
    pod_template_hash,
    resolve_int_or_percent,
    rolling_budget,
    safe_encode,
)
from kaiwo_sandbox.contracts import ApiError, JsonObj

WORKLOADS = ["scheduler", "kubelet", "deployment-controller"]


def deployment(name: str, replicas: int = 2, *, gpus: int = 0, image: str = "nginx:1.27",
               **spec: Any) -> JsonObj:
    container: JsonObj = {"name": "web", "image": image}
    if gpus:
        container["resources"] = {"limits": {"amd.com/gpu": str(gpus)}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [container]}}, **spec}}


def status_of(c: Any, name: str) -> Any:
    return c.apps.read_namespaced_deployment_status(name, "default").status


def conditions(status: Any) -> dict[str, tuple[str, str]]:
    return {cond.type: (cond.status, cond.reason) for cond in status.conditions or []}


def settled(c: Any, name: str, replicas: int) -> Any:
    status = status_of(c, name)
    done = (status.available_replicas == replicas and status.updated_replicas == replicas
            and status.replicas == replicas and status.ready_replicas == replicas
            and conditions(status).get("Progressing", ("", ""))[1] == "NewReplicaSetAvailable")
    return status if done else None


def replica_sets(c: Any, name: str) -> list[Any]:
    items: list[Any] = c.apps.list_namespaced_replica_set("default", label_selector=f"app={name}").items
    return items


def test_deployment_becomes_available_through_a_replicaset(sandbox_factory: Any, clients_factory: Any,
                                                           wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    c.apps.create_namespaced_deployment("default", deployment("web", 2))
    status = wait_for(lambda: settled(c, "web", 2), message="deployment available")
    assert conditions(status) == {"Available": ("True", "MinimumReplicasAvailable"),
                                  "Progressing": ("True", "NewReplicaSetAvailable")}
    assert status.observed_generation == 1 and not status.unavailable_replicas
    (rs,) = replica_sets(c, "web")
    template_hash = rs.metadata.labels["pod-template-hash"]
    assert rs.metadata.name == f"web-{template_hash}"
    assert rs.metadata.owner_references[0].kind == "Deployment"
    assert rs.metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    pods = c.core.list_namespaced_pod("default", label_selector="app=web").items
    assert len(pods) == 2
    assert all(p.metadata.name.startswith(f"web-{template_hash}-") for p in pods)
    assert all(p.metadata.labels["pod-template-hash"] == template_hash for p in pods)
    events = [(e.reason, e.message) for e in c.events(name="web") if e.involved_object.kind == "Deployment"]
    assert ("ScalingReplicaSet", f"Scaled up replica set web-{template_hash} from 0 to 2") in events


def test_scaling_up_and_down(sandbox_factory: Any, clients_factory: Any, wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    c.apps.create_namespaced_deployment("default", deployment("web", 1))
    wait_for(lambda: settled(c, "web", 1))
    c.apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 3}})
    wait_for(lambda: settled(c, "web", 3), message="scaled up")
    c.apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 1}})
    wait_for(lambda: settled(c, "web", 1), message="scaled down")
    wait_for(lambda: len(c.core.list_namespaced_pod("default", label_selector="app=web").items) == 1)


def test_template_change_rolls_to_a_new_replicaset(sandbox_factory: Any, clients_factory: Any,
                                                   wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    c.apps.create_namespaced_deployment("default", deployment("web", 3))
    wait_for(lambda: settled(c, "web", 3))
    (old,) = replica_sets(c, "web")
    c.apps.patch_namespaced_deployment("web", "default", {"spec": {"template": {"spec": {"containers": [
        {"name": "web", "image": "nginx:1.28"}]}}}})
    status = wait_for(lambda: (s := settled(c, "web", 3)) and s.observed_generation == 2 and s)
    assert status.updated_replicas == 3
    by_name = {rs.metadata.name: rs for rs in replica_sets(c, "web")}
    assert len(by_name) == 2 and by_name[old.metadata.name].spec.replicas == 0
    (new_name,) = set(by_name) - {old.metadata.name}
    assert by_name[new_name].metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    images = {p.spec.containers[0].image for p in c.core.list_namespaced_pod("default", label_selector="app=web").items
              if p.metadata.deletion_timestamp is None}
    assert images == {"nginx:1.28"}
    messages = [e.message for e in c.events(name="web") if e.reason == "ScalingReplicaSet"]
    assert any(m.startswith(f"Scaled down replica set {old.metadata.name}") for m in messages)


def test_progress_deadline_exceeded_when_pods_cannot_schedule(sandbox_factory: Any, clients_factory: Any,
                                                              wait_for: Any) -> None:
    sb = sandbox_factory(cluster=WORKLOADS, manual_clock=True, time_factor=1.0)
    c = clients_factory(sb)
    c.apps.create_namespaced_deployment("default", deployment("huge", 1, gpus=64, progressDeadlineSeconds=30))
    sb.advance(29.5)  # no progress for 29.5 s: still within the deadline
    assert conditions(status_of(c, "huge")).get("Progressing", ("", ""))[1] != "ProgressDeadlineExceeded"
    sb.advance(1.0)
    status = wait_for(lambda: (s := status_of(c, "huge"))
                      and conditions(s).get("Progressing", ("", ""))[1] == "ProgressDeadlineExceeded" and s)
    assert conditions(status)["Progressing"][0] == "False"
    assert conditions(status)["Available"] == ("False", "MinimumReplicasUnavailable")
    progressing = next(cond for cond in status.conditions if cond.type == "Progressing")
    assert progressing.message.endswith("has timed out progressing.")
    assert status.unavailable_replicas == 1


def test_recreate_strategy_replaces_all_pods(sandbox_factory: Any, clients_factory: Any, wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    c.apps.create_namespaced_deployment("default", deployment("batchy", 2, strategy={"type": "Recreate"}))
    wait_for(lambda: settled(c, "batchy", 2))
    c.apps.patch_namespaced_deployment("batchy", "default", {"spec": {"template": {"metadata": {
        "labels": {"app": "batchy", "v": "2"}}}}})
    wait_for(lambda: (s := settled(c, "batchy", 2)) and s.observed_generation == 2)
    pods = c.core.list_namespaced_pod("default", label_selector="app=batchy").items
    assert {p.metadata.labels.get("v") for p in pods if p.metadata.deletion_timestamp is None} == {"2"}


def test_deleting_a_deployment_removes_its_replicasets_and_pods(sandbox_factory: Any, clients_factory: Any,
                                                               wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    c.apps.create_namespaced_deployment("default", deployment("gone", 2))
    wait_for(lambda: settled(c, "gone", 2))
    c.apps.delete_namespaced_deployment("gone", "default")
    wait_for(lambda: not replica_sets(c, "gone"), message="replica sets garbage-collected")
    wait_for(lambda: not c.core.list_namespaced_pod("default", label_selector="app=gone").items,
             message="pods garbage-collected")


def test_min_ready_seconds_delays_availability(sandbox_factory: Any, clients_factory: Any, wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    # 50 simulated seconds: half a real second during which the pods are ready but not available
    c.apps.create_namespaced_deployment("default", deployment("slow", 2, minReadySeconds=50))
    status = wait_for(lambda: (s := status_of(c, "slow")) and s.ready_replicas == 2 and s)
    assert not status.available_replicas
    assert conditions(status)["Available"] == ("False", "MinimumReplicasUnavailable")
    wait_for(lambda: settled(c, "slow", 2), message="available after minReadySeconds")


def test_refused_pods_surface_as_replica_failure_until_creation_succeeds(
        sandbox_factory: Any, clients_factory: Any, wait_for: Any) -> None:
    sb = sandbox_factory(cluster=WORKLOADS)
    c = clients_factory(sb)

    def deny_pods(operation: str, gvr: Any, obj: JsonObj, old: JsonObj | None, user: str) -> None:
        if gvr.resource == "pods" and operation == "CREATE":
            raise ApiError(403, "Forbidden", 'admission webhook "pods.example.com" denied the request: no')

    remove = sb.call(sb.store.add_admission_hook, deny_pods)
    c.apps.create_namespaced_deployment("default", deployment("refused", 1))
    status = wait_for(lambda: (s := status_of(c, "refused")) and "ReplicaFailure" in conditions(s) and s)
    failure = next(cond for cond in status.conditions if cond.type == "ReplicaFailure")
    assert (failure.status, failure.reason) == ("True", "FailedCreate")
    assert "denied the request" in failure.message
    assert any(e.reason == "FailedCreate" for e in c.events() if e.involved_object.kind == "ReplicaSet")
    sb.call(remove)
    status = wait_for(lambda: settled(c, "refused", 1), message="pods created once the webhook allows them")
    assert "ReplicaFailure" not in conditions(status)


# -- pure arithmetic ---------------------------------------------------------------------------


def test_pod_template_hash_is_stable_safe_and_ignores_its_own_label() -> None:
    template = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    first = pod_template_hash(template)
    labelled = {"metadata": {"labels": {"app": "x", "pod-template-hash": first}}, "spec": template["spec"]}
    assert pod_template_hash(labelled) == first
    assert pod_template_hash(template, collision_count=1) != first
    assert set(first) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert safe_encode("0123456789") == "456789bcdf"  # why real hashes look like "7c5ddbdf54"


def test_rolling_budget_rounds_like_the_controller() -> None:
    assert rolling_budget(deployment("d", 10)) == Budget(3, 2)  # 25%: surge rounds up, unavailable down
    zero = deployment("d", 4, strategy={"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}})
    assert rolling_budget(zero) == Budget(0, 1)
    assert rolling_budget(deployment("d", 3, strategy={"type": "Recreate"})) == Budget(0, 3)
    assert resolve_int_or_percent("50%", 3, round_up=True, default="25%") == 2
    assert resolve_int_or_percent(2, 3, round_up=False, default="25%") == 2
