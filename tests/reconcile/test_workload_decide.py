"""The KaiwoJob/KaiwoService decision, pass by pass, against hand-built worlds (no I/O)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.nodes import default_nodes, with_pool_labels
from kaiwo_ray.reconcile.workload import FINALIZER, Plan, World, decide
from kaiwo_ray.render.nodepools import default_queue_config

CONFIG = KaiwoConfigSpec()
NODES = with_pool_labels(default_nodes(), CONFIG)
QUEUES = default_queue_config(NODES, CONFIG)
NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
CQ = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "kaiwo", "uid": "cq-uid"}}


def kaiwojob(spec: dict[str, Any], status: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    metadata = {"name": "hello", "namespace": "team-a", "uid": "U1", "generation": 1, **meta}
    obj: dict[str, Any] = {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob",
                           "metadata": metadata, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


def world(obj: dict[str, Any], children: list[dict[str, Any]] | None = None,
          workloads: list[dict[str, Any]] | None = None, now: datetime = NOW, **kw: Any) -> World:
    return World(obj=obj, config=CONFIG, nodes=NODES, queue_config=QUEUES,
                 children={(c["kind"], c["metadata"]["name"]): c for c in children or []},
                 kueue_workloads=workloads or [], local_queue_exists=True, cluster_queue=CQ, now=now, **kw)


def admitted() -> dict[str, Any]:
    return {"status": {"conditions": [{"type": "Admitted", "status": "True"}]}}


def applied_kinds(plan: Plan) -> list[str]:
    return [o["kind"] for o in plan.apply]


def with_status(obj: dict[str, Any], plan: Plan) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    assert plan.status is not None
    new["status"] = plan.status
    return new


def live(obj: dict[str, Any], **status: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["uid"] = "child-uid"
    out["status"] = status
    return out


SIMPLE = {"user": "jane@example.com", "image": "busybox", "entrypoint": "sleep 5"}


def test_first_pass_creates_the_job_and_reports_pending() -> None:
    obj = kaiwojob(SIMPLE)
    plan = decide(world(obj))
    assert applied_kinds(plan) == ["Job"]  # and nothing else: no finalizer, as upstream
    assert plan.status is not None and plan.status["status"] == "PENDING"
    assert plan.status["observedGeneration"] == 1
    admitted_cond = next(c for c in plan.status["conditions"] if c["type"] == "Admitted")
    assert admitted_cond["status"] == "False" and admitted_cond["message"] == "Workload is pending admission into 'kaiwo'"
    assert [e.reason for e in plan.events] == ["ResourceCreated", "WorkloadPending"]


def test_settling_defers_the_first_status_until_the_queue_answered() -> None:
    obj = kaiwojob(SIMPLE)
    creating = decide(world(obj, settle_seconds=0.05))
    assert applied_kinds(creating) == ["Job"]
    assert creating.status is None and creating.requeue_after == 0.05
    assert [e.reason for e in creating.events] == ["ResourceCreated"]  # the creation is still reported
    job = live(creating.apply[0], active=1)

    assert creating.created_main

    # A pass inside the window (woken by the echo of the Job's creation): still no PENDING.
    echo = decide(world(obj, [live(creating.apply[0])], settle_seconds=0.05, settle_remaining=0.02))
    assert echo.status is None and echo.requeue_after == 0.02 and echo.events == [] and not echo.created_main

    # Kueue admitted within the window: the first status is STARTING, with no PENDING before it.
    admitted_now = decide(world(obj, [job], [admitted()], settle_seconds=0.05))
    assert admitted_now.status is not None and admitted_now.status["status"] == "STARTING"
    assert [e.reason for e in admitted_now.events] == ["WorkloadStarting"]

    # Still queued after the window: PENDING is written as usual.
    queued = decide(world(obj, [live(creating.apply[0])], settle_seconds=0.05))
    assert queued.status is not None and queued.status["status"] == "PENDING"
    assert [e.reason for e in queued.events] == ["WorkloadPending"]


def test_job_lifecycle_to_complete_then_quiet() -> None:
    obj = kaiwojob(SIMPLE)
    first = decide(world(obj))
    job = first.apply[0]
    obj = with_status(obj, first)

    # Unchanged world: nothing to write at all (a no-op resync costs zero API calls).
    quiet = decide(world(obj, [live(job, active=0)]))
    assert quiet.apply == [] and quiet.status is None and quiet.events == []

    starting = decide(world(obj, [live(job, active=1)], [admitted()]))
    assert starting.status is not None and starting.status["status"] == "STARTING"
    obj = with_status(obj, starting)

    later = NOW + timedelta(seconds=3)
    running = decide(world(obj, [live(job, active=1, ready=1)], [admitted()], now=later))
    assert running.status is not None and running.status["status"] == "RUNNING"
    assert running.status["startTime"] == "2026-11-21T12:00:03Z"
    obj = with_status(obj, running)

    done_at = NOW + timedelta(seconds=10)
    complete = decide(world(obj, [live(job, succeeded=1, conditions=[
        {"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}])],
        [admitted()], now=done_at))
    assert complete.status is not None and complete.status["status"] == "COMPLETE"
    assert complete.status["completionTime"] == "2026-11-21T12:00:10Z"
    assert complete.status["duration"] == 7
    assert [e.reason for e in complete.events] == ["WorkloadComplete"]
    obj = with_status(obj, complete)
    assert decide(world(obj, [live(job)], [admitted()])).status is None


def test_spec_change_reaches_mutable_fields_of_the_existing_job() -> None:
    obj = kaiwojob(SIMPLE, labels={"team": "a"})
    job = decide(world(obj)).apply[0]
    changed = kaiwojob(SIMPLE, labels={"team": "b"}, generation=2)
    plan = decide(world(changed, [live(job, active=0)]))
    assert applied_kinds(plan) == ["Job"]
    assert plan.apply[0]["metadata"]["labels"]["team"] == "b"


def test_wrong_gpu_vendor_is_an_error_with_nothing_created() -> None:
    obj = kaiwojob({**SIMPLE, "gpus": 8, "gpuVendor": "NVIDIA"})
    plan = decide(world(obj))
    assert plan.apply == []
    assert plan.status is not None and plan.status["status"] == "ERROR"
    cond = plan.status["conditions"][0]
    assert (cond["type"], cond["reason"]) == ("Schedulable", "NoGPUs")
    assert plan.events[0].type == "Warning"


def test_unknown_queue_is_an_error() -> None:
    obj = kaiwojob({**SIMPLE, "clusterQueue": "nope"})
    plan = decide(world(obj))
    assert plan.status is not None and plan.status["status"] == "ERROR"
    assert plan.status["conditions"][0]["reason"] == "ClusterQueueNotFound"


def test_invalid_spec_is_an_error_not_a_crash() -> None:
    obj = kaiwojob({**SIMPLE, "rayJob": {"spec": {"entrypoint": "x"}}})  # no rayClusterSpec
    plan = decide(world(obj))
    assert plan.status is not None and plan.status["status"] == "ERROR"
    cond = plan.status["conditions"][0]
    assert cond["type"] == "SpecValid" and cond["reason"] == "InvalidSpec"
    assert "rayClusterSpec" in cond["message"]


STORAGE = {**SIMPLE, "storage": {
    "storageEnabled": True, "storageClassName": "standard",
    "data": {"storageSize": "1Gi", "download": {"s3": [{"endpointUrl": "https://s3", "buckets": [
        {"name": "b", "files": [{"path": "a", "targetPath": "a"}]}]}]}}}}


def test_downloads_gate_the_main_object() -> None:
    obj = kaiwojob(STORAGE)
    first = decide(world(obj))
    assert applied_kinds(first) == ["PersistentVolumeClaim", "ConfigMap", "Job"]
    assert first.status is not None and first.status["status"] == "DOWNLOADING"
    obj = with_status(obj, first)
    pvc, cm, dl = first.apply
    running = decide(world(obj, [live(pvc, phase="Bound"), live(cm), live(dl, active=1, ready=1)]))
    assert running.apply == []
    assert running.status is not None
    dl_cond = next(c for c in running.status["conditions"] if c["type"] == "DownloadJobSucceeded")
    assert dl_cond["reason"] == "JobInProgress"
    obj = with_status(obj, running)
    done = decide(world(obj, [live(pvc, phase="Bound"), live(cm),
                              live(dl, succeeded=1, conditions=[{"type": "Complete", "status": "True"}])]))
    assert applied_kinds(done) == ["Job"] and done.apply[0]["metadata"]["name"] == "hello"
    assert done.status is not None and done.status["status"] == "PENDING"


def test_failed_download_fails_the_workload_without_main() -> None:
    obj = kaiwojob(STORAGE)
    pvc, cm, dl = decide(world(obj)).apply
    plan = decide(world(obj, [live(pvc, phase="Bound"), live(cm),
                              live(dl, failed=1, conditions=[{"type": "Failed", "status": "True"}])]))
    assert plan.apply == []
    assert plan.status is not None and plan.status["status"] == "FAILED"


def test_missing_local_queue_is_created_owned_by_the_cluster_queue() -> None:
    obj = kaiwojob(SIMPLE)
    plan = decide(_no_lq(world(obj)))
    assert applied_kinds(plan) == ["LocalQueue", "Job"]
    lq = plan.apply[0]
    assert lq["metadata"]["ownerReferences"][0]["uid"] == "cq-uid"
    assert lq["spec"] == {"clusterQueue": "kaiwo"}


def _no_lq(w: World) -> World:
    return World(obj=w.obj, config=w.config, nodes=w.nodes, queue_config=w.queue_config, children=w.children,
                 kueue_workloads=w.kueue_workloads, local_queue_exists=False, cluster_queue=w.cluster_queue,
                 now=w.now)


def test_a_deleted_workload_is_left_to_the_garbage_collector() -> None:
    """No finalizer of ours: the garbage collector deletes the children (a foreground deletion's
    `foregroundDeletion` finalizer is its own), and the decision writes nothing."""
    obj = kaiwojob(SIMPLE, deletionTimestamp="2026-11-21T12:00:00Z", finalizers=["foregroundDeletion"])
    job = live(decide(world(kaiwojob(SIMPLE))).apply[0])
    for children in ([job], []):
        plan = decide(world(obj, children))
        assert not (plan.delete or plan.apply or plan.remove_finalizer or plan.events) and plan.status is None


def test_an_earlier_versions_finalizer_is_released_once_the_children_are_gone() -> None:
    obj = kaiwojob(SIMPLE, deletionTimestamp="2026-11-21T12:00:00Z", finalizers=[FINALIZER])
    job = live(decide(world(kaiwojob(SIMPLE))).apply[0])
    plan = decide(world(obj, [job]))
    assert plan.delete == [job] and not plan.remove_finalizer
    assert decide(world(obj)).remove_finalizer


def test_a_deleted_predecessors_leftover_is_waited_for_not_reported_as_a_conflict() -> None:
    """Deleted and created again under the same name: the garbage collector may not have taken the
    first one's Job yet. It is neither written nor reported (it is no stranger's): the successor
    waits, woken when it goes or in a second, then creates its own."""
    first = live(decide(world(kaiwojob(SIMPLE))).apply[0], active=1)
    successor = kaiwojob(SIMPLE, uid="U2")
    leftovers = {("Job", "hello"): first}
    plan = decide(world(successor, live_object=lambda kind, name: leftovers.get((kind, name))))
    assert plan.apply == [] and plan.status is None and plan.events == []
    assert plan.conflicts == [("Job", "hello")] and plan.requeue_after == 1.0
    gone = decide(world(successor))
    assert applied_kinds(gone) == ["Job"]
    assert gone.apply[0]["metadata"]["ownerReferences"][0]["uid"] == "U2"


def test_a_leftover_that_outstays_the_grace_period_is_reported() -> None:
    """A predecessor's Job still there 30 s after the successor was created (someone's finalizer
    holds it, say): no longer waited for in silence, but a ChildNameConflict that says whose it is."""
    first = live(decide(world(kaiwojob(SIMPLE))).apply[0], active=1)
    leftovers = {("Job", "hello"): first}
    for age, reported in ((29, False), (31, True)):
        successor = kaiwojob(SIMPLE, uid="U2", creationTimestamp=(NOW - timedelta(seconds=age)).strftime(
            "%Y-%m-%dT%H:%M:%SZ"))
        plan = decide(world(successor, live_object=lambda kind, name: leftovers.get((kind, name))))
        assert plan.apply == [] and plan.conflicts == [("Job", "hello")]
        if not reported:
            assert plan.status is None and plan.requeue_after == 1.0
            continue
        assert plan.status is not None and plan.status["status"] == "ERROR"
        cond = next(c for c in plan.status["conditions"] if c["reason"] == "ChildNameConflict")
        assert cond["message"] == ("Job hello of a deleted KaiwoJob hello still exists 30 s after this one was "
                                   "created (a finalizer holding it?); the workload continues once it is gone")
        assert [(e.type, e.reason) for e in plan.events] == [("Warning", "ChildNameConflict")]


def test_a_strangers_object_of_another_kind_and_name_is_still_a_conflict() -> None:
    """Only a controller of the workload's own kind and name marks a predecessor: a Job controlled by
    some other object with our child's name stays a ChildNameConflict."""
    job = live(decide(world(kaiwojob(SIMPLE))).apply[0])
    for ref in ({"kind": "KaiwoService", "name": "hello"}, {"kind": "KaiwoJob", "name": "other"},
                {"kind": "KaiwoJob", "name": "hello", "apiVersion": "example.com/v1"}):
        job["metadata"]["ownerReferences"] = [{**job["metadata"]["ownerReferences"][0], **ref, "uid": "X"}]
        plan = decide(world(kaiwojob(SIMPLE), live_object=lambda kind, name, j=job: j))
        assert plan.apply == [] and plan.status is not None and plan.status["status"] == "ERROR"
        assert any(c["reason"] == "ChildNameConflict" for c in plan.status["conditions"])


