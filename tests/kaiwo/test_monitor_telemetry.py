"""`kaiwo monitor` from kaiwo-ray's GPU telemetry: the admin API found through `--admin-url`,
`$KAIWO_ADMIN_URL` or the kubeconfig extension `kaiwo-ray dev` writes, and the fall back to the
vendor tool in the pod when telemetry cannot answer. The admin app is the real one under uvicorn;
its telemetry source is the `AdminSettings.gpu_samples` seam (the Ray aggregator behind it is
exercised end to end in tests/telemetry/test_dev_gpu.py)."""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from e2e_harness import OperatorSandbox
from prometheus_client.parser import text_string_to_metric_families
from test_commands import Run, job, wait_for
from test_offline import one_error_line

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))

from admin_support import RunningApp, free_port, serve_app
from aggregation_support import register, unregister

from kaiwo_ray.cli.admin_link import advertise, resolve, with_admin_url
from kaiwo_ray.cli.kubeconfig import load
from kaiwo_ray.cli.monitor import telemetry_rows
from kaiwo_ray.views._objects import ObjectRef
from kaiwo_ray.views.nodes import GpuReading
from serve.state import AdminSettings

NAMESPACE = "ns-monitor-telemetry"
SAMPLES: list[GpuReading] = []  # what the admin app's telemetry source answers (filled per test)


# ------------------------------------------------------------------------------------------ pure parts
def test_telemetry_rows_format_utilization_and_memory() -> None:
    pod = {"kind": "Pod", "name": "a-0", "namespace": "ns"}
    rows = telemetry_rows([
        {"node": "n1", "index": 1, "utilization": 42.4, "memory_used_bytes": 2 * 2**30,
         "memory_total_bytes": 192 * 2**30, "pod": pod},
        {"node": "n1", "index": 0, "utilization": None, "pod": pod}])
    assert rows == [["a-0", "n1", "0", "<unknown>", "<unknown>"], ["a-0", "n1", "1", "42%", "2.0/192.0 GiB"]]
    assert telemetry_rows([]) == []


