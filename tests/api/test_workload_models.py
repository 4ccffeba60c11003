from __future__ import annotations

import copy
import datetime
from typing import Any

import pytest
from kaiwo_api_examples import (
    E1_MINIMAL_JOB,
    E3_USER_JOB,
    E4_RAY_JOB,
    E5_SERVICE,
    E6_RAY_SERVICE,
    E7_STORAGE_JOB,
    RAY_JOB_WITH_EMBEDDED_SPEC,
)

from kaiwo_ray.api.load import ManifestError, parse_object
from kaiwo_ray.api.workloads import (
    KaiwoJob,
    KaiwoJobSpec,
    KaiwoService,
    KaiwoServiceSpec,
    StorageSpec,
    WorkloadPhase,
    WorkloadStatus,
)


def job(spec: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": "j"},
        "spec": spec,
        **top,
    }


def error_of(doc: dict[str, Any]) -> str:
    with pytest.raises(ManifestError) as info:
        parse_object(doc)
    return str(info.value)


# --- defaults -----------------------------------------------------------------------------------


def test_common_spec_defaults_match_upstream_crd() -> None:
    spec = KaiwoJobSpec()
    assert spec.gpus == 0
    assert spec.gpu_vendor == "amd"
    assert spec.replicas == 1
    assert spec.gpus_per_replica == 0
    assert spec.ray is False
    assert spec.dangerous is False
    assert spec.env == []
    assert spec.image_pull_secrets == []
    assert spec.secret_volumes == []
    for unset in (
        "user",
        "image",
        "duration",
        "cluster_queue",
        "priority_class",
        "storage",
        "resources",
        "job",
    ):
        assert getattr(spec, unset) is None


def test_storage_defaults() -> None:
    doc = job({"storage": {"storageEnabled": True, "data": {"storageSize": "1Gi"}, "huggingFace": {}}})
    storage = parse_object(doc).spec.storage  # type: ignore[union-attr]
    assert isinstance(storage, StorageSpec)
    assert storage.access_mode == "ReadWriteMany"
    assert storage.storage_class_name is None
    # Unset mount paths stay unset: rendering takes KaiwoConfig's storage defaults (/workload, /hf_cache).
    assert storage.data is not None and storage.data.mount_path is None
    assert storage.hugging_face is not None and storage.hugging_face.mount_path is None
    assert storage.hugging_face.pre_cache_repos == []


def test_status_defaults_and_phase_strings() -> None:
    status = WorkloadStatus()
    assert status.status is WorkloadPhase.NEW and status.status == ""
    assert [p.value for p in WorkloadPhase] == [
        "",
        "DOWNLOADING",
        "PENDING",
        "STARTING",
        "RUNNING",
        "COMPLETE",
        "ERROR",
        "FAILED",
        "TERMINATING",
        "TERMINATED",
        "READY",  # legacy, accepted when reading objects an older upstream operator wrote
    ]
    assert {p for p in WorkloadPhase if p.is_terminal} == {"COMPLETE", "FAILED", "TERMINATED"}
    assert {p for p in WorkloadPhase if p.is_active} == {
        "",
        "DOWNLOADING",
        "PENDING",
        "STARTING",
        "RUNNING",
        "READY",
    }


def test_explicit_null_means_default_like_the_api_server() -> None:
    parsed = parse_object(job({"replicas": None, "gpus": None, "user": None}))
    assert isinstance(parsed, KaiwoJob)
    assert parsed.spec.replicas == 1
    assert parsed.spec.gpus == 0


def test_kinds_default_their_type_meta() -> None:
    assert KaiwoJob().to_wire()["apiVersion"] == "kaiwo.silogen.ai/v1alpha1"
    assert KaiwoService().kind == "KaiwoService"


# --- upstream manifests --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [
        E1_MINIMAL_JOB,
        E3_USER_JOB,
        E4_RAY_JOB,
        E5_SERVICE,
        E6_RAY_SERVICE,
        E7_STORAGE_JOB,
        RAY_JOB_WITH_EMBEDDED_SPEC,
    ],
)
def test_upstream_workload_manifests_parse_and_dump_back_unchanged(doc: dict[str, Any]) -> None:
    before = copy.deepcopy(doc)
    wire = parse_object(doc).to_wire()
    assert doc == before, "parsing must not mutate the input"
    assert _contains(wire, doc), "every field the user wrote must survive a round trip"


