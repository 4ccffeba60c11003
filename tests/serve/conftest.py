"""One sandbox with the whole operator for the admin API tests, and the admin app served by uvicorn
on a real port beside it (auth off unless a test builds its own app)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from admin_support import RunningApp, serve_app
from e2e_harness import OperatorSandbox, operator_sandbox

from serve.state import AdminSettings, StatsSource


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
