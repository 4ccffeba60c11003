"""Inputs that would make invalid children are refused at render time, naming the spec field
(issue 14, item 3); everything else renders children the API server accepts. The judge is the
sandbox: every rendered child is created there with dryRun=All."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from render_fixtures import CONFIG, gpu_nodes, job, service

from kaiwo_ray.api.workloads import KaiwoJob, KaiwoJobSpec, KaiwoService, KaiwoServiceSpec
from kaiwo_ray.kube import resources as R
from kaiwo_ray.render import RenderError, render_all
from kaiwo_sandbox.testing import RunningSandbox, start_sandbox

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))
from kaiwo_api_strategies import wire_documents

NODES = gpu_nodes("amd", 2, 8)
DATA = {"storageEnabled": True, "storageClassName": "standard", "data": {"storageSize": "1Gi"}}
HF = {"storageEnabled": True, "storageClassName": "standard", "huggingFace": {"storageSize": "1Gi"}}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[RunningSandbox]:
    with start_sandbox(nodes=[]) as sb:
        status, _, text = sb.http("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                                "metadata": {"name": "ns"}})
        assert status == 201, text
        yield sb


def rejections(sandbox: RunningSandbox, children: list[dict[str, Any]]) -> list[str]:
    """Each child the sandbox refuses, with its answer."""
    refused = []
    for child in children:
        status, _, body = sandbox.http("POST", R.for_object(child).path("ns") + "?dryRun=All", child)
        if status >= 400:
            refused.append(f"{child['kind']} {status}: {json.loads(body).get('message', '')[:400]}")
    return refused


def secret_volume(name: str, mount: str = "/secrets", secret: str = "creds") -> dict[str, str]:
    return {"name": name, "secretName": secret, "mountPath": mount}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"secretVolumes": [secret_volume("s3.creds")]}, "spec.secretVolumes[0].name"),
        ({"secretVolumes": [secret_volume("data")], "storage": DATA}, "spec.secretVolumes[0].name"),
        ({"secretVolumes": [secret_volume("hf")], "storage": HF}, "spec.secretVolumes[0].name"),
        ({"secretVolumes": [secret_volume("dshm")]}, "spec.secretVolumes[0].name"),
        ({"secretVolumes": [secret_volume("a"), secret_volume("a", "/other")]}, "spec.secretVolumes[1].name"),
        ({"secretVolumes": [secret_volume("a", "/dev/shm")]}, "spec.secretVolumes[0].mountPath"),
        ({"secretVolumes": [secret_volume("a", "/workload")], "storage": DATA}, "spec.secretVolumes[0].mountPath"),
        ({"secretVolumes": [secret_volume("a", secret="Creds_1")]}, "spec.secretVolumes[0].secretName"),
        ({"clusterQueue": "team a"}, "spec.clusterQueue"),
        ({"priorityClass": "-high"}, "spec.priorityClass"),
        ({"podTemplateSpecLabels": {"team a": "x"}}, "spec.podTemplateSpecLabels"),
        ({"podTemplateSpecLabels": {"team": "a b"}}, "spec.podTemplateSpecLabels.team"),
        ({"resources": {"requests": {"cpu": "4"}, "limits": {"cpu": "2"}}}, "spec.resources.requests.cpu"),
        ({"resources": {"requests": {"amd.com/gpu": "1"}, "limits": {"amd.com/gpu": "2.5"}}},
         "spec.resources.limits.amd.com/gpu"),
        ({"storage": {**DATA, "data": {"storageSize": "0"}}}, "spec.storage.data.storageSize"),
        ({"storage": {**HF, "huggingFace": {"storageSize": "1Gi", "mountPath": ""}}},
         "spec.storage.huggingFace.mountPath"),
    ],
)
def test_inputs_that_make_invalid_children_are_refused_naming_the_field(
        sandbox: RunningSandbox, spec: dict[str, Any], field: str) -> None:
    for make in (job, service):
        workload = make({"image": "img", **spec})
        try:
            children = render_all(workload, CONFIG, NODES)
        except RenderError as err:
            assert err.field == field, err
            continue
        pytest.fail(f"rendered without error; the sandbox says: {rejections(sandbox, children)}")


def test_a_gpu_request_without_its_limit_gets_the_limit(sandbox: RunningSandbox) -> None:
    children = render_all(job({"image": "img", "resources": {"requests": {"amd.com/gpu": "1"}}}), CONFIG, NODES)
    container = children[-1]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["amd.com/gpu"] == "1"
    assert rejections(sandbox, children) == []


def test_a_download_secret_named_like_a_domain_gets_a_valid_volume(sandbox: RunningSandbox) -> None:
    ref = {"secretName": "s3.creds", "secretKey": "id"}
    storage = {**DATA, "data": {"storageSize": "1Gi", "download": {"s3": [
        {"endpointUrl": "http://s3", "buckets": [{"name": "b"}], "accessKeyId": ref, "secretKey": ref}]}}}
    children = render_all(job({"image": "img", "storage": storage}), CONFIG, NODES)
    download = next(c for c in children if c["kind"] == "Job" and c["metadata"]["name"] == "wl-download")
    volumes = download["spec"]["template"]["spec"]["volumes"]
    assert {"name": "secret-s3-creds", "secret": {"secretName": "s3.creds", "items": [{"key": "id", "path": "id"}]}} \
        in volumes
    assert rejections(sandbox, children) == []


TRICKY_SECRET_VOLUMES = st.lists(st.fixed_dictionaries({
    "name": st.sampled_from(["s", "s3.creds", "data", "hf", "dshm", "Cap", "ok-1"]),
    "secretName": st.sampled_from(["sec", "s3.creds", "Bad_Name"]),
    "mountPath": st.sampled_from(["/s", "/dev/shm", "/workload", "/hf_cache", "/t"]),
}), max_size=3)


def _specs(model: type[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.tuples(wire_documents(model), TRICKY_SECRET_VOLUMES, st.booleans()).map(
        lambda t: {**t[0], "image": "img", **({"secretVolumes": t[1]} if t[2] else {})})


@settings(max_examples=80, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(kind=st.sampled_from(["KaiwoJob", "KaiwoService"]), data=st.data())
def test_every_rendered_child_is_accepted_or_the_spec_is_refused_by_field(
        sandbox: RunningSandbox, kind: str, data: st.DataObject) -> None:
    model: type[KaiwoJob | KaiwoService] = KaiwoJob if kind == "KaiwoJob" else KaiwoService
    spec = data.draw(_specs(KaiwoJobSpec if kind == "KaiwoJob" else KaiwoServiceSpec))
    try:
        workload = model.model_validate({"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": kind,
                                         "metadata": {"name": "wl", "namespace": "ns", "uid": "UID-1"},
                                         "spec": spec})
    except ValueError:
        return  # refused by the model (the CRD's schema): a 422 at the API, with the field
    try:
        children = render_all(workload, CONFIG, NODES)
    except RenderError as err:
        assert err.field.startswith(("spec.", "metadata.")), err
        return
    assert rejections(sandbox, children) == [], json.dumps(spec)[:1500]
