"""Permanent child errors show on the workload (issue 14, item 3): when the API server refuses a
child for good (403 forbidden or over quota, 422 invalid, namespace terminating), the workload turns
ERROR with a condition and a Warning event carrying the server's message, retries with backoff (no
hot loop), and carries on once the cluster accepts the child."""

from __future__ import annotations

import time

from e2e_harness import OperatorSandbox
from e2e_scenarios import kaiwo_job, wait_phase
from e2e_support import KAIWO_API, JsonObj, Kube, Target, condition, wait_for

TESTER = "child-errors-tester"
QUOTA = ('jobs.batch "quota" is forbidden: exceeded quota: compute, requested: requests.cpu=1, used: '
         'requests.cpu=8, limited: requests.cpu=8')


def client_for(env: OperatorSandbox) -> Target:
    return Target(Kube(env.sb.api_client(token=env.sb.mint_token(TESTER))), "sandbox", 30.0, sandbox=True)


def test_a_forbidden_child_is_reported_with_the_servers_message_and_retried_with_backoff(
        operator_env: OperatorSandbox) -> None:
    env = operator_env
    target = client_for(env)
    namespace = target.namespace("child-403")
    rule = env.sb.faults.fail(code=403, verbs="create", resources="jobs.batch", namespaces=namespace, message=QUOTA)
    try:
        target.kube.create(kaiwo_job("quota", namespace, entrypoint="sleep 5"))

        def reported() -> JsonObj | None:
            cond = condition(target.kube.get(KAIWO_API, "KaiwoJob", "quota", namespace), "Schedulable")
            return cond if cond and cond.get("reason") == "ChildForbidden" else None

        cond = wait_for(reported, target.timeout, "the KaiwoJob to report ChildForbidden")
        assert cond["status"] == "False" and "exceeded quota: compute" in cond["message"], cond
        assert "Job quota" in cond["message"], cond
        obj = target.kube.get(KAIWO_API, "KaiwoJob", "quota", namespace)
        assert obj is not None and obj["status"]["status"] == "ERROR"
        events = wait_for(lambda: [e for e in target.kube.events(namespace, "quota", "KaiwoJob")
                                   if e["reason"] == "ChildForbidden"], target.timeout, "a ChildForbidden event")
        assert events[0]["type"] == "Warning" and "exceeded quota" in events[0]["message"], events

        # Backoff, not a hot loop: over three seconds the refused create is tried a handful of times.
        first = env.sb.faults.rules()[-1].hits
        began = time.monotonic()
        while time.monotonic() - began < 3.0:
            time.sleep(0.1)  # a measuring window, not synchronisation
        tries = next(r.hits for r in env.sb.faults.rules() if r.id == rule) - first
        assert tries <= 12, f"{tries} attempts in 3 s"
        status_writes = [r for r in env.sb.audit.records(namespace=namespace)
                         if r.resource == "kaiwojobs" and r.subresource == "status" and r.user != TESTER]
        assert len(status_writes) <= 2, status_writes  # said once, not rewritten on every retry
    finally:
        env.sb.faults.remove(rule)
    wait_phase(target, "KaiwoJob", "quota", namespace, "COMPLETE", timeout=400)
