"""Kinds other than a one-pod job, end to end in virtual time: a `rayjob` (a RayJob through the
simulated KubeRay: head, GPU workers and KubeRay's submitter, one Kueue Workload) and a `job` of
several pods (one pod set of `replicas` pods), replayed by `kaiwo-ray simulate` and forecast by the
estimated-start engine (the same simulation, started from the cluster's KaiwoJobs)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from hosts.cli.main import main
from hosts.runtime.forecast import forecast
from hosts.runtime.simulator import kaiwojob
from kaiwo_ray.nodes import default_nodes
from kaiwo_ray.simulation.forecast import cluster_state
from kaiwo_ray.simulation.trace import TraceEntry, TraceWorkload

QUEUES = Path(__file__).parent / "data" / "two-teams.yaml"  # team-a and team-b: 8 MI300X GPUs each
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
# team-a: r1 (2 workers x 2 GPUs) runs 0..100; r2 (2 x 4 = 8 GPUs) needs all of team-a, so waits for r1.
# team-b: j1 (2 pods x 2 GPUs) runs 0..50; j2 (2 pods x 4 = 8) waits for it.
TRACE = [
    {"name": "r1", "submit": 0, "user": "alice", "queue": "team-a", "kind": "rayjob", "replicas": 2, "gpus": 2,
     "duration": 100, "utilization": [{"percent": 100}]},
    {"name": "j1", "submit": 0, "user": "bob", "queue": "team-b", "replicas": 2, "gpus": 2, "duration": 50},
    {"name": "r2", "submit": 5, "user": "alice", "queue": "team-a", "kind": "rayjob", "replicas": 2, "gpus": 4,
     "duration": 40},
    {"name": "j2", "submit": 10, "user": "bob", "queue": "team-b", "replicas": 2, "gpus": 4, "duration": 30},
    # 3 workers x 4 GPUs fit the nodes but never team-a's 8 GPUs of quota: reported, not waited for
    {"name": "r3", "submit": 20, "user": "carol", "queue": "team-a", "kind": "rayjob", "replicas": 3, "gpus": 4,
     "duration": 10},
]


def test_rayjobs_and_multi_pod_jobs_start_and_finish_as_worked_out(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "kinds.jsonl"
    trace.write_text("".join(json.dumps(line) + "\n" for line in TRACE))
    assert main(["simulate", "--trace", str(trace), "--queue-config", str(QUEUES), "-o", "json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    rows = {w["name"]: (w["started"], w["finished"], w["preemptions"]) for w in report["workloads"]}
    assert rows == {"r1": (0.0, 100.0, []), "j1": (0.0, 50.0, []), "r2": (100.0, 140.0, []),
                    "j2": (50.0, 80.0, []), "r3": (None, None, [])}
    assert [w["name"] for w in report["never_started"]] == ["r3"]
    # every pod's GPUs count: r1 4 x 100 s, j1 4 x 50, r2 8 x 40, j2 8 x 30; only r1 uses them (100 %)
    gpu_hours = report["overall"]["gpu_hours"]
    assert gpu_hours["allocated"] == round((400 + 200 + 320 + 240) / 3600, 3)
    assert gpu_hours["used"] == round(400 / 3600, 3)
    assert report["overall"]["allocation"]["peak_gpus"] == 12  # r1 4 + j2 8 (50..80)


def _object(line: dict[str, Any], phase: str, created: datetime, started: datetime | None = None) -> dict[str, Any]:
    """The KaiwoJob the simulation makes of a trace line, as the cluster would hold it."""
    obj = kaiwojob(TraceEntry(1, TraceWorkload.model_validate(line)))
    obj["metadata"]["creationTimestamp"] = created.strftime("%Y-%m-%dT%H:%M:%SZ")
    obj["status"] = {"status": phase, **({"startTime": started.strftime("%Y-%m-%dT%H:%M:%SZ")} if started else {})}
    return obj


def test_a_pending_rayjob_is_forecast_behind_the_rayjob_that_holds_its_queue() -> None:
    # team-a: a running rayjob of 2 x 4 GPUs declared 1 h, started 30 min ago; a pending rayjob of
    # 2 x 2 starts when it ends (30 min); a pending 2-pod job of 2 x 4 then waits for that one (40 min).
    base = {"user": "alice", "queue": "team-a", "submit": 0, "duration": 1}
    state = cluster_state([
        _object({**base, "name": "running", "kind": "rayjob", "replicas": 2, "gpus": 4, "declared_duration": 3600},
                "RUNNING", NOW - timedelta(minutes=31), NOW - timedelta(minutes=30)),
        _object({**base, "name": "ray", "kind": "rayjob", "replicas": 2, "gpus": 2, "declared_duration": 600},
                "PENDING", NOW - timedelta(minutes=20)),
        _object({**base, "name": "pods", "replicas": 2, "gpus": 4, "declared_duration": 600},
                "PENDING", NOW - timedelta(minutes=10)),
    ])
    assert [(j.name, j.kind, j.replicas, j.gpus) for j in state.running + state.pending] == [
        ("running", "rayjob", 2, 4), ("ray", "rayjob", 2, 2), ("pods", "job", 2, 4)]
    result = {e.name: e for e in forecast(state, NOW, default_nodes(), yaml.safe_load(QUEUES.read_text()))}
    assert result["ray"].start == NOW + timedelta(minutes=30)
    assert result["pods"].start == NOW + timedelta(minutes=40)