def _contains(big: Any, small: Any) -> bool:
    if isinstance(small, dict):
        return isinstance(big, dict) and all(k in big and _contains(big[k], v) for k, v in small.items())
    if isinstance(small, list):
        return isinstance(big, list) and len(big) == len(small) and all(map(_contains, big, small))
    return bool(big == small)


def test_embedded_objects_are_kept_whole() -> None:
    parsed = parse_object(RAY_JOB_WITH_EMBEDDED_SPEC)
    assert isinstance(parsed, KaiwoJob)
    assert parsed.spec.ray_job == RAY_JOB_WITH_EMBEDDED_SPEC["spec"]["rayJob"]


def test_e7_download_sources_are_typed() -> None:
    parsed = parse_object(E7_STORAGE_JOB)
    assert isinstance(parsed, KaiwoJob) and parsed.spec.storage is not None
    data = parsed.spec.storage.data
    assert data is not None and data.download is not None
    s3 = data.download.s3[0]
    assert s3.endpoint_url == "https://s3.example"
    assert s3.secret_key is not None and s3.secret_key.secret_key == "key"
    assert s3.buckets[0].folders[0].target_path == "ds"
    assert data.download.azure_blob[0].containers[0].folders[0].glob == "*.pt"
    assert data.download.git[0].target_path == "code"
    assert parsed.spec.storage.hugging_face is not None
    assert parsed.spec.storage.hugging_face.pre_cache_repos[0].repo_id == "org/model"
    assert parsed.spec.storage_enabled


@pytest.mark.parametrize(
    ("spec", "uses_ray"),
    [
        ({}, False),
        ({"ray": True}, True),
        ({"rayJob": {"spec": {}}}, True),
        ({"job": {"spec": {}}, "ray": True}, True),
    ],
)
def test_job_ray_selection(spec: dict[str, Any], uses_ray: bool) -> None:
    assert KaiwoJobSpec.model_validate(spec).effective_uses_ray is uses_ray


@pytest.mark.parametrize(
    ("spec", "uses_ray"),
    [
        ({}, False),
        ({"ray": True}, True),
        ({"rayService": {"spec": {}}}, True),
        ({"deployment": {"spec": {}}}, False),
    ],
)
def test_service_ray_selection(spec: dict[str, Any], uses_ray: bool) -> None:
    assert KaiwoServiceSpec.model_validate(spec).effective_uses_ray is uses_ray


def test_duration_is_kept_as_written_and_parsed_on_demand() -> None:
    spec = KaiwoJobSpec.model_validate({"duration": "1h30m"})
    assert spec.duration == "1h30m"
    assert spec.duration_timedelta == datetime.timedelta(minutes=90)
    assert KaiwoJobSpec().duration_timedelta is None


def test_python_names_are_accepted_in_python_but_not_on_the_wire() -> None:
    spec = KaiwoJobSpec(gpus_per_replica=2, gpu_vendor="nvidia")
    assert spec.model_dump(by_alias=True, exclude_none=True)["gpusPerReplica"] == 2
    # The API server would prune a snake_case key, so the loader must not quietly honour it.
    assert (
        error_of(job({"gpus_per_replica": 2}))
        == 'spec.gpus_per_replica: unknown field (did you mean "gpusPerReplica"?)'
    )
    assert error_of(job({"storage": {"storage_enabled": True}})) == (
        'spec.storage.storage_enabled: unknown field (did you mean "storageEnabled"?)'
    )


def test_status_timestamps_round_trip_in_rfc3339() -> None:
    doc = job({}, status={"status": "RUNNING", "startTime": "2025-01-31T12:00:00Z", "duration": 5})
    parsed = parse_object(doc)
    assert isinstance(parsed, KaiwoJob) and parsed.status is not None
    assert parsed.status.start_time == datetime.datetime(2025, 1, 31, 12, tzinfo=datetime.UTC)
    assert parsed.to_wire()["status"] == {
        "status": "RUNNING",
        "conditions": [],
        "startTime": "2025-01-31T12:00:00Z",
        "duration": 5,
    }


