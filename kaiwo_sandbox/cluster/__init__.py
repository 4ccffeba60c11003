"""Simulated cluster controllers that make the sandbox behave like a cluster running the
kube-scheduler, kubelets, the Job and Deployment controllers, Kueue, KubeRay and AppWrapper.

Each controller is one module and can be switched on or off by name (see `CONTROLLERS`).
They run on the sandbox's event loop and talk to the store directly (no HTTP): the store
applies the same semantics to their writes as to any client's.
"""

from __future__ import annotations

from collections.abc import Iterable

from kaiwo_sandbox.cluster.base import ClusterSettings, Controller, ControllerRunner
from kaiwo_sandbox.cluster.certmanager.controller import CertManagerController
from kaiwo_sandbox.cluster.kuberay.appwrapper import AppWrapperController
from kaiwo_sandbox.cluster.kuberay.controller import KubeRayController
from kaiwo_sandbox.cluster.kueue.controller import KueueController
from kaiwo_sandbox.cluster.kueue.webhooks import KueueWebhooks
from kaiwo_sandbox.cluster.namespaces import NamespaceDefaults
from kaiwo_sandbox.cluster.nodes.endpoints import RealPodEndpoints
from kaiwo_sandbox.cluster.nodes.kubelet import Kubelet
from kaiwo_sandbox.cluster.nodes.localdns import LocalDns
from kaiwo_sandbox.cluster.nodes.scheduler import Scheduler
from kaiwo_sandbox.cluster.nodes.volumes import VolumeBinder
from kaiwo_sandbox.cluster.tokens import TokenController
from kaiwo_sandbox.cluster.workloads.daemonsets import DaemonSetController
from kaiwo_sandbox.cluster.workloads.deployments import DeploymentController
from kaiwo_sandbox.cluster.workloads.jobs import JobController
from kaiwo_sandbox.cluster.workloads.replicationcontrollers import ReplicationManager
from kaiwo_sandbox.contracts import Clock, Store

# name -> controller class. Order is start order.
CONTROLLERS: dict[str, type[Controller]] = {
    "volume-binder": VolumeBinder,
    "scheduler": Scheduler,
    "kubelet": Kubelet,
    "local-dns": LocalDns,
    "endpoints": RealPodEndpoints,
    "job-controller": JobController,
    "deployment-controller": DeploymentController,
    "replication-controller": ReplicationManager,
    "kueue": KueueController,
    "kuberay": KubeRayController,
    "appwrapper": AppWrapperController,
    "namespace-defaults": NamespaceDefaults,
    "daemonset-controller": DaemonSetController,
    "token-controller": TokenController,
    "cert-manager": CertManagerController,
}
# Add-ons a cluster may or may not run, started only when named (`cluster=True` leaves them out): the
# product behaves differently where they are installed (cert-manager: who keeps the webhooks' certificate).
OPT_IN: frozenset[str] = frozenset({"cert-manager"})
# Parts started with a controller, not switchable on their own: Kueue's validating webhooks run
# wherever its controller does (a Kueue without them would store what a real one refuses).
COMPANIONS: dict[str, tuple[type[Controller], ...]] = {"kueue": (KueueWebhooks,)}


def select_controllers(names: Iterable[str]) -> list[str]:
    """`names` in start order; ValueError naming the known controllers if one is unknown."""
    wanted = set(names)
    unknown = sorted(wanted - CONTROLLERS.keys())
    if unknown:
        raise ValueError(f"unknown simulated controller(s) {', '.join(unknown)}; "
                         f"known: {', '.join(CONTROLLERS)}")
    return [n for n in CONTROLLERS if n in wanted]


def start_cluster(store: Store, clock: Clock, settings: ClusterSettings | None = None,
                  enabled: Iterable[str] | None = None) -> ControllerRunner:
    """Start the named controllers (all known ones by default) on the running event loop.

    An unknown name is an error rather than ignored: a typo would otherwise silently leave a
    controller off and the cluster would just look stuck."""
    settings = settings or ClusterSettings()
    names = [n for n in CONTROLLERS if n not in OPT_IN] if enabled is None else select_controllers(enabled)
    runner = ControllerRunner(store, clock)
    for name in names:
        runner.add(CONTROLLERS[name](store, clock, settings))
        for companion in COMPANIONS.get(name, ()):
            runner.add(companion(store, clock, settings))
    runner.start()
    return runner


__all__ = ["CONTROLLERS", "OPT_IN", "ClusterSettings", "Controller", "ControllerRunner", "select_controllers", "start_cluster"]
