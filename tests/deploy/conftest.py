"""Fixtures for deploy/: kubectl (kustomize is built into it) and deploy/ rendered."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))  # e2e_harness: the in-process operator

from deploy_support import DEPLOY, kustomize


@pytest.fixture(scope="session")
def kubectl_bin() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.skip("kubectl not installed (kustomize is built into it)")
    return path


@pytest.fixture(scope="session")
def rendered(kubectl_bin: str) -> list[dict[str, Any]]:
    """Every object `kubectl apply -k deploy/` applies."""
    return [doc for doc in yaml.safe_load_all(kustomize(kubectl_bin, DEPLOY)) if doc]
