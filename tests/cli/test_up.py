"""`kaiwo-ray up` before Ray: argument checking, and the Ray-free runtime helpers it prints with
(`hosts.runtime.operator_runtime`). None of these tests starts Ray."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hosts.cli import up
from hosts.cli.main import build_parser, main
from hosts.cli.up import host_settings
from hosts.runtime.operator_runtime import (
    ActorHealth,
    ProcessMemory,
    StopSignal,
    adopted,
    format_health,
    format_memory,
    health_changes,
    parse_controller_names,
    process_tree_memory,
)
from kaiwo_ray.cli.kubeconfig import resolve_kubeconfig
from kaiwo_ray.controllers.manager import CONTROLLERS


def parse(*argv: str) -> argparse.Namespace:
    return build_parser("up").parse_args(["up", *argv])


# -- --controllers -----------------------------------------------------------------------------


def test_controllers_default_to_all_of_them() -> None:
    assert parse_controller_names(None) == list(CONTROLLERS)
    assert parse_controller_names(" ") == list(CONTROLLERS)


def test_controllers_keep_the_table_order_and_drop_repeats() -> None:
    assert parse_controller_names("kaiwoservice, KaiwoJob,kaiwojob,") == ["kaiwojob", "kaiwoservice"]


def test_an_unknown_controller_gets_a_did_you_mean() -> None:
    with pytest.raises(ValueError, match=r"unknown controller 'kaiwojobs'; did you mean 'kaiwojob'\?"):
        parse_controller_names("kaiwojobs")
    with pytest.raises(ValueError, match="choose from kaiwoconfig, kaiwoqueueconfig"):
        parse_controller_names("zzz")
    with pytest.raises(ValueError, match="no controller named"):
        parse_controller_names(",,")


# -- kubeconfig and settings -------------------------------------------------------------------


def test_a_missing_kubeconfig_is_a_usage_error_before_ray_starts(capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path) -> None:
    assert main(["up", "--kubeconfig", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert f"kubeconfig {tmp_path / 'nope'} does not exist" in err and "--in-cluster" in err


def test_the_ray_import_is_deferred_to_run() -> None:
    code = ("import sys; from hosts.cli.main import main; "
            "rc = main(['up', '--kubeconfig', '/nonexistent/kc']); "
            "assert rc == 2, rc; assert 'ray' not in sys.modules and 'actors.supervisor' not in sys.modules; "
            "import hosts.cli.dev, hosts.runtime.operator_runtime; assert 'ray' not in sys.modules")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_an_unknown_controller_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    assert main(["up", "--kubeconfig", str(kubeconfig), "--controllers", "kaiwojob,queues"]) == 2
    assert "unknown controller 'queues'" in capsys.readouterr().err


def test_kubeconfig_and_in_cluster_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse("--kubeconfig", "x", "--in-cluster")
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_kubeconfig_falls_back_to_the_first_entry_of_KUBECONFIG(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.write_text("{}")
    second.write_text("{}")
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(first), str(second)]))
    assert resolve_kubeconfig(None) == first


def test_a_relative_kubeconfig_becomes_absolute_for_the_actors(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kc").write_text("{}")
    monkeypatch.chdir(tmp_path)
    settings = host_settings(parse("--kubeconfig", "kc", "--no-lease", "--identity", "me"))
    assert settings.kubeconfig == str(tmp_path / "kc")
    assert settings.lease is False and settings.identity == "me" and not settings.in_cluster
    assert settings.tune_gc and settings.batch_scheduling  # the process is the operator


def test_up_keeps_the_default_cpu_class_when_the_admin_turns_batch_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "kc").write_text("{}")
    monkeypatch.setenv("KAIWO_BATCH_SCHEDULING", "false")
    assert not host_settings(parse("--kubeconfig", str(tmp_path / "kc"))).batch_scheduling
    monkeypatch.setenv("KAIWO_BATCH_SCHEDULING", "sometimes")
    assert main(["up", "--kubeconfig", str(tmp_path / "kc"), "--no-ray"]) == 2
    assert capsys.readouterr().err == ("kaiwo-ray up: KAIWO_BATCH_SCHEDULING must be true or false, "
                                       "not 'sometimes'\n")


def _service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, namespace: str | None) -> None:
    """A pod's view: the service-account mount (in a directory of our choosing) and the API's address."""
    (tmp_path / "token").write_text("a-token\n")
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    if namespace is not None:
        (tmp_path / "namespace").write_text(namespace)
    monkeypatch.setenv("KAIWO_SERVICE_ACCOUNT_DIR", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")


def test_in_cluster_needs_no_kubeconfig_and_leases_go_to_the_pods_namespace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _service_account(tmp_path, monkeypatch, "ops")
    settings = host_settings(parse("--in-cluster"))
    assert settings.in_cluster and settings.kubeconfig is None
    assert settings.lease and settings.lease_namespace == "ops"
    assert host_settings(parse("--in-cluster", "--lease-namespace", "elsewhere")).lease_namespace == "elsewhere"


def test_in_cluster_without_a_namespace_file_uses_kaiwo_system_and_outside_kube_system(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _service_account(tmp_path, monkeypatch, None)
    assert host_settings(parse("--in-cluster")).lease_namespace == "kaiwo-system"
    (tmp_path / "kc").write_text("{}")
    assert host_settings(parse("--kubeconfig", str(tmp_path / "kc"))).lease_namespace == "kube-system"


def test_in_cluster_outside_a_pod_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert up.run(parse("--in-cluster")) == 2
    err = capsys.readouterr().err
    assert err == ("kaiwo-ray up: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: this is not a "
                   "pod (use --kubeconfig outside a cluster)\n")


def test_in_cluster_with_no_token_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _service_account(tmp_path, monkeypatch, "ops")
    (tmp_path / "token").unlink()
    assert up.run(parse("--in-cluster")) == 2
    assert f"cannot read the service-account token {tmp_path / 'token'}" in capsys.readouterr().err


# -- health report -----------------------------------------------------------------------------


def report(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {
        "synced": True, "queue": 3, "in_flight": 1, "reconciles": 42, "errors": 2, "retries": 1,
        "last_error": "", "writing": True, "cached": {"kaiwojobs": 5}, "relists": {"kaiwojobs": 1},
        "started": True, "leader": True, "writes": 7, "alive": True, "pid": 4242, "rss_bytes": 130 << 20,
        "uptime_s": 12.5, "name": "ignored",
    }
    base.update(overrides)
    return base


def test_health_comes_from_the_actor_report_under_the_actor_name() -> None:
    row = ActorHealth.from_report("kaiwojob", report(), restarts=2)
    assert (row.name, row.alive, row.leader, row.queue, row.reconciles, row.restarts) == \
        ("kaiwojob", True, True, 3, 42, 2)
    assert row.rss_bytes == 130 << 20 and row.healthy
    assert not ActorHealth.from_report("kaiwojob", report(error="start failed: boom")).healthy


def test_adopted_actors_are_those_running_under_another_identity() -> None:
    rows = [ActorHealth.from_report("kaiwojob", report(identity="me")),
            ActorHealth.from_report("kaiwoservice", report(identity="earlier-up")),
            ActorHealth.unreachable("kaiwoconfig", "gone")]
    assert [r.name for r in adopted(rows, "me")] == ["kaiwoservice"]


def test_health_table_has_a_row_per_actor_and_lists_errors() -> None:
    rows = [ActorHealth.from_report("kaiwojob", report(last_error="409 Conflict")),
            ActorHealth.unreachable("kaiwoservice", "ActorDiedError: the actor died", restarts=1)]
    lines = format_health(rows).splitlines()
    assert lines[0].split() == ["CONTROLLER", "ALIVE", "LEADER", "SYNCED", "QUEUE", "IN-FLIGHT", "RECONCILES",
                                "ERRORS", "RESTARTS", "RSS-MIB", "PID"]
    assert lines[1].split() == ["kaiwojob", "yes", "yes", "yes", "3", "1", "42", "2", "0", "130", "4242"]
    assert lines[2].split() == ["kaiwoservice", "no", "-", "-", "0", "0", "0", "0", "1", "-", "-"]
    assert lines[3] == "kaiwojob: last reconcile error: 409 Conflict"
    assert lines[4] == "kaiwoservice: ActorDiedError: the actor died"


def test_health_changes_name_restarts_outages_and_leadership() -> None:
    before = [ActorHealth.from_report("a", report(pid=1)), ActorHealth.from_report("b", report(pid=2)),
              ActorHealth.from_report("c", report(pid=3, leader=False)),
              ActorHealth.unreachable("d", "gone")]
    after = [ActorHealth.from_report("a", report(pid=10)), ActorHealth.unreachable("b", "no answer"),
             ActorHealth.from_report("c", report(pid=3, leader=True)),
             ActorHealth.from_report("d", report(pid=4))]
    assert health_changes(before, after) == [
        "a: restarted (pid 1 -> 10)", "b: not reachable (no answer)", "c: became leader",
        "d: reachable again (pid 4)"]
    assert health_changes(after, after) == []


# -- signals -----------------------------------------------------------------------------------


def test_stop_signal_turns_sigterm_and_sigint_into_an_event_and_restores_handlers() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with StopSignal() as stop:
        assert not stop.wait(0)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(5.0) and stop.received == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == before
    with StopSignal() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.wait(5.0) and stop.received == signal.SIGINT


def test_a_second_sigint_falls_through_to_the_previous_handler() -> None:
    with StopSignal() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.wait(5.0)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)  # Python runs the handler before the next bytecode


# -- memory ------------------------------------------------------------------------------------


def test_process_tree_memory_finds_children_by_module_and_script(tmp_path: Path) -> None:
    script = tmp_path / "idle.py"
    script.write_text("import sys; sys.stdin.read()\n")
    children = [subprocess.Popen([sys.executable, "-m", "idle", "arg"], cwd=tmp_path, stdin=subprocess.PIPE),
                subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE)]
    try:
        # A child just forked may not have exec'd its command yet: poll (with a deadline) until both
        # show their own command line, then check every figure.
        deadline = time.monotonic() + 30
        while True:
            found = {p.pid: p for p in process_tree_memory()}
            labels = [found[c.pid].label if c.pid in found else None for c in children]
            if labels == ["idle arg", "idle.py"] or time.monotonic() > deadline:
                break
            time.sleep(0.02)  # polling period, not synchronisation: the loop checks the state
        assert found[children[0].pid].label == "idle arg"
        assert found[children[1].pid].label == "idle.py"
        assert all(found[c.pid].rss_bytes > 1 << 20 for c in children)
    finally:
        for child in children:
            child.communicate(b"", timeout=30)


def test_memory_line_puts_the_actors_first() -> None:
    line = format_memory([ProcessMemory(label="raylet", pid=1, rss_bytes=50 << 20),
                          ProcessMemory(label="ray::ControllerActor", pid=2, rss_bytes=120 << 20),
                          ProcessMemory(label="ray::ControllerActor", pid=3, rss_bytes=124 << 20),
                          ProcessMemory(label="gcs_server", pid=4, rss_bytes=70 << 20)])
    assert line == "RSS (MiB): controller actors 244 MiB in 2, gcs_server 70, raylet 50"


# -- --no-ray ----------------------------------------------------------------------------------


def test_no_ray_with_an_unusable_kubeconfig_fails_with_the_reason(capsys: pytest.CaptureFixture[str],
                                                                   tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    assert main(["up", "--no-ray", "--kubeconfig", str(kubeconfig), "--controllers", "kaiwoconfig"]) == 1
    assert "controllers failed to start: " in capsys.readouterr().err


def test_no_ray_and_a_ray_address_exclude_each_other(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text("{}")
    assert main(["up", "--no-ray", "--ray-address", "auto", "--kubeconfig", str(kubeconfig)]) == 2
    assert "--no-ray and --ray-address exclude each other" in capsys.readouterr().err


@pytest.mark.slow
def test_no_ray_runs_the_controllers_in_process_until_sigterm(tmp_path: Path) -> None:
    import kubernetes
    import yaml

    from kaiwo_sandbox.testing import eventually, start_sandbox

    with start_sandbox(cluster=True, time_factor=0.05) as sb:
        log_path = tmp_path / "up.log"
        command = [sys.executable, "-m", "hosts.cli.main", "up", "--no-ray", "--kubeconfig",
                   str(sb.kubeconfig_path), "--controllers", "kaiwoqueueconfig,kaiwojob", "--health-interval", "0.5"]
        with log_path.open("wb") as log:
            up = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                  env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            eventually(lambda: "Running." in log_path.read_text() or up.poll() is not None, timeout=60)
            assert up.poll() is None, log_path.read_text()
            table = log_path.read_text()
            assert "kaiwojob" in table and "kaiwoqueueconfig" in table and "kaiwoservice" not in table
            custom: Any = kubernetes.client.CustomObjectsApi(sb.api_client())
            body = yaml.safe_load((Path(__file__).parents[2] / "examples" / "cpu-job.yaml").read_text())
            custom.create_namespaced_custom_object("kaiwo.silogen.ai", "v1alpha1", "default", "kaiwojobs", body)
            eventually(lambda: (custom.get_namespaced_custom_object(
                "kaiwo.silogen.ai", "v1alpha1", "default", "kaiwojobs", "cpu-job").get("status") or {}).get(
                "status") == "COMPLETE", timeout=60)
            up.send_signal(signal.SIGTERM)
            assert up.wait(30) == 0, log_path.read_text()
        finally:
            if up.poll() is None:
                up.kill()
                up.wait(10)
        assert "Controllers stopped." in log_path.read_text()
        lease: Any = kubernetes.client.CoordinationV1Api(sb.api_client()).read_namespaced_lease(
            "kaiwo-ray-kaiwojob", "kube-system")
        assert not lease.spec.holder_identity  # released on the way out


def test_metrics_flags_default_to_controller_runtimes() -> None:
    args = parse("--kubeconfig", "kc")
    assert (args.metrics_bind_address, args.metrics_secure, args.metrics_cert_dir) == ("0", True, None)
    args = parse("--metrics-bind-address", ":8443", "--no-metrics-secure", "--metrics-cert-dir", "/certs")
    assert (args.metrics_bind_address, args.metrics_secure, args.metrics_cert_dir) == (":8443", False, "/certs")


def test_an_unusable_metrics_bind_address_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text("{}")
    assert main(["up", "--no-ray", "--kubeconfig", str(kubeconfig), "--metrics-bind-address", "8443"]) == 2
    assert "expected host:port" in capsys.readouterr().err


@pytest.mark.slow
def test_no_ray_serves_the_secure_metrics_endpoint(tmp_path: Path) -> None:
    import socket

    import httpx

    from kaiwo_sandbox.testing import eventually, start_sandbox

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with start_sandbox(cluster=True, time_factor=0.05, authorization="rbac") as sb:
        log_path = tmp_path / "up.log"
        command = [sys.executable, "-m", "hosts.cli.main", "up", "--no-ray", "--kubeconfig",
                   str(sb.kubeconfig_path), "--controllers", "kaiwoqueueconfig", "--no-lease",
                   "--metrics-bind-address", f"127.0.0.1:{port}", "--metrics-secure"]
        with log_path.open("wb") as log:
            up = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                  env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            eventually(lambda: "Running." in log_path.read_text() or up.poll() is not None, timeout=60)
            assert up.poll() is None, log_path.read_text()
            url = f"https://127.0.0.1:{port}/metrics"
            assert f"Metrics: {url}" in log_path.read_text()
            assert httpx.get(url, verify=False, timeout=30).status_code == 401
            scraped = httpx.get(url, verify=False, timeout=30, headers={"Authorization": f"Bearer {sb.token}"})
            assert scraped.status_code == 200, scraped.text
            assert 'controller_runtime_active_workers{controller="kaiwoqueueconfig"}' in scraped.text
            up.send_signal(signal.SIGTERM)
            assert up.wait(30) == 0, log_path.read_text()
        finally:
            if up.poll() is None:
                up.kill()
                up.wait(10)
