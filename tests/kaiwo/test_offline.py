"""The `kaiwo` commands without a cluster: help, version, completion, and every usage error that
is caught before a request is sent (exit 2, one line, no traceback)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kaiwo_ray.cli.main import USER_COMMANDS

Run = Callable[..., tuple[int, str, str]]  # the `kaiwo`/`offline_kaiwo` fixtures (conftest.py)

JOB = {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob", "metadata": {"name": "j"},
       "spec": {"user": "a@b.co", "image": "busybox", "entrypoint": "sleep 1"}}


# nine anchors, each aliasing the previous nine times: 9**9 strings once expanded
BILLION_LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert lines[0].startswith("error: ")
    return lines[0]


def test_help_lists_every_command(offline_kaiwo: Run) -> None:
    with pytest.raises(SystemExit) as exit_info:
        offline_kaiwo("--help")
    assert exit_info.value.code == 0


@pytest.mark.parametrize("command", sorted(USER_COMMANDS))
def test_every_command_has_help_with_examples(command: str, offline_kaiwo: Run,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        offline_kaiwo(command, "--help")
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert f"usage: kaiwo {command}" in out
    assert "examples:" in out and f"kaiwo {command if command != 'get' else 'get'}" in out


def test_version_needs_no_cluster(offline_kaiwo: Run) -> None:
    code, out, _ = offline_kaiwo("version")
    assert code == 0 and out.startswith("Client Version: kaiwo-ray ")


def test_no_command_prints_help_and_exits_2(offline_kaiwo: Run) -> None:
    code, _, err = offline_kaiwo()
    assert code == 2 and "COMMAND" in err


def test_unknown_flag_is_one_line_and_exit_2(offline_kaiwo: Run, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        offline_kaiwo("list", "--bogus")
    assert exit_info.value.code == 2
    line = one_error_line(capsys.readouterr().err)
    assert "unrecognized arguments: --bogus" in line and "--help" in line


def test_missing_file(offline_kaiwo: Run, tmp_path: Path) -> None:
    code, _, err = offline_kaiwo("submit", "-f", str(tmp_path / "nope.yaml"))
    assert code == 2
    assert "nope.yaml: no such file" in one_error_line(err)


def test_directory_instead_of_file(offline_kaiwo: Run, tmp_path: Path) -> None:
    code, _, err = offline_kaiwo("submit", "-f", str(tmp_path))
    assert code == 2 and "is a directory" in one_error_line(err)


def test_invalid_yaml_names_the_line(offline_kaiwo: Run, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: KaiwoJob\nmetadata: {name: x\nspec: [\n")
    code, _, err = offline_kaiwo("submit", "-f", str(bad))
    assert code == 2
    assert "bad.yaml is not valid YAML at line" in one_error_line(err)


def test_hostile_yaml_is_refused_in_one_line(offline_kaiwo: Run, tmp_path: Path) -> None:
    nested = tmp_path / "nested.yaml"
    nested.write_text("[" * 200_000)  # libyaml's composer would overflow its stack: a segfault
    code, _, err = offline_kaiwo("submit", "-f", str(nested))
    assert code == 2 and "nesting deeper than 100 levels" in one_error_line(err)
    laughs = tmp_path / "laughs.yaml"
    laughs.write_text(BILLION_LAUGHS)
    code, _, err = offline_kaiwo("submit", "-f", str(laughs))
    assert code == 2 and "expands to more than 1,000,000 values" in one_error_line(err)


def test_wrong_kind_points_at_kubectl(offline_kaiwo: Run, tmp_path: Path) -> None:
    manifest = tmp_path / "deploy.yaml"
    manifest.write_text(yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}))
    code, _, err = offline_kaiwo("submit", "-f", str(manifest))
    assert code == 2
    line = one_error_line(err)
    assert "is a Deployment" in line and "kubectl apply" in line


def test_two_documents_are_refused(offline_kaiwo: Run, tmp_path: Path) -> None:
    manifest = tmp_path / "two.yaml"
    manifest.write_text(yaml.safe_dump(JOB) + "---\n" + yaml.safe_dump(JOB))
    code, _, err = offline_kaiwo("submit", "-f", str(manifest))
    assert code == 2 and "holds 2 objects" in one_error_line(err)


def test_no_user_anywhere_says_how_to_give_one(offline_kaiwo: Run, tmp_path: Path) -> None:
    manifest = tmp_path / "job.yaml"
    job = {**JOB, "spec": {"image": "busybox"}}
    manifest.write_text(yaml.safe_dump(job))
    code, _, err = offline_kaiwo("submit", "-f", str(manifest))  # stdin is not a terminal under pytest
    assert code == 2
    line = one_error_line(err)
    assert "no user" in line and "--user" in line and "kaiwoconfig.yaml" in line


def test_missing_config_file_named_by_env(offline_kaiwo: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(JOB))
    monkeypatch.setenv("KAIWOCONFIG", str(tmp_path / "absent.yaml"))
    code, _, err = offline_kaiwo("submit", "-f", str(manifest))
    assert code == 2 and "absent.yaml (from $KAIWOCONFIG) does not exist" in one_error_line(err)


def test_config_file_with_unknown_key(offline_kaiwo: Run, tmp_path: Path) -> None:
    manifest, config = tmp_path / "job.yaml", tmp_path / "cfg.yaml"
    manifest.write_text(yaml.safe_dump(JOB))
    config.write_text("user: a@b.co\nqueue: q\n")
    code, _, err = offline_kaiwo("submit", "-f", str(manifest), "--config", str(config))
    assert code == 2 and "cfg.yaml: queue" in one_error_line(err)


def test_no_kubeconfig_is_a_cluster_error(offline_kaiwo: Run, tmp_path: Path) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(JOB))
    code, _, err = offline_kaiwo("submit", "-f", str(manifest))
    assert code == 1
    line = one_error_line(err)
    assert "no kubeconfig found" in line and "KUBECONFIG" in line


def test_explicit_kubeconfig_that_does_not_exist(offline_kaiwo: Run, tmp_path: Path) -> None:
    code, _, err = offline_kaiwo("list", "--kubeconfig", str(tmp_path / "kc"))
    assert code == 2 and "does not exist" in one_error_line(err)


def test_unknown_context(offline_kaiwo: Run, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(yaml.safe_dump({
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "one", "context": {"cluster": "c", "user": "u"}}], "current-context": "one"}))
    code, _, err = offline_kaiwo("list", "--kubeconfig", str(kubeconfig), "--context", "two")
    assert code == 1 and "context 'two' is not in kubeconfig" in one_error_line(err)


def test_unreachable_cluster(offline_kaiwo: Run, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(yaml.safe_dump({
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "one", "context": {"cluster": "c", "user": "u"}}], "current-context": "one"}))
    code, _, err = offline_kaiwo("list", "--kubeconfig", str(kubeconfig))
    assert code == 1
    line = one_error_line(err)
    assert "cannot reach the cluster at https://127.0.0.1:1" in line and "connection refused" in line


@pytest.mark.parametrize("selector", ["my-job", "pod/x", "job/", "job/a/b"])
def test_bad_workload_selectors(offline_kaiwo: Run, selector: str) -> None:
    code, _, err = offline_kaiwo("logs", selector)
    assert code == 2
    assert "job/NAME or service/NAME" in one_error_line(err) or "unknown workload type" in err


def test_exec_without_a_command(offline_kaiwo: Run) -> None:
    code, _, err = offline_kaiwo("exec", "job/x")
    assert code == 2 and "no command" in one_error_line(err)


@pytest.mark.parametrize("ports", ["abc", "0", "70000", "1:2:x"])
def test_bad_port_pairs(offline_kaiwo: Run, ports: str) -> None:
    code, _, err = offline_kaiwo("port-forward", "service/x", ports)
    assert code == 2
    one_error_line(err)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_name_every_command(offline_kaiwo: Run, shell: str) -> None:
    code, out, _ = offline_kaiwo("completion", shell)
    assert code == 0
    for command in USER_COMMANDS:
        assert command in out
    assert ("-l all-namespaces" if shell == "fish" else "--all-namespaces") in out


def test_bash_completion_completes_commands_flags_and_choices(offline_kaiwo: Run, tmp_path: Path) -> None:
    import subprocess

    code, script, _ = offline_kaiwo("completion", "bash")
    assert code == 0
    (tmp_path / "kaiwo.bash").write_text(script)

    def complete(*words: str) -> list[str]:
        quoted = " ".join(f"'{w}'" for w in words)
        done = subprocess.run(["bash", "-c", f"source {tmp_path / 'kaiwo.bash'}; COMP_WORDS=(kaiwo {quoted}); "
                               f"COMP_CWORD={len(words)}; _kaiwo; echo \"${{COMPREPLY[@]}}\""],
                              capture_output=True, text=True, check=True, timeout=30)
        return done.stdout.split()

    assert complete("lo") == ["logs"]
    assert "--follow" in complete("logs", "--fo")
    assert complete("status", "q") == ["queues"]
    assert set(complete("list", "-o", "")) == {"wide", "yaml", "json", "name"}


@pytest.mark.parametrize(("value", "text"), [(0, "0"), (1024, "1Ki"), (100 * 2**20, "100Mi"),
                                              (2375145688 * 1024, "2265Gi"), (30 * 2**40, "30Ti")])
def test_memory_reads_in_binary_units(value: float, text: str) -> None:
    from kaiwo_ray.cli.status import binary_size

    assert binary_size(value) == text


@pytest.mark.parametrize(("seconds", "text"), [(5, "5s"), (119, "119s"), (125, "2m5s"), (600, "10m"),
                                                (3 * 3600 + 60, "3h1m"), (30 * 3600, "30h"), (50 * 3600, "2d2h"),
                                                (400 * 86400, "400d"), (3 * 365 * 86400, "3y")])
def test_ages_read_like_kubectl(seconds: float, text: str) -> None:
    from kaiwo_ray.cli.table import human_duration

    assert human_duration(seconds) == text


def test_tables_align_like_kubectl() -> None:
    from kaiwo_ray.cli.table import render_table

    assert render_table(["NAME", "STATUS"], [["a", "RUNNING"], ["long-name", "-"]]) == (
        "NAME        STATUS\na           RUNNING\nlong-name   -\n")


def test_queue_position_orders_by_priority_then_age() -> None:
    from kaiwo_ray.cli.progress import queue_position

    def wl(name: str, created: str, priority: int = 0, admitted: bool = False) -> dict[str, object]:
        return {"metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
                "spec": {"queueName": "lq", "priority": priority},
                "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}] if admitted else []}}

    local_queues = [{"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "kaiwo"}}]
    everyone = [wl("old", "2026-01-01T00:00:00Z"), wl("new", "2026-01-02T00:00:00Z"),
                wl("urgent", "2026-01-03T00:00:00Z", priority=10), wl("running", "2025-01-01T00:00:00Z", admitted=True)]
    assert queue_position(everyone[1], everyone, local_queues) == (3, 3)
    assert queue_position(everyone[2], everyone, local_queues) == (1, 3)
    assert queue_position(everyone[3], everyone, local_queues) is None
    assert queue_position(everyone[0], everyone, []) is None  # no LocalQueue: no ClusterQueue known


def _pod(name: str, phase: str, containers: list[str], head: bool = False) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": {"ray.io/node-type": "head"} if head else {}},
            "spec": {"containers": [{"name": c} for c in containers], "initContainers": [{"name": "init"}]},
            "status": {"phase": phase,
                       "containerStatuses": [{"name": c, "state": {"running": {}}} for c in containers],
                       "initContainerStatuses": [{"name": "init", "state": {"terminated": {
                           "reason": "Completed", "exitCode": 0}}}]}}


def test_picker_rows_name_pod_and_container_in_the_right_columns() -> None:
    from kaiwo_ray.cli.workloads import container_rows

    assert container_rows([_pod("p", "Running", ["main"])]) == [
        ("p", "Running", "main", "running"), ("p", "Running", "init", "terminated (Completed 0)")]


def test_picker_without_a_terminal_takes_the_first_running_pod_and_says_so(
        capsys: pytest.CaptureFixture[str]) -> None:
    from kaiwo_ray.cli.pick import choose

    pods = [_pod("a-pending", "Pending", ["main"]), _pod("b-running", "Running", ["main", "sidecar"])]
    pod, container = choose(pods, "job/x", interactive=False)
    assert (pod["metadata"]["name"], container) == ("b-running", "main")
    assert "using pod b-running, container main (choose with --pod and -c)" in capsys.readouterr().err
    pod, container = choose(pods, "job/x", pod="b-running", container="sidecar", interactive=False)
    assert (pod["metadata"]["name"], container) == ("b-running", "sidecar")


def test_picker_on_a_terminal_asks(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from kaiwo_ray.cli.pick import choose

    answers = iter(["9", "3"])
    monkeypatch.setattr("builtins.input", lambda prompt: next(answers))
    pods = [_pod("a", "Running", ["main"]), _pod("b", "Running", ["main"])]
    pod, container = choose(pods, "job/x", interactive=True)
    assert (pod["metadata"]["name"], container) == ("b", "main")  # row 3: b/main (a/init is row 2)
    err = capsys.readouterr().err
    assert "POD" in err and "please type a number from 1 to 4" in err


def test_picker_with_no_pods_points_at_explain() -> None:
    from kaiwo_ray.cli.errors import ClusterError
    from kaiwo_ray.cli.pick import choose

    with pytest.raises(ClusterError, match="kaiwo explain job/x"):
        choose([], "job/x")
