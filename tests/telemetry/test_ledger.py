"""The GPU ledger's pure core (kaiwo_ray/telemetry/ledger.py, usage.py, charging.py) on synthetic
sample streams: integration, unknown time, watermarks across a reload, reclaims, the report."""

from __future__ import annotations

import json

import pytest

from kaiwo_ray.admission.submitter import stamp_ops
from kaiwo_ray.api.labels import SUBMITTED_BY
from kaiwo_ray.telemetry.charging import monitor_reclaim, resolve, tracker_reclaim
from kaiwo_ray.telemetry.ledger import Holder, Ledger, Owner, Reclaim, reclaimed_seconds
from kaiwo_ray.telemetry.usage import UsageIndex, counters, report, to_csv

T0 = 1_800_000_000.0  # a bucket boundary (divisible by 3600)


def run_schedule(ledger: Ledger, node: str, owner: str, start: float, seconds: int, util: list[float],
                 step: float = 1.0) -> None:
    for i in range(int(seconds / step) + 1):
        t = start + i * step
        value = util[min(len(util) - 1, int(i * step))]
        ledger.observe(node, t, [Holder(owner, "amd", "MI300X", value)])


def totals(ledger: Ledger) -> list[float]:
    out = [0.0] * 4
    for row in ledger.rows.values():
        out = [a + b for a, b in zip(out, row, strict=True)]
    return out


def test_ninety_for_sixty_seconds_then_zero_accrues_its_gpu_seconds() -> None:
    ledger = Ledger(stale_after=5)
    schedule = [90.0] * 60 + [0.0] * 31
    run_schedule(ledger, "n1", "w", T0, 90, schedule)
    allocated, used, idle, unknown = totals(ledger)
    assert allocated == pytest.approx(90)
    assert used == pytest.approx(0.9 * 60)
    assert idle == pytest.approx(30)
    assert unknown == 0


def test_an_interval_crossing_a_bucket_is_split() -> None:
    ledger = Ledger(bucket_seconds=60)
    ledger.observe("n", T0 + 50, [Holder("w", "amd", "m", 50.0)])
    ledger.observe("n", T0 + 70, [Holder("w", "amd", "m", 50.0)])
    assert ledger.rows[(int(T0), "w", "amd", "m")][0] == pytest.approx(10)
    assert ledger.rows[(int(T0) + 60, "w", "amd", "m")][0] == pytest.approx(10)


def test_a_stopped_node_is_unknown_never_idle() -> None:
    ledger = Ledger(stale_after=3)
    ledger.observe("n", T0, [Holder("w", "amd", "m", 0.0)])
    ledger.observe("n", T0 + 1, [Holder("w", "amd", "m", 0.0)])
    ledger.advance(T0 + 2)  # within stale_after: waits for the next sample
    assert totals(ledger)[3] == 0
    ledger.advance(T0 + 11)  # telemetry stopped at T0+1
    allocated, used, idle, unknown = totals(ledger)
    assert (allocated, used, idle, unknown) == pytest.approx((11, 0, 1, 10))
    ledger.observe("n", T0 + 12, [Holder("w", "amd", "m", 0.0)])  # back: the gap since is unknown too
    assert totals(ledger)[3] == pytest.approx(11)


def test_an_unreadable_node_keeps_its_holders_as_unknown() -> None:
    ledger = Ledger(stale_after=10)
    ledger.observe("n", T0, [Holder("w", "amd", "m", 80.0)])
    ledger.observe("n", T0 + 1, [], error=True)
    ledger.observe("n", T0 + 2, [Holder("w", "amd", "m", 80.0)])
    assert totals(ledger) == pytest.approx([2, 0.8, 0, 1])


def test_a_reload_continues_from_the_watermark_without_counting_twice() -> None:
    ledger = Ledger(stale_after=5)
    run_schedule(ledger, "n", "w", T0, 10, [50.0])
    state = json.loads(json.dumps(ledger.to_state()))
    again = Ledger(stale_after=5)
    again.load(state)
    for t in range(0, 11):  # the telemetry's backlog, replayed: all at or before the watermark
        assert not again.observe("n", T0 + t, [Holder("w", "amd", "m", 50.0)])
    run_schedule(again, "n", "w", T0 + 11, 9, [50.0])
    assert totals(again) == pytest.approx([20, 10, 0, 0])


def test_a_shared_gpu_is_split_between_its_pods() -> None:
    ledger = Ledger()
    for t in (T0, T0 + 4):
        ledger.observe("n", t, [Holder("a", "amd", "m", 40.0, 0.5), Holder("b", "amd", "m", 40.0, 0.5)])
    assert ledger.rows[(int(T0), "a", "amd", "m")] == pytest.approx([2, 0.8, 0, 0])


def test_a_reclaim_is_booked_once() -> None:
    ledger = Ledger()
    assert ledger.book(Reclaim("w", "gpu-preemption", T0, 8, 8 * 600.0))
    assert not ledger.book(Reclaim("w", "gpu-preemption", T0 + 5, 8, 1.0))
    assert reclaimed_seconds(2, T0 + 100, T0, 400.0, 3600) == 600
    assert reclaimed_seconds(2, T0 + 100, None, None, 3600) == 7200


