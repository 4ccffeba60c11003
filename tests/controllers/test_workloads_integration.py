"""The KaiwoJob and KaiwoService controllers against the sandbox, through the real `kubernetes`
client: what they write (and do not write), their events, the lease gate, recovery from ERROR and
duration preemption. Scenario-level behaviour (examples, queueing, faults) lives in tests/e2e.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from e2e_harness import OperatorSandbox
from e2e_scenarios import kaiwo_job, kaiwo_service, wait_phase
from e2e_support import KAIWO_API, Kube, Target, condition, phase, recording, wait_for

from kaiwo_ray.kube import resources as R
from kaiwo_ray.reconcile.workload import Plan

TESTER = "workload-tester"
WRITES = ("create", "update", "patch", "delete")


def client_for_tests(env: OperatorSandbox) -> Target:
    """A client with its own identity, so the audit log tells the operator's calls from ours."""
    return Target(Kube(env.sb.api_client(token=env.sb.mint_token(TESTER))), "sandbox", 30.0, sandbox=True)


def operator_writes(env: OperatorSandbox, namespace: str) -> Counter[tuple[str, str]]:
    """Successful operator writes in `namespace`: (verb, resource[/subresource]) -> count."""
    return Counter((r.verb, r.resource + (f"/{r.subresource}" if r.subresource else ""))
                   for r in env.sb.audit.records(namespace=namespace)
                   if r.user != TESTER and r.verb in WRITES and r.code < 400)


def settle(env: OperatorSandbox, *names: str) -> None:
    """Wait until the named controllers have nothing queued or running."""
    def idle() -> bool:
        return all(h["queue"] == 0 and h["in_flight"] == 0 for h in env.operator.health() if h["name"] in names)

    wait_for(idle, 30.0, f"{names} idle")


def resync(env: OperatorSandbox, host: str) -> None:
    """Reconcile every object of the controller once more, as a periodic resync would."""
    controller: Any = env.controller(host)
    before = controller.stats.reconciles
    env.loop.call_soon_threadsafe(controller.enqueue_all)
    wait_for(lambda: controller.stats.reconciles > before, 30.0, f"{host} resync")


def test_settled_workloads_cost_no_writes_on_resync(operator_env: OperatorSandbox) -> None:
    target = client_for_tests(operator_env)
    namespace = target.namespace("ctl-quiet")
    target.kube.create(kaiwo_job("quiet-job", namespace, entrypoint="sleep 5"))
    target.kube.create(kaiwo_service("quiet-svc", namespace, replicas=2))
    wait_phase(target, "KaiwoJob", "quiet-job", namespace, "COMPLETE")
    wait_phase(target, "KaiwoService", "quiet-svc", namespace, "RUNNING")
    settle(operator_env, "kaiwojob-controller", "kaiwoservice-controller")
    before = operator_writes(operator_env, namespace)
    for host in ("kaiwojob", "kaiwoservice"):
        resync(operator_env, host)
    settle(operator_env, "kaiwojob-controller", "kaiwoservice-controller")
    assert operator_writes(operator_env, namespace) == before


def test_a_job_lifecycle_writes_its_child_once_and_no_finalizer(operator_env: OperatorSandbox) -> None:
    target = client_for_tests(operator_env)
    namespace = target.namespace("ctl-budget")
    with recording(target.kube, KAIWO_API, "KaiwoJob", namespace) as history:
        target.kube.create(kaiwo_job("counted", namespace, entrypoint="sleep 5"))
        wait_phase(target, "KaiwoJob", "counted", namespace, "COMPLETE")
        settle(operator_env, "kaiwojob-controller")
        # The recording watch may trail the GET that saw COMPLETE: wait for it to catch up.
        phases = wait_for(lambda: (h := history.of("counted")) and h[-1] == "COMPLETE" and h,
                          target.timeout, "the watch sees COMPLETE")
    writes = operator_writes(operator_env, namespace)
    assert writes[("create", "jobs")] == 1 and writes[("patch", "jobs")] == 0, writes  # created once, never drifted
    assert writes[("patch", "kaiwojobs")] == 0, writes  # no finalizer (upstream has none either)
    assert not target.kube.get(KAIWO_API, "KaiwoJob", "counted", namespace)["metadata"].get("finalizers")
    # One status write per distinct status the watch saw: a new phase, or a condition that changed
    # within a phase (Admitted flips while PENDING when Kueue admits before the pod exists).
    states = history.states_of("counted")
    assert phases[-1] == "COMPLETE" and [s[0] for s in states][-1] == "COMPLETE", (phases, states)
    assert writes[("patch", "kaiwojobs/status")] == len(states), (writes, states)