@pytest.mark.parametrize(("demand", "pending", "expected"), [
    (True, False, "DurationExceededWithActiveGpuDemand"), (False, True, "DurationExceeded"), (False, False, None)])
def test_duration_preemption(demand: bool, pending: bool, expected: str | None) -> None:
    status = {"status": "RUNNING", "startTime": "2026-11-21T11:00:00Z", "observedGeneration": 1, "conditions": [
        {"type": "Schedulable", "status": "True", "reason": "Schedulable"}]}
    obj = kaiwojob({**SIMPLE, "duration": "30m"}, status)
    job = live(decide(world(kaiwojob(SIMPLE))).apply[0], active=1, ready=1)
    plan = decide(world(obj, [job], [admitted()], active_gpu_demand=demand, any_pending_workload=pending))
    assert plan.status is not None
    pre = next(c for c in plan.status["conditions"] if c["type"] == "Preemptable")
    assert pre["status"] == "True"
    if expected is None:
        assert plan.status["status"] == "RUNNING"
        return
    assert plan.status["status"] == "TERMINATING"
    early = next(c for c in plan.status["conditions"] if c["type"] == "WorkloadTerminatedEarly")
    assert early["reason"] == expected
    terminated = decide(world(with_status(obj, plan), [job], [admitted()]))
    assert terminated.status is not None and terminated.status["status"] == "TERMINATED"
    assert terminated.delete == [job]
    assert terminated.events[0].type == "Warning" and terminated.events[0].reason == expected


