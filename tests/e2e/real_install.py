"""What the modules of the real install (test_install.py, test_install_webhooks.py) share besides their
fixtures (`real_pods`, `kubectl`: conftest.py): where the repository is, who the operator is, how long an
install may take, and when the modules can run at all."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SA_USER = "system:serviceaccount:kaiwo-system:kaiwo-ray"
INSTALL_SECONDS = 180  # apply -> RayService Ready; docs/install.md gives the measured figure

Kubectl = Callable[..., subprocess.CompletedProcess[str]]

needs_real_pods = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("kubectl") is None,
    reason="the real install runs pods in network namespaces (needs root, ip, kubectl)")


def get_json(kubectl: Kubectl, *args: str) -> Any:
    """`kubectl get ARGS -o json`, parsed."""
    return json.loads(kubectl("get", *args, "-o", "json").stdout)
