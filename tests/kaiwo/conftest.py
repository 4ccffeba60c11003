"""Fixtures for the `kaiwo` CLI tests: one sandbox with the whole operator in-process (the e2e
harness) for the module, and `kaiwo(...)`, which runs the CLI in-process as `main(argv)` with the
sandbox's kubeconfig and returns (exit code, stdout, stderr)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from e2e_harness import OperatorSandbox, operator_sandbox

from kaiwo_ray.cli.kaiwo import main

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture(scope="session")
def cluster() -> Iterator[OperatorSandbox]:
    with operator_sandbox() as env:
        yield env


@pytest.fixture
def offline_kaiwo(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Run:
    """`kaiwo` with no cluster at all (HOME and KUBECONFIG point at an empty directory)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KAIWOCONFIG", raising=False)

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def kaiwo(cluster: OperatorSandbox, offline_kaiwo: Run, monkeypatch: pytest.MonkeyPatch) -> Run:
    monkeypatch.setenv("KUBECONFIG", str(cluster.sb.kubeconfig_path))
    return offline_kaiwo