def test_an_earlier_versions_finalizer_is_released_after_the_children(operator_env: OperatorSandbox) -> None:
    """A workload that an earlier version gave `kaiwo.silogen.ai/finalizer` (an upgrade): deleted, it
    gets what that version promised, its children deleted first, then the finalizer released."""
    target = client_for_tests(operator_env)
    namespace = target.namespace("ctl-legacy")
    target.kube.create(kaiwo_job("legacy", namespace, entrypoint="sleep 3600"))
    wait_phase(target, "KaiwoJob", "legacy", namespace, "RUNNING")
    target.kube.patch(KAIWO_API, "KaiwoJob", "legacy", {"metadata": {"finalizers": ["kaiwo.silogen.ai/finalizer"]}},
                      namespace)
    target.kube.delete(KAIWO_API, "KaiwoJob", "legacy", namespace)
    wait_for(lambda: target.kube.get(KAIWO_API, "KaiwoJob", "legacy", namespace) is None, target.timeout,
             "the KaiwoJob released")
    assert target.kube.get("batch/v1", "Job", "legacy", namespace) is None
    writes = operator_writes(operator_env, namespace)
    assert writes[("delete", "jobs")] == 1 and writes[("patch", "kaiwojobs")] == 1, writes  # the release


def test_events_name_the_controller_and_follow_the_phases(operator_env: OperatorSandbox) -> None:
    target = client_for_tests(operator_env)
    namespace = target.namespace("ctl-events")
    target.kube.create(kaiwo_job("told", namespace, entrypoint="sleep 5"))
    target.kube.create(kaiwo_service("told-svc", namespace))
    wait_phase(target, "KaiwoJob", "told", namespace, "COMPLETE")
    wait_phase(target, "KaiwoService", "told-svc", namespace, "RUNNING")
    for kind, name, component, final in (("KaiwoJob", "told", "kaiwojob-controller", "WorkloadComplete"),
                                         ("KaiwoService", "told-svc", "kaiwoservice-controller", "WorkloadRunning")):
        def reasons(kind: str = kind, name: str = name, final: str = final) -> list[str] | None:
            seen = target.kube.event_reasons(namespace, name, kind)
            return seen if final in seen else None

        seen = wait_for(reasons, target.timeout, f"{final} event for {name}")
        assert "ResourceCreated" in seen, seen
        events = target.kube.events(namespace, name, kind)
        assert {(e.get("source") or {}).get("component") for e in events} == {component}, events
        assert all(e["type"] == "Normal" for e in events), events


def test_standby_controller_writes_nothing_until_it_may(operator_env: OperatorSandbox) -> None:
    """A host that does not hold the lease keeps its caches warm but writes nothing."""
    target = client_for_tests(operator_env)
    namespace = target.namespace("ctl-standby")
    controller: Any = operator_env.controller("kaiwojob")
    operator_env.loop.call_soon_threadsafe(controller.writes_enabled.clear)
    try:
        target.kube.create(kaiwo_job("waiting", namespace, entrypoint="sleep 5"))
        wait_for(lambda: controller.caches[R.KAIWOJOBS].get(namespace, "waiting"), 30.0,
                 "the standby cache to see the KaiwoJob")
        wait_for(lambda: controller.queue.in_flight > 0, 30.0, "a worker holding the key, gated")
        assert operator_writes(operator_env, namespace) == Counter()
        assert phase(target.kube.get(KAIWO_API, "KaiwoJob", "waiting", namespace)) == ""
    finally:
        operator_env.loop.call_soon_threadsafe(controller.writes_enabled.set)
    wait_phase(target, "KaiwoJob", "waiting", namespace, "COMPLETE")


