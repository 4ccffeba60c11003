"""Idle-GPU preemption and the resource monitor inside `kaiwo-ray simulate`: the real controllers, fed
by the sandbox's simulated GPUs through the telemetry sampler, in virtual time. One workload holds
team-a's 8 GPUs at 0 % for an hour; another asks for the same 8 GPUs 30 s later (tests/simulation/data)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

from hosts.cli.main import main
from kaiwo_ray.reconcile.gpupreemption import workload_gpus
from kaiwo_ray.simulation.report import Interval, reclaimed_gpu_seconds
from kaiwo_ray.simulation.trace import parse_trace

DATA = Path(__file__).parent / "data"
TRACE = DATA / "idle.jsonl"


def _run(*extra: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["simulate", "--trace", str(TRACE), "--queue-config", str(DATA / "two-teams.yaml"),
                     "-o", "json", *extra]) == 0
    return out.getvalue()


def _rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in report["workloads"]}


def test_idle_preemption_frees_the_gpus_for_the_waiting_workload_after_the_grace() -> None:
    text = _run("--kaiwoconfig", str(DATA / "idle-preemption.yaml"))
    report = json.loads(text)
    rows = _rows(report)
    # Idle from its start (0 s), grace 2m. The trackers are polled every 15 s (0, 15, 30, ...). At its
    # start no telemetry sample shows it yet (they are taken at 0.5, 1.5, ... s), so its reading is
    # unknown; the poll at 15 s finds it idle, and the one at 135 s preempts it. The waiting one is
    # admitted in the same simulated second.
    assert rows["idle"]["preemptions"] == ["IdleGpuPreemption"]
    assert rows["idle"]["terminated"] == 135.0 and rows["idle"]["finished"] is None
    assert rows["busy"]["started"] == 135.0 and rows["busy"]["finished"] == 735.0
    assert report["overall"]["preemptions"] == {"IdleGpuPreemption": 1}
    reclaimed = report["overall"]["reclaimed_gpu_hours"]
    assert reclaimed == {"idle_preemption": round(8 * (3600 - 135) / 3600, 3), "resource_monitoring": 0.0}
    assert report["queues"]["team-a"]["reclaimed_gpu_hours"] == reclaimed
    assert report["users"]["bob"]["reclaimed_gpu_hours"] == {"idle_preemption": 0.0, "resource_monitoring": 0.0}
    # Reproducible: the same inputs give the same bytes.
    assert _run("--kaiwoconfig", str(DATA / "idle-preemption.yaml")) == text


def test_without_a_kaiwoconfig_turning_it_on_the_idle_workload_keeps_its_gpus() -> None:
    report = json.loads(_run())
    rows = _rows(report)
    assert rows["idle"]["preemptions"] == [] and rows["idle"]["finished"] == 3600.0
    assert rows["busy"]["started"] == 3600.0
    assert report["overall"]["preemptions"] == {}
    assert report["overall"]["reclaimed_gpu_hours"]["idle_preemption"] == 0.0


def test_the_resource_monitor_terminates_the_underutilized_workload() -> None:
    text = _run("--kaiwoconfig", str(DATA / "resource-monitoring.yaml"))
    rows = _rows(json.loads(text))
    # The monitor's first tick (10 s) marks it underutilized; terminated 5m later, at its next tick.
    assert rows["idle"]["preemptions"] == ["GpuUtilizationLow"]
    assert rows["idle"]["terminated"] == 310.0
    assert rows["busy"]["started"] == 310.0
    assert json.loads(text)["overall"]["reclaimed_gpu_hours"]["resource_monitoring"] == round(8 * 3290 / 3600, 3)
    assert _run("--kaiwoconfig", str(DATA / "resource-monitoring.yaml")) == text


def test_the_table_says_what_was_reclaimed(capsys: Any) -> None:
    assert main(["simulate", "--trace", str(TRACE), "--queue-config", str(DATA / "two-teams.yaml"),
                 "--kaiwoconfig", str(DATA / "idle-preemption.yaml")]) == 0
    out = capsys.readouterr().out
    assert "IdleGpuPreemption 1" in out
    assert "Reclaimed GPU-hours: 7.7 by idle GPU preemption, 0.0 by resource monitoring." in out


def test_reclaimed_time_is_what_the_workload_would_still_have_held() -> None:
    entry = parse_trace(['{"submit": 0, "user": "u", "queue": "q", "gpus": 4, "duration": 100}'])[0]
    assert reclaimed_gpu_seconds(entry, Interval(10.0, 40.0, "IdleGpuPreemption")) == 4 * 70
    assert reclaimed_gpu_seconds(entry, Interval(0.0, 150.0, "IdleGpuPreemption")) == 0.0


def test_a_pending_workload_asks_for_its_pod_sets_gpus() -> None:
    template = {"spec": {"containers": [{"resources": {"requests": {"amd.com/gpu": "2"}}}]}}
    assert workload_gpus({"spec": {"podSets": [{"count": 3, "template": template}]}}) == {"amd.com/gpu": 6}
    assert workload_gpus({"spec": {}}) == {}
