"""Every manifest in examples/ applied to a cluster reaches the final phase tests/examples_expected.yaml
names (the singletons KaiwoConfig and KaiwoQueueConfig included: on the sandbox, which is its own).

On a real cluster the workloads go to a fresh namespace and the cluster's own KaiwoConfig and
KaiwoQueueConfig are left alone unless `KAIWO_E2E_APPLY_SINGLETONS=1`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from e2e_harness import OperatorSandbox, operator_sandbox
from e2e_scenarios import expected_examples, scenario_delete_examples, scenario_examples
from e2e_support import Target, condition, wait_for


@pytest.fixture(scope="module")
def examples_sandbox() -> Iterator[OperatorSandbox]:
    """A sandbox of its own: the examples replace the cluster-wide queue configuration."""
    with operator_sandbox() as env:
        yield env


def test_every_example_reaches_its_expected_phase(examples_sandbox: OperatorSandbox) -> None:
    target = examples_sandbox.target
    namespace, reached = scenario_examples(target, include_singletons=True)
    assert namespace == "default"  # the sandbox runs the files as they are
    table = expected_examples()
    assert reached == {f: e["phase"] or "" for f, e in table.items()}
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


@pytest.mark.cluster
def test_every_example_on_a_real_cluster(real_cluster: Target) -> None:
    singletons = os.environ.get("KAIWO_E2E_APPLY_SINGLETONS") == "1"
    namespace, reached = scenario_examples(real_cluster, include_singletons=singletons)
    table = expected_examples()
    expected = {f: e["phase"] or "" for f, e in table.items()
                if singletons or e["kind"] not in ("KaiwoConfig", "KaiwoQueueConfig")}
    assert reached == expected
    scenario_delete_examples(real_cluster, namespace)
