"""Queue and node read models on the world captured from the sandbox (see test_explain.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from kaiwo_ray.nodes import default_nodes
from kaiwo_ray.views.nodes import GpuReading, node_totals, node_views
from kaiwo_ray.views.queues import cluster_queue_views

DATA = json.loads((Path(__file__).parent / "data" / "sandbox_world.json").read_text())


def test_cluster_queue_usage_per_flavor_and_pending_in_order() -> None:
    [kaiwo] = cluster_queue_views(DATA["ClusterQueue"], DATA["LocalQueue"], DATA["Workload"])
    assert kaiwo.exists and kaiwo.active
    mi300 = kaiwo.flavor("amd-mi300x-8gpu-345core-2038gi")
    assert mi300 is not None
    gpu = mi300.resource("amd.com/gpu")
    assert gpu is not None and (gpu.nominal, gpu.used, gpu.free) == (16.0, 16.0, 0.0)
    memory = mi300.resource("memory")
    assert memory is not None and memory.used_text == "512Gi"
    assert [(p.position, p.kaiwo_workload, p.owner.name if p.owner else None) for p in kaiwo.pending] == [
        (1, "big2", "big2")]
    assert kaiwo.admitted == 3
    assert [(lq.namespace, lq.name, lq.pending, lq.admitted) for lq in kaiwo.local_queues] == [
        ("default", "kaiwo", 1, 3)]


def test_pending_order_is_priority_then_age_and_missing_queues_are_listed() -> None:
    workloads = copy.deepcopy(DATA["Workload"])
    pending = next(w for w in workloads if w["metadata"]["name"].startswith("job-big2"))
    older, urgent = copy.deepcopy(pending), copy.deepcopy(pending)
    older["metadata"].update(name="older", creationTimestamp="2000-01-01T00:00:00Z")
    urgent["metadata"].update(name="urgent", creationTimestamp="2030-01-01T00:00:00Z")
    urgent["spec"]["priority"] = 100
    lost = copy.deepcopy(pending)
    lost["metadata"]["name"] = "lost"
    lost["spec"]["queueName"] = "other"
    local_queues = [*DATA["LocalQueue"], {"kind": "LocalQueue", "metadata": {"namespace": "default", "name": "other"},
                                          "spec": {"clusterQueue": "gone"}}]
    views = {v.name: v for v in cluster_queue_views(DATA["ClusterQueue"], local_queues,
                                                     [*workloads, older, urgent, lost])}
    assert [p.name for p in views["kaiwo"].pending] == ["urgent", "older", pending["metadata"]["name"]]
    assert [p.position for p in views["kaiwo"].pending] == [1, 2, 3]
    assert not views["gone"].exists and [p.name for p in views["gone"].pending] == ["lost"]


def test_nodes_gpus_allocatable_used_and_idle() -> None:
    sample = GpuReading(node="gpu-amd-mi300x-01", index=3, utilization=97.5)
    views = {v.name: v for v in node_views(default_nodes(), DATA["Pod"], samples=[sample])}
    busy = views["gpu-amd-mi300x-01"]
    assert (busy.gpu_resource, busy.gpus_allocatable, busy.gpus_used, busy.gpus_idle) == ("amd.com/gpu", 8, 8, 0)
    assert [(p.name.split("-")[0], p.gpus, p.workload) for p in busy.pods] == [("big0", 8, "big0")]
    assert busy.gpus == [sample]
    idle = views["gpu-nvidia-h100-01"]
    assert (idle.gpus_used, idle.gpus_idle, idle.gpus) == (0, 8, [])
    totals = node_totals(views.values())
    assert (totals.gpus, totals.gpus_used, totals.idle_gpu_nodes) == (24, 16, 1)


def test_position_of_agrees_with_the_ordered_list() -> None:
    from kaiwo_ray.views.queues import local_queue_index, pending_in_order, position_of

    workloads = copy.deepcopy(DATA["Workload"])
    pending = next(w for w in workloads if w["metadata"]["name"].startswith("job-big2"))
    for n, (stamp, priority) in enumerate([("2000-01-01T00:00:00Z", 0), ("2030-01-01T00:00:00Z", 5),
                                           ("2010-01-01T00:00:00Z", 0)]):
        extra = copy.deepcopy(pending)
        extra["metadata"].update(name=f"extra-{n}", creationTimestamp=stamp)
        extra["spec"]["priority"] = priority
        workloads.append(extra)
    index = local_queue_index(DATA["LocalQueue"])
    ordered = pending_in_order("kaiwo", workloads, index)
    assert len(ordered) == 4
    by_name = {w["metadata"]["name"]: w for w in workloads}
    for entry in ordered:
        assert position_of(by_name[entry.name], "kaiwo", workloads, index) == entry.position
    admitted = next(w for w in workloads if w["metadata"]["name"].startswith("job-big0"))
    assert position_of(admitted, "kaiwo", workloads, index) is None
