"""Manifests in upstream Kaiwo's own shapes (spec/workloads.md §9, spec/cluster.md examples A-D, §12.4, §13).

They must parse unchanged: anything an upstream user has applied must keep working.
"""

from __future__ import annotations

from typing import Any

KAIWO = "kaiwo.silogen.ai/v1alpha1"
CONFIG = "config.kaiwo.silogen.ai/v1alpha1"

E1_MINIMAL_JOB: dict[str, Any] = {
    "apiVersion": KAIWO,
    "kind": "KaiwoJob",
    "metadata": {"name": "hello", "namespace": "team-a", "uid": "U1", "labels": {"project": "x"}},
    "spec": {"user": "Jane.Doe@example.com", "image": "busybox:latest", "entrypoint": "echo hi\nsleep 5\n"},
}

E3_USER_JOB: dict[str, Any] = {
    "apiVersion": KAIWO,
    "kind": "KaiwoJob",
    "metadata": {"name": "custom"},
    "spec": {
        "resources": {"requests": {"memory": "100Mi"}},
        "job": {
            "spec": {
                "backoffLimit": 2,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "c",
                                "image": "busybox",
                                "resources": {"limits": {"memory": "125Mi"}, "requests": {"cpu": "125m"}},
                            }
                        ],
                    }
                },
            }
        },
    },
}

E4_RAY_JOB: dict[str, Any] = {
    "apiVersion": KAIWO,
    "kind": "KaiwoJob",
    "metadata": {"name": "ray-train", "namespace": "ml"},
    "spec": {
        "user": "test@amd.com",
        "ray": True,
        "image": "rayproject/ray:2.41.0",
        "gpuVendor": "nvidia",
        "gpus": 14,
        "entrypoint": "python train.py \\\n  --epochs 2",
    },
}

E5_SERVICE: dict[str, Any] = {
    "apiVersion": KAIWO,
    "kind": "KaiwoService",
    "metadata": {"name": "web"},
    "spec": {
        "image": "nginx:1.27",
        "replicas": 2,
        "priorityClass": "high",
        "entrypoint": "nginx -g 'daemon off;'",
    },
}

E6_RAY_SERVICE: dict[str, Any] = {
    "apiVersion": KAIWO,
    "kind": "KaiwoService",
    "metadata": {"name": "svc", "namespace": "ns"},
    "spec": {
        "ray": True,
        "image": "ghcr.io/silogen/ray-test:v0.3",
        "serveConfigV2": "applications:\n- name: app\n  import_path: app:deployment\n",
    },
}

E7_STORAGE_JOB: dict[str, Any] = {
    "apiVersion": KAIWO,
    "kind": "KaiwoJob",
    "metadata": {"name": "train"},
    "spec": {
        "gpus": 8,
        "image": "rocm/pytorch:latest",
        "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}],
        "storage": {
            "storageEnabled": True,
            "storageClassName": "rwx-nfs",
            "data": {
                "storageSize": "10Gi",
                "download": {
                    "s3": [
                        {
                            "endpointUrl": "https://s3.example",
                            "accessKeyId": {"secretName": "s3", "secretKey": "id"},
                            "secretKey": {"secretName": "s3", "secretKey": "key"},
                            "buckets": [{"name": "b", "folders": [{"path": "ds/", "targetPath": "ds"}]}],
                        }
                    ],
                    "gcs": [
                        {
                            "applicationCredentials": {"secretName": "gcs", "secretKey": "sa.json"},
                            "buckets": [{"name": "g", "files": [{"path": "a.bin", "targetPath": "a.bin"}]}],
                        }
                    ],
                    "azureBlob": [
                        {
                            "connectionString": {"secretName": "az", "secretKey": "conn"},
                            "containers": [
                                {"name": "c", "folders": [{"path": "x/", "targetPath": "x", "glob": "*.pt"}]}
                            ],
                        }
                    ],
                    "git": [
                        {
                            "repository": "https://github.com/silogen/kaiwo.git",
                            "branch": "main",
                            "token": {"secretName": "gh", "secretKey": "token"},
                            "path": "python",
                            "targetPath": "code",
                        }
                    ],
                },
            },
            "huggingFace": {"storageSize": "50Gi", "preCacheRepos": [{"repoId": "org/model"}]},
        },
        "secretVolumes": [
            {"name": "creds", "secretName": "creds", "key": "k", "subPath": "k", "mountPath": "/creds/k"}
        ],
    },
}

