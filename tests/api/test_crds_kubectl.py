"""What an operator sees with kubectl: printer columns and short names of our CRDs (on the sandbox)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from kaiwo_api_examples import AIM_NAMESPACE_CONFIG, E1_MINIMAL_JOB, E5_SERVICE, EXAMPLE_C_PRIORITIES

from kaiwo_sandbox.testing import RunningSandbox, start_sandbox

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")


@pytest.fixture(scope="module")
def sandbox() -> Iterator[RunningSandbox]:
    with start_sandbox(nodes=[]) as running:
        yield running


def kubectl(sandbox: RunningSandbox, *args: str, stdin: Any = None) -> str:
    assert KUBECTL is not None
    result = subprocess.run(
        [KUBECTL, f"--kubeconfig={sandbox.kubeconfig_path}", *args],
        input=None if stdin is None else json.dumps(stdin),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def applied(sandbox: RunningSandbox) -> RunningSandbox:
    kubectl(
        sandbox,
        "apply",
        "-f",
        "-",
        stdin={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
    )
    service = {**E5_SERVICE, "metadata": {"name": "web", "namespace": "team-a"}}
    for doc in (E1_MINIMAL_JOB, service, AIM_NAMESPACE_CONFIG, EXAMPLE_C_PRIORITIES):
        kubectl(sandbox, "apply", "-f", "-", stdin=doc)
    return sandbox


@pytest.mark.parametrize(
    ("resource", "header"),
    [
        ("kaiwojobs", ["NAME", "STATUS", "STARTTIME", "COMPLETIONTIME", "DURATION(S)"]),
        ("kaiwoservices", ["NAME", "STATUS", "STARTTIME", "DURATION(S)"]),
        ("aimns", ["NAME", "GATEWAY", "AGE"]),
    ],
)
def test_namespaced_columns(applied: RunningSandbox, resource: str, header: list[str]) -> None:
    lines = kubectl(applied, "get", resource, "-n", "team-a").splitlines()
    assert lines[0].split() == header
    assert len(lines) == 2


def test_aim_row_shows_the_gateway(applied: RunningSandbox) -> None:
    row = kubectl(applied, "get", "aimns", "-n", "team-a", "--no-headers").split()
    assert row[:2] == ["default", "kgw-default"]


def test_queue_config_column(applied: RunningSandbox) -> None:
    lines = kubectl(applied, "get", "kaiwoqueueconfigs").splitlines()
    assert lines[0].split() == ["NAME", "WORKLOADSTATUS"]
    assert lines[1].split() == ["kaiwo"]


def test_category_kaiwo_lists_aim_namespace_configs(applied: RunningSandbox) -> None:
    out = kubectl(applied, "get", "kaiwo", "-A", "-o", "name")
    assert "aimnamespaceconfig.config.kaiwo.silogen.ai/default" in out
