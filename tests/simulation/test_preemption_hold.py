"""A preemptor holds the room it frees: the sandbox's Kueue, like Kueue's scheduler, counts a
workload waiting on its preemptions as using what it asked for until the cycle ends, so a
lower-priority workload of the same cohort cannot take that room first (before, the preemptor and
its victims changed places for ever and this trace's simulation never ended)."""

from __future__ import annotations

import pytest
from simulate_child import simulate_json


def test_the_preemptor_is_admitted_and_its_victim_is_preempted_once() -> None:
    report = simulate_json("preemption-hold.jsonl", "cohort.yaml")  # before the fix: its deadline
    rows = {row["name"]: row for row in report["workloads"]}
    assert all(row["finished"] is not None for row in rows.values()), rows
    # w-000003 (team-b) ends at 34.8 s and leaves the cohort room for w-000007 once w-000001 goes.
    # (34.8 to the millisecond: the simulated kubelet's timers can add one, depending on the start's phase.)
    assert rows["w-000003"]["finished"] == pytest.approx(34.8, abs=0.002)
    assert rows["w-000007"]["started"] == rows["w-000003"]["finished"] and rows["w-000007"]["preemptions"] == []
    assert rows["w-000001"]["preemptions"] == ["InClusterQueue"]
    # The lower-priority team-a workload waiting since 25.2 s did not take the room before it.
    assert rows["w-000005"]["started"] > rows["w-000007"]["started"]
