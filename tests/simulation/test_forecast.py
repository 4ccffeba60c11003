"""Estimated start times: the cluster's KaiwoJobs as a forecast trace (pure), and that trace simulated
forward by the real controllers on the simulated cluster in virtual time (hosts/runtime/forecast.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from hosts.runtime.forecast import forecast
from kaiwo_ray.nodes import default_nodes
from kaiwo_ray.simulation.forecast import (
    DEFAULT_ABOVE,
    DEFAULT_BELOW,
    DEFAULT_RUN_SECONDS,
    Estimate,
    Widening,
    calibrated,
    cluster_state,
    forecast_trace,
    run_seconds,
    settle,
    widening,
)

QUEUES = Path(__file__).parent / "data" / "two-teams.yaml"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def kaiwojob(name: str, phase: str, created: datetime, *, user: str = "alice", queue: str = "team-a",
             gpus: int = 8, started: datetime | None = None, finished: datetime | None = None,
             duration: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"user": user, "clusterQueue": queue, "gpus": gpus, "gpuVendor": "amd", "image": "x"}
    if duration:
        spec["duration"] = duration
    status: dict[str, Any] = {"status": phase}
    if started:
        status["startTime"] = _stamp(started)
    if finished:
        status["completionTime"] = _stamp(finished)
    return {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob",
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": _stamp(created)},
            "spec": spec, "status": status}


def test_run_times_come_from_the_declared_duration_else_the_users_else_the_queues_history() -> None:
    objs = [kaiwojob(f"done-{i}", "COMPLETE", NOW - timedelta(hours=5), user="bob", started=NOW - timedelta(hours=4),
                     finished=NOW - timedelta(hours=4) + timedelta(seconds=s))
            for i, s in enumerate([100, 200, 300, 400, 500, 600, 700, 800, 900, 1000])]
    objs += [kaiwojob("mine", "PENDING", NOW, user="bob"), kaiwojob("carol", "PENDING", NOW, user="carol"),
             kaiwojob("dave", "PENDING", NOW, user="dave", queue="team-b"),
             kaiwojob("declared", "PENDING", NOW, user="dave", duration="1h30m")]
    state = cluster_state(objs)
    jobs = {j.name: j for j in state.pending}
    assert len(state.history) == 10 and not state.running
    assert [run_seconds(jobs["mine"], state.history, q) for q in (0.1, 0.5, 0.9)] == [
        (100.0, "user"), (500.0, "user"), (900.0, "user")]
    assert run_seconds(jobs["carol"], state.history, 0.5) == (500.0, "queue")  # bob's runs were in team-a
    assert run_seconds(jobs["dave"], state.history, 0.5) == (pytest.approx(DEFAULT_RUN_SECONDS), "default")
    assert run_seconds(jobs["declared"], state.history, 0.9) == (5400.0, "declared")


def test_the_trace_runs_what_is_left_of_the_running_jobs_then_the_pending_ones_in_order() -> None:
    state = cluster_state([
        kaiwojob("late", "PENDING", NOW - timedelta(minutes=1)),
        kaiwojob("early", "PENDING", NOW - timedelta(minutes=9), duration="10m"),
        kaiwojob("run", "RUNNING", NOW - timedelta(hours=1), started=NOW - timedelta(minutes=30), duration="1h"),
        kaiwojob("ray", "PENDING", NOW) | {"spec": {"ray": True, "user": "x"}},  # a rayjob (tests/simulation/test_kinds.py)
    ])
    trace = forecast_trace(state, NOW, 0.5)
    assert [(e.name, e.workload.submit, e.workload.duration) for e in trace] == [
        ("run", 0.0, 1800.0), ("early", 1.0, 600.0), ("late", 2.0, pytest.approx(DEFAULT_RUN_SECONDS)),
        ("ray", 3.0, pytest.approx(DEFAULT_RUN_SECONDS))]


def test_a_pending_job_starts_when_the_running_one_it_waits_for_ends() -> None:
    # team-a has 8 GPUs: one 8-GPU job declared 1 h, started 30 min ago; an 8-GPU job waits behind it,
    # and a 4-GPU one behind that (FIFO), each declared 10 min: 30 min, then 40 min from now.
    state = cluster_state([
        kaiwojob("running", "RUNNING", NOW - timedelta(minutes=31), started=NOW - timedelta(minutes=30),
                 duration="1h"),
        kaiwojob("next", "PENDING", NOW - timedelta(minutes=20), duration="10m"),
        kaiwojob("after", "PENDING", NOW - timedelta(minutes=10), gpus=4, duration="10m"),
    ])
    queue_config = yaml.safe_load(QUEUES.read_text())
    result = {e.name: e for e in forecast(state, NOW, default_nodes(), queue_config)}
    assert set(result) == {"next", "after"}
    assert result["next"].start == NOW + timedelta(minutes=30)
    assert result["after"].start == NOW + timedelta(minutes=40)
    # every run time declared: the three scenarios are one, so their span is a point; with no past
    # scores the interval is that point widened by the defaults, in horizons (30 and 40 min ahead)
    for name, ahead in (("next", 30), ("after", 40)):
        estimate = result[name]
        assert (estimate.span_earliest, estimate.span_latest) == (estimate.start,) * 2
        assert estimate.earliest == NOW + timedelta(minutes=ahead * (1 - DEFAULT_BELOW))
        assert estimate.latest == NOW + timedelta(minutes=ahead * (1 + DEFAULT_ABOVE))


def test_a_preempted_and_requeued_job_is_pending_again() -> None:
    state = cluster_state([kaiwojob("again", "PENDING", NOW - timedelta(hours=2), started=NOW - timedelta(hours=1))])
    assert [(j.name, j.started) for j in state.pending] == [("again", None)] and not state.running


def test_a_running_job_ends_like_the_past_runs_that_lasted_longer_than_it_has_run() -> None:
    runs = [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]
    objs = [kaiwojob(f"done-{i}", "COMPLETE", NOW - timedelta(hours=5), started=NOW - timedelta(hours=4),
                     finished=NOW - timedelta(hours=4) + timedelta(seconds=s)) for i, s in enumerate(runs)]
    objs += [kaiwojob("run", "RUNNING", NOW - timedelta(hours=1), started=NOW - timedelta(seconds=550))]
    state = cluster_state(objs)
    job = state.running[0]
    # ran 550 s: ends like the runs of 600..1000 s (nearest rank: 1st, 3rd, 5th of 5)
    assert [run_seconds(job, state.history, q, 550.0)[0] for q in (0.1, 0.5, 0.9)] == [600.0, 800.0, 1000.0]
    # outlived every past run: elapsed / (1 - q)
    assert run_seconds(job, state.history, 0.5, 1200.0) == (2400.0, "user")
    assert [(e.name, e.workload.duration) for e in forecast_trace(state, NOW, 0.5)] == [("run", 250.0)]
    # two past runs only: a log-normal around their median (nearest rank: 600), shape 1
    few = [("alice", "team-a", 600.0), ("alice", "team-a", 1200.0)]
    assert run_seconds(job, few, 0.5)[0] == pytest.approx(600.0)
    assert run_seconds(job, few, 0.9) == (pytest.approx(600.0 * 3.6022, rel=1e-4), "few")
    assert run_seconds(job, few, 0.1, 5000.0)[0] > 5000.0  # conditioned on having run 5000 s


def test_the_interval_widens_by_the_clusters_past_misses_never_below_the_defaults() -> None:
    assert widening([(0.0, 5.0)] * 9) == Widening()  # too few to go by
    # 20 scores: the ceil(21 * 0.9) = 19th smallest on each side, at least the default
    assert widening([(-1.0, i / 10) for i in range(20)]) == Widening(DEFAULT_BELOW, 1.8)
    assert widening([(0.5, -1.0)] * 20) == Widening(0.5, DEFAULT_ABOVE)
    span = Estimate(namespace="default", name="w", start=NOW + timedelta(hours=1), earliest=None, latest=None,
                    span_earliest=NOW + timedelta(minutes=50), span_latest=NOW + timedelta(hours=2))
    wide = calibrated(span, NOW, Widening(0.5, 2.0))  # one hour ahead: 30 min below, 2 h above
    assert (wide.earliest, wide.latest) == (NOW + timedelta(minutes=20), NOW + timedelta(hours=4))
    assert calibrated(span, NOW, Widening(2.0, -5.0)).model_dump(include={"earliest", "latest"}) == {
        "earliest": NOW, "latest": span.start}  # never before now, always holding the likely start


def test_a_first_estimate_is_scored_when_its_workload_starts() -> None:
    def estimate(name: str) -> Estimate:  # 30 min ahead, span 20..40 min
        return Estimate(namespace="default", name=name, start=NOW + timedelta(minutes=30), earliest=None,
                        latest=None, span_earliest=NOW + timedelta(minutes=20), span_latest=NOW + timedelta(minutes=40))

    first = {("default", n): (NOW, estimate(n)) for n in ("started", "waiting", "requeued", "gone")}
    waiting, scores = settle(first, [
        kaiwojob("started", "RUNNING", NOW, started=NOW + timedelta(minutes=100)),
        kaiwojob("waiting", "PENDING", NOW),
        kaiwojob("requeued", "RUNNING", NOW, started=NOW - timedelta(hours=1)),  # its first run's startTime
        kaiwojob("other", "RUNNING", NOW, started=NOW + timedelta(minutes=5)),  # never estimated
    ])
    assert list(waiting) == [("default", "waiting")]
    # 80 min after the span's start and 60 min after its end, in units of its 30 min horizon
    assert scores == [pytest.approx((-80 / 30, 60 / 30))]
