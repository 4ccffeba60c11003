"""The operator under a hostile API server (sandbox only: it needs the fault injector): about one
call in ten fails with 500, 429 or 409, watch streams are cut every few hundred milliseconds and
resumed watches are told their resourceVersion expired (410). Workloads must still converge, with
exactly one child of each kind per workload and no child left without a live owner.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator

import pytest
from e2e_harness import OperatorSandbox, operator_sandbox
from e2e_scenarios import kaiwo_job, kaiwo_service, wait_gone, wait_no_children, wait_phase
from e2e_support import KAIWO_API, JsonObj, Kube, Target, owned_by, phase, wait_for

JOBS = [f"job-{n}" for n in range(5)]
RAY_JOBS = ["ray-job"]
SERVICES = ["svc-0", "svc-1"]
CHILD_KINDS = (("batch/v1", "Job"), ("ray.io/v1", "RayJob"), ("apps/v1", "Deployment"),
               ("workload.codeflare.dev/v1beta2", "AppWrapper"), ("v1", "PersistentVolumeClaim"),
               ("v1", "ConfigMap"))
WRITES = ("create", "update", "patch", "delete")
# A Hugging Face pre-cache: a PVC, a download ConfigMap and Job, then the main Job.
STORAGE = {"storageEnabled": True, "storageClassName": "standard",
           "huggingFace": {"storageSize": "1Gi", "preCacheRepos": [{"repoId": "org/model", "files": ["config.json"]}]}}


class Chaos:
    """Cuts every watch stream and expires the next resumed watch, on a timer, until stopped."""

    def __init__(self, env: OperatorSandbox, every: float = 0.3) -> None:
        self.env = env
        self.every = every
        self.cuts = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos", daemon=True)

    def __enter__(self) -> Chaos:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        faults = self.env.sb.faults
        while not self._stop.wait(self.every):  # a fault schedule, not a synchronisation
            self.cuts += self.env.sb.call(faults.cut_watches)
            self.env.sb.call(faults.expire_next, 1)


@pytest.fixture(scope="module")
def fault_sandbox() -> Iterator[OperatorSandbox]:
    with operator_sandbox() as env:
        yield env


def client_for_tests(env: OperatorSandbox) -> Target:
    """A client with its own identity, so the audit log tells the operator's calls from ours."""
    token = env.sb.mint_token("e2e-tester")
    return Target(Kube(env.sb.api_client(token=token)), "sandbox", 60.0, sandbox=True)


def orphans(kube: Kube, namespace: str) -> list[str]:
    """Children whose controller owner (a KaiwoJob/KaiwoService) no longer exists."""
    live_uids = {o["metadata"]["uid"] for kind in ("KaiwoJob", "KaiwoService")
                 for o in kube.items(KAIWO_API, kind, namespace)}
    found: list[str] = []
    for api_version, kind in CHILD_KINDS:
        for child in kube.items(api_version, kind, namespace):
            refs = [r for r in child["metadata"].get("ownerReferences") or ()
                    if r.get("controller") and r.get("kind") in ("KaiwoJob", "KaiwoService")]
            if refs and refs[0]["uid"] not in live_uids:
                found.append(f"{kind}/{child['metadata']['name']}")
    return found


def children_per_owner(kube: Kube, namespace: str, owner: JsonObj) -> Counter[str]:
    uid = owner["metadata"]["uid"]
    counts: Counter[str] = Counter()
    for api_version, kind in CHILD_KINDS:
        counts[kind] += sum(1 for c in kube.items(api_version, kind, namespace) if owned_by(c, uid))
    return +counts