def test_duration_not_exceeded_requeues_at_the_deadline() -> None:
    status = {"status": "RUNNING", "startTime": "2026-11-21T11:50:00Z", "observedGeneration": 1}
    obj = kaiwojob({**SIMPLE, "duration": "30m"}, status)
    job = live(decide(world(kaiwojob(SIMPLE))).apply[0], active=1, ready=1)
    plan = decide(world(obj, [job], [admitted()]))
    assert plan.requeue_after == pytest.approx(20 * 60)


def test_the_status_is_never_validated_as_spec() -> None:
    """A decision reads the status as stored; only metadata and spec are parsed into the model (a
    status the model would refuse, say an old operator's timestamp format, is not an InvalidSpec)."""
    obj = kaiwojob(SIMPLE, {"status": "PENDING", "startTime": "yesterday",
                            "conditions": [{"type": "Admitted", "status": "False", "lastTransitionTime": "soon"}]})
    plan = decide(world(obj))
    assert plan.phase == "PENDING"
    assert applied_kinds(plan) == ["Job"]


def _observed(obj: dict[str, Any], plan: Plan) -> dict[str, Any]:
    """`obj` as stored after `plan`'s status write (which observed its generation)."""
    new = with_status(obj, plan)
    assert new["status"]["observedGeneration"] == obj["metadata"]["generation"]
    return new


