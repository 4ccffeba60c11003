"""Every manifest in examples/ applied to a cluster reaches the final phase tests/examples_expected.yaml
names (the singletons KaiwoConfig and KaiwoQueueConfig included: on the sandbox, which is its own),
in a namespace that enforces the Pod Security "restricted" standard (every pod the operator makes
passes it; a pod that does not is refused there).

On a real cluster the workloads go to a fresh namespace and the cluster's own KaiwoConfig and
KaiwoQueueConfig are left alone unless `KAIWO_E2E_APPLY_SINGLETONS=1`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from e2e_harness import OperatorSandbox, operator_sandbox
from e2e_scenarios import expected_examples, scenario_delete_examples, scenario_examples
from e2e_support import Target, condition, wait_for
from kubernetes.dynamic.exceptions import DynamicApiError


@pytest.fixture(scope="module")
def examples_sandbox() -> Iterator[OperatorSandbox]:
    """A sandbox of its own: the examples replace the cluster-wide queue configuration."""
    with operator_sandbox() as env:
        yield env


def test_every_example_reaches_its_expected_phase(examples_sandbox: OperatorSandbox) -> None:
    target = examples_sandbox.target
    namespace, reached = scenario_examples(target, include_singletons=True, pod_security="restricted")
    assert namespace == "default"  # the sandbox runs the files as they are
    table = expected_examples()
    assert reached == {f: e["phase"] or "" for f, e in table.items()}
    assert_restricted(target, namespace)
    # The applied queue config is the one Kueue serves: the `research` queue and its LocalQueue.
    kube = target.kube
    wait_for(lambda: kube.get(kube.kueue_api, "ClusterQueue", "research"), target.timeout,
             "ClusterQueue research")
    wait_for(lambda: kube.get(kube.kueue_api, "LocalQueue", "research", "default"), target.timeout,
             "LocalQueue research in default")
    # The GPU job went through its download Job first.
    finetune = kube.get("kaiwo.silogen.ai/v1alpha1", "KaiwoJob", "llama-finetune", "default")
    downloaded = condition(finetune, "DownloadJobSucceeded")
    assert downloaded is not None and downloaded["status"] == "True", finetune
    # The RayJob's head took KaiwoConfig's headPodMemory from examples/kaiwoconfig.yaml (8Gi).
    rayjob = kube.get("ray.io/v1", "RayJob", "ray-distributed", "default")
    assert rayjob is not None
    head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert head["resources"]["limits"]["memory"] == "8Gi"
    scenario_delete_examples(target, namespace)


def assert_restricted(target: Target, namespace: str) -> None:
    """The namespace the examples ran in really enforced "restricted": a pod without the fields is refused."""
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "not-restricted"},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "command": ["true"]}]}}
    with pytest.raises(DynamicApiError) as refused:
        target.kube.create(bare, namespace)
    assert refused.value.status == 403
    assert 'violates PodSecurity "restricted:' in json.loads(refused.value.body)["message"]


@pytest.mark.cluster
def test_every_example_on_a_real_cluster(real_cluster: Target) -> None:
    singletons = os.environ.get("KAIWO_E2E_APPLY_SINGLETONS") == "1"
    namespace, reached = scenario_examples(real_cluster, include_singletons=singletons, pod_security="restricted")
    table = expected_examples()
    expected = {f: e["phase"] or "" for f, e in table.items()
                if singletons or e["kind"] not in ("KaiwoConfig", "KaiwoQueueConfig")}
    assert reached == expected
    assert_restricted(real_cluster, namespace)
    scenario_delete_examples(real_cluster, namespace)
