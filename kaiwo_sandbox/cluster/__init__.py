"""Simulated cluster controllers that make the sandbox behave like a cluster running the
kube-scheduler, kubelets, the Job and Deployment controllers, Kueue, KubeRay and AppWrapper.

Each controller is one module and can be switched on or off by name (see `CONTROLLERS`).
They run on the sandbox's event loop and talk to the store directly (no HTTP): the store
applies the same semantics to their writes as to any client's.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from kaiwo_sandbox.cluster.base import ClusterSettings, Controller, ControllerRunner
from kaiwo_sandbox.contracts import Clock, Store

# name -> "module:Class". Order is start order.
CONTROLLERS: dict[str, str] = {
    "volume-binder": "kaiwo_sandbox.cluster.nodes.volumes:VolumeBinder",
    "scheduler": "kaiwo_sandbox.cluster.nodes.scheduler:Scheduler",
    "kubelet": "kaiwo_sandbox.cluster.nodes.kubelet:Kubelet",
    "job-controller": "kaiwo_sandbox.cluster.workloads.jobs:JobController",
    "deployment-controller": "kaiwo_sandbox.cluster.workloads.deployments:DeploymentController",
    "kueue": "kaiwo_sandbox.cluster.kueue.controller:KueueController",
    "kuberay": "kaiwo_sandbox.cluster.kuberay.controller:KubeRayController",
    "appwrapper": "kaiwo_sandbox.cluster.kuberay.appwrapper:AppWrapperController",
}


def load_controller(name: str) -> type[Controller]:
    module_name, _, class_name = CONTROLLERS[name].partition(":")
    cls: type[Controller] = getattr(importlib.import_module(module_name), class_name)
    return cls


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
    names = list(CONTROLLERS) if enabled is None else select_controllers(enabled)
    runner = ControllerRunner(store, clock)
    for name in names:
        runner.add(load_controller(name)(store, clock, settings))
    runner.start()
    return runner


__all__ = ["CONTROLLERS", "ClusterSettings", "Controller", "ControllerRunner", "select_controllers", "start_cluster"]
