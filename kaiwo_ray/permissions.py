"""What the operator's controllers need from the API server, as RBAC rules: the same rules as
deploy/base/rbac-operator.yaml (a test keeps the two equal; tests/e2e/test_least_privilege.py proves every
one of them is needed and that they suffice) and, for GPU preemption, rbac-gpu-preemption.yaml
(tests/deploy/test_gpu_preemption_rbac.py runs preemption under both). `kaiwo-ray doctor` asks the API
server about the operator's rules.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Rule:
    groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]

    def atoms(self) -> list[tuple[str, str, str]]:
        return [(g, r, v) for g in self.groups for r in self.resources for v in self.verbs]

    def describe(self) -> str:
        group = "/".join(g or "core" for g in self.groups)
        return f"{','.join(self.verbs)} {','.join(self.resources)} ({group})"


# The ClusterRole kaiwo-ray-operator, rule by rule.
OPERATOR_RULES: tuple[Rule, ...] = (
    Rule(("",), ("configmaps", "persistentvolumeclaims"), ("create", "delete", "get", "list", "patch", "watch")),
    Rule(("apps",), ("deployments",), ("create", "delete", "get", "list", "patch", "watch")),
    Rule(("batch",), ("jobs",), ("create", "delete", "get", "list", "patch", "watch")),
    Rule(("ray.io",), ("rayjobs",), ("create", "delete", "get", "list", "patch", "watch")),
    Rule(("workload.codeflare.dev",), ("appwrappers",), ("create", "delete", "get", "list", "patch", "watch")),
    Rule(("ray.io",), ("rayservices",), ("delete", "list", "watch")),
    Rule(("",), ("pods",), ("list", "watch")),
    Rule(("",), ("events",), ("create",)),
    Rule(("",), ("nodes",), ("list", "patch", "watch")),
    Rule(("",), ("namespaces",), ("list", "watch")),
    Rule(("kaiwo.silogen.ai",), ("kaiwojobs", "kaiwoservices"), ("list", "patch", "watch")),
    Rule(("kaiwo.silogen.ai",), ("kaiwojobs/status", "kaiwoqueueconfigs/status", "kaiwoservices/status"),
         ("patch",)),
    Rule(("kaiwo.silogen.ai",), ("kaiwoqueueconfigs",), ("create", "list", "update", "watch")),
    Rule(("config.kaiwo.silogen.ai",), ("kaiwoconfigs",), ("create", "list", "watch")),
    Rule(("kueue.x-k8s.io",), ("clusterqueues", "topologies", "workloadpriorityclasses"),
         ("create", "delete", "list", "update", "watch")),
    Rule(("kueue.x-k8s.io",), ("localqueues",), ("create", "delete", "list", "watch")),
    Rule(("kueue.x-k8s.io",), ("resourceflavors",), ("create", "delete", "get", "list", "patch", "update", "watch")),
    Rule(("kueue.x-k8s.io",), ("workloads",), ("list", "watch")),
    Rule(("scheduling.k8s.io",), ("priorityclasses",), ("list", "watch")),
    Rule(("config.kaiwo.silogen.ai",), ("aimnamespaceconfigs",), ("list", "watch")),
    Rule(("config.kaiwo.silogen.ai",), ("aimnamespaceconfigs/status",), ("patch",)),
    Rule(("",), ("secrets",), ("list", "watch")),
    Rule(("gateway.networking.k8s.io",), ("gateways",), ("list", "watch")),
    Rule(("gateway.networking.k8s.io",), ("httproutes",), ("create", "delete", "get", "list", "patch", "watch")),
)

# The Role kaiwo-ray-leader-election, in the operator's own namespace.
LEASE_RULES: tuple[Rule, ...] = (Rule(("coordination.k8s.io",), ("leases",), ("create", "get", "update")),)

# The ClusterRole kaiwo-ray-gpu-preemption (deploy/base/rbac-gpu-preemption.yaml): what the GpuWorkload
# controller (kaiwo_ray/controllers/gpupreemption.py) needs beyond OPERATOR_RULES. Its trackers; the
# owner chain it reads (get) from a GPU pod or Kueue Workload up to the root owner, and the root it deletes
# to preempt, for the root kinds listed here; its evaluation Lease is LEASE_RULES' (same namespace).
PREEMPTION_RULES: tuple[Rule, ...] = (
    Rule(("kaiwo.silogen.ai",), ("gpuworkloads",), ("create", "delete", "get", "list", "patch", "watch")),
    Rule(("kaiwo.silogen.ai",), ("gpuworkloads/status",), ("patch",)),
    Rule(("",), ("pods",), ("delete", "get")),
    Rule(("apps",), ("replicasets", "statefulsets"), ("delete", "get")),
    Rule(("batch",), ("cronjobs",), ("delete", "get")),
    Rule(("ray.io",), ("rayclusters",), ("delete", "get")),
    Rule(("ray.io",), ("rayservices",), ("get",)),
    Rule(("kaiwo.silogen.ai",), ("kaiwojobs", "kaiwoservices"), ("delete", "get")),
)

