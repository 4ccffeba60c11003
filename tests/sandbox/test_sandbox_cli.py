"""`kaiwo-ray sandbox`: kubeconfig, node seeding, clean Ctrl-C, state across restarts."""

from __future__ import annotations

import base64
import http.client
import importlib.util
import json
import signal
import ssl
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from kaiwo_sandbox.storage.persistence import load_state

NODES = """apiVersion: v1
kind: Node
metadata:
  name: only-node
  labels: {kubernetes.io/hostname: only-node}
status:
  capacity: {cpu: "4", memory: 8Gi}
"""


@contextmanager
def running_cli(*args: str) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    process = subprocess.Popen([sys.executable, "-m", "hosts.cli.main", "sandbox", *args],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if line.startswith("Press Ctrl-C"):
                break
        else:
            raise AssertionError(f"sandbox exited early: {''.join(lines)}")
        yield process, lines
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def _stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0, out
    assert "Traceback" not in out
    return out


def _core(kubeconfig: Path) -> Any:
    return kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(config_file=str(kubeconfig)))


def test_cli_serves_writes_kubeconfig_and_stops_cleanly(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc" / "config"
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(NODES)
    state = tmp_path / "state"
    with running_cli("--kubeconfig", str(kubeconfig), "--nodes", str(nodes), "--state", str(state),
                     "--no-cluster") as (process, lines):
        text = "".join(lines)
        assert f"export KUBECONFIG={kubeconfig}" in text
        assert f"kubectl --kubeconfig {kubeconfig}" in text
        config = yaml.safe_load(kubeconfig.read_text())
        assert config["current-context"] == "kaiwo-sandbox"
        assert config["clusters"][0]["cluster"]["server"].startswith("https://127.0.0.1:")
        assert config["users"][0]["user"]["token"]
        core = _core(kubeconfig)
        assert [n.metadata.name for n in core.list_node().items] == ["only-node"]
        created = core.create_namespaced_config_map("default", {"metadata": {"name": "kept"}, "data": {"a": "1"}})
        out = _stop(process)
    assert "state saved" in out
    assert load_state(state) is not None

    with running_cli("--kubeconfig", str(kubeconfig), "--state", str(state), "--no-cluster") as (process, _):
        core = _core(kubeconfig)  # same token and certificate as before the restart
        kept = core.read_namespaced_config_map("kept", "default")
        assert kept.data == {"a": "1"}
        assert kept.metadata.uid == created.metadata.uid
        again = core.create_namespaced_config_map("default", {"metadata": {"name": "new"}})
        assert int(again.metadata.resource_version) > int(created.metadata.resource_version)
        _stop(process)


def test_cli_rejects_a_bad_nodes_file(tmp_path: Path) -> None:
    bad = tmp_path / "nodes.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n")
    result = subprocess.run([sys.executable, "-m", "hosts.cli.main", "sandbox", "--kubeconfig",
                             str(tmp_path / "kc"), "--nodes", str(bad)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "expected Node" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_refuses_to_overwrite_a_foreign_kubeconfig(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters:\n- name: production\n  cluster: {server: x}\n")
    result = subprocess.run([sys.executable, "-m", "hosts.cli.main", "sandbox", "--kubeconfig", str(kubeconfig),
                             "--no-cluster"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "refusing to overwrite" in result.stderr and "production" in result.stderr
    assert "production" in kubeconfig.read_text()


def test_the_serving_loop_is_uvloop_when_installed_and_asyncio_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from kaiwo_sandbox.instance import new_event_loop

    loop = new_event_loop()
    try:
        expected = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
        assert type(loop).__module__.split(".")[0] == expected
    finally:
        loop.close()
    monkeypatch.setitem(sys.modules, "uvloop", None)  # an environment without it
    loop = new_event_loop()
    try:
        assert isinstance(loop, asyncio.BaseEventLoop) and type(loop).__module__.startswith("asyncio")
    finally:
        loop.close()


def test_authorization_rbac_enforces_roles_for_minted_identities(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    with running_cli("--kubeconfig", str(kubeconfig), "--no-cluster", "--authorization", "rbac") as (process, lines):
        assert "(authorization: RBAC)" in "".join(lines)
        config = yaml.safe_load(kubeconfig.read_text())
        url = urllib.parse.urlsplit(config["clusters"][0]["cluster"]["server"])
        context = ssl.create_default_context(
            cadata=base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode())

        def request(method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
            connection = http.client.HTTPSConnection(url.hostname or "", url.port, context=context, timeout=30)
            try:
                connection.request(method, path, body=None if body is None else json.dumps(body),
                                   headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
                response = connection.getresponse()
                return response.status, json.loads(response.read())
            finally:
                connection.close()

        admin = config["users"][0]["user"]["token"]
        assert request("GET", "/api/v1/namespaces", admin)[0] == 200  # the admin may do anything
        status, minted = request("POST", "/sandbox/v1/tokens", admin, {"user": "dev"})
        assert status == 201
        status, denied = request("GET", "/api/v1/namespaces", minted["token"])
        assert status == 403 and denied["message"] == ('namespaces is forbidden: User "dev" cannot list resource '
                                                       '"namespaces" in API group "" at the cluster scope')
        _stop(process)


def test_cli_runs_opt_in_add_ons_only_when_named() -> None:
    import argparse

    from hosts.cli.sandbox import _cluster, add_arguments
    from kaiwo_sandbox.cluster import CONTROLLERS

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    k = ["--kubeconfig", "k"]
    assert _cluster(parser.parse_args(k)) is True  # every default controller; cert-manager is not one
    named = _cluster(parser.parse_args([*k, "--with", "cert-manager"]))
    assert isinstance(named, list) and named == list(CONTROLLERS)
    without = _cluster(parser.parse_args([*k, "--without", "kuberay"]))
    assert isinstance(without, list) and "cert-manager" not in without and "kuberay" not in without
    with pytest.raises(SystemExit):
        parser.parse_args([*k, "--with", "kueue"])  # not an add-on


def test_cli_refuses_a_clock_origin_without_a_scaled_clock(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "hosts.cli.main", "sandbox", "--kubeconfig", str(tmp_path / "kc"),
                             "--clock-origin", "1767225600"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == "kaiwo-ray sandbox: --clock-origin needs --scaled-clock"