RAY_JOB_WITH_EMBEDDED_SPEC: dict[str, Any] = {
    "apiVersion": KAIWO,
    "kind": "KaiwoJob",
    "metadata": {"name": "embedded"},
    "spec": {
        "rayJob": {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": {"name": "dropped"},
            "spec": {
                "entrypoint": "python x.py",
                "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}}},
            },
        }
    },
}

CI_KAIWO_CONFIG: dict[str, Any] = {
    "apiVersion": CONFIG,
    "kind": "KaiwoConfig",
    "metadata": {"name": "kaiwo"},
    "spec": {
        "dynamicallyUpdateDefaultClusterQueue": True,
        "ray": {"headPodMemory": "1Gi"},
        "scheduling": {"pendingThresholdForPreemption": "1s"},
        "storage": {"defaultStorageClass": "rwx-nfs"},
    },
}


def _quotas(name: str, cpu: str, memory: str, amd: str, nvidia: str) -> dict[str, Any]:
    resources = zip(
        ("cpu", "memory", "amd.com/gpu", "nvidia.com/gpu"), (cpu, memory, amd, nvidia), strict=True
    )
    return {"name": name, "resources": [{"name": r, "nominalQuota": q} for r, q in resources]}


EXAMPLE_A_DEFAULT_KQC: dict[str, Any] = {
    "apiVersion": KAIWO,
    "kind": "KaiwoQueueConfig",
    "metadata": {"name": "kaiwo"},
    "spec": {
        "resourceFlavors": [
            {"name": n, "nodeLabels": {"kaiwo/nodepool": n}, "topologyName": "default-topology"}
            for n in (
                "cpu-only-0gpu-7core-28gi",
                "cpu-only-0gpu-28core-115gi",
                "amd-mi300x-8gpu-115core-921gi",
                "nvidia-nvidiah10080gbhbm3-8gpu-86core-460gi",
            )
        ],
        "topologies": [
            {
                "metadata": {"name": "default-topology"},
                "spec": {
                    "levels": [
                        {"nodeLabel": "kaiwo/topology-block"},
                        {"nodeLabel": "kaiwo/topology-rack"},
                        {"nodeLabel": "kubernetes.io/hostname"},
                    ]
                },
            }
        ],
        "clusterQueues": [
            {
                "name": "kaiwo",
                "namespaces": [],
                "spec": {
                    "cohort": "kaiwo",
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory", "amd.com/gpu", "nvidia.com/gpu"],
                            "flavors": [
                                _quotas("cpu-only-0gpu-7core-28gi", "7", "30923764531", "0", "0"),
                                _quotas("cpu-only-0gpu-28core-115gi", "56", "247390116248", "0", "0"),
                                _quotas(
                                    "nvidia-nvidiah10080gbhbm3-8gpu-86core-460gi",
                                    "86",
                                    "494780232499",
                                    "0",
                                    "8",
                                ),
                                _quotas("amd-mi300x-8gpu-115core-921gi", "230", "1979120929996", "16", "0"),
                            ],
                        }
                    ],
                },
            }
        ],
    },
}

EXAMPLE_B_NAMESPACED: dict[str, Any] = {
    "apiVersion": KAIWO,
    "kind": "KaiwoQueueConfig",
    "metadata": {"name": "kaiwo"},
    "spec": {
        "resourceFlavors": [{"name": "foo", "nodeLabels": {"kaiwo/nodepool": "foo"}}],
        "clusterQueues": [
            {
                "name": "fizz",
                "namespaces": ["namespace1", "namespace2"],
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory"],
                            "flavors": [
                                {
                                    "name": "foo",
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": "4"},
                                        {"name": "memory", "nominalQuota": "8Gi"},
                                    ],
                                }
                            ],
                        }
                    ],
                },
            }
        ],
    },
}

