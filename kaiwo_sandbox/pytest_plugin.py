"""The sandbox's pytest plugin: one harness for every test suite that talks to a sandbox.

Fixtures:
- `sandbox`: a bare sandbox (API server only: no nodes, no simulated controllers) for one test;
- `sandbox_factory`: `sandbox_factory(**start_sandbox_kwargs)` starts more, each stopped after the
  test; a simulated controller that raised during the test fails it (a controller error is logged and
  retried, which would otherwise hide a bug behind a slow recovery);
- `eventually`: `kaiwo_sandbox.testing.eventually` (poll with a deadline) for tests that take it as a fixture.

Enable it with `pytest_plugins = ["kaiwo_sandbox.pytest_plugin"]` in the root conftest.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox

SandboxFactory = Callable[..., RunningSandbox]


@pytest.fixture
def sandbox_factory() -> Iterator[SandboxFactory]:
    started: list[RunningSandbox] = []

    def make(**kwargs: Any) -> RunningSandbox:
        running = start_sandbox(**kwargs)
        started.append(running)
        return running

    yield make
    errors = {id(r): r.cluster.errors for r in started if r.cluster is not None}
    for running in started:
        running.stop()
    assert not any(errors.values()), f"simulated controllers raised {sum(errors.values())} time(s); see the log"


@pytest.fixture
def sandbox(sandbox_factory: SandboxFactory) -> RunningSandbox:
    """A bare API server: no nodes, no simulated controllers (a fresh one starts in tens of ms)."""
    return sandbox_factory(nodes=[])


@pytest.fixture(name="eventually")
def eventually_fixture() -> Callable[..., Any]:
    return eventually