def test_the_admin_url_comes_from_the_flag_then_the_environment_then_the_kubeconfig(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
              "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1",
                                                     "extensions": [{"name": "other", "extension": {"a": 1}}]}}],
              "users": [{"name": "c", "user": {"token": "t"}}],
              "contexts": [{"name": "c", "context": {"cluster": "c", "user": "c"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.delenv("KAIWO_ADMIN_URL", raising=False)
    assert load(str(path)).admin_url is None
    advertise(path, "http://127.0.0.1:8265/")
    advertise(path, "http://127.0.0.1:8266")  # a second dev run replaces the first's URL
    written = yaml.safe_load(path.read_text())
    assert [e["name"] for e in written["clusters"][0]["cluster"]["extensions"]] == [
        "other", "kaiwo.silogen.ai/admin-api"]
    access = load(str(path))
    assert access.admin_url == "http://127.0.0.1:8266"
    assert resolve(None, access) == "http://127.0.0.1:8266"
    monkeypatch.setenv("KAIWO_ADMIN_URL", "http://env:1/")
    assert resolve(None, access) == "http://env:1"
    assert resolve("http://flag:2", access) == "http://flag:2"
    assert with_admin_url(config, "absent", "http://x") == config


# ------------------------------------------------------------------------------------------ against the sandbox
@pytest.fixture(scope="module")
def admin(cluster: OperatorSandbox) -> Iterator[RunningApp]:
    status, _, body = cluster.sb.http("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    assert status in (201, 409), body
    app = serve_app(AdminSettings(kubeconfig=str(cluster.sb.kubeconfig_path), auth="none",
                                  gpu_samples=lambda: list(SAMPLES)))
    yield app
    app.stop()


@pytest.fixture(scope="module")
def trainer_pod(cluster: OperatorSandbox, admin: RunningApp) -> tuple[str, str]:
    """The running pod of a 1-GPU KaiwoJob `tel` (submitted once for the module): (name, node)."""
    manifest = job("tel", NAMESPACE, entrypoint="sleep infinity", gpus=1)
    status, _, body = cluster.sb.http("POST", f"/apis/kaiwo.silogen.ai/v1alpha1/namespaces/{NAMESPACE}/kaiwojobs",
                                      manifest)
    assert status == 201, body

    def running_pods() -> list[tuple[str, str]]:
        status, _, body = cluster.sb.http("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
        assert status == 200, body
        return [(p["metadata"]["name"], p["spec"]["nodeName"]) for p in json.loads(body)["items"]
                if p["metadata"]["name"].startswith("tel-") and p.get("status", {}).get("phase") == "Running"]

    names = wait_for(running_pods, 60, "tel's pod Running")
    assert len(names) == 1, names
    return names[0]


@pytest.fixture
def samples(trainer_pod: tuple[str, str]) -> Iterator[list[GpuReading]]:
    SAMPLES.clear()
    yield SAMPLES
    SAMPLES.clear()


def test_monitor_and_explain_need_only_a_kubeconfig_where_the_group_is_served(
        kaiwo: Run, cluster: OperatorSandbox, trainer_pod: tuple[str, str], samples: list[GpuReading],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The admin API registered as admin.kaiwo.silogen.ai: `kaiwo monitor` reads its telemetry through
    the Kubernetes API with the kubeconfig's credentials, with no URL anywhere."""
    name, node = trainer_pod
    samples.append(GpuReading(node=node, index=1, utilization=55.0,
                             pod=ObjectRef(kind="Pod", name=name, namespace=NAMESPACE)))
    port = free_port()
    app = serve_app(AdminSettings(kubeconfig=str(cluster.sb.kubeconfig_path), auth="kubernetes",
                                  aggregated_bind=f"127.0.0.1:{port}", gpu_samples=lambda: list(SAMPLES)))
    monkeypatch.delenv("KAIWO_ADMIN_URL", raising=False)
    kubeconfig = str(cluster.sb.kubeconfig_path)
    assert load(kubeconfig).admin_url is None
    try:
        register(cluster.sb, port, namespace="kaiwo-aggregated", service="admin")
        code, out, err = kaiwo("monitor", "job/tel", "-n", NAMESPACE, "--kubeconfig", kubeconfig,
                               "--source", "telemetry")
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0] == ("GPUs of 1 pod(s), from kaiwo-ray telemetry (the Kubernetes API, "
                            "admin.kaiwo.silogen.ai)")
        assert lines[2].split()[:4] == [name, node, "1", "55%"]
        code, out, err = kaiwo("explain", "job/tel", "-n", NAMESPACE, "--kubeconfig", kubeconfig)
        assert code == 0, err
        assert out.startswith(f"KaiwoJob {NAMESPACE}/tel")
    finally:
        unregister(cluster.sb, namespace="kaiwo-aggregated", service="admin")
        app.stop()
    # unregistered, and no URL known: telemetry has nowhere to come from
    code, _, err = kaiwo("monitor", "job/tel", "-n", NAMESPACE, "--kubeconfig", kubeconfig, "--source", "telemetry")
    assert code != 0 and "no kaiwo-ray admin API known" in err


def test_monitor_reads_telemetry_through_the_kubeconfig_extension(
        kaiwo: Run, cluster: OperatorSandbox, admin: RunningApp, trainer_pod: tuple[str, str], samples: list[GpuReading],
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name, node = trainer_pod
    samples.append(GpuReading(node=node, index=5, utilization=12.0,  # another namespace's pod: not shown
                             pod=ObjectRef(kind="Pod", name=name, namespace="elsewhere")))
    samples.append(GpuReading(node=node, index=3, utilization=77.0, memory_used_bytes=float(2**30),
                             memory_total_bytes=float(8 * 2**30),
                             pod=ObjectRef(kind="Pod", name=name, namespace=NAMESPACE)))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(cluster.sb.kubeconfig_path.read_text())
    advertise(kubeconfig, admin.url)
    monkeypatch.delenv("KAIWO_ADMIN_URL", raising=False)
    code, out, err = kaiwo("monitor", "job/tel", "-n", NAMESPACE, "--kubeconfig", str(kubeconfig))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"GPUs of 1 pod(s), from kaiwo-ray telemetry ({admin.url})"
    assert lines[1].split() == ["POD", "NODE", "GPU", "UTILIZATION", "MEMORY"]
    assert lines[2].split() == [name, node, "3", "77%", "1.0/8.0", "GiB"]

    # the same telemetry in the admin API's /metrics: the node's GPUs by state and their mean utilization
    with urllib.request.urlopen(f"{admin.url}/metrics", timeout=10) as response:
        families = {f.name: f.samples for f in text_string_to_metric_families(response.read().decode())}
    assert [s.value for s in families["kaiwo_node_gpu_utilization_percent"] if s.labels["node"] == node] == [44.5]  # mean of 77 and 12
    states = {s.labels["state"]: s.value for s in families["kaiwo_node_gpus"] if s.labels["node"] == node}
    assert states["used"] >= 1 and states["allocatable"] == states["used"] + states["idle"]

    code, out, _ = kaiwo("monitor", "job/tel", "-n", NAMESPACE, "--kubeconfig", str(kubeconfig),
                         "--source", "pod")
    assert code == 0 and "GFX_UTIL" in out and "telemetry" not in out  # amd-smi in the pod


def test_monitor_falls_back_to_the_pod_when_telemetry_cannot_answer(
        kaiwo: Run, admin: RunningApp, samples: list[GpuReading], monkeypatch: pytest.MonkeyPatch) -> None:
    # the admin API answers, but has no samples for this workload's pods
    code, out, err = kaiwo("monitor", "job/tel", "-n", NAMESPACE, "--admin-url", admin.url)
    assert code == 0 and "GFX_UTIL" in out
    assert "has no GPU samples for the pods of job/tel: asking the GPU tool in each pod" in err

    closed = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("KAIWO_ADMIN_URL", closed)
    code, out, err = kaiwo("monitor", "job/tel", "-n", NAMESPACE)
    assert code == 0 and "GFX_UTIL" in out and f"admin API at {closed} unreachable" in err

    code, _, err = kaiwo("monitor", "job/tel", "-n", NAMESPACE, "--source", "telemetry")
    assert code == 1 and f"admin API at {closed} unreachable" in one_error_line(err)

    monkeypatch.delenv("KAIWO_ADMIN_URL")
    code, _, err = kaiwo("monitor", "job/tel", "-n", NAMESPACE, "--source", "telemetry")
    assert code == 2 and "no kaiwo-ray admin API known" in one_error_line(err)
