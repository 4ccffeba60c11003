from __future__ import annotations

from typing import Any

import pytest
from kaiwo_api_examples import AIM_NAMESPACE_CONFIG, CI_KAIWO_CONFIG

from kaiwo_ray.api.aim import AIMNamespaceConfig
from kaiwo_ray.api.config import KaiwoConfig, KaiwoConfigSpec
from kaiwo_ray.api.load import ManifestError, parse_object

# spec/cluster.md §2.1, the code's defaults (they differ from seed 003 in places: §14).
CLUSTER_MD_DEFAULTS: dict[str, Any] = {
    "ray": {"defaultRayImage": "ghcr.io/silogen/rocm-ray:6.4", "headPodMemory": "16Gi"},
    "storage": {
        "defaultStorageClass": "",
        "defaultDataMountPath": "/workload",
        "defaultHfMountPath": "/hf_cache",
    },
    "nodes": {
        "defaultGpuResourceKey": "amd.com/gpu",
        "defaultGpuTaintKey": "kaiwo.silogen.ai/gpu",
        "excludeMasterNodesFromNodePools": False,
        "addTaintsToGpuNodes": False,
    },
    "scheduling": {"kubeSchedulerName": "kaiwo-scheduler", "pendingThresholdForPreemption": "5m"},
    "resourceMonitoring": {
        "lowUtilizationThreshold": 1,
        "targetNamespaces": [],
        "profile": "gpu",
        "terminateUnderutilized": False,
        "terminateUnderutilizedAfter": "24h",
    },
    "gpuPreemption": {},
    "defaultClusterQueueName": "kaiwo",
    "defaultClusterQueueCohortName": "kaiwo",
    "dynamicallyUpdateDefaultClusterQueue": False,
    "defaultTopologyName": "default-topology",
}


def config(spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": spec,
    }


def test_every_default_of_cluster_md() -> None:
    assert KaiwoConfigSpec().to_wire() == CLUSTER_MD_DEFAULTS


def test_config_without_spec_still_gets_every_nested_default() -> None:
    # Upstream relies on API-server defaulting, which skips a missing spec (cluster.md §2.2).
    parsed = parse_object(
        {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoConfig",
            "metadata": {"name": "kaiwo"},
        }
    )
    assert isinstance(parsed, KaiwoConfig)
    assert parsed.spec.to_wire() == CLUSTER_MD_DEFAULTS


def test_partial_sub_objects_keep_their_other_defaults() -> None:
    parsed = parse_object(CI_KAIWO_CONFIG)
    assert isinstance(parsed, KaiwoConfig)
    assert parsed.spec.ray.head_pod_memory == "1Gi"
    assert parsed.spec.ray.default_ray_image == "ghcr.io/silogen/rocm-ray:6.4"
    assert parsed.spec.scheduling.pending_threshold_for_preemption == "1s"
    assert parsed.spec.scheduling.kube_scheduler_name == "kaiwo-scheduler"
    assert parsed.spec.storage.default_storage_class == "rwx-nfs"
    assert parsed.spec.dynamically_update_default_cluster_queue is True


def test_gpu_preemption_fields_are_unset_by_default_and_validated() -> None:
    spec = KaiwoConfigSpec.model_validate(
        {
            "gpuPreemption": {
                "defaultThreshold": 5,
                "defaultGracePeriod": "10m",
                "defaultPolicy": "Always",
                "defaultAggregation": "Avg",
                "defaultTTL": "0",
            }
        }
    )
    assert spec.gpu_preemption.default_ttl == "0"
    assert spec.to_wire()["gpuPreemption"]["defaultTTL"] == "0"
    assert KaiwoConfigSpec().gpu_preemption.default_policy is None


def test_seed_003s_data_is_read_as_storage() -> None:
    spec = KaiwoConfigSpec.model_validate({"data": {"defaultStorageClass": "rwx-nfs"},
                                           "storage": {"defaultStorageClass": "from-crd-default"}})
    assert spec.storage.default_storage_class == "rwx-nfs"
    assert KaiwoConfigSpec().data is None


