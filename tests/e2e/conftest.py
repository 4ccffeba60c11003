"""Fixtures for the end-to-end suite: the sandbox with the whole operator running in-process, or a
real cluster (`pytest -m cluster` with `KAIWO_E2E_KUBECONFIG`) where `kaiwo-ray up` runs it.

The `target` fixture is parametrised over both; the cluster half carries the `cluster` marker, which
pyproject deselects unless `-m cluster` is given.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import kubernetes
import pytest
from e2e_harness import OperatorSandbox, operator_sandbox
from e2e_support import Kube, Target

CLUSTER_TIMEOUT = float(os.environ.get("KAIWO_E2E_TIMEOUT", "900"))
KUBECONFIG_VAR = "KAIWO_E2E_KUBECONFIG"


@pytest.fixture(scope="session")
def shared_sandbox() -> Iterator[OperatorSandbox]:
    """One operator sandbox for every scenario that keeps to its own namespaces."""
    with operator_sandbox() as env:
        yield env


@pytest.fixture(scope="session")
def real_cluster() -> Iterator[Target]:
    path = os.environ.get(KUBECONFIG_VAR)
    if not path:
        pytest.skip(f"{KUBECONFIG_VAR} is not set: point it at a kubeconfig of a cluster where "
                    "`kaiwo-ray up` runs the operator to run the cluster suite")
    api_client = kubernetes.config.new_client_from_config(config_file=path)  # type: ignore[no-untyped-call]
    target = Target(Kube(api_client), "cluster", CLUSTER_TIMEOUT, sandbox=False)
    if target.kube.get("config.kaiwo.silogen.ai/v1alpha1", "KaiwoConfig", "kaiwo") is None:
        pytest.skip(f"{KUBECONFIG_VAR}: KaiwoConfig kaiwo does not exist; is the operator running "
                    "(`kaiwo-ray up`)? It creates it at start-up")
    yield target
    target.cleanup()


@pytest.fixture(params=["sandbox", pytest.param("cluster", marks=pytest.mark.cluster)])
def target(request: pytest.FixtureRequest) -> Target:
    if request.param == "sandbox":
        env: OperatorSandbox = request.getfixturevalue("shared_sandbox")
        return env.target
    cluster: Target = request.getfixturevalue("real_cluster")
    return cluster
