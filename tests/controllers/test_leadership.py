"""Fenced leadership (issue 14, item 4), two whole operator instances against one sandbox, each with
its own user so the audit log tells their writes apart: a leader cut off from its Lease stops writing
before the standby takes over (zero writes from a non-leader), and a restart under the same identity
never leads beside its predecessor. Prints the failover time it measures."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_scenarios import kaiwo_job, wait_phase
from e2e_support import Kube, Target, wait_for

from hosts.runtime.controller_host import Operator
from kaiwo_ray.controllers.manager import HostSettings
from kaiwo_sandbox.instance import write_kubeconfig
from kaiwo_sandbox.testing import RunningSandbox, start_sandbox

LEASE = {"lease": True, "lease_seconds": 3.0, "renew_every": 0.3, "renew_deadline": 2.0}
WRITES = ("create", "update", "patch", "delete")


class Instances:
    def __init__(self, sb: RunningSandbox, tmp_path: Path) -> None:
        self.sb = sb
        self.tmp_path = tmp_path
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="operators", daemon=True)
        self.thread.start()
        self.operators: list[Operator] = []

    def run(self, coro: Any, timeout: float = 60.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self, user: str, identity: str) -> Operator:
        path = self.tmp_path / f"{user}.kubeconfig"
        cert = self.sb.sandbox.cert
        write_kubeconfig(path, self.sb.url, self.sb.mint_token(user), cert.cert_pem if cert else None)
        operator = Operator(None, HostSettings(kubeconfig=str(path), identity=identity, **LEASE))  # type: ignore[arg-type]
        self.run(operator.start())
        self.operators.append(operator)
        return operator

    def stop(self, operator: Operator) -> None:
        self.run(operator.stop())
        self.operators.remove(operator)

    def close(self) -> None:
        for operator in list(self.operators):
            self.stop(operator)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@pytest.fixture
def instances(tmp_path: Path) -> Iterator[Instances]:
    sb = start_sandbox(cluster=True, time_factor=0.05)
    found = Instances(sb, tmp_path)
    try:
        yield found
    finally:
        sb.faults.clear()
        found.close()
        sb.stop()


def leading(operator: Operator) -> bool:
    return all(h.get("leader") for h in operator.health())


def writes(sb: RunningSandbox, user: str, after: float = 0.0) -> list[Any]:
    """Successful writes of `user` other than its Leases (its controllers' work)."""
    return [r for r in sb.audit.records(user=user) if r.verb in WRITES and r.code < 400
            and r.resource != "leases" and r.timestamp > after]


def lease_takeovers(sb: RunningSandbox, user: str, after: float) -> list[float]:
    return [r.timestamp for r in sb.audit.records(user=user) if r.resource == "leases"
            and r.verb in ("update", "create") and r.code < 400 and r.timestamp > after]


class Load:
    """Creates a KaiwoJob every 0.1 s, so whoever leads always has something to write."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.created = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(0.1):  # a load schedule, not synchronisation
            self.kube.create(kaiwo_job(f"load-{self.created}", self.namespace, entrypoint="sleep 1"))
            self.created += 1


def test_a_partitioned_leader_stops_writing_before_the_standby_takes_over(instances: Instances) -> None:
    sb = instances.sb
    target = Target(Kube(sb.api_client(token=sb.mint_token("tester"))), "sandbox", 60.0, sandbox=True)
    namespace = target.namespace("partition")
    first = instances.start("op-a", "a")
    wait_for(lambda: leading(first), 30, "instance a leading")
    second = instances.start("op-b", "b")
    wait_for(lambda: all(h["synced"] for h in second.health()), 30, "instance b's caches warm")
    with Load(target.kube, namespace):
        wait_for(lambda: len(writes(sb, "op-a")) > 10, 30, "instance a at work")
        # a's Lease requests now hang for 20 s, then fail: it can no longer renew (its controllers'
        # own requests still get through, which is what makes a partitioned leader dangerous)
        sb.faults.fail(code=503, latency=20, resources="leases", users="op-a")
        cut = time.time()
        wait_for(lambda: leading(second), 30, "instance b taking over")
        failover = time.time() - cut
        wait_for(lambda: len(writes(sb, "op-b")) > 10, 30, "instance b at work")
    taken = min(lease_takeovers(sb, "op-b", after=cut))
    late = [f"{r.verb} {r.resource}/{r.name} at +{r.timestamp - taken:.3f}s" for r in writes(sb, "op-a", after=taken)]
    assert late == [], late  # not one write of a's after b took a Lease
    assert not any(h.get("leader") for h in first.health())
    last_of_a = max(r.timestamp for r in writes(sb, "op-a"))
    print(f"\nfailover after a partition: {failover:.2f} s (lease 3 s, renew deadline 2 s); "
          f"a's last write {taken - last_of_a:.2f} s before b's first Lease write")
    sb.faults.clear()
    wait_phase(target, "KaiwoJob", "load-0", namespace, "COMPLETE")


def test_a_restart_under_the_same_identity_waits_for_its_predecessors_lease(instances: Instances) -> None:
    sb = instances.sb
    first = instances.start("op-old", "same")
    wait_for(lambda: leading(first), 30, "the first incarnation leading")
    second = instances.start("op-new", "same")  # same identity, e.g. an actor restarted by Ray
    began = time.monotonic()
    while time.monotonic() - began < 4.5:  # one and a half lease durations
        assert not any(h.get("leader") for h in second.health()), "both incarnations lead"
        time.sleep(0.05)  # sampling the health reports, not synchronisation
    assert writes(sb, "op-new") == []
    # the predecessor crashes (no release): the restarted one leads once the Lease has expired
    for host in first.hosts:
        assert host._election is not None
        instances.loop.call_soon_threadsafe(host._election.cancel)
        if host.controller is not None:
            instances.loop.call_soon_threadsafe(host.controller.writes_enabled.clear)
    # the restarted incarnation takes over on its own (how long it takes against the lease
    # duration is benchmarks/failover.py's figure)
    wait_for(lambda: leading(second), 30, "the restarted incarnation leading after the expiry")
    assert lease_takeovers(sb, "op-new", after=0.0), "the restarted incarnation leads without its Lease"


def test_a_standby_stops_without_waiting_out_its_grace(instances: Instances) -> None:
    """A standby's workers hold queued keys until they lead (the KaiwoConfig controller queues its
    singleton at start); that is no work in flight, so its stop need not wait the 10 s grace."""
    first = instances.start("op-lead", "lead")
    wait_for(lambda: leading(first), 30, "the first instance leading")
    standby = instances.start("op-standby", "standby")
    wait_for(lambda: all(h["synced"] for h in standby.health()), 30, "the standby's caches warm")
    kaiwoconfig = standby.host("kaiwoconfig").controller
    assert kaiwoconfig is not None
    wait_for(lambda: kaiwoconfig.queue.in_flight > 0, 30, "a standby worker holding the singleton's key")
    began = time.monotonic()
    instances.stop(standby)
    took = time.monotonic() - began
    # Waiting out the grace would take 10 s or more; the margin below it is for a loaded machine.
    assert took < 9.0, f"the standby's stop took {took:.1f} s: it waited out its 10 s grace"
    assert not any(h.get("leader") for h in standby.health())
