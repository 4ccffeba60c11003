"""How every process of a benchmark runs: started with the spawn context (`CONTEXT`), on the event
loop its party is deployed on (`deployed_loop`, `run_deployed`), talking to the API server through
the `kubernetes` package (`k8s`, `api_client`), and waiting on a condition by polling it under a
deadline (`wait_for`).

Every actor of a measurement runs in its own process (sandbox, operator, watcher, load client), so
none of them shares a GIL with another; wall-clock timestamps (`time.time()`) are compared across
processes on the same machine.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CONTEXT = multiprocessing.get_context("spawn")


def deployed_loop() -> asyncio.AbstractEventLoop:
    """The event loop a party runs on when deployed, for every process here: uvloop where installed.
    Ray creates each async actor's loop with it (ray._private.async_compat.get_new_event_loop, unless
    RAY_USE_UVLOOP=0), so our controllers run on it in production; the `kaiwo-ray sandbox` CLI serves on
    it (kaiwo_sandbox.instance.new_event_loop); `kopf run` picks it when installed. Plain asyncio here
    measured every party on a loop none of them is deployed on (and the sandbox ~15% slower)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    if os.environ.get("RAY_USE_UVLOOP", "1").lower() in ("0", "false"):
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run_deployed(main: Any) -> Any:
    """`asyncio.run(main)` on `deployed_loop()`."""
    with asyncio.Runner(loop_factory=deployed_loop) as runner:
        return runner.run(main)


def k8s() -> Any:
    """The kubernetes package, untyped here: its generated signatures want models, we pass dicts."""
    import kubernetes

    return kubernetes


def api_client(kubeconfig: Path) -> Any:
    return k8s().config.new_client_from_config(config_file=str(kubeconfig))


def wait_for(check: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)  # polling under a deadline
    return check()
