"""The kopf peers of benchmarks/operator.py must create exactly what kaiwo-ray's reconciler creates,
and the same-work peer must also write the same status and Events on the way to PENDING, or the
comparison would not be like for like."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.nodes import default_nodes, with_pool_labels
from kaiwo_ray.reconcile.workload import World, decide

PEER = Path(__file__).parents[2] / "benchmarks" / "peers" / "kopf_operator.py"
CONFIG = KaiwoConfigSpec()
NODES = with_pool_labels(default_nodes(), CONFIG)
CQ = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "kaiwo", "uid": "cq"}}


@pytest.fixture(scope="module")
def peer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kopf_peer_under_test", PEER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kaiwojob(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob",
            "metadata": {"name": "bench-1", "namespace": "bench", "uid": "U1", "generation": 1},
            "spec": {"user": "bench@example.com", "image": "busybox", "entrypoint": "sleep 600", **spec}}


@pytest.mark.parametrize("extra", [{}, {"gpus": 8, "gpuVendor": "nvidia"}, {"ray": True}])
def test_the_peer_renders_what_the_reconciler_applies(peer: ModuleType, extra: dict[str, Any]) -> None:
    obj = kaiwojob(**extra)
    plan = decide(World(obj=obj, config=CONFIG, nodes=NODES, queue_config=None, children={}, kueue_workloads=[],
                        local_queue_exists=True, cluster_queue=CQ, now=datetime.now(UTC)))
    assert plan.apply, "the reconciler should create the main child of a new KaiwoJob"
    assert peer.children_of(obj, CONFIG, NODES) == plan.apply


# -- the same-work peer: children, status and Events as kaiwo-ray's reconciler writes them to PENDING --

SAME_WORK_PEER = PEER.with_name("kopf_equivalent.py")


@pytest.fixture(scope="module")
def same_work_peer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kopf_same_work_peer_under_test", SAME_WORK_PEER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("extra", [{}, {"gpus": 8, "gpuVendor": "nvidia"}, {"ray": True},
                                   {"clusterQueue": "other"}])
def test_the_same_work_peer_writes_what_the_reconciler_writes_to_pending(
        same_work_peer: ModuleType, extra: dict[str, Any]) -> None:
    obj = kaiwojob(**extra)
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    plan = decide(World(obj=obj, config=CONFIG, nodes=NODES, queue_config=None, children={}, kueue_workloads=[],
                        local_queue_exists=True, cluster_queue=CQ, now=now))
    assert plan.phase == "PENDING" and plan.status is not None
    children = same_work_peer.children_of(obj, CONFIG, NODES)
    assert children == plan.apply
    assert same_work_peer.pending_status(obj, CONFIG, NODES, now) == plan.status
    events = [("Normal", "ResourceCreated", same_work_peer.created_message(child)) for child in children]
    events.append(("Normal", *same_work_peer.PENDING_EVENT))
    assert events == [(e.type, e.reason, e.message) for e in plan.events]
