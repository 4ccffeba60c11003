"""`kaiwo-ray trace export` against a live sandbox with the operator in-process: KaiwoJobs on two
queues, for three users, with and without GPUs, run to the end; one can never start; a GPU ledger
checkpoint for one of them. The export is read back line by line and replayed by `kaiwo-ray simulate`.
The mapping's corners (ledger utilization, GPU vendor, Ray jobs, the window) are pinned on plain objects."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from e2e_harness import OperatorSandbox, operator_sandbox

from hosts.cli.main import main
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.simulation.export import export_trace, mean_utilization, parse_moment
from kaiwo_ray.simulation.trace import parse_trace
from kaiwo_ray.telemetry.ledger import Holder, Ledger
from kaiwo_ray.telemetry.ledger_store import LedgerStore
from kaiwo_sandbox.testing import eventually

QUEUES = Path(__file__).parent / "data" / "two-teams.yaml"
RUN_SECONDS = "sandbox.kaiwo-ray.dev/run-seconds"
GPU_UTILIZATION = "sandbox.kaiwo-ray.dev/gpu-utilization"
# (name, user, queue, gpus, vendor, run seconds): the sandbox runs at time factor 1, so a pod runs
# its annotated seconds of wall time, and the API's whole-second stamps measure them.
JOBS = [
    ("a1", "alice", "team-a", 2, "amd", 2),
    ("b1", "bob", "team-b", 1, "amd", 4),
    ("n1", "carol", "team-b", 0, "amd", 3),
    ("c1", "carol", "team-c", 1, "amd", 1),  # team-c has no GPU quota: never starts
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[OperatorSandbox]:
    with operator_sandbox(time_factor=1.0) as env:
        yield env


def kaiwojob(name: str, user: str, queue: str, gpus: int, vendor: str, seconds: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"user": user, "image": "simulated", "entrypoint": "simulated", "clusterQueue": queue,
                            "resources": {"requests": {"cpu": "2", "memory": "4Gi"},
                                          "limits": {"cpu": "2", "memory": "4Gi"}}}
    if gpus:
        spec |= {"gpus": gpus, "gpuVendor": vendor}
    if name == "b1":
        spec["duration"] = "1h"
    return {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob",
            "metadata": {"name": name, "namespace": "export", "annotations": {RUN_SECONDS: str(seconds)}},
            "spec": spec}


def test_export_of_finished_kaiwojobs_replays_in_simulate(cluster: OperatorSandbox, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    kube = cluster.target.kube
    config = yaml.safe_load(QUEUES.read_text())
    kube.patch("kaiwo.silogen.ai/v1alpha1", "KaiwoQueueConfig", "kaiwo", {"spec": config["spec"]})
    eventually(lambda: all(kube.get(kube.kueue_api, "ClusterQueue", q) for q in ("team-a", "team-b", "team-c")),
               15, "ClusterQueues team-a, team-b and team-c")
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "export"}})
    before = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
    for job in JOBS:
        kube.create(kaiwojob(*job))
    done = {"a1", "b1", "n1"}
    eventually(lambda: all(((kube.get("kaiwo.silogen.ai/v1alpha1", "KaiwoJob", n, "export") or {})
                            .get("status") or {}).get("status") in ("COMPLETE", "FAILED") for n in done),
               20, "a1, b1 and n1 finished")

    # What the accounting controller would have checkpointed for b1 (its uid): 1 s at 80 % and 1 s at
    # 40 % of its GPU, written by the product's ledger store into the default ledger namespace.
    b1 = kube.get("kaiwo.silogen.ai/v1alpha1", "KaiwoJob", "b1", "export") or {}
    ledger, now = Ledger(), time.time()
    for offset, percent in ((0.0, 80.0), (1.0, 40.0), (2.0, 40.0)):
        ledger.observe("node", now + offset, [Holder(b1["metadata"]["uid"], "amd", "mi300x", percent)])

    async def checkpoint() -> None:
        client = await KubeClient.from_kubeconfig(str(cluster.sb.kubeconfig_path))
        try:
            await LedgerStore(client, "kube-system").save(ledger, now + 2)
        finally:
            await client.close()

    cluster.run(checkpoint())

    out = tmp_path / "trace.jsonl"
    code = main(["trace", "export", "--kubeconfig", str(cluster.sb.kubeconfig_path), "-n", "export",
                 "--since", before.isoformat().replace("+00:00", "Z"), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "3 workloads written" in err and "1 not finished" in err, err
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    by_name = {line["name"]: line for line in lines}
    assert set(by_name) == done
    assert [line["submit"] for line in lines] == sorted(line["submit"] for line in lines)
    # Created within the test's few seconds after `before` (stamps are whole seconds).
    assert all(0 <= line["submit"] <= 10 for line in lines), lines
    expected = {name: (user, queue, gpus, seconds) for name, user, queue, gpus, _, seconds in JOBS if name in done}
    for name, (user, queue, gpus, seconds) in expected.items():
        line = by_name[name]
        assert (line["user"], line["queue"], line.get("gpus", 0)) == (user, queue, gpus), line
        assert (line["cpu"], line["memory"]) == ("2", "4Gi"), line
        # Start and finish are whole-second stamps (each difference is off by < 1 s), plus the
        # sandbox's container start latency on a loaded 2-core machine: 1.5 s either way.
        assert abs(line["duration"] - seconds) <= 1.5, line
    assert by_name["b1"]["declared_duration"] == 3600
    assert by_name["b1"]["utilization"] == [{"percent": 60.0}]
    assert "utilization" not in by_name["a1"]  # the ledger knows nothing of it
    # The same cluster read twice gives the same bytes.
    again = tmp_path / "again.jsonl"
    assert main(["trace", "export", "--kubeconfig", str(cluster.sb.kubeconfig_path), "-n", "export",
                 "--since", before.isoformat().replace("+00:00", "Z"), "-o", str(again)]) == 0
    assert again.read_bytes() == out.read_bytes()

    capsys.readouterr()
    assert main(["simulate", "--trace", str(out), "--queue-config", str(QUEUES), "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert sorted(w["name"] for w in report["workloads"]) == sorted(done)
    assert all(w["started"] is not None for w in report["workloads"])


def test_export_of_a_finished_ray_kaiwojob_replays_as_a_rayjob(cluster: OperatorSandbox, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A Ray KaiwoJob (2 workers of 1 GPU) runs through the sandbox's Kueue and KubeRay: its Ray job
    (the submitter) sleeps 3 s. Its pods are gone when it ends; the export takes its run from its
    RayJob and writes a `rayjob` line, which `simulate` replays for that long."""
    kube = cluster.target.kube
    config = yaml.safe_load(QUEUES.read_text())
    kube.patch("kaiwo.silogen.ai/v1alpha1", "KaiwoQueueConfig", "kaiwo", {"spec": config["spec"]})
    eventually(lambda: kube.get(kube.kueue_api, "ClusterQueue", "team-a"), 15, "ClusterQueue team-a")
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "export-ray"}})
    before = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
    # Ray pods start and turn ready at once (KubeRay's readiness probe would wait 10 s).
    annotations = {"sandbox.kaiwo-ray.dev/start-seconds": "0", "sandbox.kaiwo-ray.dev/ready-seconds": "0"}
    kube.create({"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob",
                 "metadata": {"name": "r1", "namespace": "export-ray", "annotations": annotations},
                 "spec": {"user": "alice", "clusterQueue": "team-a", "ray": True, "replicas": 2, "gpusPerReplica": 1,
                          "gpus": 2, "gpuVendor": "amd", "image": "simulated", "entrypoint": "sleep 3",
                          "resources": {"requests": {"cpu": "2", "memory": "4Gi"},
                                        "limits": {"cpu": "2", "memory": "4Gi"}}}})
    eventually(lambda: ((kube.get("kaiwo.silogen.ai/v1alpha1", "KaiwoJob", "r1", "export-ray") or {})
                        .get("status") or {}).get("status") == "COMPLETE", 30, "r1 COMPLETE")
    out = tmp_path / "ray.jsonl"
    code = main(["trace", "export", "--kubeconfig", str(cluster.sb.kubeconfig_path), "-n", "export-ray",
                 "--since", before.isoformat().replace("+00:00", "Z"), "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    [line] = [json.loads(text) for text in out.read_text().splitlines()]
    assert {k: line[k] for k in ("name", "user", "queue", "kind", "replicas", "gpus", "cpu", "memory")} == {
        "name": "r1", "user": "alice", "queue": "team-a", "kind": "rayjob", "replicas": 2, "gpus": 1,
        "cpu": "2", "memory": "4Gi"}, line
    # The RayJob's span: its cluster's start, the submitter's pod start (0.5 s) and the 3 s job, in
    # whole-second stamps, on a loaded machine.
    assert 3 <= line["duration"] <= 6, line
    capsys.readouterr()
    assert main(["simulate", "--trace", str(out), "--queue-config", str(QUEUES), "-o", "json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["workloads"]
    assert row["started"] is not None and row["finished"] - row["started"] == line["duration"], row


def test_bad_since_and_unreachable_cluster_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "export", "--since", "last tuesday"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--since" in err and "last tuesday" in err
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "gone",
        "clusters": [{"name": "gone", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}]}))
    assert main(["trace", "export", "--kubeconfig", str(kubeconfig)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "127.0.0.1:9" in err, err


def _job(name: str, created: str, uid: str, status: str | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid, "creationTimestamp": created},
            "spec": {"user": "u", "clusterQueue": "q", **spec}, **({"status": {"status": status}} if status else {})}


def _pod(uid: str, started: str, finished: str, gpus: int = 0, resource: str = "amd.com/gpu") -> dict[str, Any]:
    resources = {"requests": {"cpu": "1", "memory": "1Gi", **({resource: str(gpus)} if gpus else {})}}
    return {"metadata": {"labels": {"kaiwo.silogen.ai/run-id": uid}},
            "spec": {"containers": [{"name": "main", "resources": resources}]},
            "status": {"phase": "Succeeded", "containerStatuses": [
                {"state": {"terminated": {"startedAt": started, "finishedAt": finished}}}]}}


def _rayjob(owner_uid: str, started: str, ended: str) -> dict[str, Any]:
    return {"metadata": {"ownerReferences": [{"kind": "KaiwoJob", "uid": owner_uid}]},
            "status": {"startTime": started, "endTime": ended}}


def test_mapping_window_kinds_order_and_ledger_utilization() -> None:
    ledger = Ledger()
    for t, percent in ((0.0, 80.0), (1.0, 40.0), (2.0, 40.0)):  # 1 s at 80 %, 1 s at 40 %: mean 60 %
        ledger.observe("node", t, [Holder("uid-b", "amd", "mi300x", percent)])
    assert mean_utilization(ledger.rows, "uid-b") == 60.0
    assert mean_utilization(ledger.rows, "nobody") is None
    two_pods = {"spec": {"parallelism": 2, "completions": 2, "template": {}}}
    jobs = [_job("late", "2026-12-01T00:10:00Z", "uid-late"),
            _job("b", "2026-12-01T00:00:30Z", "uid-b", gpus=1),
            _job("a", "2026-12-01T00:00:10Z", "uid-a"),
            _job("ray", "2026-12-01T00:00:20Z", "uid-r", "COMPLETE", ray=True, replicas=2, gpus=4, gpusPerReplica=2),
            _job("ray-running", "2026-12-01T00:00:21Z", "uid-rr", "RUNNING", ray=True),
            _job("multi", "2026-12-01T00:00:40Z", "uid-m", "COMPLETE", gpus=2, job=two_pods),
            _job("multi-running", "2026-12-01T00:00:41Z", "uid-mr", "RUNNING", job=two_pods),
            _job("early", "2026-11-30T23:59:00Z", "uid-e")]
    pods = [_pod("uid-a", "2026-12-01T00:00:12Z", "2026-12-01T00:01:12Z"),
            _pod("uid-b", "2026-12-01T00:00:31Z", "2026-12-01T00:00:41Z", gpus=1, resource="nvidia.com/gpu"),
            _pod("uid-late", "2026-12-01T00:10:01Z", "2026-12-01T00:10:02Z"),
            # multi: a preempted run (ended before the last began), then two pods side by side
            _pod("uid-m", "2026-12-01T00:00:41Z", "2026-12-01T00:00:45Z", gpus=2),
            _pod("uid-m", "2026-12-01T00:00:51Z", "2026-12-01T00:01:50Z", gpus=2),
            _pod("uid-m", "2026-12-01T00:00:50Z", "2026-12-01T00:01:49Z", gpus=2),
            _pod("uid-mr", "2026-12-01T00:00:42Z", "2026-12-01T00:00:50Z")]
    # The Ray KaiwoJob's pods are gone (KubeRay deleted its cluster); its RayJob says when it ran.
    rayjobs = [_rayjob("uid-r", "2026-12-01T00:00:22Z", "2026-12-01T00:01:52Z")]
    since = parse_moment("2026-12-01T00:00:00Z", datetime.now(UTC))
    until = parse_moment("2026-12-01T00:05:00Z", datetime.now(UTC))
    result = export_trace(jobs, pods, since=since, until=until, ledger_rows=ledger.rows, other={"KaiwoService": 2},
                          rayjobs=rayjobs)
    assert [(w.name, w.submit, w.kind, w.replicas, w.gpus, w.duration) for w in result.workloads] == [
        ("a", 10.0, "job", 1, 0, 60.0), ("ray", 20.0, "rayjob", 2, 2, 90.0), ("b", 30.0, "job", 1, 1, 10.0),
        ("multi", 40.0, "job", 2, 2, 60.0)]
    assert (result.workloads[2].gpus, result.workloads[2].gpu_vendor) == (1, "nvidia")
    assert result.workloads[2].utilization[0].percent == 60.0
    assert result.workloads[0].utilization == []
    assert result.skipped == {"KaiwoService": 2, "not finished (running, pending, or its pods are gone)": 2}
    # Without its RayJob, a Ray KaiwoJob's run is its own startTime..completionTime.
    alone = [_job("ray", "2026-12-01T00:00:20Z", "uid-r", ray=True)
             | {"status": {"status": "COMPLETE", "startTime": "2026-12-01T00:00:25Z",
                           "completionTime": "2026-12-01T00:01:05Z"}}]
    assert [w.duration for w in export_trace(alone, [], since=since, until=until).workloads] == [40.0]
    parse_trace(["{}".format(json.dumps(w.model_dump(mode="json", exclude_defaults=True)))
                 for w in result.workloads])
    assert parse_moment("7d", datetime(2026, 12, 8, tzinfo=UTC)) == datetime(2026, 12, 1, tzinfo=UTC)
    with pytest.raises(ValueError, match="neither a duration"):
        parse_moment("yesterday", datetime.now(UTC))
