"""End to end: KaiwoJobs that cannot run, on the sandbox with the whole operator, explained from what
the API server lists (fetched over HTTP like any client would)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from e2e_harness import OperatorSandbox, operator_sandbox
from e2e_support import wait_for

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.views.explain import Explanation, ReasonCode, collect_world, explain

NS = "explain-e2e"


@pytest.fixture(scope="module")
def env() -> Iterator[OperatorSandbox]:
    with operator_sandbox() as env:
        yield env


def listed(env: OperatorSandbox, path: str, kind: str) -> list[JsonObj]:
    code, _, body = env.sb.http("GET", path)
    assert code == 200, body
    items: list[JsonObj] = json.loads(body)["items"]
    for item in items:
        item.setdefault("kind", kind)
    return items


def explain_live(env: OperatorSandbox, name: str) -> Explanation:
    kj = next(o for o in listed(env, f"/apis/kaiwo.silogen.ai/v1alpha1/namespaces/{NS}/kaiwojobs", "KaiwoJob")
              if o["metadata"]["name"] == name)
    owned = (listed(env, f"/apis/batch/v1/namespaces/{NS}/jobs", "Job")
             + listed(env, f"/api/v1/namespaces/{NS}/persistentvolumeclaims", "PersistentVolumeClaim"))
    world = collect_world(
        kj, owned=owned, pods=listed(env, f"/api/v1/namespaces/{NS}/pods", "Pod"),
        kueue_workloads=listed(env, "/apis/kueue.x-k8s.io/v1beta2/workloads", "Workload"),
        events=listed(env, f"/api/v1/namespaces/{NS}/events", "Event"),
        cluster_queues=listed(env, "/apis/kueue.x-k8s.io/v1beta2/clusterqueues", "ClusterQueue"),
        local_queues=listed(env, "/apis/kueue.x-k8s.io/v1beta2/localqueues", "LocalQueue"))
    return explain(world)


def kaiwojob(name: str, **spec: Any) -> JsonObj:
    return {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"user": "e2e@example.com", "image": "busybox", "entrypoint": "sleep 100000", **spec}}


def test_a_job_over_quota_is_explained_with_the_flavor_and_its_free_gpus(env: OperatorSandbox) -> None:
    env.sb.http("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for name in ("fill-a", "fill-b", "waits"):  # the default queue has 16 MI300X GPUs: the third waits
        code, _, body = env.sb.http("POST", f"/apis/kaiwo.silogen.ai/v1alpha1/namespaces/{NS}/kaiwojobs",
                                    kaiwojob(name, gpus=8, gpuModels=["mi300x"]))
        assert code == 201, body
        if name != "waits":  # admit the first two before the third comes, so which one waits is known
            wait_for(lambda n=name: explain_live(env, n).running, 30, f"{name} RUNNING")

    result = wait_for(lambda: (r := explain_live(env, "waits")).reasons and r.phase == "PENDING" and r, 30,
                      "waits is explained as PENDING")
    assert not result.running
    assert result.codes() == [ReasonCode.QUOTA], result
    gap = next(g for g in result.reasons[0].quota if g.nominal > 0)
    assert (gap.resource, gap.requested, gap.free, gap.nominal) == ("amd.com/gpu", 8.0, 0.0, 16.0)
    assert gap.flavor.startswith("amd-mi300x")
    assert result.queue_position == 1
    assert "has 0 of 16 amd.com/gpu free" in result.summary


def test_an_unknown_queue_and_an_unbound_pvc(env: OperatorSandbox) -> None:
    env.sb.http("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for body in (kaiwojob("lost", clusterQueue="nope"),
                 kaiwojob("no-disk", entrypoint="sleep 1", storage={
                     "storageEnabled": True, "storageClassName": "missing-class", "data": {"storageSize": "1Gi"}})):
        code, _, text = env.sb.http("POST", f"/apis/kaiwo.silogen.ai/v1alpha1/namespaces/{NS}/kaiwojobs", body)
        assert code == 201, text
    lost = wait_for(lambda: (r := explain_live(env, "lost")).phase == "ERROR" and r, 30, "lost in ERROR")
    assert lost.codes() == [ReasonCode.CLUSTER_QUEUE_NOT_FOUND]
    no_disk = wait_for(lambda: (r := explain_live(env, "no-disk")).codes()[:1] == [ReasonCode.PVC_UNBOUND] and r,
                       30, "no-disk held by its PVC")
    assert "missing-class" in no_disk.reasons[0].message