def test_a_job_whose_generation_was_observed_is_decided_without_rendering_its_template() -> None:
    """The template of an existing Job is frozen and no no-op pass reads it, so it is not rendered
    once a whole rendering has seen this generation; a pass that must write renders whole again."""
    obj = kaiwojob(SIMPLE)
    job = live(decide(world(obj)).apply[0], active=0)
    pending = _observed(obj, decide(world(obj, [job])))
    assert decide(world(pending, [job])).apply == []  # quiet, with no template rendered

    tampered = copy.deepcopy(job)  # someone changed what we own outside the template
    tampered["spec"]["ttlSecondsAfterFinished"] = 5
    lean = decide(world(pending, [tampered]))
    whole = decide(world(obj, [tampered]))  # the same Job, a status that never observed the spec
    assert applied_kinds(lean) == ["Job"] and lean.apply == whole.apply
    assert lean.apply[0]["spec"]["ttlSecondsAfterFinished"] == 3600
    assert "template" in lean.apply[0]["spec"]  # an apply without it would drop our fields from a frozen path


def test_the_settle_pass_after_a_create_is_decided_without_rendering_the_template_again() -> None:
    """The pass that creates the Job rendered it whole and says so (rendered_generation); the next
    pass, which no status has observed the spec for yet, reads that instead of rendering the template
    again, and decides exactly as a whole rendering would. Another generation renders whole."""
    obj = kaiwojob(SIMPLE)
    created = decide(world(obj))
    assert applied_kinds(created) == ["Job"] and created.rendered_generation == 1
    job = live(created.apply[0], active=0)
    lean = decide(world(obj, [job], rendered_generation=1))
    whole = decide(world(obj, [job]))
    assert lean.rendered_generation is None and whole.rendered_generation == 1  # only one rendered whole
    assert (lean.apply, lean.status, lean.phase) == (whole.apply, whole.status, whole.phase)
    assert lean.apply == [] and lean.phase == "PENDING"
    edited = copy.deepcopy(obj)
    edited["metadata"]["generation"] = 2
    assert decide(world(edited, [job], rendered_generation=1)).rendered_generation == 2


def test_a_spec_edit_or_an_error_is_decided_from_the_whole_rendering() -> None:
    obj = kaiwojob(SIMPLE)
    job = live(decide(world(obj)).apply[0], active=0)
    pending = _observed(obj, decide(world(obj, [job])))
    edited = copy.deepcopy(pending)  # a new generation: its template is rendered (and checked) whole
    edited["metadata"]["generation"] = 2
    edited["spec"]["image"] = ""
    plan = decide(world(edited, [job]))
    assert plan.phase == "ERROR" and plan.status is not None
    assert plan.status["conditions"][0]["reason"] == "InvalidSpec"
    errored = _observed(edited, plan)  # the generation observed, in ERROR: still checked whole
    assert decide(world(errored, [job])).phase == "ERROR"
