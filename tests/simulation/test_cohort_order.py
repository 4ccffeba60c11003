"""The sandbox's Kueue orders the heads of a cohort's ClusterQueues as Kueue's scheduler does
(pkg/scheduler/scheduler.go, classicalIterator): a head that fits within its queue's nominal quota
before one that must borrow, then priority, then queue order; not the queues' alphabetical order."""

from __future__ import annotations

from simulate_child import simulate_json


def test_a_head_within_nominal_quota_goes_before_an_earlier_one_that_borrows() -> None:
    report = simulate_json("cohort-order.jsonl", "cohort.yaml")
    started = {row["name"]: row["started"] for row in report["workloads"]}
    # b1 ends at 10 s: team-b's b2 (within its nominal 8) gets its 4 GPUs, not team-a's a2 (submitted
    # first, but team-a already uses its 8 and would borrow). a2 borrows once b2 has ended.
    assert started["b2"] == 10.0, started
    assert started["a2"] == 30.0, started