def test_report_groups_filters_by_namespace_and_exports_csv() -> None:
    ledger = Ledger()
    ledger.owners.update({
        "a": Owner("a", "team-a", "KaiwoJob", "train", user="alice", declared_user="bob", queue="q1"),
        "b": Owner("b", "team-b", "Job", "infer", user="bob", queue="q2", preemption=True)})
    run_schedule(ledger, "n1", "a", T0, 3600, [100.0])
    run_schedule(ledger, "n2", "b", T0, 1800, [0.0])
    ledger.book(Reclaim("b", "gpu-preemption", T0 + 1800, 1, 1800.0, "amd"))
    full = report(ledger.rows, ledger.owners, ledger.reclaims.values(), by="user", since=0, until=T0 + 7200,
                  bucket_seconds=3600)
    by_user = {r.key: r for r in full.items}
    assert by_user["alice"].allocated_gpu_hours == pytest.approx(1.0)
    assert by_user["alice"].declared_users == ["bob"]  # shown beside, not charged
    assert by_user["bob"].idle_gpu_hours == pytest.approx(0.5)
    assert by_user["bob"].reclaimed_gpu_hours == {"gpu-preemption": 0.5}
    assert [h.name for h in full.top_idle] == ["infer"] and full.top_idle[0].preemption_enabled
    mine = report(ledger.rows, ledger.owners, ledger.reclaims.values(), by="namespace", since=0, until=T0 + 7200,
                  bucket_seconds=3600, namespaces=frozenset({"team-a"}))
    assert [r.key for r in mine.items] == ["team-a"] and not mine.top_idle
    lines = to_csv(full).splitlines()
    assert lines[0].startswith("user,allocated_gpu_hours") and lines[1].startswith("alice,1.000000")
    totals_, reclaimed = counters(ledger.rows, ledger.owners, ledger.reclaims.values())
    assert totals_[("team-b", "bob", "q2", "amd")][2] == pytest.approx(0.5)
    assert reclaimed[(("team-b", "bob", "q2", "amd"), "gpu-preemption")] == pytest.approx(0.5)


def test_a_window_takes_only_its_buckets() -> None:
    ledger = Ledger(bucket_seconds=3600)
    ledger.owners["w"] = Owner("w", "ns", user="u")
    run_schedule(ledger, "n", "w", T0, 7200, [100.0], step=60)
    second_hour = report(ledger.rows, ledger.owners, [], by="user", since=T0 + 3600, until=T0 + 7200,
                         bucket_seconds=3600)
    assert second_hour.items[0].allocated_gpu_hours == pytest.approx(1.0)


# -- charging ---------------------------------------------------------------------------------------

def _pod(name: str, **meta: object) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", **meta}}


def test_a_kaiwo_pod_is_charged_to_its_submitter_not_its_spec_user() -> None:
    job = {"metadata": {"name": "train", "namespace": "ns", "uid": "kj-1",
                        "annotations": {SUBMITTED_BY: "alice@example.com"}},
           "spec": {"user": "bob@example.com", "clusterQueue": "team"}}
    pod = _pod("train-abc", labels={"kaiwo.silogen.ai/run-id": "kj-1"})
    owner = resolve(pod, kaiwo_by_uid=lambda uid: ("KaiwoJob", job) if uid == "kj-1" else None,
                    tracker_for_pod=lambda ns, name: None, get=lambda *a: None, local_queues={("ns", "team"): "cq"})
    assert (owner.key, owner.user, owner.declared_user, owner.queue, owner.cluster_queue) == (
        "kj-1", "alice@example.com", "bob@example.com", "team", "cq")


def test_a_plain_pod_is_charged_to_its_job_or_its_tracked_root() -> None:
    job = {"metadata": {"name": "j", "namespace": "ns", "uid": "job-1", "annotations": {SUBMITTED_BY: "carol"},
                        "labels": {"kueue.x-k8s.io/queue-name": "lq"}}}
    pod = _pod("j-x", ownerReferences=[{"kind": "Job", "name": "j", "uid": "job-1", "controller": True}])
    owner = resolve(pod, kaiwo_by_uid=lambda uid: None, tracker_for_pod=lambda ns, name: None,
                    get=lambda kind, ns, name: job if (kind, name) == ("Job", "j") else None, local_queues={})
    assert (owner.key, owner.kind, owner.user, owner.queue, owner.preemption) == ("job-1", "Job", "carol", "lq", False)
    tracker = {"spec": {"workloadRef": {"kind": "Deployment", "name": "d", "uid": "dep-1"}}}
    owner = resolve(_pod("d-1"), kaiwo_by_uid=lambda uid: None, tracker_for_pod=lambda ns, name: tracker,
                    get=lambda *a: None, local_queues={})
    assert (owner.key, owner.kind, owner.preemption) == ("dep-1", "Deployment", True)