def test_error_recovers_when_the_spec_is_fixed(operator_env: OperatorSandbox) -> None:
    target = client_for_tests(operator_env)
    namespace = target.namespace("ctl-recover")
    target.kube.create(kaiwo_job("fixable", namespace, entrypoint="sleep 5", clusterQueue="missing-queue"))
    broken = wait_phase(target, "KaiwoJob", "fixable", namespace, "ERROR")
    assert (condition(broken, "Schedulable") or {}).get("reason") == "ClusterQueueNotFound"
    target.kube.patch(KAIWO_API, "KaiwoJob", "fixable", {"spec": {"clusterQueue": "kaiwo"}}, namespace)
    fixed = wait_phase(target, "KaiwoJob", "fixable", namespace, "COMPLETE")
    assert (condition(fixed, "Schedulable") or {}).get("status") == "True"
    assert fixed["status"].get("observedGeneration") == fixed["metadata"]["generation"]


def test_running_job_past_its_duration_yields_to_a_pending_one(operator_env: OperatorSandbox) -> None:
    """Duration preemption (spec §7.6, chainsaw `preemption`): a RUNNING job past its `duration`
    is terminated once another workload waits, its children go, and the waiting one runs."""
    target = client_for_tests(operator_env)
    namespace = target.namespace("ctl-preempt")
    gpu = {"gpus": 8, "gpuVendor": "nvidia"}  # the default queue holds 8 NVIDIA GPUs: one such job at a time
    target.kube.create(kaiwo_job("hog", namespace, entrypoint="sleep 36000", duration="1s", **gpu))
    wait_phase(target, "KaiwoJob", "hog", namespace, "RUNNING")
    wait_for(lambda: (condition(target.kube.get(KAIWO_API, "KaiwoJob", "hog", namespace), "Preemptable") or {})
             .get("status") == "True", target.timeout, "hog preemptable after its duration")
    target.kube.create(kaiwo_job("waiter", namespace, entrypoint="sleep 5", **gpu))
    hog = wait_phase(target, "KaiwoJob", "hog", namespace, "TERMINATED", timeout=10.0)
    early = condition(hog, "WorkloadTerminatedEarly")
    assert early is not None and early["status"] == "True" and early["reason"] == "DurationExceeded", hog["status"]
    wait_for(lambda: target.kube.get("batch/v1", "Job", "hog", namespace) is None, target.timeout, "hog's Job gone")
    wait_phase(target, "KaiwoJob", "waiter", namespace, "COMPLETE")
    assert "WorkloadTerminated" in target.kube.event_reasons(namespace, "hog", "KaiwoJob")


def test_a_childs_foreground_deletion_is_in_the_cache_when_the_delete_returns(operator_env: OperatorSandbox) -> None:
    """The answer to a foreground delete (the child, now deleting) is written through to the cache,
    so a pass that runs before the child's watch event arrives does not delete it a second time."""
    target = client_for_tests(operator_env)
    namespace = target.namespace("ctl-delete-through")
    target.kube.create(kaiwo_job("held", namespace, entrypoint="sleep 3600"))
    job = wait_for(lambda: target.kube.get("batch/v1", "Job", "held", namespace), target.timeout, "the Job")
    # A foreign finalizer keeps the deleted Job, so only its deletionTimestamp says it is going.
    target.kube.patch("batch/v1", "Job", "held", {"metadata": {"finalizers": ["example.com/hold"]}}, namespace)
    controller: Any = operator_env.controller("kaiwojob")
    kaiwojob = target.kube.get(KAIWO_API, "KaiwoJob", "held", namespace)
    job = {**job, "kind": "Job", "apiVersion": "batch/v1"}

    async def delete_then_look() -> Any:
        await controller.execute(kaiwojob, Plan(delete=[job]))
        return controller.caches[R.JOBS].get(namespace, "held")  # before any further await: no watch event yet

    cached = operator_env.run(delete_then_look())
    assert cached is not None and cached["metadata"].get("deletionTimestamp"), cached
    target.kube.patch("batch/v1", "Job", "held", {"metadata": {"finalizers": None}}, namespace)
