"""The decision asks to run again after status writes whose follow-up pass matters: the controller
does not react to its own writes' watch events, so without a requeue a workload entering RUNNING
with a `duration`, or entering TERMINATING, would wait for an unrelated event (found by tests/e2e)."""

from __future__ import annotations

import pytest
from test_workload_decide import SIMPLE, admitted, kaiwojob, live, with_status, world

from kaiwo_ray.reconcile.workload import decide


def running_job() -> dict[str, object]:
    return live(decide(world(kaiwojob(SIMPLE))).apply[0], active=1, ready=1)


@pytest.mark.parametrize("duration", ["30m", None])
def test_entering_running_requeues_only_with_a_duration(duration: str | None) -> None:
    spec = {**SIMPLE, "duration": duration} if duration else SIMPLE
    obj = kaiwojob(spec, {"status": "PENDING", "observedGeneration": 1})
    plan = decide(world(obj, [running_job()], [admitted()]))
    assert plan.status is not None and plan.status["status"] == "RUNNING"
    if duration is None:
        assert plan.requeue_after is None
        return
    assert plan.requeue_after is not None and plan.requeue_after < 1
    # The pass it asks for sets Preemptable and schedules the deadline.
    again = decide(world(with_status(obj, plan), [running_job()], [admitted()]))
    assert again.status is not None
    assert any(c["type"] == "Preemptable" and c["status"] == "False" for c in again.status["conditions"])
    assert again.requeue_after == pytest.approx(30 * 60)


@pytest.mark.parametrize(("demand", "pending"), [(True, False), (False, True)])
def test_entering_terminating_requeues_for_the_termination_pass(demand: bool, pending: bool) -> None:
    status = {"status": "RUNNING", "startTime": "2026-11-21T11:00:00Z", "observedGeneration": 1}
    obj = kaiwojob({**SIMPLE, "duration": "30m"}, status)
    plan = decide(world(obj, [running_job()], [admitted()], active_gpu_demand=demand, any_pending_workload=pending))
    assert plan.status is not None and plan.status["status"] == "TERMINATING"
    assert plan.requeue_after is not None and plan.requeue_after < 1
