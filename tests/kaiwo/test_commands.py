"""Each `kaiwo` command against the sandbox with the operator running, in-process (`main(argv)`)
over real HTTP: happy paths and the bad inputs that need a cluster to be found out. Every test
keeps to a namespace of its own."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_harness import OperatorSandbox
from test_offline import one_error_line

from kaiwo_sandbox.testing import polling

Run = Callable[..., tuple[int, str, str]]  # the `kaiwo`/`offline_kaiwo` fixtures (conftest.py)

NAMESPACES = ['ns-bad', 'ns-delete', 'ns-exec', 'ns-explain', 'ns-fail', 'ns-follow', 'ns-list', 'ns-logs', 'ns-monitor', 'ns-monitor-cpu', 'ns-precedence', 'ns-status', 'ns-stdin', 'ns-submit', 'ns-wait']


@pytest.fixture(scope="module", autouse=True)
def namespaces(cluster: OperatorSandbox) -> None:
    for name in NAMESPACES:
        status, _, body = cluster.sb.http("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
        assert status in (201, 409), body


wait_for = polling(timeout=60.0, interval=0.1)  # wait_for(check, timeout, message)


def job(name: str, namespace: str, *, entrypoint: str = "echo hello from kaiwo; sleep 20", gpus: int = 0,
        **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"user": "jane@example.com", "image": "busybox", "entrypoint": entrypoint, "gpus": gpus,
                     "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}, **spec}}


def write(tmp_path: Path, manifest: dict[str, Any], name: str = "m.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(manifest))
    return str(path)


def phase_of(kaiwo: Run, selector: str, namespace: str) -> str:
    code, out, _ = kaiwo("get", selector, "-n", namespace, "-o", "json")
    return str((json.loads(out).get("status") or {}).get("status") or "") if code == 0 else ""


def running(kaiwo: Run, tmp_path: Path, name: str, namespace: str, **kwargs: Any) -> None:
    code, _, err = kaiwo("submit", "-f", write(tmp_path, job(name, namespace, entrypoint=(
        "echo hello from kaiwo; sleep infinity"), **kwargs)), "--wait", "--timeout", "60")
    assert code == 0, err
    assert phase_of(kaiwo, f"job/{name}", namespace) == "RUNNING"


# ------------------------------------------------------------------------------------------ submit
def test_submit_creates_then_reports_unchanged_then_updates(kaiwo: Run, tmp_path: Path,
                                                            cluster: OperatorSandbox) -> None:
    manifest = job("resubmit", "ns-submit")
    path = write(tmp_path, manifest)
    result = kaiwo("submit", "-f", path)
    assert result[:2] == (0, "kaiwojob.kaiwo.silogen.ai/resubmit created\n"), result[2]
    assert kaiwo("submit", "-f", path)[:2] == (0, "kaiwojob.kaiwo.silogen.ai/resubmit unchanged\n")
    manifest["spec"]["priorityClass"] = "high"
    manifest["metadata"]["labels"] = {"team": "vision"}
    assert kaiwo("submit", "-f", write(tmp_path, manifest))[:2] == (
        0, "kaiwojob.kaiwo.silogen.ai/resubmit configured\n")
    _, out, _ = kaiwo("get", "job/resubmit", "-n", "ns-submit", "-o", "json")
    stored = json.loads(out)
    assert stored["spec"]["priorityClass"] == "high"  # upstream silently kept the old spec
    assert stored["metadata"]["labels"] == {"team": "vision"}


def test_submit_from_stdin_with_user_and_queue_flags(kaiwo: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    manifest = job("from-stdin", "ns-stdin")
    del manifest["spec"]["user"]
    for dash in ("-", "--"):
        monkeypatch.setattr("sys.stdin", io.StringIO(yaml.safe_dump(manifest)))
        code, out, err = kaiwo("submit", "-f", dash, "--user", "flag@example.com", "--queue", "kaiwo")
        assert code == 0, err
    _, out, _ = kaiwo("get", "job/from-stdin", "-n", "ns-stdin", "-o", "json")
    spec = json.loads(out)["spec"]
    assert spec["user"] == "flag@example.com" and spec["clusterQueue"] == "kaiwo"


def test_manifest_wins_over_flags_and_config_file(kaiwo: Run, tmp_path: Path) -> None:
    config = tmp_path / "kaiwoconfig.yaml"
    config.write_text("user: file@example.com\nclusterQueue: from-file\n")
    manifest = job("precedence", "ns-precedence")  # has spec.user, no clusterQueue
    code, _, err = kaiwo("submit", "-f", write(tmp_path, manifest), "--config", str(config), "--user",
                         "flag@example.com")
    assert code == 0, err
    _, out, _ = kaiwo("get", "job/precedence", "-n", "ns-precedence", "-o", "json")
    spec = json.loads(out)["spec"]
    assert spec["user"] == "jane@example.com"  # the manifest's own
    assert spec["clusterQueue"] == "from-file"  # the file fills what neither manifest nor flag gave


def test_namespace_clash_is_a_usage_error(kaiwo: Run, tmp_path: Path) -> None:
    code, _, err = kaiwo("submit", "-f", write(tmp_path, job("clash", "ns-a")), "-n", "ns-b")
    assert code == 2
    assert "manifest says namespace 'ns-a' but -n says 'ns-b'" in one_error_line(err)


def test_invalid_spec_is_named_by_field(kaiwo: Run, tmp_path: Path) -> None:
    code, _, err = kaiwo("submit", "-f", write(tmp_path, job("bad", "ns-bad", gpus=-1)))
    assert code == 2
    assert "spec.gpus" in one_error_line(err)


def test_submit_wait_follows_to_complete(kaiwo: Run, tmp_path: Path) -> None:
    code, _, err = kaiwo("submit", "-f", write(tmp_path, job("waits", "ns-wait")), "--wait", "--timeout", "60")
    assert code == 0, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("COMPLETE") or lines[-1].startswith("RUNNING")
    assert any("pods" in line for line in lines)


def test_submit_wait_exits_1_when_the_job_fails(kaiwo: Run, tmp_path: Path) -> None:
    code, _, err = kaiwo("submit", "-f", write(tmp_path, job("fails", "ns-fail", entrypoint="sleep 1; exit 3")),
                         "--wait", "--timeout", "60")
    assert code == 1
    assert "job/fails is FAILED" in err and "kaiwo logs job/fails" in err


# ------------------------------------------------------------------------------------------ list / get
def test_list_tables_and_formats(kaiwo: Run, tmp_path: Path) -> None:
    for name, labels in (("alpha", {"team": "a"}), ("beta", {"team": "b"})):
        manifest = job(name, "ns-list")
        manifest["metadata"]["labels"] = labels
        assert kaiwo("submit", "-f", write(tmp_path, manifest, f"{name}.yaml"))[0] == 0
    code, out, _ = kaiwo("list", "jobs", "-n", "ns-list")
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split() == ["NAME", "USER", "QUEUE", "STATUS", "AGE"]
    assert [r.split()[0] for r in rows] == ["alpha", "beta"]
    assert kaiwo("list", "-n", "ns-list", "-o", "name")[1] == "job/alpha\njob/beta\n"
    assert kaiwo("list", "jobs", "-n", "ns-list", "-l", "team=b", "-o", "name")[1] == "job/beta\n"
    assert kaiwo("list", "-n", "ns-list", "--user", "nobody@example.com", "-o", "name")[1] == ""
    wide = kaiwo("list", "jobs", "-n", "ns-list", "-o", "wide")[1].splitlines()[0].split()
    assert wide[-4:] == ["GPUS", "VENDOR", "RAY", "DURATION"]
    listed = json.loads(kaiwo("list", "jobs", "-n", "ns-list", "-o", "json")[1])
    assert listed["kind"] == "List" and len(listed["items"]) == 2
    assert yaml.safe_load(kaiwo("get", "job", "alpha", "-n", "ns-list", "-o", "yaml")[1])["metadata"]["name"] == "alpha"
    everywhere = kaiwo("list", "-A")[1].splitlines()
    assert everywhere[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert any(line.split()[:2] == ["ns-list", "job/alpha"] for line in everywhere)


def test_list_of_an_empty_namespace_says_so(kaiwo: Run) -> None:
    code, out, err = kaiwo("list", "-n", "ns-empty")
    assert (code, out) == (0, "")
    assert err == "No resources found in ns-empty namespace.\n"


def test_unknown_workload_is_one_line(kaiwo: Run) -> None:
    code, _, err = kaiwo("get", "job/ghost", "-n", "ns-ghost")
    assert code == 1
    assert 'job/ghost not found in namespace "ns-ghost"' in one_error_line(err)
    for command in (("logs", "job/ghost"), ("explain", "job/ghost"), ("exec", "job/ghost", "--", "ls"),
                    ("monitor", "service/ghost"), ("port-forward", "service/ghost", "80")):
        code, _, err = kaiwo(*command, "-n", "ns-ghost")
        assert code == 1 and "not found" in one_error_line(err), command


def test_bad_label_selector(kaiwo: Run) -> None:
    code, _, err = kaiwo("list", "jobs", "-l", "a in (", "-n", "default")
    assert code == 2 and "bad label selector" in one_error_line(err)


def test_unauthorized_token(kaiwo: Run, cluster: OperatorSandbox, tmp_path: Path) -> None:
    config = yaml.safe_load(cluster.sb.kubeconfig_path.read_text())
    for user in config["users"]:
        user["user"]["token"] = "not-a-token"
    path = tmp_path / "kc"
    path.write_text(yaml.safe_dump(config))
    code, _, err = kaiwo("list", "--kubeconfig", str(path))
    assert code == 1
    assert "rejected your credentials (401 Unauthorized)" in one_error_line(err)


# ------------------------------------------------------------------------------------------ logs / exec / monitor
def test_logs_of_a_job(kaiwo: Run, tmp_path: Path) -> None:
    assert kaiwo("submit", "-f", write(tmp_path, job("talks", "ns-logs")), "--wait", "--timeout", "60")[0] == 0
    code, out, _ = kaiwo("logs", "job/talks", "-n", "ns-logs")
    assert code == 0 and "hello from kaiwo" in out
    code, out, _ = kaiwo("logs", "job/talks", "-n", "ns-logs", "--tail", "1")
    assert code == 0 and len(out.splitlines()) == 1
    code, _, err = kaiwo("logs", "job/talks", "-n", "ns-logs", "-c", "nope")
    assert code == 2 and "no container 'nope'" in one_error_line(err)


def test_logs_follow_ends_when_the_container_does(kaiwo: Run, tmp_path: Path) -> None:
    # `submit --wait` returns once the job runs; its container then runs 5 s (sleep 100 at the
    # harness's time factor), ample time to open the follow while it still runs
    code, _, err = kaiwo("submit", "-f", write(tmp_path, job("follows", "ns-follow", entrypoint=(
        "echo first; sleep 100"))), "--wait", "--timeout", "60")
    assert code == 0, err
    code, out, _ = kaiwo("logs", "job/follows", "-n", "ns-follow", "-f")
    lines = out.splitlines()
    assert code == 0 and "first" in out
    # the follow began while the container ran (a log read after it ended has no running line)...
    assert any("running since" in line for line in lines), out
    # ...and ended when the container did
    assert "terminated since" in lines[-1], out


def test_exec_runs_in_the_pod_and_returns_its_exit_code(kaiwo: Run, tmp_path: Path) -> None:
    running(kaiwo, tmp_path, "shell", "ns-exec")
    code, out, err = kaiwo("exec", "job/shell", "-n", "ns-exec", "--", "sh", "-c", "echo in $HOSTNAME; exit 3")
    assert code == 3 and out.startswith("in shell-"), err
    code, out, _ = kaiwo("exec", "job/shell", "-n", "ns-exec", "--command", "printenv NUM_GPUS")
    assert (code, out) == (0, "0\n")


def test_monitor_runs_the_vendor_tool(kaiwo: Run, tmp_path: Path) -> None:
    running(kaiwo, tmp_path, "trainer", "ns-monitor", gpus=1)
    code, out, _ = kaiwo("monitor", "job/trainer", "-n", "ns-monitor")
    assert code == 0 and "(container workload, amd)" in out
    assert "GFX_UTIL" in out  # amd-smi in an AMD pod


def test_monitor_of_a_cpu_job_says_there_are_no_gpus(kaiwo: Run, tmp_path: Path) -> None:
    running(kaiwo, tmp_path, "cpu-only", "ns-monitor-cpu")
    code, _, err = kaiwo("monitor", "job/cpu-only", "-n", "ns-monitor-cpu")
    assert code == 1 and "no running pod with GPUs" in one_error_line(err)


# ------------------------------------------------------------------------------------------ status / explain / delete
def test_status_tables_count_gpus_and_workloads(kaiwo: Run, tmp_path: Path) -> None:
    running(kaiwo, tmp_path, "holder", "ns-status", gpus=1)
    code, out, _ = kaiwo("status", "queues")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["CLUSTERQUEUE", "LOCALQUEUE", "ADMITTED", "PENDING"]
    assert any(line.split()[:2] == ["kaiwo", "[TOTAL]"] for line in lines)
    assert any(line.split()[0] == "ns-status/kaiwo" for line in lines[1:])
    code, out, _ = kaiwo("status", "amd")
    assert code == 0 and out.splitlines()[0].split()[:3] == ["NODE", "STATUS", "GPU"]
    assert "GPUs in use" in out
    assert kaiwo("status", "nodes")[0] == 0
    code, out, _ = kaiwo("status", "amd", "-o", "json")
    views = json.loads(out)
    assert sum(v["gpus_used"] for v in views) >= 1


def test_explain_says_why_and_what_holds_it(kaiwo: Run, tmp_path: Path) -> None:
    manifest = job("too-big", "ns-explain", gpus=4096)
    assert kaiwo("submit", "-f", write(tmp_path, manifest))[0] == 0
    wait_for(lambda: phase_of(kaiwo, "job/too-big", "ns-explain") not in ("",), message="a phase")
    code, out, _ = kaiwo("explain", "job/too-big", "-n", "ns-explain")
    assert code == 0
    assert out.startswith("KaiwoJob ns-explain/too-big")
    data = json.loads(kaiwo("explain", "job/too-big", "-n", "ns-explain", "-o", "json")[1])
    assert data["running"] is False and data["reasons"]


def test_delete_wait_returns_once_the_workload_its_job_and_pods_are_gone(kaiwo: Run, tmp_path: Path,
                                                                          cluster: OperatorSandbox) -> None:
    """--wait is what a user waits for before resubmitting: the GPUs back, so the pods gone too, not
    only the KaiwoJob (which, deleted in the background, goes at once and leaves its Job and pods to
    the garbage collector). A finalizer holds the pod here, as a kubelet's grace period would."""
    import threading

    running(kaiwo, tmp_path, "goner", "ns-delete")

    def pods() -> list[dict[str, Any]]:
        status, _, body = cluster.sb.http("GET", "/api/v1/namespaces/ns-delete/pods")
        assert status == 200, body
        return list(json.loads(body)["items"])

    (pod,) = pods()
    pod_path = f"/api/v1/namespaces/ns-delete/pods/{pod['metadata']['name']}"
    merge = {"Content-Type": "application/merge-patch+json"}
    assert cluster.sb.http("PATCH", pod_path, json.dumps({"metadata": {"finalizers": ["example.com/hold"]}}),
                           headers=merge)[0] == 200
    answer: list[tuple[int, str, str]] = []
    waiting = threading.Thread(target=lambda: answer.append(kaiwo("delete", "job/goner", "-n", "ns-delete",
                                                                  "--wait")))
    waiting.start()
    try:
        wait_for(lambda: json.loads(cluster.sb.http("GET", pod_path)[2])["metadata"].get("deletionTimestamp"),
                 message="the held pod deleting")
        assert not answer, "returned while the workload's pod still existed"
        assert cluster.sb.http("GET", "/apis/kaiwo.silogen.ai/v1alpha1/namespaces/ns-delete/kaiwojobs/goner")[0] == 200
    finally:
        assert cluster.sb.http("PATCH", pod_path, json.dumps({"metadata": {"finalizers": None}}),
                               headers=merge)[0] == 200
        waiting.join(timeout=60)
    code, out, _ = answer[0]
    assert code == 0 and out == 'kaiwojob.kaiwo.silogen.ai "goner" deleted\n'
    assert kaiwo("get", "job/goner", "-n", "ns-delete")[0] == 1
    assert cluster.sb.http("GET", "/apis/batch/v1/namespaces/ns-delete/jobs/goner")[0] == 404
    assert pods() == []
    code, _, err = kaiwo("delete", "job/goner", "-n", "ns-delete")
    assert code == 1 and "not found" in err


