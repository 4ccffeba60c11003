"""One sandbox with the whole operator for the admin API tests, and the admin app served by uvicorn
on a real port beside it (auth off unless a test builds its own app)."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from e2e_harness import OperatorSandbox, operator_sandbox
from e2e_support import wait_for

from serve.app import build_app
from serve.state import AdminSettings, StatsSource


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class RunningApp:
    url: str
    server: uvicorn.Server
    thread: threading.Thread

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30.0, **kwargs)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def serve_app(settings: AdminSettings) -> RunningApp:
    """The admin app under uvicorn on a thread (its own event loop), once its cache has synced."""
    port = free_port()
    config = uvicorn.Config(build_app(settings), host="127.0.0.1", port=port, log_level="warning",
                            lifespan="on", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"admin-{port}", daemon=True)
    thread.start()
    wait_for(lambda: server.started or not thread.is_alive(), 60, "the admin app started")
    assert thread.is_alive(), "the admin app failed to start"
    return RunningApp(f"http://127.0.0.1:{port}", server, thread)


def operator_stats(env: OperatorSandbox) -> StatsSource:
    """The in-process operator's stats, read on its own loop (as the Ray actors answer theirs)."""
    async def collect() -> list[dict[str, Any]]:
        async def on_operator_loop() -> list[dict[str, Any]]:
            return [host.stats() for host in env.operator.hosts]

        future = asyncio.run_coroutine_threadsafe(on_operator_loop(), env.loop)
        return await asyncio.wrap_future(future)

    return collect


@pytest.fixture(scope="session")
def env() -> Iterator[OperatorSandbox]:
    with operator_sandbox() as env:
        yield env


@pytest.fixture(scope="session")
def api(env: OperatorSandbox) -> Iterator[RunningApp]:
    running = serve_app(AdminSettings(kubeconfig=str(env.sb.kubeconfig_path), auth="none",
                                      stats_source=operator_stats(env)))
    yield running
    running.stop()


@pytest.fixture
def http(api: RunningApp) -> Iterator[httpx.Client]:
    with api.client() as client:
        yield client
