"""Fixtures for simulated-cluster scenario tests: sandboxes with controllers running, clients of
the official `kubernetes` package, node builders, and `wait_for` (poll under a deadline)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import kubernetes
import pytest

from kaiwo_sandbox.cluster.base import ClusterSettings
from kaiwo_sandbox.contracts import Clock, JsonObj
from kaiwo_sandbox.pytest_plugin import SandboxFactory
from kaiwo_sandbox.testing import RunningSandbox, eventually

# The controllers these workload tests need (no Kueue, KubeRay or AppWrapper in the way).
WORKLOAD_CONTROLLERS = ("volume-binder", "scheduler", "kubelet", "job-controller", "deployment-controller")


# Poll under a deadline: the one polling loop is kaiwo_sandbox.testing.eventually.
wait_for = eventually


def make_node(name: str, *, cpu: str = "16", memory: str = "64Gi", gpus: int = 0, gpu_resource: str = "amd.com/gpu",
              labels: dict[str, str] | None = None, taints: list[JsonObj] | None = None,
              unschedulable: bool = False, pods: str = "110", ready: bool | None = None) -> JsonObj:
    """A Node as a kind cluster would register it (capacity = allocatable)."""
    capacity = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi"}
    if gpus:
        capacity[gpu_resource] = str(gpus)
    node: JsonObj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                              **(labels or {})}},
        "spec": {},
        "status": {"capacity": dict(capacity), "allocatable": dict(capacity)},
    }
    if taints:
        node["spec"]["taints"] = taints
    if unschedulable:
        node["spec"]["unschedulable"] = True
    if ready is not None:
        node["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False",
                                         "reason": "KubeletReady" if ready else "KubeletNotReady"}]
    return node


@pytest.fixture(name="wait_for")
def wait_for_fixture() -> Callable[..., Any]:
    return wait_for


@pytest.fixture(name="make_node")
def make_node_fixture() -> Callable[..., JsonObj]:
    return make_node


@pytest.fixture
def sandbox_factory(sandbox_factory: SandboxFactory) -> SandboxFactory:
    """`sandbox_factory(nodes=[...], cluster=True | [names], time_factor=0.01, settings=None,
    manual_clock=False, clock=None)`: the
    plugin's factory with this suite's defaults (one plain node, every simulated controller)."""

    def make(*, nodes: list[JsonObj] | None = None, cluster: bool | Iterable[str] = True,
             time_factor: float = 0.01, settings: ClusterSettings | None = None,
             manual_clock: bool = False, clock: Clock | None = None) -> RunningSandbox:
        return sandbox_factory(nodes=[make_node("node-1")] if nodes is None else nodes, cluster=cluster,
                               time_factor=time_factor, cluster_settings=settings, manual_clock=manual_clock,
                               clock=clock)

    return make


class Clients:
    """The typed APIs of the official client, bound to one sandbox."""

    def __init__(self, sandbox: RunningSandbox) -> None:
        self.sandbox = sandbox
        self.api = sandbox.api_client()
        self.core = kubernetes.client.CoreV1Api(self.api)
        self.batch = kubernetes.client.BatchV1Api(self.api)
        self.apps = kubernetes.client.AppsV1Api(self.api)
        self.storage = kubernetes.client.StorageV1Api(self.api)

    def events(self, namespace: str = "default", name: str | None = None) -> list[Any]:
        items = self.core.list_namespaced_event(namespace).items
        return [e for e in items if name is None or e.involved_object.name == name]

    def close(self) -> None:
        self.api.close()


@pytest.fixture
def clients_factory() -> Iterator[Callable[[RunningSandbox], Clients]]:
    made: list[Clients] = []

    def make(sandbox: RunningSandbox) -> Clients:
        clients = Clients(sandbox)
        made.append(clients)
        return clients

    yield make
    for clients in made:
        clients.close()