# --- validation errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"gpus": -1}, "spec.gpus: must be >= 0 (got -1)"),
        ({"replicas": -2}, "spec.replicas: must be >= 0 (got -2)"),
        ({"gpusPerReplica": -1}, "spec.gpusPerReplica: must be >= 0 (got -1)"),
        ({"gpus": "eight"}, 'spec.gpus: must be an integer (got "eight")'),
        ({"gpus": 1.5}, "spec.gpus: must be an integer (got 1.5)"),
        ({"ray": "maybe"}, 'spec.ray: must be true or false (got "maybe")'),
        ({"image": 3}, "spec.image: must be a string (got 3)"),
        ({"duration": "1d"}, 'spec.duration: invalid duration "1d" (expected e.g. 30s, 5m, 1h30m, 500ms)'),
        ({"gpusPerReplika": 1}, 'spec.gpusPerReplika: unknown field (did you mean "gpusPerReplica"?)'),
        ({"GPUs": 1}, 'spec.GPUs: unknown field (did you mean "gpus"?)'),
        ({"zzz": 1}, "spec.zzz: unknown field"),
        ({"env": [{"value": "x"}]}, "spec.env[0].name: required"),
        ({"env": [{"name": "A"}, {"name": ""}]}, "spec.env[1].name: must be a non-empty string"),
        ({"imagePullSecrets": [{"name": 1}]}, "spec.imagePullSecrets[0].name: must be a string"),
        (
            {"resources": {"requests": {"cpu": "two"}}},
            'spec.resources.requests.cpu: invalid quantity "two" (expected e.g. 2, 500m, 16Gi)',
        ),
        (
            {"resources": {"limits": {"amd.com/gpu": "x"}}},
            'spec.resources.limits["amd.com/gpu"]: invalid quantity "x" (expected e.g. 2, 500m, 16Gi)',
        ),
        (
            {"resources": {"request": {}}},
            "spec.resources.request: unknown field (expected limits, requests or claims)",
        ),
        (
            {"resources": {"limits": ["cpu"]}},
            "spec.resources.limits: must be an object mapping resource names to quantities",
        ),
        ({"resources": {"claims": {}}}, "spec.resources.claims: must be a list"),
        ({"env": {"A": "b"}}, "spec.env: must be a list (got an object)"),
        ({"secretVolumes": [{"name": "s", "secretName": "s"}]}, "spec.secretVolumes[0].mountPath: required"),
        (
            {"storage": {"accessMode": "RWX"}},
            'spec.storage.accessMode: must be one of "ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod" (got "RWX")',
        ),
        (
            {"storage": {"data": {"storageSize": "ten gigs"}}},
            'spec.storage.data.storageSize: invalid quantity "ten gigs" (expected e.g. 2, 500m, 16Gi)',
        ),
        (
            {"storage": {"data": {"download": {"s3": [{"buckets": []}]}}}},
            "spec.storage.data.download.s3[0].endpointUrl: required",
        ),
        (
            {"storage": {"data": {"download": {"s3": [{"endpointUrl": "u"}]}}}},
            "spec.storage.data.download.s3[0].buckets: required",
        ),
        (
            {"storage": {"data": {"download": {"azureBlob": [{"connectionString": {}}]}}}},
            "spec.storage.data.download.azureBlob[0].containers: required",
        ),
        (
            {"storage": {"data": {"download": {"git": [{"repository": "r"}]}}}},
            "spec.storage.data.download.git[0].targetPath: required",
        ),
        (
            {"storage": {"data": {"download": {"s3": [{"endpointUrl": "u", "buckets": [{"files": []}]}]}}}},
            "spec.storage.data.download.s3[0].buckets[0].name: required",
        ),
        (
            {
                "storage": {
                    "data": {
                        "download": {
                            "s3": [{"endpointUrl": "u", "buckets": [{"name": "b", "files": [{"path": "p"}]}]}]
                        }
                    }
                }
            },
            "spec.storage.data.download.s3[0].buckets[0].files[0].targetPath: required",
        ),
        (
            {"storage": {"huggingFace": {"preCacheRepos": [{"files": ["a"]}]}}},
            "spec.storage.huggingFace.preCacheRepos[0].repoId: required",
        ),
        (
            {
                "storage": {
                    "data": {
                        "download": {
                            "s3": [{"endpointUrl": "u", "buckets": [], "accessKeyId": {"secretname": "x"}}]
                        }
                    }
                }
            },
            'spec.storage.data.download.s3[0].accessKeyId.secretname: unknown field (did you mean "secretName"?)',
        ),
        ({"job": "batch"}, 'spec.job: must be an object (got "batch")'),
        ({"podTemplateSpecLabels": {"a": 1}}, "spec.podTemplateSpecLabels.a: must be a string (got 1)"),
        ({"gpuModels": "mi300x"}, 'spec.gpuModels: must be a list (got "mi300x")'),
    ],
)
def test_validation_errors_name_the_wire_path(spec: dict[str, Any], message: str) -> None:
    assert error_of(job(spec)) == message


