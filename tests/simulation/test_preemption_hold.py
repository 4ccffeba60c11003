"""A preemptor holds the room it frees: the sandbox's Kueue, like Kueue's scheduler, counts a
workload waiting on its preemptions as using what it asked for until the cycle ends, so a
lower-priority workload of the same cohort cannot take that room first (before, the preemptor and
its victims changed places for ever and this trace's simulation never ended)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"


def test_the_preemptor_is_admitted_and_its_victim_is_preempted_once() -> None:
    # A subprocess with a deadline: a livelock must fail the test, not hang it.
    done = subprocess.run([sys.executable, "-m", "hosts.cli.main", "simulate",
                           "--trace", str(DATA / "preemption-hold.jsonl"),
                           "--queue-config", str(DATA / "cohort.yaml"), "-o", "json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {row["name"]: row for row in json.loads(done.stdout)["workloads"]}
    assert all(row["finished"] is not None for row in rows.values()), rows
    # w-000003 (team-b) ends at 34.8 s and leaves the cohort room for w-000007 once w-000001 goes.
    assert rows["w-000007"]["started"] == 34.8 and rows["w-000007"]["preemptions"] == []
    assert rows["w-000001"]["preemptions"] == ["InClusterQueue"]
    # The lower-priority team-a workload waiting since 25.2 s did not take the room before it.
    assert rows["w-000005"]["started"] > rows["w-000007"]["started"]
