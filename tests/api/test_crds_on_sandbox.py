"""Our CRDs installed in the project's sandbox API server, driven through the official `kubernetes` client:
upstream manifests are accepted, defaulted exactly like the models default them, and bad ones are
rejected naming the field."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from kaiwo_api_examples import ALL_EXAMPLES, E1_MINIMAL_JOB, E7_STORAGE_JOB, EXAMPLE_B_NAMESPACED

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.crd import CRDS
from kaiwo_ray.api.load import parse_object
from kaiwo_sandbox.testing import RunningSandbox

NAMESPACE = "team-a"
PLURALS = {info.kind: (info.group, info.plural, info.scope == "Namespaced") for info in CRDS}


@pytest.fixture
def sandbox(sandbox: RunningSandbox) -> RunningSandbox:
    """The plugin's sandbox with the namespaces these tests create objects in."""
    client = sandbox.api_client()
    for namespace in (NAMESPACE, "ns", "ml"):
        kubernetes.client.CoreV1Api(client).create_namespace({"metadata": {"name": namespace}})
    client.close()
    return sandbox


@pytest.fixture
def custom(sandbox: RunningSandbox) -> Iterator[Any]:
    client = sandbox.api_client()
    yield kubernetes.client.CustomObjectsApi(client)
    client.close()


def create(custom: Any, doc: dict[str, Any]) -> dict[str, Any]:
    group, plural, namespaced = PLURALS[doc["kind"]]
    if namespaced:
        namespace = doc["metadata"].get("namespace", NAMESPACE)
        return dict(custom.create_namespaced_custom_object(group, "v1alpha1", namespace, plural, doc))
    return dict(custom.create_cluster_custom_object(group, "v1alpha1", plural, doc))


def delete(custom: Any, doc: dict[str, Any]) -> None:
    group, plural, namespaced = PLURALS[doc["kind"]]
    name = doc["metadata"]["name"]
    if namespaced:
        custom.delete_namespaced_custom_object(
            group, "v1alpha1", doc["metadata"].get("namespace", NAMESPACE), plural, name
        )
    else:
        custom.delete_cluster_custom_object(group, "v1alpha1", plural, name)


def test_every_crd_is_installed_and_established(sandbox: RunningSandbox) -> None:
    client = sandbox.api_client()
    try:
        crds = kubernetes.client.ApiextensionsV1Api(client).list_custom_resource_definition().items
    finally:
        client.close()
    names = {crd.metadata.name for crd in crds}
    assert {f"{info.plural}.{info.group}" for info in CRDS} <= names


@pytest.mark.parametrize("name", sorted(ALL_EXAMPLES))
def test_server_defaults_equal_model_defaults(custom: Any, name: str) -> None:
    doc = copy.deepcopy(ALL_EXAMPLES[name])
    doc.pop("status", None)
    stored = create(custom, doc)
    try:
        from_server = parse_object(stored)
        from_model = parse_object(doc)
        assert from_server.spec == from_model.spec  # type: ignore[attr-defined]
    finally:
        delete(custom, doc)


def test_a_config_without_spec_is_completed_by_the_server(custom: Any) -> None:
    doc = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "bare"},
    }
    stored = create(custom, doc)
    try:
        assert KaiwoConfigSpec.model_validate(stored["spec"]) == KaiwoConfigSpec()
        assert stored["spec"]["resourceMonitoring"]["terminateUnderutilizedAfter"] == "24h"
    finally:
        delete(custom, doc)


def _broken(doc: dict[str, Any], name: str, change: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["metadata"]["name"] = name
    change(doc)
    return doc


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (_broken(E1_MINIMAL_JOB, "neg", lambda d: d["spec"].update(gpus=-1)), "spec.gpus"),
        (_broken(E1_MINIMAL_JOB, "dur", lambda d: d["spec"].update(duration="1d")), "spec.duration"),
        (
            _broken(E7_STORAGE_JOB, "rwx", lambda d: d["spec"]["storage"].update(accessMode="RWX")),
            "spec.storage.accessMode",
        ),
        (
            _broken(
                E7_STORAGE_JOB,
                "s3",
                lambda d: d["spec"]["storage"]["data"]["download"]["s3"][0].pop("endpointUrl"),
            ),
            "spec.storage.data.download.s3[0].endpointUrl",
        ),
        (
            _broken(
                EXAMPLE_B_NAMESPACED,
                "fifo",
                lambda d: d["spec"]["clusterQueues"][0]["spec"].update(queueingStrategy="FIFO"),
            ),
            "spec.clusterQueues[0].spec.queueingStrategy",
        ),
    ],
)
def test_server_rejects_what_the_model_rejects_naming_the_field(
    custom: Any, doc: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError, match=f"^{field.replace('[', '.').replace(']', '').split('.')[0]}"):
        parse_object(doc)
    with pytest.raises(kubernetes.client.ApiException) as info:
        create(custom, doc)
    assert info.value.status == 422
    assert field in (info.value.body or "")


def test_status_subresource_round_trips_through_the_model(custom: Any) -> None:
    doc = _broken(E1_MINIMAL_JOB, "with-status", lambda d: None)
    create(custom, doc)
    try:
        status = {
            "status": "RUNNING",
            "startTime": "2025-01-31T12:00:00Z",
            "duration": 7,
            "conditions": [
                {
                    "type": "Running",
                    "status": "True",
                    "reason": "Started",
                    "message": "",
                    "lastTransitionTime": "2025-01-31T12:00:00Z",
                }
            ],
        }
        custom.patch_namespaced_custom_object_status(
            "kaiwo.silogen.ai", "v1alpha1", NAMESPACE, "kaiwojobs", "with-status", {"status": status}
        )
        stored = custom.get_namespaced_custom_object(
            "kaiwo.silogen.ai", "v1alpha1", NAMESPACE, "kaiwojobs", "with-status"
        )
        parsed = parse_object(stored)
        assert parsed.to_wire()["status"] == status  # type: ignore[union-attr]
    finally:
        delete(custom, doc)


def test_upstream_era_manifests_are_accepted(custom: Any) -> None:
    """Seed 003's KaiwoConfig (`data`, not `storage`) with a fractional GPU-preemption threshold, and a
    GpuWorkload with a fractional one: the server keeps them, and the models read `data` as `storage`."""
    config = {"apiVersion": "config.kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoConfig", "metadata": {"name": "old"},
              "spec": {"data": {"defaultStorageClass": "rwx-nfs", "defaultHfMountPath": "/.cache/huggingface"},
                       "gpuPreemption": {"defaultThreshold": 2.5}}}
    tracker = {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "GpuWorkload",
               "metadata": {"name": "job-x-12345678", "namespace": NAMESPACE},
               "spec": {"workloadRef": {"apiVersion": "batch/v1", "kind": "Job", "name": "x", "uid": "u"},
                        "utilizationThreshold": 2.5}}
    try:
        stored = create(custom, config)
        assert stored["spec"]["data"]["defaultStorageClass"] == "rwx-nfs"
        spec = KaiwoConfigSpec.model_validate(stored["spec"])
        assert (spec.storage.default_storage_class, spec.storage.default_hf_mount_path) == (
            "rwx-nfs", "/.cache/huggingface")
        assert spec.gpu_preemption.default_threshold == 2.5
        assert create(custom, tracker)["spec"]["utilizationThreshold"] == 2.5
    finally:
        for doc in (config, tracker):
            with contextlib.suppress(kubernetes.client.ApiException):
                delete(custom, doc)
