"""`kaiwo-ray simulate` end to end: the real operator controllers and the simulated cluster in virtual
time, on a trace small enough to work out by hand (tests/simulation/data)."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from hosts.cli.main import main
from hosts.runtime.virtual_loop import VirtualTimeLoop

DATA = Path(__file__).parent / "data"
TRACE = DATA / "contention.jsonl"
QUEUES = DATA / "two-teams.yaml"


def simulate(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["simulate", "--trace", str(TRACE), "--queue-config", str(QUEUES), *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def report_text() -> str:
    """The JSON report of the contention trace (one run, shared by the tests that read it)."""
    return _run_json()


def _run_json() -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["simulate", "--trace", str(TRACE), "--queue-config", str(QUEUES), "-o", "json"]) == 0
    return out.getvalue()


def test_starts_waits_and_preemptions_are_the_ones_worked_out_by_hand(report_text: str) -> None:
    report: dict[str, Any] = json.loads(report_text)
    rows = {w["name"]: (w["started"], w["wait"], w["finished"], w["preemptions"]) for w in report["workloads"]}
    assert rows == {
        # team-a (8 GPUs): a1 takes all 8; a2 and a3 (4 each) start when it ends at 100; a4 (priority
        # high, 8 GPUs) preempts both at 120 and runs to 150; they start again then and run their 50 s.
        "a1": (0.0, 0.0, 100.0, []),
        "a2": (100.0, 90.0, 200.0, ["InClusterQueue"]),
        "a3": (100.0, 80.0, 200.0, ["InClusterQueue"]),
        "a4": (120.0, 0.0, 150.0, []),
        # team-b (8 GPUs, no borrowing): b1 and b2 share it; b3 needs all 8, so waits for b1 (300).
        "b1": (0.0, 0.0, 300.0, []),
        "b2": (5.0, 0.0, 65.0, []),
        "b3": (300.0, 270.0, 360.0, []),
        # team-c has no GPU quota: c1 can never start, and is reported instead of waited for.
        "c1": (None, None, None, []),
    }
    assert report["never_started"] == [{"line": 8, "name": "c1", "namespace": "default", "queue": "team-c"}]
    assert report["simulated_seconds"] == 360.0
    team_a = report["queues"]["team-a"]
    assert team_a["wait_seconds"] == {"p50": 0.0, "p95": 90.0, "max": 90.0}
    assert team_a["preemptions"] == {"InClusterQueue": 2}
    assert report["users"]["bob"]["wait_seconds"]["max"] == 270.0
    overall = report["overall"]
    assert overall["allocation"]["peak_gpus"] == 16
    # a1: 8 GPUs x 100 s at 100 %; b1: 4 GPUs x 100 s at 50 %; the rest idle their GPUs
    assert overall["gpu_hours"]["used"] == round(1000 / 3600, 3)
    # 8x100 + 4x20x2 (a2, a3 before preemption) + 4x50x2 + 8x30 + 4x300 + 4x60 + 8x60 GPU-seconds
    assert overall["gpu_hours"]["allocated"] == round((800 + 160 + 400 + 240 + 1200 + 240 + 480) / 3600, 3)


def test_the_time_series_are_the_ones_worked_out_by_hand(report_text: str) -> None:
    series = json.loads(report_text)["series"]
    # a1 8 + b1 4; b2 +4 at 5, ends at 65; at 100, 120 and 150 team-a swaps 8 GPUs for 8; a2, a3 end
    # at 200; b1 (4) gives way to b3 (8) at 300; all done at 360
    assert series["gpus_allocated"] == [[0.0, 12.0], [5.0, 16.0], [65.0, 12.0], [200.0, 4.0], [300.0, 8.0],
                                        [360.0, 0.0]]
    # a1's 8 GPUs at 100 % and b1's 4 at 50 % for 100 s; everything else idles its GPUs
    assert series["gpus_used"] == [[0.0, 10.0], [100.0, 0.0], [360.0, 0.0]]
    assert series["pending"] == {
        # a2 and a3 wait for a1, then again from their preemption by a4 (120) until it ends (150)
        "team-a": [[0.0, 0.0], [10.0, 1.0], [20.0, 2.0], [100.0, 0.0], [120.0, 2.0], [150.0, 0.0], [360.0, 0.0]],
        "team-b": [[0.0, 0.0], [30.0, 1.0], [300.0, 0.0], [360.0, 0.0]],
        "team-c": [[0.0, 0.0], [40.0, 1.0], [360.0, 0.0]],  # c1 never starts
    }


def test_the_same_inputs_give_byte_identical_json(report_text: str) -> None:
    assert _run_json() == report_text


def test_the_table_names_queues_users_and_what_never_started(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = simulate(capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["WORKLOADS", "NEVER", "WAIT", "P50"]
    assert any(row.startswith("queue team-a") and row.endswith("InClusterQueue 2") for row in lines)
    assert lines[-1] == "Never started (1): default/c1 (line 8, queue team-c)"


@pytest.mark.parametrize(("line", "expected"), [
    ('{"submit": 0, "user": "u", "queue": "team-a", "gpus": 2, "duration": "long"}',
     "line 2: duration: Input should be a valid number"),
    ('{"submit": 0, "user": "u", "queue": "team-z", "gpus": 2, "duration": 5}', "line 2: queue: unknown queue 'team-z'"),
    ('{"submit": 0, "user": "u", "queue": "team-a", "gpus": 16, "duration": 5}',
     "line 2: gpus: 16 amd GPUs in one pod, but no node has more than 8"),
    ('{"submit": 0, "user": "u", "queue": "team-a", "gpus": 1, "duration": 5', "line 2: not JSON"),
    # more CPU than any node has: with quota for it, Kueue would admit it and its pod wait for ever
    ('{"submit": 0, "user": "u", "queue": "team-a", "cpu": "900", "duration": 5}',
     "line 2: cpu: 900 CPU in one pod, but no node has more than 383"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str,
                                          expected: str) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"submit": 0, "user": "u", "queue": "team-a", "gpus": 1, "duration": 5}\n' + line + "\n")
    code = main(["simulate", "--trace", str(trace), "--queue-config", str(QUEUES)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"kaiwo-ray simulate: {trace}: {expected}"), err


def test_a_queue_config_file_without_one_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "q.yaml"
    config.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    assert main(["simulate", "--trace", str(TRACE), "--queue-config", str(config)]) == 2
    assert capsys.readouterr().err == f"kaiwo-ray simulate: {config}: expected one KaiwoQueueConfig, found 0\n"


def test_idle_waits_cost_no_wall_time_but_threads_are_waited_for() -> None:
    loop = VirtualTimeLoop()

    async def scenario() -> tuple[float, float, float]:
        began = time.monotonic()
        await asyncio.sleep(7 * 86400)  # a simulated week
        week = loop.time()
        # A thread's work is real time the loop cannot see through: a timer due in 10 virtual
        # seconds must not fire (by a jump) before the thread is done.
        timer = asyncio.ensure_future(asyncio.sleep(10))
        await asyncio.to_thread(time.sleep, 0.2)
        at_thread_end = loop.time()
        assert not timer.done()
        await timer
        return week, at_thread_end - week, time.monotonic() - began

    try:
        week, thread_virtual, wall = loop.run_until_complete(scenario())
    finally:
        loop.close()
    assert week == 7 * 86400
    assert thread_virtual < 10
    assert wall < 5


def test_compare_runs_the_trace_under_both_configurations(capsys: pytest.CaptureFixture[str]) -> None:
    more = DATA / "team-b-16.yaml"
    code = main(["simulate", "--trace", str(TRACE), "--compare", str(QUEUES), str(more), "-o", "json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["a"]["queue_config"] == str(QUEUES) and result["b"]["queue_config"] == str(more)
    groups = {row["group"]: row["figures"] for row in result["comparison"]["groups"]}
    # With 16 GPUs of quota b3 no longer waits for b1: it starts at once (the nodes have room then).
    assert groups["queue team-b"]["wait_seconds.max"] == {"a": 270.0, "b": 0.0, "difference": -270.0}
    assert groups["queue team-c"]["never_started"] == {"a": 1, "b": 1, "difference": 0}
    rows_a = {w["name"]: w["started"] for w in result["a"]["report"]["workloads"]}
    assert rows_a["b3"] == 300.0


def test_a_wait_below_the_resolution_of_the_loop_still_lets_time_move() -> None:
    """While other callbacks are ready, asyncio runs a timer up to its clock resolution (1 ns) early.
    Code that waits "until t" by computing `t - now` itself (the sandbox's Kueue status writer does)
    then finds a remainder under a nanosecond and waits again: in real time the clock moves meanwhile;
    in virtual time the wait must still be one, or work that keeps the loop busy (here: a task
    yielding 5,000 times; in a simulation the sandbox's own controllers) spins the waiter with it."""
    loop = VirtualTimeLoop()

    async def busy() -> None:
        for _ in range(5000):
            await asyncio.sleep(0)

    async def scenario() -> int:
        await asyncio.sleep(3683.75)
        target = loop.time() + 5e-10
        other = asyncio.ensure_future(busy())
        waits = 0
        while loop.time() < target:
            waits += 1
            await asyncio.sleep(target - loop.time())
        await other
        return waits

    try:
        assert loop.run_until_complete(scenario()) == 1
    finally:
        loop.close()


def test_an_interrupted_run_reports_what_it_has_so_far() -> None:
    """Ctrl-C arrives as KeyboardInterrupt on the loop's thread: here from the progress callback, as
    the 4th workload (a2, at 10 s) is submitted."""
    from hosts.cli.simulate import load_inputs
    from hosts.runtime.simulator import Recorder, run_simulation
    from kaiwo_ray import clock
    from kaiwo_ray.simulation.report import build_report, render_table

    args = argparse.Namespace(trace=TRACE, kaiwoconfig=None, nodes=None, settle=600.0, horizon=None)
    inputs = load_inputs(args, QUEUES)

    def interrupt(recorder: Recorder) -> None:
        if sum(1 for t in recorder.by_name.values() if t.record.submitted is not None) == 4:
            raise KeyboardInterrupt

    report = build_report(inputs.trace, run_simulation(inputs, interrupt), 24)
    assert report["interrupted"] is True
    assert report["simulated_seconds"] == 10.0
    assert {w["name"]: w["started"] for w in report["workloads"] if w["started"] is not None} == \
        {"a1": 0.0, "b1": 0.0, "b2": 5.0}
    assert render_table(report).splitlines()[-1].startswith("Interrupted after 10s simulated")
    assert abs((clock.now() - datetime.now(UTC)).total_seconds()) < 5  # the operator's clock is the wall's again
