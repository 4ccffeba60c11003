"""List pages decoded to the fields a cache keeps hold, once cached, exactly what whole pages hold."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import msgspec
import pytest

from kaiwo_ray.controllers.workloads import (
    KUEUE_WORKLOAD_PAGES,
    OBJECT_PAGES,
    kueue_workload_fields,
    without_pod_template,
)
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.cache import ObjectCache, Transform
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import TransportError
from kaiwo_ray.kube.informer import Informer, InformerSettings
from kaiwo_ray.kube.projection import PageDecoder, page_decoder
from kaiwo_sandbox.testing import RunningSandbox

NS = "default"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
TEMPLATE = {"metadata": {"labels": {"app": "x"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox",
                                                               "resources": {"requests": {"cpu": "1"}}}]}}


def _seed(sb: RunningSandbox) -> None:
    """Objects as the API server stores them: server-side applied (managedFields of two managers),
    with status, with and without optional fields, one whose status is absent."""
    for i in range(3):
        name = f"job-{i}"
        job: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "Job",
                               "metadata": {"name": name, "labels": {"run": str(i)}, "annotations": {"a": "b"}},
                               "spec": {"suspend": True, "template": TEMPLATE}}
        status, _, body = sb.http("PATCH", f"/apis/batch/v1/namespaces/{NS}/jobs/{name}?fieldManager=kaiwo&force=true",
                                  job, headers=APPLY)
        assert status in (200, 201), body
        uid = json.loads(body)["metadata"]["uid"]
        workload = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                    "metadata": {"name": f"wl-{i}", "labels": {"kueue.x-k8s.io/job-uid": uid},
                                 "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                                      "uid": uid, "controller": True}]},
                    "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": TEMPLATE}]}}
        status, _, body = sb.http("POST", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads", workload)
        assert status == 201, body
        if i:  # one Workload without status: the projection must not invent one
            condition = {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "ok",
                         "lastTransitionTime": "2026-01-01T00:00:00Z"}
            status, _, body = sb.http(
                "PATCH", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads/wl-{i}/status?fieldManager=kueue",
                {"status": {"conditions": [condition]}}, headers={"Content-Type": "application/merge-patch+json"})
            assert status == 200, body
        kaiwojob = {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob",
                    "metadata": {"name": f"kj-{i}", "finalizers": ["kaiwo.silogen.ai/finalizer"]},
                    "spec": {"image": "busybox", "entrypoint": "true"}}
        status, _, body = sb.http("POST", f"/apis/kaiwo.silogen.ai/v1alpha1/namespaces/{NS}/kaiwojobs", kaiwojob)
        assert status == 201, body


async def _cached(sb: RunningSandbox, resource: R.Resource, transform: Transform | None,
                  decoder: PageDecoder | None) -> dict[Any, Any]:
    client = await KubeClient.from_kubeconfig(str(sb.kubeconfig_path))
    cache = ObjectCache(transform=transform)
    informer = Informer(client, resource, lambda *a: None, cache=cache, page_decoder=decoder,
                        settings=InformerSettings(page_size=2))  # several pages: continue tokens too
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 20)
        return {(o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in cache}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


@pytest.mark.parametrize(("resource", "transform", "decoder"), [
    (R.JOBS, without_pod_template, OBJECT_PAGES),
    (R.KAIWOJOBS, None, OBJECT_PAGES),
    (R.WORKLOADS, kueue_workload_fields, KUEUE_WORKLOAD_PAGES),
], ids=["jobs", "kaiwojobs", "workloads"])
def test_a_projected_list_caches_what_a_whole_list_caches(sandbox: RunningSandbox, resource: R.Resource,
                                                          transform: Transform | None, decoder: PageDecoder) -> None:
    _seed(sandbox)
    whole = asyncio.run(_cached(sandbox, resource, transform, None))
    projected = asyncio.run(_cached(sandbox, resource, transform, decoder))
    assert len(whole) == 3
    assert projected == whole
    for obj in projected.values():
        assert "managedFields" not in obj["metadata"]


def test_the_workload_projection_skips_what_its_transform_drops() -> None:
    page = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "7", "continue": "x"},
            "items": [{"metadata": {"name": "w", "uid": "u", "managedFields": [{"manager": "m"}], "annotations": {}},
                       "spec": {"podSets": []}, "status": {"conditions": [], "admission": {"clusterQueue": "c"}}},
                      {"metadata": {"name": "v"}, "status": None}]}
    decoded = KUEUE_WORKLOAD_PAGES(msgspec.json.encode(page))
    assert decoded == {"metadata": {"resourceVersion": "7", "continue": "x"},
                       "items": [{"metadata": {"name": "w", "uid": "u"}, "status": {"conditions": []}},
                                 {"metadata": {"name": "v"}, "status": None}]}


def test_a_malformed_page_is_a_transport_error(sandbox: RunningSandbox) -> None:
    """The decoder's error surfaces as what any broken answer is: a TransportError, never a bare
    decode error (an informer backs off and relists on it)."""
    assert page_decoder()(b'{"items": []}') == {"items": []}
    with pytest.raises(msgspec.DecodeError):
        page_decoder()(b'{"items": [{"metadata": 5}]}')

    def garbled(data: bytes) -> dict[str, Any]:
        return page_decoder()(data[:-1])  # as if the body had been cut

    async def body() -> None:
        client = await KubeClient.from_kubeconfig(str(sandbox.kubeconfig_path))
        try:
            with pytest.raises(TransportError, match="malformed list"):
                await client.list(R.CONFIGMAPS, NS, decode=garbled)
        finally:
            await client.close()

    asyncio.run(body())
