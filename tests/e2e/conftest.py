"""Fixtures for the end-to-end suite: the sandbox with the whole operator running in-process, or a
real cluster (`pytest -m cluster` with `KAIWO_E2E_KUBECONFIG`) where `kaiwo-ray up` runs it.

The `target` fixture is parametrised over both; the cluster half carries the `cluster` marker, which
pyproject deselects unless `-m cluster` is given.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import kubernetes
import pytest
from e2e_harness import OperatorSandbox, operator_sandbox
from e2e_support import Kube, Target
from real_install import ROOT, Kubectl

from kaiwo_ray.api.crd import all_crds
from kaiwo_ray.nodes import default_nodes
from kaiwo_sandbox.testing import RunningSandbox, start_sandbox

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


@pytest.fixture(scope="module")
def real_pods() -> Iterator[RunningSandbox]:
    """For the real install (real_install.py): a sandbox that runs the `kaiwo-ray` image's pods as real
    processes, RBAC enforced; one for each module that asks, as each installs on its own."""
    with start_sandbox(nodes=default_nodes(), cluster=True, time_factor=1.0, authorization="RBAC",
                       extra_crds=list(all_crds()), local_images=["kaiwo-ray"]) as running:
        yield running


@pytest.fixture(scope="module")
def kubectl(real_pods: RunningSandbox, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    """kubectl against `real_pods`, run from the repository root; a failure raises unless check=False."""
    cache = tmp_path_factory.mktemp("kubectl-cache")
    binary = shutil.which("kubectl")
    assert binary is not None

    def run(*args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([binary, "--kubeconfig", str(real_pods.kubeconfig_path), "--cache-dir", str(cache),
                                 *args], capture_output=True, text=True, timeout=120, input=stdin, cwd=ROOT)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {result.stderr}")
        return result
    return run
