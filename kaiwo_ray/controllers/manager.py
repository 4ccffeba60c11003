"""The operator's controllers by name (`CONTROLLERS`, built by `build_controller`), which of them run
by default, and `HostSettings`: what a host (hosts/runtime/controller_host.py, run by a Ray actor or
in-process) needs to run one — cluster access, leader election, workers, process tuning switches.
"""

from __future__ import annotations

import importlib
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kaiwo_ray.controllers.base import Controller
from kaiwo_ray.kube.client import KubeClient

# controller name -> factory path "module:callable(client, **kwargs) -> Controller"
CONTROLLERS: dict[str, str] = {
    "kaiwoconfig": "kaiwo_ray.controllers.kaiwoconfig:KaiwoConfigController",
    "kaiwoqueueconfig": "kaiwo_ray.controllers.queueconfig:QueueConfigController",
    "aimnamespaceconfig": "kaiwo_ray.controllers.aimnamespace:AIMNamespaceConfigController",
    "kaiwojob": "kaiwo_ray.controllers.workloads:kaiwojob_controller",
    "kaiwoservice": "kaiwo_ray.controllers.workloads:kaiwoservice_controller",
    "managedworkload": "kaiwo_ray.controllers.managed:managed_workload_controller",
    "resourcemonitor": "kaiwo_ray.controllers.monitoring:resource_monitor_controller",
    "gpuworkload": "kaiwo_ray.controllers.gpupreemption:gpu_preemption_controller",
    "accounting": "kaiwo_ray.controllers.accounting:accounting_controller",
}
# Controllers of opt-in features: started by default only when their switch is on (the option's
# `settings.enabled`, else the upstream environment variable).
# `managedworkload` tracks plain workloads labelled `kaiwo.silogen.ai/managed`, which only the admission
# webhooks queue (they set Kueue's label): deploy/components/webhooks switches it on.
FEATURE_SWITCHES: dict[str, str] = {"resourcemonitor": "RESOURCE_MONITORING_ENABLED",
                                    "gpuworkload": "GPU_PREEMPTION_ENABLED",
                                    "managedworkload": "MANAGED_WORKLOADS_ENABLED",
                                    "accounting": "GPU_ACCOUNTING_ENABLED"}


def default_controller_names(settings: HostSettings) -> list[str]:
    def enabled(name: str) -> bool:
        feature = settings.controller_options.get(name, {}).get("settings")
        if feature is not None:
            return bool(feature.enabled)
        return os.environ.get(FEATURE_SWITCHES[name], "").strip().lower() in ("true", "1", "yes")

    return [name for name in CONTROLLERS if name not in FEATURE_SWITCHES or enabled(name)]


def build_controller(name: str, client: KubeClient, **kwargs: Any) -> Controller:
    module_name, _, attr = CONTROLLERS[name].partition(":")
    factory: Callable[..., Controller] = getattr(importlib.import_module(module_name), attr)
    return factory(client, **kwargs)


@dataclass(slots=True)
class HostSettings:
    kubeconfig: str | None = None  # None + in_cluster False: the default kubeconfig
    in_cluster: bool = False
    lease: bool = True
    lease_namespace: str = "kube-system"
    lease_seconds: float = 15.0
    renew_every: float = 2.0
    renew_deadline: float | None = None  # None: 2/3 of lease_seconds (client-go's 10 s of 15 s)
    workers: int = 4
    coalesce_seconds: float = 0.05  # see Controller.coalesce_seconds; 0 reacts to every child event
    tune_gc: bool = False  # the process is the operator: see hosts.runtime.gc_tuning (actors, `up`, `dev`)
    # With tune_gc: seconds between full collections of frozen objects (None: gc_tuning.SWEEP_SECONDS).
    gc_sweep_seconds: float | None = None
    # The controller's thread never preempts on wakeup (SCHED_BATCH): see hosts.runtime.cpu_policy. Set
    # where the process is the operator (actors, `up`, `dev`), never in a shared process (tests).
    batch_scheduling: bool = False
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}")
    # Extra keyword arguments for a controller's factory, by controller name (feature settings).
    controller_options: dict[str, dict[str, Any]] = field(default_factory=dict)


async def make_client(settings: HostSettings) -> KubeClient:
    if settings.in_cluster:
        return KubeClient.in_cluster()
    return await KubeClient.from_kubeconfig(settings.kubeconfig)
