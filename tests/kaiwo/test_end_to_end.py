"""The installed `kaiwo` console script as a user runs it (subprocesses): submit and list, a live
`list -w`, and `port-forward` serving HTTP until Ctrl-C, which ends it without a traceback."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml
from e2e_harness import OperatorSandbox
from test_commands import job

KAIWO = str(Path(sys.executable).parent / "kaiwo")
REPO = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def env(cluster: OperatorSandbox) -> dict[str, str]:
    status, _, body = cluster.sb.http("POST", "/api/v1/namespaces", {"metadata": {"name": "ns-e2e"}})
    assert status in (201, 409), body
    return {**os.environ, "KUBECONFIG": str(cluster.sb.kubeconfig_path), "HOME": str(REPO / ".no-home")}


def kaiwo(env: dict[str, str], *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KAIWO, *argv], env=env, capture_output=True, text=True, input=stdin, timeout=120)


def test_submit_from_stdin_then_list(env: dict[str, str]) -> None:
    done = kaiwo(env, "submit", "-f", "-", "-n", "ns-e2e", stdin=yaml.safe_dump(job("piped", "ns-e2e")))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "kaiwojob.kaiwo.silogen.ai/piped created\n"
    listed = kaiwo(env, "list", "-n", "ns-e2e")
    assert listed.returncode == 0 and re.search(r"^job/piped\s+jane@example.com", listed.stdout, re.M)


def test_list_watch_prints_changes_and_stops_on_ctrl_c(env: dict[str, str]) -> None:
    watcher = subprocess.Popen([KAIWO, "list", "jobs", "-n", "ns-e2e", "-w"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert kaiwo(env, "submit", "-f", "-", stdin=yaml.safe_dump(job("watched", "ns-e2e"))).returncode == 0
        lines: list[str] = []
        while not any(line.startswith("watched") and "COMPLETE" in line for line in lines):
            line = watcher.stdout.readline() if watcher.stdout else ""
            assert line, f"the watch ended early: {lines}"
            lines.append(line)
        assert lines[0].split()[:2] == ["NAME", "USER"]
    finally:
        os.killpg(watcher.pid, signal.SIGINT)
        _, err = watcher.communicate(timeout=30)
    assert watcher.returncode == 130 and "Traceback" not in err


def test_port_forward_serves_until_ctrl_c(env: dict[str, str], cluster: OperatorSandbox) -> None:
    service = yaml.safe_load((REPO / "examples" / "ray-service.yaml").read_text())
    service["metadata"]["namespace"] = "ns-e2e"
    done = kaiwo(env, "submit", "-f", "-", "--wait", "--timeout", "90", stdin=yaml.safe_dump(service))
    assert done.returncode == 0, done.stderr
    name = service["metadata"]["name"]
    forward = subprocess.Popen([KAIWO, "port-forward", f"service/{name}", "-n", "ns-e2e", ":8265", ":9"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        assert forward.stdout is not None
        lines = [forward.stdout.readline(), forward.stdout.readline()]
        ports = [int(m.group(1)) for line in lines if (m := re.search(r":(\d+) -> ", line))]
        assert len(ports) == 2, lines
        body = urllib.request.urlopen(f"http://127.0.0.1:{ports[0]}/api/version", timeout=20).read()
        assert b'"port": 8265' in body and b'"path": "/api/version"' in body
        with pytest.raises(OSError):  # nothing listens on port 9 in the pod: the connection is dropped
            urllib.request.urlopen(f"http://127.0.0.1:{ports[1]}/", timeout=20).read()
    finally:
        os.killpg(forward.pid, signal.SIGINT)
        _, err = forward.communicate(timeout=30)
    assert forward.returncode == 130
    assert "Traceback" not in err and "connection refused" in err


def test_console_script_reads_the_kubeconfig_flag(env: dict[str, str], cluster: OperatorSandbox) -> None:
    assert kaiwo(env, "submit", "-f", "-", stdin=yaml.safe_dump(job("flagged", "ns-e2e"))).returncode == 0
    bare = {k: v for k, v in env.items() if k != "KUBECONFIG"}
    assert kaiwo(bare, "list", "-n", "ns-e2e").returncode == 1  # no kubeconfig: a cluster error
    done = kaiwo(bare, "list", "-n", "ns-e2e", "--kubeconfig", str(cluster.sb.kubeconfig_path), "-o", "name")
    assert done.returncode == 0 and "job/flagged" in done.stdout
