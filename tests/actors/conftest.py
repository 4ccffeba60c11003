"""One real local Ray for the whole test session (it takes seconds to start on two cores), and a
sandbox cluster per test with helpers to start operator instances on it as distinct API users."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kaiwo_sandbox.instance import write_kubeconfig
from kaiwo_sandbox.pytest_plugin import SandboxFactory
from kaiwo_sandbox.testing import RunningSandbox

_namespaces = itertools.count()


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    ray = pytest.importorskip("ray")
    from actors.supervisor import init_ray

    started = init_ray(None, namespace="kaiwo-tests", num_cpus=2)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture
def sandbox(sandbox_factory: SandboxFactory) -> RunningSandbox:
    """A sandbox with every simulated controller, at 20x real time."""
    return sandbox_factory(cluster=True, time_factor=0.05)


class Instances:
    """Operator instances (supervisors) on one sandbox, each under its own API user and Ray
    namespace, as two kaiwo-ray deployments in two Ray clusters would be. Stopped at teardown."""

    def __init__(self, sb: RunningSandbox, tmp_path: Path) -> None:
        self.sb = sb
        self.tmp_path = tmp_path
        self.started: list[Any] = []

    def kubeconfig_for(self, user: str) -> Path:
        path = self.tmp_path / f"{user}.kubeconfig"
        cert = self.sb.sandbox.cert
        write_kubeconfig(path, self.sb.url, self.sb.mint_token(user), cert.cert_pem if cert else None)
        return path

    def supervisor(self, user: str, names: list[str], **settings: Any) -> Any:
        from actors.supervisor import Supervisor
        from kaiwo_ray.controllers.manager import HostSettings

        host = HostSettings(kubeconfig=str(self.kubeconfig_for(user)), identity=user, renew_every=1.0,
                            **settings)
        sup = Supervisor(host, names, namespace=f"kaiwo-test-{user}-{next(_namespaces)}",
                         log_level=logging.WARNING)
        self.started.append(sup)
        return sup

    def stop_all(self) -> None:
        for sup in self.started:
            sup.stop(grace_seconds=2.0)


@pytest.fixture
def instances(ray_session: Any, sandbox: RunningSandbox, tmp_path: Path) -> Iterator[Instances]:
    found = Instances(sandbox, tmp_path)
    yield found
    found.stop_all()
