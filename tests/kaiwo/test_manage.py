"""`kaiwo manage` against the sandbox: driven headless by textual's own Pilot (rows, pods, logs,
explain, GPUs, a command in the pod, a background port-forward, delete with confirmation), and once as a user sees it, in tmux (send-keys / capture-pane)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from e2e_harness import OperatorSandbox
from test_commands import job, wait_for
from textual.widgets import Input

from kaiwo_ray.cli.api import Api
from kaiwo_ray.cli.kubeconfig import load
from kaiwo_ray.cli.manage_app import AskText, ClusterBackend, ManageApp

REPO = Path(__file__).resolve().parents[2]
Run = Callable[..., tuple[int, str, str]]  # the `kaiwo`/`offline_kaiwo` fixtures (conftest.py)


def namespace(cluster: OperatorSandbox, name: str) -> None:
    status, _, body = cluster.sb.http("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    assert status in (201, 409), body


def submit(kaiwo: Run, tmp_path: Path, name: str, ns: str, gpus: int = 0) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job(name, ns, entrypoint="echo hello from kaiwo; sleep infinity", gpus=gpus)))
    code, _, err = kaiwo("submit", "-f", str(path), "--wait", "--timeout", "60")
    assert code == 0, err


async def until(pilot: object, check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the screen did not get there in time"
        await pilot.pause(0.05)  # type: ignore[attr-defined]


def test_manage_lists_and_acts_headless(kaiwo: Run, cluster: OperatorSandbox, tmp_path: Path) -> None:
    namespace(cluster, "ns-manage")
    for name, gpus in (("first", 0), ("second", 1)):
        submit(kaiwo, tmp_path, name, "ns-manage", gpus)
    api = Api(load(str(cluster.sb.kubeconfig_path)))
    app = ManageApp(ClusterBackend(api, namespace="ns-manage"))

    async def scenario() -> None:
        async with app.run_test(size=(140, 40)) as pilot:
            await until(pilot, lambda: [r["metadata"]["name"] for r in app.rows] == ["first", "second"])
            await pilot.press("down", "p")
            await until(pilot, lambda: app.detail_text.startswith("[pods of job/second]"))
            assert "POD" in app.detail_text and "running" in app.detail_text
            await pilot.press("l")
            await until(pilot, lambda: app.detail_text.startswith("[logs of job/second]"))
            assert "hello from kaiwo" in app.detail_text
            await pilot.press("e")
            await until(pilot, lambda: app.detail_text.startswith("[explain of job/second]"))
            assert "KaiwoJob ns-manage/second is RUNNING" in app.detail_text
            await pilot.press("m")
            await until(pilot, lambda: app.detail_text.startswith("[monitor of job/second]"))
            assert "GFX_UTIL" in app.detail_text  # amd-smi in its AMD pod
            # run a command in its pod
            await pilot.press("c")
            await until(pilot, lambda: isinstance(app.screen, AskText))
            app.screen.query_one(Input).value = "echo hi-from-$HOSTNAME; exit 4"
            await pilot.press("enter")
            await until(pilot, lambda: app.detail_text.startswith("[command in job/second]"))
            assert "hi-from-second-" in app.detail_text and app.detail_text.endswith("(exit code 4)")
            await pilot.press("d", "n")
            await until(pilot, lambda: app.detail_text == "kept job/second")
            await pilot.press("d", "y")
            await until(pilot, lambda: app.detail_text == "deleted job/second")
            await until(pilot, lambda: [r["metadata"]["name"] for r in app.rows] == ["first"])
            await pilot.press("q")

    asyncio.run(scenario())
    assert kaiwo("get", "job/second", "-n", "ns-manage")[0] == 1
    assert kaiwo("get", "job/first", "-n", "ns-manage")[0] == 0


def test_manage_port_forwards_in_the_background(kaiwo: Run, cluster: OperatorSandbox, tmp_path: Path) -> None:
    """The Ray head of a KaiwoService declares 8265: forwarded while the screen stays up, stopped with s."""
    namespace(cluster, "ns-manage-pf")
    service = yaml.safe_load((REPO / "examples" / "ray-service.yaml").read_text())
    service["metadata"]["namespace"] = "ns-manage-pf"
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(service))
    code, _, err = kaiwo("submit", "-f", str(path), "--wait", "--timeout", "90")
    assert code == 0, err
    app = ManageApp(ClusterBackend(Api(load(str(cluster.sb.kubeconfig_path))), namespace="ns-manage-pf"))

    async def scenario() -> None:
        async with app.run_test(size=(140, 40)) as pilot:
            await until(pilot, lambda: len(app.rows) == 1)
            await pilot.press("f")
            await until(pilot, lambda: isinstance(app.screen, AskText))
            app.screen.query_one(Input).value = ":8265"
            await pilot.press("enter")
            await until(pilot, lambda: app.detail_text.startswith("Forwarding from"))
            found = re.search(r"127\.0\.0\.1:(\d+) -> 8265", app.detail_text)
            assert found, app.detail_text
            url = f"http://127.0.0.1:{found.group(1)}/api/version"
            body = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=20).read())
            assert b'"port": 8265' in body
            await pilot.press("s")
            await until(pilot, lambda: app.detail_text == "stopped 1 port-forward(s)")
            with pytest.raises(OSError):
                await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read())
            await pilot.press("q")

    asyncio.run(scenario())


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed (make tools)")
def test_manage_in_a_real_terminal(kaiwo: Run, cluster: OperatorSandbox, tmp_path: Path) -> None:
    namespace(cluster, "ns-tmux")
    submit(kaiwo, tmp_path, "terminal-job", "ns-tmux")
    session = f"kaiwo-manage-{os.getpid()}"
    kaiwo_bin = Path(sys.executable).parent / "kaiwo"
    command = f"KUBECONFIG={cluster.sb.kubeconfig_path} {kaiwo_bin} manage -n ns-tmux; echo EXITED=$?; sleep 30"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "140", "-y", "40", command], check=True)

    def screen() -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True,
                              check=True).stdout

    try:
        wait_for(lambda: "terminal-job" in screen() and "RUNNING" in screen(), 60, "the workload row")
        subprocess.run(["tmux", "send-keys", "-t", session, "l"], check=True)
        wait_for(lambda: "hello from kaiwo" in screen(), 30, "the logs pane")
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
        wait_for(lambda: "EXITED=0" in screen(), 30, "kaiwo manage to quit")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
