"""The kopf peers of benchmarks/operator.py must create exactly what kaiwo-ray's reconciler creates,
and the same-work peer must also write the same status and Events on the way to PENDING, or the
comparison would not be like for like."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
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


def load_peer(path: Path, name: str) -> ModuleType:
    """A peer module from its file (benchmarks/ is not a package; the peers import `peers.same_work`
    as they do when the benchmark, run from benchmarks/, imports them)."""
    if str(path.parents[1]) not in sys.path:
        sys.path.append(str(path.parents[1]))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def peer() -> ModuleType:
    return load_peer(PEER, "kopf_peer_under_test")


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
    return load_peer(SAME_WORK_PEER, "kopf_same_work_peer_under_test")


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


# -- the floor operator: watch, render, apply; it must create the same Job, really, through the API --

FLOOR_PEER = PEER.with_name("floor_operator.py")


def _run_peer_on_one_kaiwojob(monkeypatch: pytest.MonkeyPatch, peer: ModuleType,
                              done: Callable[[Any], bool]) -> Any:
    """Start a sandbox, create KaiwoJob bench/bench-1, run `peer` until `done(api_client)` (polled under a
    deadline), stop it; returns the api client's view as `done` left it (the sandbox is stopped after)."""
    import threading
    import time

    import kubernetes

    from kaiwo_sandbox.testing import start_sandbox

    sb = start_sandbox()
    try:
        monkeypatch.setenv("KUBECONFIG", str(sb.kubeconfig_path))
        api = sb.api_client()
        kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": "bench"}})
        obj = kaiwojob()
        del obj["metadata"]["uid"], obj["metadata"]["generation"]
        kubernetes.client.CustomObjectsApi(api).create_namespaced_custom_object(
            "kaiwo.silogen.ai", "v1alpha1", "bench", "kaiwojobs", obj)
        stop, ready = threading.Event(), threading.Event()
        runner = threading.Thread(target=peer.run, args=("bench", stop, ready), daemon=True)
        runner.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not done(api):
            time.sleep(0.05)  # polling under a deadline
        stop.set()
        runner.join(10)
        assert not runner.is_alive()
        return done(api)
    finally:
        sb.stop()


def test_the_same_work_floor_writes_what_the_reconciler_writes_to_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same-work floor's four writes, through the API: the Job, status PENDING with the
    reconciler's conditions, and its two Events (no finalizer, as the reconciler)."""
    import kubernetes

    floor = load_peer(FLOOR_PEER.with_name("floor_same_work.py"), "floor_same_work_under_test")

    def written(api: Any) -> Any:
        custom = kubernetes.client.CustomObjectsApi(api)
        obj = custom.get_namespaced_custom_object("kaiwo.silogen.ai", "v1alpha1", "bench", "kaiwojobs", "bench-1")
        events = kubernetes.client.CoreV1Api(api).list_namespaced_event("bench").items
        jobs = kubernetes.client.BatchV1Api(api).list_namespaced_job("bench").items
        return (obj, events, jobs) if len(events) == 2 and jobs and obj.get("status") else None

    got = _run_peer_on_one_kaiwojob(monkeypatch, floor, written)
    assert got is not None, "the same-work floor did not write its four writes within 30 s"
    obj, events, jobs = got
    assert [j.metadata.name for j in jobs] == ["bench-1"]
    assert not obj["metadata"].get("finalizers")
    assert obj["status"]["status"] == "PENDING"
    assert [c["type"] for c in obj["status"]["conditions"]] == ["Schedulable", "Admitted"]
    assert sorted(e.reason for e in events) == ["ResourceCreated", "WorkloadPending"]
    assert {e.involved_object.uid for e in events} == {obj["metadata"]["uid"]}


def test_the_floor_operator_applies_the_rendered_job(monkeypatch: pytest.MonkeyPatch) -> None:
    import kubernetes

    floor = load_peer(FLOOR_PEER, "floor_peer_under_test")

    def applied(api: Any) -> Any:
        return kubernetes.client.BatchV1Api(api).list_namespaced_job("bench").items

    jobs = _run_peer_on_one_kaiwojob(monkeypatch, floor, applied)
    assert [j.metadata.name for j in jobs] == ["bench-1"]
    assert jobs[0].metadata.managed_fields[0].manager == "floor-peer"
