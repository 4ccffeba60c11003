"""The operator in-process against a sandbox: every kaiwo-ray controller on a private event loop,
next to a sandbox running the simulated cluster (Kueue, KubeRay, AppWrapper, kubelets ...)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from e2e_support import Kube, Target, wait_for

from hosts.runtime.controller_host import Operator
from kaiwo_ray.controllers.manager import HostSettings
from kaiwo_sandbox.testing import RunningSandbox, start_sandbox

# A `sleep 20` entrypoint runs 1 s; pod start-up takes 25 ms.
TIME_FACTOR = 0.05
SANDBOX_TIMEOUT = 30.0


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

    def second_operator(self, **settings: Any) -> Operator:
        """Another operator instance against the same sandbox, on the same loop (started)."""
        operator = Operator(None, HostSettings(kubeconfig=str(self.sb.kubeconfig_path), **settings))
        self.run(operator.start())
        return operator


@dataclass
class RunningOperator:
    """An Operator on an event loop of its own thread (`in_process_operator`)."""

    operator: Operator
    loop: asyncio.AbstractEventLoop

    def run(self, coro: Any, timeout: float = 60.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


@contextmanager
def in_process_operator(settings: HostSettings, names: list[str] | None = None,
                        timeout: float = 60.0) -> Iterator[RunningOperator]:
    """The operator (`names`: those controllers, None: the default set) started on a private loop; on
    exit it is stopped (releasing its Leases) and the loop ended."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="kaiwo-operator", daemon=True)
    thread.start()
    running = RunningOperator(Operator(names, settings), loop)
    try:
        running.run(running.operator.start(), timeout)
        yield running
    finally:
        try:
            running.run(running.operator.stop(), timeout)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)


@contextmanager
def operator_sandbox(host_settings: dict[str, Any] | None = None, **sandbox_kwargs: Any) -> Iterator[OperatorSandbox]:
    """`host_settings` override the operator's HostSettings (default: no leader election)."""
    sandbox_kwargs.setdefault("time_factor", TIME_FACTOR)
    sb = start_sandbox(cluster=True, **sandbox_kwargs)
    settings = HostSettings(**{"kubeconfig": str(sb.kubeconfig_path), "lease": False, **(host_settings or {})})
    try:
        with in_process_operator(settings, timeout=30) as running:
            kube = Kube(sb.api_client())
            env = OperatorSandbox(sb, running.operator, running.loop,
                                  Target(kube, "sandbox", SANDBOX_TIMEOUT, sandbox=True))
            # The default queue (from the nodes) is what most scenarios run through.
            wait_for(lambda: kube.get(kube.kueue_api, "ClusterQueue", "kaiwo"), SANDBOX_TIMEOUT,
                     "the default ClusterQueue kaiwo")
            yield env
    finally:
        sb.stop()
