"""Scenario tests for the simulated kubelet: pod phases, container statuses, node status."""

from __future__ import annotations

from typing import Any

from kaiwo_sandbox.contracts import JsonObj

NODE_CONTROLLERS = ["scheduler", "kubelet"]


def pod(name: str, command: list[str], *, policy: str = "Never", annotations: dict[str, str] | None = None,
        init: list[JsonObj] | None = None) -> JsonObj:
    spec: JsonObj = {"restartPolicy": policy,
                     "containers": [{"name": "main", "image": "ghcr.io/silogen/busybox:1.36", "command": command,
                                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                                   "limits": {"cpu": "1", "memory": "1Gi"}}}]}
    if init:
        spec["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": annotations or {}},
            "spec": spec}


def phase(core: Any, name: str) -> str:
    value: str = core.read_namespaced_pod_status(name, "default").status.phase
    return value


def conditions(status: Any) -> dict[str, str]:
    return {c.type: c.status for c in status.conditions or []}


def test_sleep_pod_runs_then_succeeds_with_full_status(sandbox_factory: Any, clients_factory: Any,
                                                       make_node: Any, wait_for: Any) -> None:
    sb = sandbox_factory(nodes=[make_node("n1")], cluster=NODE_CONTROLLERS, time_factor=0.05)
    c = clients_factory(sb)
    # 20 simulated seconds at time factor 0.05: a one-second Running window, easy to observe
    c.core.create_namespaced_pod("default", pod("sleeper", ["/bin/sh", "-c", "echo hi\nsleep 20"]))

    running = wait_for(lambda: (s := c.core.read_namespaced_pod_status("sleeper", "default").status)
                       and s.phase == "Running" and s)
    assert conditions(running) == {"PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True",
                                   "ContainersReady": "True", "PodScheduled": "True"}
    container = running.container_statuses[0]
    assert container.ready and container.started and container.state.running.started_at is not None
    assert container.container_id.startswith("containerd://")
    assert container.image_id.startswith("ghcr.io/silogen/busybox@sha256:")
    assert running.pod_ip.startswith("10.244.") and running.host_ip
    assert running.qos_class == "Guaranteed"
    assert running.start_time is not None

    wait_for(lambda: phase(c.core, "sleeper") == "Succeeded", timeout=10)
    done = c.core.read_namespaced_pod_status("sleeper", "default").status
    terminated = done.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (0, "Completed")
    assert terminated.finished_at >= terminated.started_at
    ready = next(cond for cond in done.conditions if cond.type == "Ready")
    assert (ready.status, ready.reason) == ("False", "PodCompleted")
    reasons = {e.reason for e in c.events(name="sleeper") if e.source.component == "kubelet"}
    assert {"Pulled", "Created", "Started"} <= reasons


def test_exit_code_annotation_fails_the_pod(sandbox_factory: Any, clients_factory: Any, make_node: Any,
                                            wait_for: Any) -> None:
    sb = sandbox_factory(nodes=[make_node("n1")], cluster=NODE_CONTROLLERS)
    c = clients_factory(sb)
    c.core.create_namespaced_pod("default", pod("crash", ["python", "train.py"], annotations={
        "sandbox.kaiwo-ray.dev/exit-code": "3", "sandbox.kaiwo-ray.dev/run-seconds": "1"}))
    wait_for(lambda: phase(c.core, "crash") == "Failed")
    terminated = c.core.read_namespaced_pod_status("crash", "default").status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (3, "Error")


def test_restart_policy_always_restarts_exited_containers(sandbox_factory: Any, clients_factory: Any,
                                                          make_node: Any, wait_for: Any) -> None:
    sb = sandbox_factory(nodes=[make_node("n1")], cluster=NODE_CONTROLLERS)
    c = clients_factory(sb)
    c.core.create_namespaced_pod("default", pod("flappy", ["sleep", "5"], policy="Always"))
    status = wait_for(lambda: (s := c.core.read_namespaced_pod_status("flappy", "default").status)
                      and s.container_statuses and s.container_statuses[0].restart_count >= 1 and s)
    assert status.phase == "Running"
    last = status.container_statuses[0].last_state.terminated
    assert last is not None and last.reason == "Completed"


