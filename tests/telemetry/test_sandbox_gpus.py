"""The sandbox's simulated GPUs: the utilization annotation (pure), device assignment, and the
exporter endpoints of a running sandbox read over HTTP, with pods placed by its scheduler and kubelet."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import kubernetes
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kaiwo_sandbox.cluster.nodes.gpusim import (
    ANNOTATION,
    ScheduleError,
    parse_schedule,
    simulate,
    utilization_at,
)
from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def test_schedule_grammar() -> None:
    schedule = parse_schedule("90 for 30s, then 10 for 1m, then 0")
    assert [utilization_at(schedule, t) for t in (0, 29.9, 30, 89.9, 90, 10_000)] == [90, 90, 10, 10, 0, 0]
    assert utilization_at(parse_schedule("42"), 1e9) == 42
    assert utilization_at(parse_schedule("75 for 1m30s"), 89) == 75
    assert utilization_at(parse_schedule("75 for 1m30s"), 91) == 0  # after the last timed segment: idle


@pytest.mark.parametrize("text, message", [("fast", "expected"), ("150", "between 0 and 100"),
                                           ("90 for soon", "not a duration"),
                                           ("90, then 0", "only the last segment")])
def test_bad_schedules_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        parse_schedule(text)


def _node(name: str, resource: str, count: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {}}, "status": {"capacity": {resource: str(count)}}}


def _pod(name: str, node: str, gpus: int, started: datetime, annotation: str | None = None,
         resource: str = "amd.com/gpu") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "uid": f"uid-{name}"}
    if annotation is not None:
        meta["annotations"] = {ANNOTATION: annotation}
    return {"metadata": meta, "spec": {"nodeName": node, "containers": [
        {"name": "main", "resources": {"limits": {resource: str(gpus)}}}]},
        "status": {"phase": "Running", "startTime": started.strftime("%Y-%m-%dT%H:%M:%SZ")}}


def test_pods_get_distinct_gpus_in_start_order_and_their_schedule() -> None:
    nodes = [_node("amd-1", "amd.com/gpu", 4), _node("nv-1", "nvidia.com/gpu", 2)]
    pods = [_pod("late", "amd-1", 2, NOW - timedelta(seconds=5), "90 for 30s, then 0"),
            _pod("early", "amd-1", 1, NOW - timedelta(seconds=60), "90 for 30s, then 0"),
            _pod("plain", "nv-1", 1, NOW - timedelta(seconds=1), resource="nvidia.com/gpu"),
            _pod("broken", "nv-1", 1, NOW, "lots", resource="nvidia.com/gpu")]
    gpus = {(g.node, g.index): g for g in simulate(nodes, pods, NOW)}
    assert [(gpus[("amd-1", i)].pod, gpus[("amd-1", i)].utilization) for i in range(4)] == [
        ("early", 0.0), ("late", 90.0), ("late", 90.0), ("", 0.0)]
    assert gpus[("nv-1", 0)].pod == "plain" and gpus[("nv-1", 0)].utilization == 0  # no annotation: idle
    assert gpus[("nv-1", 0)].uuid.startswith("GPU-")
    assert gpus[("nv-1", 1)].utilization is None and "gpu-utilization" in gpus[("nv-1", 1)].error  # unknown
    # time factor: 30 simulated seconds last 3 real seconds at 0.1
    fast = {(g.node, g.index): g for g in simulate(nodes, pods, NOW, time_factor=0.1)}
    assert fast[("amd-1", 1)].utilization == 0


@pytest.fixture(scope="module")
def sandbox() -> Any:
    with start_sandbox(cluster=True, time_factor=1.0) as sb:
        yield sb


def _metrics(sb: RunningSandbox) -> dict[str, list[Any]]:
    status, headers, body = sb.http("GET", "/sandbox/gpu-metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    return {f.name: f.samples for f in text_string_to_metric_families(body.decode())}


def test_exporter_endpoint_follows_the_annotation_over_time(sandbox: RunningSandbox) -> None:
    core = kubernetes.client.CoreV1Api(sandbox.api_client())
    core.create_namespace({"metadata": {"name": "gpu-sim"}})
    for name, resource, annotation in [("burst", "amd.com/gpu", "90 for 3s, then 0"),
                                       ("steady", "nvidia.com/gpu", "55")]:
        core.create_namespaced_pod("gpu-sim", {
            "metadata": {"name": name, "annotations": {ANNOTATION: annotation}},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                                     "resources": {"limits": {resource: "2"}, "requests": {resource: "2"}}}]}})

    def values(family: str, pod: str) -> list[float]:
        return [s.value for s in _metrics(sandbox).get(family, []) if s.labels.get("pod") == pod]

    assert eventually(lambda: values("gpu_gfx_activity", "burst") == [90.0, 90.0], timeout=20)
    sample = next(s for s in _metrics(sandbox)["gpu_gfx_activity"] if s.labels.get("pod") == "burst")
    assert sample.labels["namespace"] == "gpu-sim" and sample.labels["container"] == "main"
    assert sample.labels["gpu_partition_id"] == "0" and sample.labels["hostname"]
    assert eventually(lambda: values("DCGM_FI_DEV_GPU_UTIL", "steady") == [55.0, 55.0], timeout=20)
    dcgm = next(s for s in _metrics(sandbox)["DCGM_FI_DEV_GPU_UTIL"] if s.labels.get("pod") == "steady")
    assert dcgm.labels["UUID"].startswith("GPU-") and dcgm.labels["Hostname"]
    assert eventually(lambda: values("gpu_gfx_activity", "burst") == [0.0, 0.0], timeout=20)
    # idle GPUs are exported too, with empty pod labels, as the exporters do
    assert any(s.labels["pod"] == "" for s in _metrics(sandbox)["gpu_gfx_activity"])

    status, _, body = sandbox.http("GET", "/sandbox/gpus?node=" + dcgm.labels["Hostname"])
    items = json.loads(body)["items"]
    assert status == 200 and {i["node"] for i in items} == {dcgm.labels["Hostname"]}
    assert sorted(i["utilization"] for i in items if i["pod"] == "steady") == [55, 55]
