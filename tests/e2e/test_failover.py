"""Two operator instances, one Lease per controller (sandbox only: it runs both in-process). The
standby keeps its caches warm and writes nothing; when the leader stops (and gives its Leases
back), the standby takes over and carries on, with no child made twice."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from e2e_harness import OperatorSandbox, operator_sandbox
from e2e_scenarios import kaiwo_job, kaiwo_service, wait_phase
from e2e_support import KAIWO_API, owned_by, wait_for

from hosts.runtime.controller_host import Operator
from kaiwo_ray.kube import resources as R

ELECTION = {"lease": True, "lease_seconds": 3, "renew_every": 0.3}


@pytest.fixture(scope="module")
def elected() -> Iterator[OperatorSandbox]:
    with operator_sandbox(host_settings={**ELECTION, "identity": "first"}) as env:
        yield env


def leaders(operator: Operator) -> dict[str, bool]:
    return {h["name"]: bool(h.get("leader")) for h in operator.health()}


def writes(operator: Operator) -> int:
    return sum(h.get("writes") or 0 for h in operator.health())


def test_standby_takes_over_when_the_leader_stops(elected: OperatorSandbox) -> None:
    env = elected
    target = env.target
    namespace = target.namespace("e2e-failover")
    first = env.operator
    wait_for(lambda: all(leaders(first).values()), target.timeout, "the first instance leading every controller")
    second = env.second_operator(**ELECTION, identity="second")
    try:
        wait_for(lambda: all(h["synced"] for h in second.health()), target.timeout, "the standby's caches synced")
        target.kube.create(kaiwo_job("before", namespace, entrypoint="sleep 5"))
        target.kube.create(kaiwo_service("web", namespace))
        wait_phase(target, "KaiwoJob", "before", namespace, "COMPLETE")
        wait_phase(target, "KaiwoService", "web", namespace, "RUNNING")
        assert not any(leaders(second).values()) and writes(second) == 0, second.health()
        standby: Any = second.host("kaiwojob").controller
        assert standby.caches[R.KAIWOJOBS].get(namespace, "before") is not None, "cold standby cache"

        env.run(first.stop())
        wait_for(lambda: all(leaders(second).values()), target.timeout, "the standby taking over every controller")
        target.kube.create(kaiwo_job("after", namespace, entrypoint="sleep 5"))
        target.kube.patch(KAIWO_API, "KaiwoService", "web", {"spec": {"replicas": 2}}, namespace)
        wait_phase(target, "KaiwoJob", "after", namespace, "COMPLETE")
        wait_for(lambda: (target.kube.get("apps/v1", "Deployment", "web", namespace) or {})
                 .get("spec", {}).get("replicas") == 2, target.timeout, "the new leader updating the Deployment")
        assert writes(second) > 0
        for name in ("before", "after"):
            owner = target.kube.get(KAIWO_API, "KaiwoJob", name, namespace)
            assert owner is not None
            jobs = [j for j in target.kube.items("batch/v1", "Job", namespace) if owned_by(j, owner["metadata"]["uid"])]
            assert len(jobs) == 1, (name, jobs)
    finally:
        env.run(second.stop())


def test_restarted_operator_finishes_what_came_in_while_it_was_down(elected: OperatorSandbox) -> None:
    """A new instance after a full stop: a KaiwoJob created while no operator ran completes, and the
    workloads that had settled before cost it no writes."""
    env = elected
    target = env.target
    namespace = target.namespace("e2e-restart")
    env.run(env.operator.stop())  # whatever led before (stopping twice is harmless)
    before = env.second_operator(**ELECTION, identity="before-restart")
    try:
        target.kube.create(kaiwo_job("settled", namespace, entrypoint="sleep 5"))
        target.kube.create(kaiwo_service("steady", namespace))
        wait_phase(target, "KaiwoJob", "settled", namespace, "COMPLETE")
        wait_phase(target, "KaiwoService", "steady", namespace, "RUNNING")
    finally:
        env.run(before.stop())
    target.kube.create(kaiwo_job("offline", namespace, entrypoint="sleep 5"))
    settled_versions = {name: (target.kube.get(KAIWO_API, kind, name, namespace) or {})["metadata"]["resourceVersion"]
                        for kind, name in (("KaiwoJob", "settled"), ("KaiwoService", "steady"))}
    after = env.second_operator(**ELECTION, identity="after-restart")
    try:
        wait_phase(target, "KaiwoJob", "offline", namespace, "COMPLETE")
        wait_for(lambda: all(h["queue"] == 0 and h["in_flight"] == 0 for h in after.health()), target.timeout,
                 "the new instance idle")
        reconciles = {h["name"]: h["reconciles"] for h in after.health()}
        assert reconciles["kaiwojob-controller"] >= 2 and reconciles["kaiwoservice-controller"] >= 1, reconciles
        for kind, name in (("KaiwoJob", "settled"), ("KaiwoService", "steady")):
            live = target.kube.get(KAIWO_API, kind, name, namespace)
            assert live is not None and live["metadata"]["resourceVersion"] == settled_versions[name], \
                f"{kind} {name} was rewritten after the restart"
        deployment = target.kube.get("apps/v1", "Deployment", "steady", namespace)
        assert deployment is not None and deployment["metadata"]["generation"] == 1, "the Deployment was re-applied"
    finally:
        env.run(after.stop())
