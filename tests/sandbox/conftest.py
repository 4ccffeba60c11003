"""Fixtures for the sandbox's own tests: a fresh sandbox per test (no nodes, no controllers)
and clients of the official `kubernetes` package pointed at it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from kaiwo_sandbox.testing import RunningSandbox


@pytest.fixture
def api(sandbox: RunningSandbox) -> Iterator[Any]:
    client = sandbox.api_client()
    yield client
    client.close()


@pytest.fixture
def core(api: Any) -> Any:
    return kubernetes.client.CoreV1Api(api)


@pytest.fixture
def custom(api: Any) -> Any:
    return kubernetes.client.CustomObjectsApi(api)


@pytest.fixture
def kubectl_bin() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.skip("kubectl not installed")
    return path