def test_version_with_the_server(kaiwo: Run) -> None:
    code, out, _ = kaiwo("version", "--server")
    assert code == 0 and out.splitlines()[1].startswith("Server Version: v1.")


def test_status_of_one_vendor_lists_only_its_nodes(kaiwo: Run) -> None:
    code, out, _ = kaiwo("status", "nvidia")
    rows = [line.split()[0] for line in out.splitlines()[1:] if line and not line[0].isdigit()]
    assert code == 0 and rows and all("nvidia" in row for row in rows)
    nodes = kaiwo("status", "nodes")[1]
    assert "gpu-amd" in nodes and "gpu-nvidia" in nodes


@pytest.mark.parametrize("how", ["exec-plugin", "token-file", "ca-file"])
def test_kubeconfig_credential_forms(kaiwo: Run, cluster: OperatorSandbox, tmp_path: Path, how: str) -> None:
    import base64
    import stat

    config = yaml.safe_load(cluster.sb.kubeconfig_path.read_text())
    user = config["users"][0]["user"]
    token = user.pop("token")
    if how == "exec-plugin":
        plugin = tmp_path / "credential-plugin"
        plugin.write_text("#!/bin/sh\n[ -n \"$KUBERNETES_EXEC_INFO\" ] || exit 3\n"
                          f"echo '{{\"apiVersion\": \"client.authentication.k8s.io/v1\", \"kind\": \"ExecCredential\", "
                          f"\"status\": {{\"token\": \"{token}\"}}}}'\n")
        plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
        user["exec"] = {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin)}
    elif how == "token-file":
        (tmp_path / "token").write_text(token + "\n")
        user["tokenFile"] = "token"  # relative to the kubeconfig's directory
    else:
        user["token"] = token
        cluster_entry = config["clusters"][0]["cluster"]
        (tmp_path / "ca.crt").write_bytes(base64.b64decode(cluster_entry.pop("certificate-authority-data")))
        cluster_entry["certificate-authority"] = str(tmp_path / "ca.crt")
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    code, _, err = kaiwo("list", "--kubeconfig", str(path), "-n", "ns-list", "-o", "name")
    assert code == 0, err


def test_exec_plugin_that_fails_is_one_line(kaiwo: Run, cluster: OperatorSandbox, tmp_path: Path) -> None:
    config = yaml.safe_load(cluster.sb.kubeconfig_path.read_text())
    config["users"][0]["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                           "command": "kaiwo-no-such-plugin", "installHint": "install the plugin"}}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    code, _, err = kaiwo("list", "--kubeconfig", str(path))
    assert code == 1
    assert "exec credential plugin kaiwo-no-such-plugin not found: install the plugin" in one_error_line(err)
