"""One sandbox with the whole operator for the admin API tests, and the admin app served by uvicorn
on a real port beside it (auth off unless a test builds its own app)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from admin_support import RunningApp, operator_stats, serve_app
from e2e_harness import OperatorSandbox, operator_sandbox

from serve.state import AdminSettings


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