EXAMPLE_C_PRIORITIES: dict[str, Any] = {
    "apiVersion": KAIWO,
    "kind": "KaiwoQueueConfig",
    "metadata": {"name": "kaiwo"},
    "spec": {
        "resourceFlavors": [{"name": "default"}],
        "workloadPriorityClasses": [
            {"metadata": {"name": "high-priority"}, "value": 1000, "description": "High priority class"},
            {"metadata": {"name": "low-priority"}, "value": 10},
        ],
        "clusterQueues": [
            {
                "name": "workload-priority-class-test-queue",
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory"],
                            "flavors": [
                                {
                                    "name": "default",
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": "500m"},
                                        {"name": "memory", "nominalQuota": "2Gi"},
                                    ],
                                }
                            ],
                        }
                    ],
                },
            }
        ],
    },
}

EXAMPLE_D_TOPOLOGY: dict[str, Any] = {
    "apiVersion": KAIWO,
    "kind": "KaiwoQueueConfig",
    "metadata": {"name": "kaiwo"},
    "spec": {
        "topologies": [
            {
                "metadata": {"name": "test-topo"},
                "spec": {
                    "levels": [
                        {"nodeLabel": "kaiwo/topology-block"},
                        {"nodeLabel": "kaiwo/topology-rack"},
                        {"nodeLabel": "kubernetes.io/hostname"},
                    ]
                },
            }
        ],
        "resourceFlavors": [
            {"name": "no-topo-flavor", "nodeLabels": {"kaiwo/nodepool": "no-topo"}},
            {"name": "topo-flavor", "nodeLabels": {"kaiwo/nodepool": "topo"}, "topologyName": "test-topo"},
        ],
    },
}

AIM_NAMESPACE_CONFIG: dict[str, Any] = {
    "apiVersion": CONFIG,
    "kind": "AIMNamespaceConfig",
    "metadata": {"name": "default", "namespace": "team-a"},
    "spec": {
        "gateway": {"name": "kgw-default", "namespace": "gateway-system"},
        "credentials": {
            "huggingFaceToken": {"secretName": "hf-creds", "secretKey": "token"},
            "s3": [
                {
                    "endpointUrl": "https://s3.us-east-1.amazonaws.com",
                    "accessKeyId": {"secretName": "s3", "secretKey": "id"},
                    "secretAccessKey": {"secretName": "s3", "secretKey": "key"},
                }
            ],
            "gcs": [{"applicationCredentials": {"secretName": "gcs", "secretKey": "sa.json"}}],
            "azureBlob": [{"connectionString": {"secretName": "az", "secretKey": "conn"}}],
        },
        "images": {"imagePullSecrets": ["my-regcred"]},
    },
}

ALL_EXAMPLES: dict[str, dict[str, Any]] = {
    "E1_MINIMAL_JOB": E1_MINIMAL_JOB,
    "E3_USER_JOB": E3_USER_JOB,
    "E4_RAY_JOB": E4_RAY_JOB,
    "E5_SERVICE": E5_SERVICE,
    "E6_RAY_SERVICE": E6_RAY_SERVICE,
    "E7_STORAGE_JOB": E7_STORAGE_JOB,
    "RAY_JOB_WITH_EMBEDDED_SPEC": RAY_JOB_WITH_EMBEDDED_SPEC,
    "CI_KAIWO_CONFIG": CI_KAIWO_CONFIG,
    "EXAMPLE_A_DEFAULT_KQC": EXAMPLE_A_DEFAULT_KQC,
    "EXAMPLE_B_NAMESPACED": EXAMPLE_B_NAMESPACED,
    "EXAMPLE_C_PRIORITIES": EXAMPLE_C_PRIORITIES,
    "EXAMPLE_D_TOPOLOGY": EXAMPLE_D_TOPOLOGY,
    "AIM_NAMESPACE_CONFIG": AIM_NAMESPACE_CONFIG,
}