def test_init_containers_run_first(sandbox_factory: Any, clients_factory: Any, make_node: Any,
                                   wait_for: Any) -> None:
    sb = sandbox_factory(nodes=[make_node("n1")], cluster=NODE_CONTROLLERS)
    c = clients_factory(sb)
    init = [{"name": "fetch", "image": "busybox", "command": ["sleep", "2"]}]
    c.core.create_namespaced_pod("default", pod("with-init", ["sleep", "3"], init=init))
    wait_for(lambda: phase(c.core, "with-init") == "Succeeded")
    status = c.core.read_namespaced_pod_status("with-init", "default").status
    init_state = status.init_container_statuses[0].state.terminated
    main_state = status.container_statuses[0].state.terminated
    assert init_state.reason == "Completed"
    assert init_state.finished_at <= main_state.started_at


def test_deleting_a_running_pod_removes_it(sandbox_factory: Any, clients_factory: Any, make_node: Any,
                                           wait_for: Any) -> None:
    sb = sandbox_factory(nodes=[make_node("n1")], cluster=NODE_CONTROLLERS)
    c = clients_factory(sb)
    c.core.create_namespaced_pod("default", pod("forever", ["sleep", "infinity"]))
    wait_for(lambda: phase(c.core, "forever") == "Running")
    c.core.delete_namespaced_pod("forever", "default")
    wait_for(lambda: not [p for p in c.core.list_namespaced_pod("default").items if p.metadata.name == "forever"])


def test_nodes_get_kubelet_conditions_and_addresses(sandbox_factory: Any, clients_factory: Any, make_node: Any,
                                                    wait_for: Any) -> None:
    bare = make_node("bare")
    del bare["status"]["allocatable"]
    sb = sandbox_factory(nodes=[bare, make_node("sick", ready=False)], cluster=["kubelet"])
    c = clients_factory(sb)
    node = wait_for(lambda: (n := c.core.read_node_status("bare")) and n.status.conditions and n)
    assert {cond.type: cond.status for cond in node.status.conditions} == {
        "MemoryPressure": "False", "DiskPressure": "False", "PIDPressure": "False", "Ready": "True"}
    assert node.status.allocatable["cpu"] == "16"
    assert any(a.type == "InternalIP" for a in node.status.addresses)
    sick = wait_for(lambda: (n := c.core.read_node_status("sick")) and n.status.node_info and n)
    ready = next(cond for cond in sick.status.conditions if cond.type == "Ready")
    assert ready.status == "False"  # what was seeded wins: a NotReady node stays NotReady


def test_pod_ip_comes_from_the_nodes_pod_cidr(sandbox_factory: Any, clients_factory: Any, make_node: Any,
                                              wait_for: Any) -> None:
    node = make_node("n1")
    node["spec"]["podCIDR"] = "10.244.7.0/24"
    sb = sandbox_factory(nodes=[node], cluster=NODE_CONTROLLERS)
    c = clients_factory(sb)
    c.core.create_namespaced_pod("default", pod("addressed", ["sleep", "infinity"]))
    status = wait_for(lambda: (s := c.core.read_namespaced_pod_status("addressed", "default").status) and s.pod_ip
                      and s)
    assert status.pod_ip.startswith("10.244.7.")
    assert status.pod_ips[0].ip == status.pod_ip


def test_running_pod_resumes_after_a_sandbox_restart(tmp_path: Any, clients_factory: Any, make_node: Any,
                                                     wait_for: Any) -> None:
    from kaiwo_sandbox.testing import start_sandbox

    first = start_sandbox(nodes=[make_node("n1")], cluster=NODE_CONTROLLERS, time_factor=0.01, state_dir=tmp_path)
    try:
        c = clients_factory(first)
        # One real second to start, two to run: starting over after the restart would be visible.
        c.core.create_namespaced_pod("default", pod("survivor", ["sleep", "200"], annotations={
            "sandbox.kaiwo-ray.dev/start-seconds": "100"}))
        before = wait_for(lambda: (s := c.core.read_namespaced_pod_status("survivor", "default").status)
                          and s.phase == "Running" and s, timeout=10)
    finally:
        first.stop()
    second = start_sandbox(nodes=[make_node("n1")], cluster=NODE_CONTROLLERS, time_factor=0.01, state_dir=tmp_path)
    try:
        c = clients_factory(second)
        seen: list[str] = []

        def finished() -> bool:
            status = c.core.read_namespaced_pod_status("survivor", "default").status
            seen.append(status.phase)
            return bool(status.phase == "Succeeded")

        wait_for(finished, timeout=10, message="pod finishes after the restart")
        assert "Pending" not in seen  # resumed, not started over
        after = c.core.read_namespaced_pod_status("survivor", "default").status
        assert after.start_time == before.start_time
        assert after.container_statuses[0].restart_count == 0
    finally:
        second.stop()
