"""Fixtures for the end-to-end suite: the sandbox with the whole operator running in-process, or a
real cluster (`pytest -m cluster` with `KAIWO_E2E_KUBECONFIG`) where `kaiwo-ray up` runs it.

The `target` fixture is parametrised over both; the cluster half carries the `cluster` marker, which
pyproject deselects unless `-m cluster` is given.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import kubernetes
import pytest
from e2e_support import Kube, Target, wait_for

from kaiwo_ray.controllers.manager import HostSettings, Operator
from kaiwo_ray.sandbox.testing import RunningSandbox, start_sandbox

# A `sleep 20` entrypoint runs 1 s; pod start-up takes 25 ms.
TIME_FACTOR = 0.05
SANDBOX_TIMEOUT = 30.0
CLUSTER_TIMEOUT = float(os.environ.get("KAIWO_E2E_TIMEOUT", "900"))
KUBECONFIG_VAR = "KAIWO_E2E_KUBECONFIG"


@dataclass
class OperatorSandbox:
    """A sandbox (simulated cluster included) and every kaiwo-ray controller on a private loop."""

    sb: RunningSandbox
    operator: Operator
    loop: asyncio.AbstractEventLoop
    target: Target

    def run(self, coro: Any, timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def controller(self, name: str) -> Any:
        return self.operator.host(name).controller


@contextmanager
def operator_sandbox(**sandbox_kwargs: Any) -> Iterator[OperatorSandbox]:
    sandbox_kwargs.setdefault("time_factor", TIME_FACTOR)
    sb = start_sandbox(cluster=True, **sandbox_kwargs)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="kaiwo-operator", daemon=True)
    thread.start()
    operator = Operator(None, HostSettings(kubeconfig=str(sb.kubeconfig_path), lease=False))
    try:
        asyncio.run_coroutine_threadsafe(operator.start(), loop).result(30)
        kube = Kube(sb.api_client())
        env = OperatorSandbox(sb, operator, loop, Target(kube, "sandbox", SANDBOX_TIMEOUT, sandbox=True))
        # The default queue (from the nodes) is what most scenarios run through.
        wait_for(lambda: kube.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", "kaiwo"), SANDBOX_TIMEOUT,
                 "the default ClusterQueue kaiwo")
        yield env
    finally:
        try:
            asyncio.run_coroutine_threadsafe(operator.stop(), loop).result(30)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            sb.stop()


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
    yield target
    target.cleanup()


@pytest.fixture(params=["sandbox", pytest.param("cluster", marks=pytest.mark.cluster)])
def target(request: pytest.FixtureRequest) -> Target:
    if request.param == "sandbox":
        env: OperatorSandbox = request.getfixturevalue("shared_sandbox")
        return env.target
    cluster: Target = request.getfixturevalue("real_cluster")
    return cluster
