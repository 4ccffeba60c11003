"""Scenario tests for the simulated Job controller, through the real `kubernetes` client."""

from __future__ import annotations

from typing import Any

from kaiwo_sandbox.cluster.workloads.jobs import format_indexes, parse_indexes
from kaiwo_sandbox.contracts import JOBS, JsonObj

WORKLOADS = ["volume-binder", "scheduler", "kubelet", "job-controller"]


def job(name: str, command: list[str], *, annotations: dict[str, str] | None = None, **spec: Any) -> JsonObj:
    template: JsonObj = {"metadata": {"labels": {"app": name}},
                         "spec": {"restartPolicy": "Never",
                                  "containers": [{"name": "main", "image": "busybox", "command": command}]}}
    if annotations:
        template["metadata"]["annotations"] = annotations
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": template, **spec}}


def job_status(c: Any, name: str) -> Any:
    return c.batch.read_namespaced_job_status(name, "default").status


def condition_types(status: Any) -> list[str]:
    return [cond.type for cond in status.conditions or [] if cond.status == "True"]


def job_pods(c: Any, name: str) -> list[Any]:
    items: list[Any] = c.core.list_namespaced_pod("default", label_selector=f"batch.kubernetes.io/job-name={name}").items
    return items


def test_sleep_job_completes_with_conditions_counts_and_events(sandbox_factory: Any, clients_factory: Any,
                                                               wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    c.batch.create_namespaced_job("default", job("hello", ["sleep", "2"]))
    status = wait_for(lambda: (s := job_status(c, "hello")) and "Complete" in condition_types(s) and s)
    assert condition_types(status) == ["SuccessCriteriaMet", "Complete"]
    complete = status.conditions[1]
    assert (complete.reason, complete.message) == ("CompletionsReached", "Reached expected number of succeeded pods")
    assert (status.succeeded, status.failed, status.active, status.ready) == (1, None, None, 0)  # omitempty
    assert status.start_time is not None and status.completion_time is not None

    (pod,) = job_pods(c, "hello")
    job_obj = c.batch.read_namespaced_job("hello", "default")
    uid = job_obj.metadata.uid
    assert pod.metadata.name.startswith("hello-") and len(pod.metadata.name) == len("hello-") + 5
    assert pod.metadata.labels == {"app": "hello", "batch.kubernetes.io/controller-uid": uid,
                                   "batch.kubernetes.io/job-name": "hello", "controller-uid": uid,
                                   "job-name": "hello"}
    owner = pod.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("Job", "hello", uid, True)
    assert not pod.metadata.finalizers  # tracking finalizer removed once counted
    assert pod.status.phase == "Succeeded"
    events = {(e.reason, e.message) for e in c.events(name="hello")}
    assert ("SuccessfulCreate", f"Created pod: {pod.metadata.name}") in events
    assert ("Completed", "Job completed") in events


def test_failing_job_reaches_backoff_limit(sandbox_factory: Any, clients_factory: Any, wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    c.batch.create_namespaced_job("default", job("doomed", ["sleep", "1"], backoffLimit=2, annotations={
        "sandbox.kaiwo-ray.dev/exit-code": "1"}))
    status = wait_for(lambda: (s := job_status(c, "doomed")) and "Failed" in condition_types(s) and s, timeout=10)
    assert condition_types(status) == ["FailureTarget", "Failed"]
    failed = status.conditions[1]
    assert (failed.reason, failed.message) == ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
    assert (status.failed, status.succeeded, status.active) == (3, None, None)
    assert status.completion_time is None
    assert len(job_pods(c, "doomed")) == 3  # backoffLimit + 1 attempts
    warning = wait_for(lambda: [e for e in c.events(name="doomed") if e.reason == "BackoffLimitExceeded"])[0]
    assert warning.type == "Warning"


def test_suspended_job_has_no_pods_until_resumed_and_suspending_deletes_them(
        sandbox_factory: Any, clients_factory: Any, wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    c.batch.create_namespaced_job("default", job("parked", ["sleep", "infinity"], suspend=True))
    status = wait_for(lambda: (s := job_status(c, "parked")) and s.conditions and s)
    suspended = status.conditions[0]
    assert (suspended.type, suspended.status, suspended.reason) == ("Suspended", "True", "JobSuspended")
    assert status.start_time is None and not job_pods(c, "parked")

    c.batch.patch_namespaced_job("parked", "default", {"spec": {"suspend": False}})
    wait_for(lambda: (s := job_status(c, "parked")) and s.ready == 1)
    status = job_status(c, "parked")
    assert status.start_time is not None
    resumed = status.conditions[0]
    assert (resumed.status, resumed.reason, resumed.message) == ("False", "JobResumed", "Job resumed")

    c.batch.patch_namespaced_job("parked", "default", {"spec": {"suspend": True}})
    wait_for(lambda: not job_pods(c, "parked"), message="pods deleted on suspend")
    status = wait_for(lambda: (s := job_status(c, "parked")) and not s.active and s)
    assert "Suspended" in condition_types(status)
    assert not status.failed  # pods removed by suspension are not failures
    reasons = [e.reason for e in c.events(name="parked")]
    assert {"Suspended", "Resumed", "SuccessfulDelete"} <= set(reasons)


def test_parallelism_and_completions(sandbox_factory: Any, clients_factory: Any, wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    # 50 simulated seconds per pod: half a real second during which two pods are active
    c.batch.create_namespaced_job("default", job("batch", ["sleep", "50"], parallelism=2, completions=3))
    wait_for(lambda: (s := job_status(c, "batch")) and s.active == 2)
    status = wait_for(lambda: (s := job_status(c, "batch")) and "Complete" in condition_types(s) and s, timeout=10)
    assert status.succeeded == 3
    assert len(job_pods(c, "batch")) == 3


def test_indexed_job_tracks_completed_indexes(sandbox_factory: Any, clients_factory: Any, wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    c.batch.create_namespaced_job("default", job("idx", ["sleep", "1"], completions=3, parallelism=3,
                                                 completionMode="Indexed"))
    status = wait_for(lambda: (s := job_status(c, "idx")) and "Complete" in condition_types(s) and s, timeout=10)
    assert status.completed_indexes == "0-2"
    indexes = sorted(p.metadata.annotations["batch.kubernetes.io/job-completion-index"] for p in job_pods(c, "idx"))
    assert indexes == ["0", "1", "2"]


def test_ttl_after_finished_deletes_job_and_pods_exactly_at_the_ttl(sandbox_factory: Any, clients_factory: Any,
                                                                         wait_for: Any) -> None:
    sb = sandbox_factory(cluster=WORKLOADS, manual_clock=True, time_factor=1.0)
    c = clients_factory(sb)
    c.batch.create_namespaced_job("default", job("brief", ["sleep", "1"], ttlSecondsAfterFinished=5))
    for _ in range(40):  # the pod is scheduled, started and runs its 1 s in simulated time
        sb.advance(0.25)
        status = job_status(c, "brief")
        if "Complete" in condition_types(status):
            break
    assert "Complete" in condition_types(status), status
    sb.advance(4.75)
    assert [j.metadata.name for j in c.batch.list_namespaced_job("default").items] == ["brief"]
    sb.advance(0.5)  # past completionTime + 5 s (the controller measures from its own observation)
    wait_for(lambda: not c.batch.list_namespaced_job("default").items, message="job removed after its TTL")
    wait_for(lambda: not job_pods(c, "brief"), message="pods garbage-collected with the job")


def test_failed_pods_are_replaced_after_the_doubling_back_off(sandbox_factory: Any, clients_factory: Any) -> None:
    """The controller waits 10 s after the first failure and 20 s after the second before the next pod
    (like the real controller's back-off): measured on a manual clock, where timestamps are exact."""
    sb = sandbox_factory(cluster=WORKLOADS, manual_clock=True, time_factor=1.0)
    c = clients_factory(sb)
    c.batch.create_namespaced_job("default", job("doomed", ["sleep", "1"], backoffLimit=2, annotations={
        "sandbox.kaiwo-ray.dev/exit-code": "1"}))
    for _ in range(240):
        sb.advance(0.25)
        if "Failed" in condition_types(job_status(c, "doomed")):
            break
    pods = sorted(job_pods(c, "doomed"), key=lambda p: p.metadata.creation_timestamp)
    assert len(pods) == 3
    finished = [p.status.container_statuses[0].state.terminated.finished_at for p in pods]
    created = [p.metadata.creation_timestamp for p in pods]
    assert 10 <= (created[1] - finished[0]).total_seconds() < 11
    assert 20 <= (created[2] - finished[1]).total_seconds() < 21


def test_deleting_a_job_removes_its_pods(sandbox_factory: Any, clients_factory: Any, wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    c.batch.create_namespaced_job("default", job("long", ["sleep", "infinity"], parallelism=2, completions=2))
    wait_for(lambda: len(job_pods(c, "long")) == 2)
    c.batch.delete_namespaced_job("long", "default", propagation_policy="Background")
    wait_for(lambda: not job_pods(c, "long"), message="pods removed with their job")


def test_completed_indexes_round_trip() -> None:
    assert format_indexes([4, 0, 1, 2, 7, 8]) == "0-2,4,7-8"
    assert parse_indexes("0-2,4,7-8") == {0, 1, 2, 4, 7, 8}
    assert parse_indexes("") == set() and format_indexes([]) == ""


def test_malformed_numbers_fall_back_to_defaults_without_crashing(sandbox_factory: Any, clients_factory: Any,
                                                                  wait_for: Any) -> None:
    sb = sandbox_factory(cluster=WORKLOADS)
    c = clients_factory(sb)
    body = job("odd", ["sleep", "1"], parallelism="two", backoffLimit="many", activeDeadlineSeconds="long")
    body["metadata"]["namespace"] = "default"
    # Straight into the store: the HTTP layer rejects such a body before any controller sees it,
    # and the store's typed decoding may refuse later writes of it (its status included), as an
    # apiserver would. Either way the controller must read it with defaults and keep working.
    sb.call(sb.store.create, JOBS, body, namespace="default")
    c.batch.create_namespaced_job("default", job("fine", ["sleep", "1"]))

    wait_for(lambda: job_pods(c, "odd") and job_pods(c, "odd")[0].status.phase == "Succeeded",
             message="the malformed Job's pod ran")
    assert len(job_pods(c, "odd")) == 1  # "two" is not a parallelism: the default of 1 applied
    wait_for(lambda: (c.batch.read_namespaced_job_status("fine", "default").status.succeeded or 0) == 1,
             message="the controller kept serving other Jobs")
    assert sb.cluster.errors == 0  # refused writes are API errors, retried with back-off, not crashes


def test_active_deadline_kills_running_pods_before_failing(sandbox_factory: Any, clients_factory: Any,
                                                           wait_for: Any) -> None:
    sb = sandbox_factory(cluster=WORKLOADS, manual_clock=True, time_factor=1.0)
    c = clients_factory(sb)
    c.batch.create_namespaced_job("default", job("overdue", ["sleep", "infinity"], activeDeadlineSeconds=20))
    sb.advance(19.5)  # the deadline counts from the Job's startTime: not yet
    assert "Failed" not in condition_types(job_status(c, "overdue"))
    assert [p.status.phase for p in job_pods(c, "overdue")] == ["Running"]
    for _ in range(40):  # past it: the pod is killed (its grace period runs on the same clock)
        sb.advance(1.0)
        if "Failed" in condition_types(job_status(c, "overdue")) and not job_pods(c, "overdue"):
            break
    status = wait_for(lambda: (s := job_status(c, "overdue")) and "Failed" in condition_types(s) and s)
    assert condition_types(status) == ["FailureTarget", "Failed"]
    failed = status.conditions[1]
    assert (failed.reason, failed.message) == ("DeadlineExceeded", "Job was active longer than specified deadline")
    assert status.failed == 1 and not status.active  # the killed pod counts as failed
    assert not job_pods(c, "overdue")  # deleted, stopped, counted, then released and gone
    assert any(e.reason == "SuccessfulDelete" for e in c.events(name="overdue"))


def test_orphaning_a_jobs_pods_releases_their_tracking_finalizer(sandbox_factory: Any, clients_factory: Any,
                                                                 wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    c.batch.create_namespaced_job("default", job("keep", ["sleep", "infinity"]))
    wait_for(lambda: (pods := job_pods(c, "keep")) and pods[0].status.phase == "Running")
    c.batch.delete_namespaced_job("keep", "default")  # batch/v1 default: orphan the pods
    wait_for(lambda: not c.batch.list_namespaced_job("default").items)
    (pod,) = wait_for(lambda: (pods := job_pods(c, "keep")) and not pods[0].metadata.owner_references
                      and not pods[0].metadata.finalizers and pods, message="orphaned pod released")
    assert pod.status.phase == "Running"  # orphaned, not killed