def test_service_spec_rejects_job_only_fields() -> None:
    doc = {**E5_SERVICE, "spec": {**E5_SERVICE["spec"], "rayJob": {}}}
    assert error_of(doc).startswith("spec.rayJob: unknown field")


def test_status_phase_is_validated() -> None:
    assert error_of(job({}, status={"status": "Running"})).startswith(
        'status.status: must be one of "", "DOWNLOADING"'
    )


def test_resources_keep_the_users_spelling() -> None:
    resources = {
        "requests": {"cpu": 2, "memory": "16Gi"},
        "limits": {"amd.com/gpu": "8"},
        "claims": [{"name": "c"}],
    }
    parsed = parse_object(job({"resources": resources}))
    assert isinstance(parsed, KaiwoJob)
    assert parsed.spec.resources == resources


def test_metadata_allows_anything() -> None:
    doc = job({}, metadata={"name": "j", "managedFields": [{"manager": "kubectl"}], "generateName": "x-"})
    parsed = parse_object(doc)
    assert parsed.to_wire()["metadata"]["managedFields"] == [{"manager": "kubectl"}]


def test_metadata_labels_must_be_strings() -> None:
    assert (
        error_of(job({}, metadata={"labels": {"kaiwo/x": 1}}))
        == 'metadata.labels["kaiwo/x"]: must be a string (got 1)'
    )


def test_all_problems_are_collected() -> None:
    with pytest.raises(ManifestError) as info:
        parse_object(job({"gpus": -1, "replicas": -1, "typo": 1}))
    assert str(info.value) == "spec.gpus: must be >= 0 (got -1) (and 2 more errors)"
    assert [e.path for e in info.value.errors] == ["spec.gpus", "spec.replicas", "spec.typo"]
    assert info.value.details().count("\n") == 2


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (
            {"conditions": [{"type": "Ready", "status": "Yes"}]},
            'status.conditions[0].status: must be one of "True", "False", "Unknown" (got "Yes")',
        ),
        ({"conditions": [{"status": "True"}]}, "status.conditions[0].type: required"),
        (
            {"startTime": "yesterday"},
            'status.startTime: invalid timestamp "yesterday" (expected RFC 3339, e.g. 2025-01-31T12:00:00Z)',
        ),
        ({"duration": "5s"}, 'status.duration: must be an integer (got "5s")'),
        ({"observedGeneration": 1.5}, "status.observedGeneration: must be an integer (got 1.5)"),
    ],
)
def test_status_validation(status: dict[str, Any], message: str) -> None:
    assert error_of(job({}, status=status)) == message


def test_timestamps_are_normalised_to_utc_seconds() -> None:
    status = WorkloadStatus.model_validate({"startTime": "2025-01-31T14:00:00.123+02:00"})
    assert status.to_wire()["startTime"] == "2025-01-31T12:00:00Z"
    naive = WorkloadStatus(start_time=datetime.datetime(2025, 1, 31, 12, 0, 0, 999))
    assert naive.to_wire()["startTime"] == "2025-01-31T12:00:00Z"


def test_service_status_and_kind_defaults() -> None:
    parsed = parse_object({**E5_SERVICE, "status": {"status": "STARTING"}})
    assert isinstance(parsed, KaiwoService) and parsed.status is not None
    assert parsed.status.status is WorkloadPhase.STARTING
