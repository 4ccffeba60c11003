"""The controller actors on a real local Ray against the sandbox cluster.

Each test runs only the two controllers a KaiwoJob needs (the queue config makes Kueue's queues,
the KaiwoJob controller the Job), each operator instance under its own API user so that the
sandbox's audit log says who wrote what.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, TypeVar

import kubernetes
import pytest
import yaml

from kaiwo_sandbox.testing import RunningSandbox, polling

pytestmark = [pytest.mark.ray, pytest.mark.slow]

T = TypeVar("T")
NAMES = ["kaiwoqueueconfig", "kaiwojob"]
KAIWOJOBS = ("kaiwo.silogen.ai", "v1alpha1", "kaiwojobs")
WRITES = ("create", "update", "patch", "delete")
EXAMPLE = yaml.safe_load((Path(__file__).parents[2] / "examples" / "cpu-job.yaml").read_text())


# Poll under a deadline: the one polling loop is kaiwo_sandbox.testing.eventually.
wait_for = polling(timeout=60.0, interval=0.1)


class Api:
    def __init__(self, sb: RunningSandbox) -> None:
        client = sb.api_client()
        # Any: the client's typed models make every field Optional, which a test need not prove.
        self.custom: Any = kubernetes.client.CustomObjectsApi(client)
        self.batch: Any = kubernetes.client.BatchV1Api(client)
        self.sb = sb

    def create_job(self, name: str) -> None:
        body = yaml.safe_load(yaml.safe_dump(EXAMPLE))
        body["metadata"]["name"] = name
        self.custom.create_namespaced_custom_object(*KAIWOJOBS[:2], "default", KAIWOJOBS[2], body)

    def kaiwojobs(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.custom.list_namespaced_custom_object(
            *KAIWOJOBS[:2], "default", KAIWOJOBS[2])["items"]
        return items

    def phase(self, name: str) -> str:
        obj = self.custom.get_namespaced_custom_object(*KAIWOJOBS[:2], "default", KAIWOJOBS[2], name)
        return str((obj.get("status") or {}).get("status") or "")

    def all_complete(self, names: list[str]) -> bool:
        phases = {(o["metadata"]["name"]): (o.get("status") or {}).get("status") for o in self.kaiwojobs()}
        return all(phases.get(n) == "COMPLETE" for n in names)

    def writes_by(self, user: str) -> int:
        return sum(1 for r in self.sb.audit.records(user=user) if r.verb in WRITES and r.resource != "leases")


def row(rows: list[Any], name: str) -> Any:
    return next(r for r in rows if r.name == name)


def test_actors_run_a_kaiwojob_to_complete_and_report_health(instances: Any) -> None:
    api = Api(instances.sb)
    sup = instances.supervisor("operator-a", NAMES, batch_scheduling=True)  # as the operator's entry points run it
    rows = sup.start()
    assert [r.name for r in rows] == NAMES
    assert all(r.alive and r.started and r.synced and r.pid not in (None, os.getpid()) for r in rows)
    assert all(r.batch_scheduling for r in rows)  # each controller's loop thread, in its actor
    wait_for(lambda: all(r.leader for r in sup.health()), 30, "both actors lead")

    api.create_job("cpu-job")
    wait_for(lambda: api.phase("cpu-job") == "COMPLETE", 60, "cpu-job COMPLETE")

    job = row(sup.health(), "kaiwojob")
    assert job.alive and job.leader and job.writing and job.error == ""
    assert job.reconciles >= 1 and job.errors == 0 and job.restarts == 0
    assert job.rss_bytes > 20 << 20  # a real process's RSS, measured in the actor
    assert api.writes_by("operator-a") > 0
    names = [j.metadata.name for j in api.batch.list_namespaced_job("default").items]
    assert names == ["cpu-job"]


def test_a_killed_controller_actor_converges_without_duplicate_or_orphan_children(instances: Any) -> None:
    import ray

    api = Api(instances.sb)
    sup = instances.supervisor("operator-k", NAMES)
    sup.start()
    wait_for(lambda: all(r.leader for r in sup.health()), 30, "both actors lead")
    first_pid = row(sup.health(), "kaiwojob").pid
    # Slow down the Job creates so that the kill lands while reconciles are in flight.
    instances.sb.faults.delay(0.2, verbs="create", resources="jobs")
    names = [f"burst-{i:02d}" for i in range(12)]
    for i, name in enumerate(names):
        api.create_job(name)
        if i == 5:
            wait_for(lambda: api.batch.list_namespaced_job("default").items, 30, "a first child Job")
            ray.kill(sup.handle("kaiwojob"), no_restart=False)
    wait_for(lambda: api.all_complete(names), 90, "every KaiwoJob COMPLETE after the restart")

    after = row(sup.health(), "kaiwojob")
    assert after.pid != first_pid and after.restarts >= 1 and after.alive
    owners = {o["metadata"]["uid"]: o["metadata"]["name"] for o in api.kaiwojobs()}
    jobs = api.batch.list_namespaced_job("default").items
    assert sorted(j.metadata.name for j in jobs) == sorted(names)  # one each: none missing, none twice
    for job in jobs:
        refs = [r for r in job.metadata.owner_references or [] if r.controller]
        assert len(refs) == 1 and owners.get(refs[0].uid) == job.metadata.name  # no orphan
    workloads = api.custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "default", "workloads")
    job_uids = sorted(w["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] for w in workloads["items"])
    assert job_uids == sorted(j.metadata.uid for j in jobs)  # Kueue saw each Job once, not a re-created twin


def test_only_the_lease_holder_writes_and_the_standby_takes_over(instances: Any) -> None:
    api = Api(instances.sb)
    first = instances.supervisor("instance-a", NAMES)
    first.start()
    wait_for(lambda: all(r.leader for r in first.health()), 30, "instance-a leads")
    second = instances.supervisor("instance-b", NAMES)
    rows = second.start(leader_wait=0)
    assert all(r.alive and r.synced and not r.leader and not r.writing for r in rows)

    api.create_job("during-a")
    wait_for(lambda: api.phase("during-a") == "COMPLETE", 60, "during-a COMPLETE")
    assert api.writes_by("instance-a") > 0
    assert api.writes_by("instance-b") == 0
    assert not any(r.leader for r in second.health())

    first.stop(grace_seconds=5.0)  # releases the Leases: no need to wait for them to expire
    writes_of_a = api.writes_by("instance-a")
    wait_for(lambda: all(r.leader for r in second.health()), 15, "instance-b takes over")
    api.create_job("during-b")
    wait_for(lambda: api.phase("during-b") == "COMPLETE", 60, "during-b COMPLETE")
    assert api.writes_by("instance-b") > 0
    assert api.writes_by("instance-a") == writes_of_a


def test_graceful_stop_lets_the_in_flight_reconcile_finish(instances: Any) -> None:
    api = Api(instances.sb)
    sup = instances.supervisor("operator-g", NAMES)
    sup.start()
    wait_for(lambda: all(r.leader for r in sup.health()), 30, "both actors lead")
    slow_apply = instances.sb.faults.delay(2.0, verbs="create", resources="jobs")  # the Job create takes 2 s

    api.create_job("graceful")

    def applying() -> bool:  # the sandbox holds the Job apply: the reconcile is inside it
        return any(rule.id == slow_apply and rule.hits > 0 for rule in instances.sb.faults.rules())

    wait_for(applying, 30, "the reconcile reached its Job apply")
    assert api.batch.list_namespaced_job("default").items == []
    began = time.monotonic()
    rows = sup.stop(grace_seconds=10.0)
    took = time.monotonic() - began

    assert all(r.error == "stopped" and r.in_flight == 0 for r in rows), rows
    # The apply that was in flight landed, and the rest of that reconcile ran: its ResourceCreated
    # Event (sent in the background) was flushed before the actor went away. (The first status is
    # written by the next pass, once Kueue answered: see WorkloadController.coalesce_seconds.)
    assert [j.metadata.name for j in api.batch.list_namespaced_job("default").items] == ["graceful"]
    events = kubernetes.client.CoreV1Api(instances.sb.api_client()).list_namespaced_event("default").items
    assert "ResourceCreated" in [e.reason for e in events if e.involved_object.kind == "KaiwoJob"
                                 and e.involved_object.name == "graceful"]
    assert took < 10.0
    lease: Any = kubernetes.client.CoordinationV1Api(instances.sb.api_client()).read_namespaced_lease(
        "kaiwo-ray-kaiwojob", "kube-system")
    assert not lease.spec.holder_identity  # given back on the way out


def test_an_interrupted_start_stops_the_actors_it_created(instances: Any) -> None:
    import ray

    from actors.supervisor import StartInterrupted

    sup = instances.supervisor("operator-i", ["kaiwoconfig"])
    with pytest.raises(StartInterrupted):
        sup.start(interrupted=lambda: True)
    assert sup.handles == {}

    def gone() -> bool:
        try:
            ray.get_actor("kaiwoconfig", namespace=sup.namespace)
        except ValueError:
            return True
        return False

    wait_for(gone, 15, "the named actor is gone")


def test_the_supervise_loop_restarts_nothing_that_is_alive(instances: Any) -> None:
    """Several supervise intervals against real Ray: the actors keep their pids and no line says
    one was restarted (the loop once swapped the creating handle for a looked-up one, and Ray
    destroyed each non-detached actor when its owner's handle went away)."""
    import io
    import threading

    from hosts.cli.up import supervise
    from hosts.runtime.operator_runtime import StopSignal

    sup = instances.supervisor("operator-s", NAMES)
    pids = {r.name: r.pid for r in sup.start()}
    checks: list[list[str]] = []
    ensure = sup.ensure

    def counted_ensure() -> list[str]:
        recreated: list[str] = ensure()
        checks.append(recreated)
        return recreated

    sup.ensure = counted_ensure
    stop = StopSignal()  # not installed: only its event is used
    out = io.StringIO()
    loop = threading.Thread(target=supervise, args=(sup, stop, 0.3, out), daemon=True)
    loop.start()
    wait_for(lambda: len(checks) >= 8, 30, "eight supervise intervals")
    stop.event.set()
    loop.join(10)

    assert not loop.is_alive()
    assert checks and all(recreated == [] for recreated in checks), checks
    rows = sup.health()
    assert {r.name: r.pid for r in rows} == pids
    assert all(r.alive and r.restarts == 0 for r in rows), rows
    assert out.getvalue() == ""  # nothing was gone, restarted or unreachable
