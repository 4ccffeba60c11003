"""The kubelet's pure rendering: image IDs, pod IPs, and the status of a pod at a given moment."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kaiwo_sandbox.cluster.nodes.kubelet import PodRuntime, image_id, pod_ip, render_pod_status
from kaiwo_sandbox.cluster.nodes.podsim import PodTimeline, plan_pod
from kaiwo_sandbox.contracts import JsonObj


@pytest.mark.parametrize(("image", "repository"), [
    ("busybox", "docker.io/library/busybox"),
    ("busybox:1.36", "docker.io/library/busybox"),
    ("rocm/pytorch:latest", "docker.io/rocm/pytorch"),
    ("ghcr.io/silogen/rocm-ray:6.4", "ghcr.io/silogen/rocm-ray"),
    ("localhost:5000/app:v1", "localhost:5000/app"),
])
def test_image_ids_are_fully_qualified_digests(image: str, repository: str) -> None:
    qualified = image_id(image)
    assert qualified.startswith(f"{repository}@sha256:")
    assert len(qualified.split("@sha256:")[1]) == 64
    assert image_id(image) == qualified


def test_pod_ips_are_stable_and_inside_the_node_range() -> None:
    assert pod_ip("uid-1") == pod_ip("uid-1")
    assert pod_ip("uid-1", "10.244.3.0/24").startswith("10.244.3.")
    assert pod_ip("uid-1", "not-a-cidr").startswith("10.244.")


def pod(annotations: dict[str, str], policy: str = "Never") -> JsonObj:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u1", "annotations": annotations},
            "spec": {"restartPolicy": policy,
                     "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "4"]}]},
            "status": {"conditions": [{"type": "PodScheduled", "status": "True",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


def runtime_for(body: JsonObj) -> PodRuntime:
    plan = plan_pod(body, 15.0, 1.0)
    return PodRuntime(uid="u1", timeline=PodTimeline.start(plan), bound_monotonic=0.0,
                      bound_wall=datetime(2026, 1, 1, tzinfo=UTC), pod_ref="p_ns(u1)")


def render(body: JsonObj, runtime: PodRuntime, at: float) -> JsonObj:
    runtime.timeline.advance(at)
    return render_pod_status(body, runtime, at, 1.0, "172.18.0.2", "2026-01-01T00:01:00Z")


def test_status_before_start_is_container_creating() -> None:
    body = pod({})
    status = render(body, runtime_for(body), 0.5)
    assert status["phase"] == "Pending"
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert "podIP" not in status
    types = [c["type"] for c in status["conditions"]]
    assert types == ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
    ready = status["conditions"][2]
    assert ready["reason"] == "ContainersNotReady"
    assert ready["message"] == "containers with unready status: [main]"


def test_running_then_terminated_timestamps_follow_the_timeline() -> None:
    body = pod({})
    runtime = runtime_for(body)
    running = render(body, runtime, 2.0)
    assert running["phase"] == "Running"
    assert running["containerStatuses"][0]["state"]["running"]["startedAt"] == "2026-01-01T00:00:01Z"
    done = render(body, runtime, 6.0)
    terminated = done["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["startedAt"], terminated["finishedAt"]) == ("2026-01-01T00:00:01Z", "2026-01-01T00:00:05Z")
    assert done["phase"] == "Succeeded"


def test_crash_loop_back_off_is_reported_while_waiting_to_restart() -> None:
    body = pod({"sandbox.kaiwo-ray.dev/exit-code": "1"}, policy="Always")
    status = render(body, runtime_for(body), 6.0)
    container = status["containerStatuses"][0]
    assert container["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert "restarting failed container=main pod=p_ns(u1)" in container["state"]["waiting"]["message"]
    assert container["lastState"]["terminated"]["exitCode"] == 1
    assert status["phase"] == "Running"