def test_workloads_converge_through_errors_watch_cuts_and_expired_versions(fault_sandbox: OperatorSandbox) -> None:
    env = fault_sandbox
    target = client_for_tests(env)
    kube = target.kube
    namespace = target.namespace("e2e-faults")
    faults = env.sb.faults
    faults.seed(5)
    faults.fail(code=500, probability=0.04)
    faults.fail(code=429, probability=0.03, retry_after=1)
    faults.fail(code=409, verbs=["create", "update", "patch"], probability=0.03)
    ray_spec = {"ray": True, "entrypoint": "sleep 20", "image": "rayproject/ray:2.47.1-py311",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}
    try:
        with Chaos(env) as chaos:
            for name in JOBS:
                kube.create(kaiwo_job(name, namespace, entrypoint="sleep 20"))
            for name in RAY_JOBS:
                kube.create(kaiwo_job(name, namespace, **ray_spec))
            kube.create(kaiwo_job("stored", namespace, entrypoint="sleep 5", storage=STORAGE))
            for name in SERVICES:
                kube.create(kaiwo_service(name, namespace, replicas=1))
            for name in [*JOBS, *RAY_JOBS, "stored"]:
                wait_phase(target, "KaiwoJob", name, namespace, "COMPLETE")
            for name in SERVICES:
                wait_phase(target, "KaiwoService", name, namespace, "RUNNING")
            # Deleting under the same conditions still cleans up.
            doomed = [kube.get(KAIWO_API, "KaiwoService", "svc-1", namespace),
                      kube.get(KAIWO_API, "KaiwoJob", "job-0", namespace)]
            for obj in doomed:
                assert obj is not None
                kube.delete(KAIWO_API, obj["kind"], obj["metadata"]["name"], namespace)
            for obj in doomed:
                assert obj is not None
                uid = obj["metadata"]["uid"]
                wait_gone(target, obj["kind"], obj["metadata"]["name"], namespace)
                wait_no_children(target, namespace, uid, obj["metadata"]["name"])
        hits = {rule.code: rule.hits for rule in faults.rules()}
    finally:
        faults.clear()

    operator_failures = [r for r in env.sb.audit.records(namespace=namespace)
                         if r.user != "e2e-tester" and r.verb in WRITES and r.code >= 409]
    assert chaos.cuts > 0 and all(hits.get(code, 0) > 0 for code in (500, 429, 409)), (chaos.cuts, hits)
    assert operator_failures, "no operator write met a fault: the test proved nothing"
    relists = sum(sum(h["relists"].values()) for h in env.operator.health() if "relists" in h)
    assert relists > sum(len(h["relists"]) for h in env.operator.health() if "relists" in h), \
        "no informer had to relist after an expired watch"

    # Exactly one child per kind per surviving workload, nothing orphaned, phases stable.
    expected = {"KaiwoJob": Counter({"Job": 1}), "KaiwoService": Counter({"Deployment": 1})}
    for kind, names in (("KaiwoJob", JOBS[1:]), ("KaiwoService", SERVICES[:1])):
        for name in names:
            owner = kube.get(KAIWO_API, kind, name, namespace)
            assert owner is not None
            assert children_per_owner(kube, namespace, owner) == expected[kind], name
            assert phase(owner) == ("COMPLETE" if kind == "KaiwoJob" else "RUNNING"), owner["status"]
    stored = kube.get(KAIWO_API, "KaiwoJob", "stored", namespace)
    assert stored is not None  # main Job + download Job, the HF cache PVC, the download ConfigMap
    assert children_per_owner(kube, namespace, stored) == Counter(
        {"Job": 2, "PersistentVolumeClaim": 1, "ConfigMap": 1})
    ray_owner = kube.get(KAIWO_API, "KaiwoJob", "ray-job", namespace)
    assert ray_owner is not None and children_per_owner(kube, namespace, ray_owner) == Counter({"RayJob": 1})
    assert orphans(kube, namespace) == []
    workloads = kube.items(kube.kueue_api, "Workload", namespace)
    owners = Counter((r["kind"], r["name"]) for w in workloads for r in w["metadata"].get("ownerReferences") or ()
                     if r.get("controller"))
    assert all(n == 1 for n in owners.values()), owners


def test_workload_stalls_during_a_write_outage_and_finishes_after_it(fault_sandbox: OperatorSandbox) -> None:
    """While every operator write in the namespace fails, nothing progresses; once the outage ends,
    the retries already queued finish the job without anyone touching it again."""
    env = fault_sandbox
    target = client_for_tests(env)
    namespace = target.namespace("e2e-outage")
    rule = env.sb.faults.fail(code=503, verbs=["update", "patch"], namespaces=namespace,
                              resources=["kaiwojobs", "jobs.batch"])
    creates = env.sb.faults.fail(code=503, verbs="create", namespaces=namespace, resources="jobs.batch")
    try:
        target.kube.create(kaiwo_job("patient", namespace, entrypoint="sleep 5"))

        def failed_writes() -> int:
            return sum(1 for r in env.sb.audit.records(namespace=namespace)
                       if r.user != "e2e-tester" and r.code == 503)

        wait_for(lambda: failed_writes() >= 3, target.timeout, "the operator retrying its writes")
        obj = target.kube.get(KAIWO_API, "KaiwoJob", "patient", namespace)
        assert phase(obj) == "" and target.kube.get("batch/v1", "Job", "patient", namespace) is None
    finally:
        env.sb.faults.remove(rule)
        env.sb.faults.remove(creates)
    wait_phase(target, "KaiwoJob", "patient", namespace, "COMPLETE")