def test_fractional_gpu_preemption_threshold() -> None:
    spec = KaiwoConfigSpec.model_validate({"gpuPreemption": {"defaultThreshold": 2.5}})
    assert spec.gpu_preemption.default_threshold == 2.5


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"resourceMonitoring": {"terminateUnderutilizedAfter": "1d"}},
            'spec.resourceMonitoring.terminateUnderutilizedAfter: must match ^([0-9]+(s|m|h))+$ (got "1d")',
        ),
        (
            {"resourceMonitoring": {"terminateUnderutilizedAfter": "500ms"}},
            'spec.resourceMonitoring.terminateUnderutilizedAfter: must match ^([0-9]+(s|m|h))+$ (got "500ms")',
        ),
        (
            {"resourceMonitoring": {"lowUtilizationThreshold": -1}},
            "spec.resourceMonitoring.lowUtilizationThreshold: must be >= 0 (got -1)",
        ),
        (
            {"resourceMonitoring": {"profile": "cpu"}},
            'spec.resourceMonitoring.profile: must be one of "gpu" (got "cpu")',
        ),
        (
            {"scheduling": {"pendingThresholdForPreemption": "5"}},
            'spec.scheduling.pendingThresholdForPreemption: invalid duration "5" (expected e.g. 30s, 5m, 1h30m, 500ms)',
        ),
        (
            {"gpuPreemption": {"defaultThreshold": 101}},
            "spec.gpuPreemption.defaultThreshold: must be <= 100 (got 101)",
        ),
        (
            {"gpuPreemption": {"defaultPolicy": "Sometimes"}},
            'spec.gpuPreemption.defaultPolicy: must be one of "OnPressure", "Always" (got "Sometimes")',
        ),
        (
            {"gpuPreemption": {"defaultAggregation": "Mean"}},
            'spec.gpuPreemption.defaultAggregation: must be one of "Min", "Max", "Avg" (got "Mean")',
        ),
        (
            {"gpuPreemption": {"defaultTtl": "1h"}},
            'spec.gpuPreemption.defaultTtl: unknown field (did you mean "defaultTTL"?)',
        ),
        (
            {"ray": {"headPodMemory": "lots"}},
            'spec.ray.headPodMemory: invalid quantity "lots" (expected e.g. 2, 500m, 16Gi)',
        ),
        (
            {"nodes": {"addTaintsToGpuNodes": "yes please"}},
            'spec.nodes.addTaintsToGpuNodes: must be true or false (got "yes please")',
        ),
    ],
)
def test_config_validation(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError) as info:
        parse_object(config(spec))
    assert str(info.value) == message


def test_aim_namespace_config_from_seed_004_parses() -> None:
    parsed = parse_object(AIM_NAMESPACE_CONFIG)
    assert isinstance(parsed, AIMNamespaceConfig)
    assert parsed.spec.gateway is not None and parsed.spec.gateway.name == "kgw-default"
    credentials = parsed.spec.credentials
    assert credentials is not None and credentials.hugging_face_token is not None
    assert credentials.hugging_face_token.secret_key == "token"
    assert credentials.s3[0].secret_access_key is not None
    assert parsed.spec.images is not None and parsed.spec.images.image_pull_secrets == ["my-regcred"]
    assert parsed.to_wire()["spec"]["credentials"]["azureBlob"] == [
        {"connectionString": {"secretName": "az", "secretKey": "conn"}}
    ]


def test_aim_namespace_config_fields_are_all_optional() -> None:
    parsed = parse_object(
        {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "AIMNamespaceConfig",
            "metadata": {"name": "x"},
            "spec": {},
        }
    )
    assert parsed.to_wire()["spec"] == {}


def test_aim_image_pull_secrets_are_plain_names() -> None:
    doc = {**AIM_NAMESPACE_CONFIG, "spec": {"images": {"imagePullSecrets": [{"name": "x"}]}}}
    with pytest.raises(ManifestError, match=r"spec\.images\.imagePullSecrets\[0\]: must be a string"):
        parse_object(doc)