def test_reclaims_from_a_preempted_tracker_and_a_terminated_workload() -> None:
    tracker = {"spec": {"workloadRef": {"uid": "job-1"}, "gpuResources": {"amd.com/gpu": 4}},
               "status": {"phase": "Preempted", "preemptedAt": "2027-01-15T08:00:00Z", "preemptionReason": "idle"}}
    found = tracker_reclaim(tracker, None, None, 600)
    assert found is not None and (found.owner, found.cause, found.gpus, found.seconds, found.vendor) == (
        "job-1", "gpu-preemption", 4, 2400, "amd")
    assert tracker_reclaim({**tracker, "status": {"phase": "Idle"}}, None, None, 600) is None
    workload = {"metadata": {"uid": "kj"}, "spec": {"duration": "1h"},
                "status": {"startTime": "2027-01-15T08:00:00Z", "conditions": [
                    {"type": "WorkloadTerminatedEarly", "status": "False", "lastTransitionTime": "2027-01-15T08:20:00Z",
                     "message": "low"}]}}
    found = monitor_reclaim(workload, 2, "nvidia", 600)
    assert found is not None and (found.cause, found.seconds) == ("resource-monitoring", 2 * 2400)


# -- the submitter at admission ---------------------------------------------------------------------

def _review(operation: str, obj_ann: dict[str, str] | None, old_ann: dict[str, str] | None = None,
            user: str = "jane") -> dict[str, object]:
    obj: dict[str, object] = {"metadata": {"name": "x", **({"annotations": obj_ann} if obj_ann is not None else {})}}
    review: dict[str, object] = {"operation": operation, "object": obj, "userInfo": {"username": user}}
    if old_ann is not None:
        review["oldObject"] = {"metadata": {"annotations": old_ann}}
    return review


def test_the_submitter_is_who_asked_never_what_the_client_wrote() -> None:
    path = "/metadata/annotations/kaiwo.silogen.ai~1submitted-by"
    assert stamp_ops(_review("CREATE", None)) == [{"op": "add", "path": "/metadata/annotations", "value": {}},
                                                  {"op": "add", "path": path, "value": "jane"}]
    assert stamp_ops(_review("CREATE", {SUBMITTED_BY: "boss"})) == [{"op": "add", "path": path, "value": "jane"}]
    trusted = frozenset({"system:serviceaccount:kaiwo-system:kaiwo-ray"})
    assert stamp_ops(_review("CREATE", {SUBMITTED_BY: "alice"}, user=next(iter(trusted))), trusted) == []
    assert stamp_ops(_review("UPDATE", {SUBMITTED_BY: "jane"}, {SUBMITTED_BY: "alice"})) == [
        {"op": "add", "path": path, "value": "alice"}]
    assert stamp_ops(_review("UPDATE", {SUBMITTED_BY: "jane"}, {})) == [{"op": "remove", "path": path}]


def test_the_daily_index_answers_as_the_hourly_rows_do() -> None:
    ledger = Ledger(bucket_seconds=3600)
    for w in range(6):
        ledger.owners[f"w{w}"] = Owner(f"w{w}", f"ns{w % 2}", user=f"u{w % 3}")
        run_schedule(ledger, f"n{w}", f"w{w}", T0 + w * 20_000, 90_000, [float(10 * w)], step=600)
    index = UsageIndex.build(ledger.rows)
    for since, until in ((T0, T0 + 4 * 86_400), (T0 + 7_200, T0 + 100_800), (T0 + 86_400, T0 + 2 * 86_400)):
        for by in ("user", "namespace", "model"):
            plain = report(ledger.rows, ledger.owners, [], by=by, since=since, until=until, bucket_seconds=3600)
            fast = report({}, ledger.owners, [], by=by, since=since, until=until, bucket_seconds=3600, index=[index])
            assert fast.items == plain.items and plain.items


def test_a_silent_node_stops_charging_a_pod_that_is_gone_and_is_forgotten() -> None:
    ledger = Ledger(stale_after=2)
    for t in (0, 1):
        ledger.observe("n", T0 + t, [Holder("w", "amd", "m", 50.0, 1.0, "ns/p")])
    ledger.advance(T0 + 5, alive=lambda h: True)
    assert totals(ledger)[3] == pytest.approx(4)
    ledger.advance(T0 + 9, alive=lambda h: h.pod != "ns/p")  # the pod ended while its node was silent
    assert totals(ledger)[0] == pytest.approx(5) and "n" not in ledger.nodes
    ledger.owners["w"] = Owner("w")
    ledger.owners["gone"] = Owner("gone")
    ledger.prune_owners()
    assert set(ledger.owners) == {"w"}


def test_a_pod_charged_before_its_workload_was_known_moves_to_it() -> None:
    ledger = Ledger()
    ledger.owners["pod-uid"] = Owner("pod-uid", "ns", "Pod", "p")
    for t in (0, 1, 2):
        ledger.observe("n", T0 + t, [Holder("pod-uid", "amd", "m", 50.0)])
    ledger.rekey("pod-uid", "job-uid")
    ledger.observe("n", T0 + 3, [Holder("job-uid", "amd", "m", 50.0)])
    assert {k[1] for k in ledger.rows} == {"job-uid"} and "pod-uid" not in ledger.owners
    assert totals(ledger) == pytest.approx([3, 1.5, 0, 0])
