"""Fixtures for the KaiwoJob/KaiwoService controller integration tests: the e2e harness (the whole
operator in-process next to a sandbox with the simulated cluster), reused from tests/e2e."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from e2e_harness import OperatorSandbox, operator_sandbox


@pytest.fixture(scope="module")
def operator_env() -> Iterator[OperatorSandbox]:
    """One sandbox + operator per test module; tests keep to namespaces of their own."""
    with operator_sandbox() as env:
        yield env
