"""KaiwoServices in a what-if (`kind: service`), end to end in virtual time: the operator renders each as
a Deployment, the simulated Kueue admits each of its pods as a Workload of its own (its pod
integration), and the simulation, as the service's owner, deletes it `duration` seconds after it
started (all its pods admitted). Also `trace generate --service-share`, the refusals, and the forecast
of a cluster with services."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from hosts.cli.main import main
from hosts.runtime.forecast import forecast
from hosts.runtime.simulator import kaiwojob, kaiwoservice
from kaiwo_ray.nodes import default_nodes
from kaiwo_ray.simulation.forecast import cluster_state
from kaiwo_ray.simulation.report import Interval, WorkloadRecord
from kaiwo_ray.simulation.series import whole_spans
from kaiwo_ray.simulation.trace import TraceEntry, TraceWorkload, parse_trace

DATA = Path(__file__).parent / "data"
QUEUES = DATA / "two-teams.yaml"  # team-a (preempts by priority) and team-b: 8 MI300X GPUs each
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _simulate(capsys: pytest.CaptureFixture[str], trace: Path) -> str:
    assert main(["simulate", "--trace", str(trace), "--queue-config", str(QUEUES), "-o", "json"]) == 0
    return capsys.readouterr().out


def _report(capsys: pytest.CaptureFixture[str], tmp_path: Path, lines: str) -> dict[str, Any]:
    """The JSON report of a trace of these lines."""
    trace = tmp_path / "trace.jsonl"
    trace.write_text(lines)
    report: dict[str, Any] = json.loads(_simulate(capsys, trace))
    return report


def test_a_service_holds_its_gpus_until_its_owner_deletes_it(capsys: pytest.CaptureFixture[str]) -> None:
    out = _simulate(capsys, DATA / "services.jsonl")
    report: dict[str, Any] = json.loads(out)
    rows = {w["name"]: (w["started"], w["finished"], w["preemptions"]) for w in report["workloads"]}
    # s1 deleted at 0 + 100; j1 waits for its 8 GPUs of team-a until then; s2 (no duration) holds its
    # GPUs until the run ends (j1's finish, at 150: then only s3 waits, and nothing can change).
    assert rows == {"s1": (0.0, 100.0, []), "j1": (100.0, 150.0, []), "s2": (0.0, None, []),
                    "s3": (None, None, [])}
    assert [w["name"] for w in report["never_started"]] == ["s3"]
    assert report["queues"]["team-b"]["never_started"] == 1
    assert report["simulated_seconds"] == 150.0
    # every admitted pod's GPUs count, s3's lone admitted pod too (from 5: 2 + 4 of team-b's 8)
    assert report["series"]["gpus_allocated"] == [[0.0, 10.0], [5.0, 14.0], [100.0, 10.0], [150.0, 0.0]]
    assert report["overall"]["gpu_hours"]["allocated"] == round((8 * 100 + 4 * 50 + 2 * 150 + 4 * 145) / 3600, 3)
    assert report["overall"]["gpu_hours"]["used"] == round(8 * 100 * 0.5 / 3600, 3)  # s1 at 50 %
    # s3 is pending from its submission to the end; j1 from 10 to 100
    assert report["series"]["pending"]["team-b"] == [[0.0, 0.0], [5.0, 1.0], [150.0, 0.0]]
    assert report["series"]["pending"]["team-a"] == [[0.0, 0.0], [10.0, 1.0], [100.0, 0.0], [150.0, 0.0]]
    assert _simulate(capsys, DATA / "services.jsonl") == out  # byte-identical


def test_a_preempted_service_pod_is_readmitted_and_the_service_still_ends_at_its_deletion(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = _report(capsys, tmp_path,
                     '{"name": "s", "submit": 0, "user": "alice", "queue": "team-a", "kind": "service", "replicas": 2, '
                     '"gpus": 4, "duration": 300}\n'
                     '{"name": "h", "submit": 10, "user": "bob", "queue": "team-a", "priority": "high", "gpus": 4, '
                     '"duration": 50}\n')
    rows = {w["name"]: (w["started"], w["finished"], w["preemptions"]) for w in report["workloads"]}
    # h preempts one of s's pods at 10 (Kueue deletes the pod; the ReplicaSet makes another, queued
    # again, admitted when h ends at 60); s was started at 0, so its owner deletes it at 300
    assert rows == {"s": (0.0, 300.0, ["InClusterQueue"]), "h": (10.0, 60.0, [])}
    assert report["overall"]["preemptions"] == {"InClusterQueue": 1}
    assert report["series"]["pending"]["team-a"] == [[0.0, 0.0], [10.0, 1.0], [60.0, 0.0], [300.0, 0.0]]
    assert report["series"]["gpus_allocated"] == [[0.0, 8.0], [300.0, 0.0]]


def test_a_service_past_its_declared_duration_is_terminated_by_the_operator(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = _report(capsys, tmp_path,
                     '{"name": "s", "submit": 0, "user": "alice", "queue": "team-a", "kind": "service", "replicas": 2, '
                     '"gpus": 4, "duration": 5000, "declared_duration": 60}\n'
                     '{"name": "j", "submit": 10, "user": "bob", "queue": "team-a", "gpus": 4, "duration": 50}\n')
    s, j = report["workloads"]
    # the KaiwoService's spec.duration (60 s) is over while j waits: the operator terminates it (its
    # WorkloadTerminatedEarly reason, once per pod Workload) long before its owner would delete it
    assert (s["started"], s["finished"], s["preemptions"]) == (0.0, None, ["DurationExceeded"] * 2)
    assert 60.0 <= s["terminated"] < 61.0
    assert j["started"] == s["terminated"]
    assert j["finished"] == pytest.approx(j["started"] + 50, abs=0.01)


def test_a_service_is_started_while_all_its_pods_are_admitted() -> None:
    pods = [Interval(0.0, 50.0, "InClusterQueue", pods=1), Interval(5.0, 90.0, pods=1), Interval(70.0, 90.0, pods=1)]
    # 2 pods: whole from 5 (the second admission) until 50 (a preemption), again from 70
    assert whole_spans(pods, 2) == [(5.0, 50.0, "InClusterQueue"), (70.0, 90.0, "")]
    assert WorkloadRecord(1, "s", 0.0, pods, replicas=2).started == 5.0
    assert WorkloadRecord(1, "s", 0.0, pods, replicas=3).started is None  # never 3 at once
    # admitted as the run ends (a span of no length) is still a start; a job's intervals are its spans
    assert WorkloadRecord(1, "s", 0.0, [Interval(9.0, 9.0, pods=1)], replicas=1).started == 9.0
    assert whole_spans([Interval(1.0, 2.0, "x")], 0) == [(1.0, 2.0, "x")]


@pytest.mark.parametrize(("line", "expected"), [
    ({"kind": "service", "gpus": 16}, "line 2: gpus: 16 amd GPUs in one pod, but no node has more than 8"),
    ({"kind": "service", "replicas": 2, "gpus": 1, "cpu": 900}, "line 2: cpu: 900 CPU in one pod, but no node"),
    ({"kind": "job", "duration": None}, "line 2: duration: Field required (only a service may run without one)"),
])
def test_a_bad_service_line_is_refused_with_its_line_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               line: dict[str, Any], expected: str) -> None:
    body = {"submit": 0, "user": "alice", "queue": "team-a", "duration": 60, **line}
    trace = tmp_path / "bad.jsonl"
    trace.write_text("# a comment\n" + json.dumps({k: v for k, v in body.items() if v is not None}) + "\n")
    assert main(["simulate", "--trace", str(trace), "--queue-config", str(QUEUES)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"kaiwo-ray simulate: {trace}: {expected}") and "\n" not in err, err


def test_generate_service_share_draws_from_its_own_stream(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["trace", "generate", "--workloads", "60", "--seed", "9", "--rayjob-share", "0.3"]
    assert main(args) == 0
    plain = capsys.readouterr().out
    assert main([*args, "--service-share", "0"]) == 0
    assert capsys.readouterr().out == plain  # the default trace, byte for byte
    assert main([*args, "--service-share", "0.4"]) == 0
    mixed = capsys.readouterr().out
    before = [e.workload for e in parse_trace(plain.splitlines())]
    after = [e.workload for e in parse_trace(mixed.splitlines())]
    services = [b for b in after if b.kind == "service"]
    assert 12 <= len(services) <= 36  # 40 % of 60, give or take
    for a, b in zip(before, after, strict=True):  # the same workloads; only some are services now
        assert a.model_copy(update={"kind": b.kind}) == b
        assert b.kind == "service" or b.kind == a.kind
    assert main([*args, "--service-share", "1.5"]) == 2
    assert capsys.readouterr().err.strip() == "kaiwo-ray trace generate: --service-share must be between 0 and 1"


def _object(line: dict[str, Any], phase: str, created: datetime, started: datetime | None = None) -> dict[str, Any]:
    """The KaiwoJob or KaiwoService the simulation makes of a trace line, as the cluster would hold it."""
    entry = TraceEntry(1, TraceWorkload.model_validate(line))
    obj = kaiwoservice(entry) if entry.workload.kind == "service" else kaiwojob(entry)
    obj["metadata"]["creationTimestamp"] = created.strftime("%Y-%m-%dT%H:%M:%SZ")
    obj["status"] = {"status": phase, **({"startTime": started.strftime("%Y-%m-%dT%H:%M:%SZ")} if started else {})}
    return obj


def test_the_forecast_holds_a_running_services_gpus_and_estimates_a_pending_one() -> None:
    # team-a: a running service of 2 x 4 GPUs declared 1 h, started 30 min ago: the pending job (8 GPUs,
    # declared 10 min) starts when it ends (in 30 min), the pending service of 4 GPUs after that job (40).
    # team-b: a running service without a duration holds 6 of its 8 GPUs for ever: a 4-GPU job there
    # never starts (no estimate).
    base = {"user": "alice", "submit": 0, "duration": 1}
    services = [
        _object({**base, "name": "web", "queue": "team-a", "kind": "service", "replicas": 2, "gpus": 4,
                 "declared_duration": 3600}, "RUNNING", NOW - timedelta(minutes=31), NOW - timedelta(minutes=30)),
        _object({**base, "name": "api", "queue": "team-b", "kind": "service", "gpus": 6},
                "RUNNING", NOW - timedelta(hours=5), NOW - timedelta(hours=5)),
        _object({**base, "name": "new", "queue": "team-a", "kind": "service", "gpus": 4},
                "PENDING", NOW - timedelta(minutes=5)),
    ]
    jobs = [
        _object({**base, "name": "big", "queue": "team-a", "gpus": 8, "declared_duration": 600},
                "PENDING", NOW - timedelta(minutes=20)),
        _object({**base, "name": "stuck", "queue": "team-b", "gpus": 4, "declared_duration": 600},
                "PENDING", NOW - timedelta(minutes=10)),
    ]
    state = cluster_state(jobs, services)
    assert [(j.name, j.kind, j.replicas, j.gpus) for j in state.running] == [
        ("api", "service", 1, 6), ("web", "service", 2, 4)]
    assert [j.name for j in state.pending] == ["big", "stuck", "new"]
    result = {e.name: e for e in forecast(state, NOW, default_nodes(), yaml.safe_load(QUEUES.read_text()))}
    assert result["big"].start == NOW + timedelta(minutes=30)
    assert result["new"].start == NOW + timedelta(minutes=40)
    assert result["stuck"].start is None
