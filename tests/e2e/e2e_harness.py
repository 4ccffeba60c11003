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

from kaiwo_ray.controllers.manager import HostSettings, Operator
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


@contextmanager
def operator_sandbox(host_settings: dict[str, Any] | None = None, **sandbox_kwargs: Any) -> Iterator[OperatorSandbox]:
    """`host_settings` override the operator's HostSettings (default: no leader election)."""
    sandbox_kwargs.setdefault("time_factor", TIME_FACTOR)
    sb = start_sandbox(cluster=True, **sandbox_kwargs)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="kaiwo-operator", daemon=True)
    thread.start()
    operator = Operator(None, HostSettings(**{"kubeconfig": str(sb.kubeconfig_path), "lease": False,
                                              **(host_settings or {})}))
    try:
        asyncio.run_coroutine_threadsafe(operator.start(), loop).result(30)
        kube = Kube(sb.api_client())
        env = OperatorSandbox(sb, operator, loop, Target(kube, "sandbox", SANDBOX_TIMEOUT, sandbox=True))
        # The default queue (from the nodes) is what most scenarios run through.
        wait_for(lambda: kube.get(kube.kueue_api, "ClusterQueue", "kaiwo"), SANDBOX_TIMEOUT,
                 "the default ClusterQueue kaiwo")
        yield env
    finally:
        try:
            asyncio.run_coroutine_threadsafe(operator.stop(), loop).result(30)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            sb.stop()
