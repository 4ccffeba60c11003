"""Nothing we do not own is taken (issue 14, item 1): a same-named object that this workload does not
control is never written, adopted or deleted. The workload says so (Schedulable=False,
ChildNameConflict, and a Warning event) and carries on once the name is free.

Against the sandbox with the whole operator in-process, through the real `kubernetes` client; the
sandbox's audit log tells the operator's writes from the test's.
"""

from __future__ import annotations

from typing import Any

import pytest
from e2e_harness import OperatorSandbox
from e2e_scenarios import kaiwo_job, kaiwo_service, wait_gone, wait_phase
from e2e_support import KAIWO_API, JsonObj, Kube, Target, condition, wait_for

from kaiwo_ray.kube import resources as R

TESTER = "ownership-tester"
WRITES = ("create", "update", "patch", "delete")
DATA_STORAGE = {"storageEnabled": True, "storageClassName": "standard", "data": {"storageSize": "1Gi"}}


def client_for(env: OperatorSandbox) -> Target:
    return Target(Kube(env.sb.api_client(token=env.sb.mint_token(TESTER))), "sandbox", 30.0, sandbox=True)


def operator_writes_to(env: OperatorSandbox, namespace: str, resource: str, name: str) -> list[str]:
    """Successful writes over HTTP by anyone but the tester (the operator: the simulated cluster's
    controllers write in-process) to one object's body (its status is the simulated cluster's)."""
    return [f"{r.user} {r.verb} {r.resource}/{r.name}" for r in env.sb.audit.records(namespace=namespace)
            if r.user != TESTER and r.verb in WRITES and r.code < 400 and not r.subresource
            and r.resource == resource and r.name == name]


def user_pvc(name: str, namespace: str) -> JsonObj:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "3Gi"}},
                     "storageClassName": "standard"}}


def conflict_condition(target: Target, kind: str, name: str, namespace: str) -> JsonObj:
    def reported() -> JsonObj | None:
        cond = condition(target.kube.get(KAIWO_API, kind, name, namespace), "Schedulable")
        return cond if cond and cond.get("reason") == "ChildNameConflict" else None

    return wait_for(reported, target.timeout, f"{kind} {name} to report ChildNameConflict")


def test_a_users_pvc_with_our_childs_name_is_never_taken_nor_deleted(operator_env: OperatorSandbox) -> None:
    target = client_for(operator_env)
    namespace = target.namespace("own-pvc")
    target.kube.create(user_pvc("train-data", namespace))
    # The simulated volume controller binds it first (its write, not ours): then it must stay as it is.
    before = wait_for(lambda: (p := target.kube.get("v1", "PersistentVolumeClaim", "train-data", namespace))
                      and (p.get("status") or {}).get("phase") == "Bound" and p, target.timeout, "the user's PVC bound")
    target.kube.create(kaiwo_job("train", namespace, entrypoint="sleep 5", storage=DATA_STORAGE))

    cond = conflict_condition(target, "KaiwoJob", "train", namespace)
    assert cond["status"] == "False"
    assert "PersistentVolumeClaim train-data" in cond["message"], cond
    job = target.kube.get(KAIWO_API, "KaiwoJob", "train", namespace)
    assert job is not None and job["status"]["status"] == "ERROR", job["status"]
    events = wait_for(lambda: [e for e in target.kube.events(namespace, "train", "KaiwoJob")
                               if e["reason"] == "ChildNameConflict"], target.timeout, "a ChildNameConflict event")
    assert events[0]["type"] == "Warning" and "train-data" in events[0]["message"], events
    # Nothing else of the workload was made while its storage is blocked.
    assert target.kube.get("batch/v1", "Job", "train", namespace) is None

    pvc = target.kube.get("v1", "PersistentVolumeClaim", "train-data", namespace)
    assert pvc is not None
    assert pvc["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert not pvc["metadata"].get("ownerReferences"), pvc["metadata"]
    assert operator_writes_to(operator_env, namespace, "persistentvolumeclaims", "train-data") == []

    target.kube.delete(KAIWO_API, "KaiwoJob", "train", namespace)
    wait_gone(target, "KaiwoJob", "train", namespace)
    pvc = target.kube.get("v1", "PersistentVolumeClaim", "train-data", namespace)
    assert pvc is not None and not pvc["metadata"].get("deletionTimestamp"), pvc
    assert pvc["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert operator_writes_to(operator_env, namespace, "persistentvolumeclaims", "train-data") == []


def test_the_workload_carries_on_once_the_name_is_free(operator_env: OperatorSandbox) -> None:
    target = client_for(operator_env)
    namespace = target.namespace("own-free")
    target.kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late", "namespace": namespace},
                        "data": {"mine": "yes"}})
    # The main Job's name is taken by a user's Job (shaped nothing like ours).
    target.kube.create({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "late", "namespace": namespace},
                        "spec": {"suspend": True, "template": {"spec": {
                            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}}}})
    target.kube.create(kaiwo_job("late", namespace, entrypoint="sleep 5"))
    cond = conflict_condition(target, "KaiwoJob", "late", namespace)
    assert "Job late" in cond["message"], cond
    target.kube.delete("batch/v1", "Job", "late", namespace)
    # No resync, no timer needed: the stranger's deletion wakes the workload.
    wait_phase(target, "KaiwoJob", "late", namespace, "COMPLETE")
    job = target.kube.get("batch/v1", "Job", "late", namespace)
    assert job is not None and any(r.get("controller") and r["kind"] == "KaiwoJob"
                                   for r in job["metadata"]["ownerReferences"]), job["metadata"]
    assert target.kube.get("v1", "ConfigMap", "late", namespace)["data"] == {"mine": "yes"}  # type: ignore[index]


def test_a_look_alike_rayservice_is_neither_read_nor_deleted(operator_env: OperatorSandbox) -> None:
    target = client_for(operator_env)
    namespace = target.namespace("own-ray")
    serve_config = "applications:\n- name: app\n  import_path: serve:app\n"
    group = {"groupName": "workers", "replicas": 1, "minReplicas": 1, "maxReplicas": 1,
             "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.9.0"}]}}}
    stranger = target.kube.create({
        "apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "lookalike", "namespace": namespace},
        "spec": {"serveConfigV2": serve_config, "rayClusterConfig": {
            "headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head",
                                                                    "image": "rayproject/ray:2.9.0"}]}}},
            "workerGroupSpecs": [group]}}})
    uid = stranger["metadata"]["uid"]
    target.kube.create(kaiwo_service("lookalike", namespace))
    wait_phase(target, "KaiwoService", "lookalike", namespace, "RUNNING")
    target.kube.delete(KAIWO_API, "KaiwoService", "lookalike", namespace)
    wait_gone(target, "KaiwoService", "lookalike", namespace)
    live: Any = target.kube.get("ray.io/v1", "RayService", "lookalike", namespace)
    assert live is not None and live["metadata"]["uid"] == uid and not live["metadata"].get("deletionTimestamp")
    assert operator_writes_to(operator_env, namespace, "rayservices", "lookalike") == []


def test_a_stranger_wearing_our_label_is_reported_and_its_deletion_wakes_the_workload(
        operator_env: OperatorSandbox) -> None:
    target = client_for(operator_env)
    namespace = target.namespace("own-label")
    # A copy of one of our download ConfigMaps, labels and all, but owned by nobody.
    target.kube.create({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "copy-data", "namespace": namespace,
                                     "labels": {"kaiwo.silogen.ai/run-id": "someone-else"}}, "data": {"a": "b"}})
    target.kube.create(user_pvc("copy-data", namespace) | {"metadata": {
        "name": "copy-data", "namespace": namespace, "labels": {"kaiwo.silogen.ai/run-id": "someone-else"}}})
    target.kube.create(kaiwo_job("copy", namespace, entrypoint="sleep 5", storage=DATA_STORAGE))
    cond = conflict_condition(target, "KaiwoJob", "copy", namespace)
    assert "PersistentVolumeClaim copy-data" in cond["message"], cond
    target.kube.delete("v1", "PersistentVolumeClaim", "copy-data", namespace)
    wait_phase(target, "KaiwoJob", "copy", namespace, "COMPLETE")
    assert target.kube.get("v1", "ConfigMap", "copy-data", namespace)["data"] == {"a": "b"}  # type: ignore[index]


def test_child_caches_hold_only_what_carries_our_label(operator_env: OperatorSandbox) -> None:
    target = client_for(operator_env)
    namespace = target.namespace("own-cache")
    for n in range(5):
        target.kube.create({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": f"unrelated-{n}", "namespace": namespace}, "data": {"n": str(n)}})
    target.kube.create(kaiwo_job("cached", namespace, entrypoint="sleep 5", storage=DATA_STORAGE))
    wait_phase(target, "KaiwoJob", "cached", namespace, "COMPLETE")
    controller: Any = operator_env.controller("kaiwojob")
    caches = controller.caches
    from kaiwo_ray.kube import resources as R

    assert caches[R.PVCS].get(namespace, "cached-data") is not None  # ours, labelled: cached
    assert all(caches[R.CONFIGMAPS].get(namespace, f"unrelated-{n}") is None for n in range(5))


def test_caches_keep_what_the_controllers_read(operator_env: OperatorSandbox) -> None:
    """Jobs are cached without their pod template, Kueue Workloads (watched cluster-wide) without their
    pod sets, and the KaiwoService controller caches download Jobs only (a KaiwoJob's main Job carries
    the same run-id label, and was cached by both). Admission is still read (the KaiwoJob runs), and an
    update of a Job is still made from the whole object: a label added to the KaiwoJob reaches its Job,
    whose template stays as it was."""
    from kaiwo_ray.kube import resources as R

    target = client_for(operator_env)
    namespace = target.namespace("own-trim")
    target.kube.create(kaiwo_job("trimmed", namespace, entrypoint="sleep 3600"))
    wait_phase(target, "KaiwoJob", "trimmed", namespace, "RUNNING")
    jobs: Any = operator_env.controller("kaiwojob")
    services: Any = operator_env.controller("kaiwoservice")
    cached = jobs.caches[R.JOBS].get(namespace, "trimmed")
    assert cached is not None and "template" not in cached["spec"], sorted(cached["spec"])
    assert services.caches[R.JOBS].get(namespace, "trimmed") is None
    workloads = [w for w in jobs.caches[R.WORKLOADS] if w["metadata"]["namespace"] == namespace]
    assert workloads, "Kueue made no Workload for the Job"
    for workload in workloads:
        assert "spec" not in workload, sorted(workload)
        assert workload["metadata"]["labels"].get("kueue.x-k8s.io/job-uid")
        assert any(c["type"] == "Admitted" for c in workload["status"]["conditions"])

    before = target.kube.get("batch/v1", "Job", "trimmed", namespace)
    assert before is not None
    target.kube.patch(KAIWO_API, "KaiwoJob", "trimmed", {"metadata": {"labels": {"team": "blue"}}}, namespace)

    def labelled() -> JsonObj | None:
        job = target.kube.get("batch/v1", "Job", "trimmed", namespace) or {}
        return job if (job.get("metadata", {}).get("labels") or {}).get("team") == "blue" else None

    after = wait_for(labelled, target.timeout, "the new label on the Job")
    assert after["spec"]["template"] == before["spec"]["template"]
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    target.kube.delete(KAIWO_API, "KaiwoJob", "trimmed", namespace)
    wait_gone(target, "KaiwoJob", "trimmed", namespace)


@pytest.mark.parametrize("labelled", [True, False], ids=["cached", "found-by-its-create"])
def test_a_successor_waits_for_its_predecessors_job_and_never_takes_it(operator_env: OperatorSandbox,
                                                                       labelled: bool) -> None:
    """No finalizer: a deleted KaiwoJob's Job is the garbage collector's to delete. A KaiwoJob created
    again under the same name meanwhile waits for it, without calling it a conflict and without
    touching it, and creates its own Job once it is gone (woken by the deletion, no resync). Without
    its run-id label the leftover is not in the caches: the successor's create answers AlreadyExists,
    and the read that follows tells the predecessor's Job from a stranger's (retried with backoff)."""
    target = client_for(operator_env)
    namespace = target.namespace("own-again")
    first = target.kube.create(kaiwo_job("again", namespace, entrypoint="sleep 3600"))
    old = wait_for(lambda: target.kube.get("batch/v1", "Job", "again", namespace), target.timeout, "the first Job")
    # Someone else's finalizer keeps the old Job (deleting, not gone) for as long as this test wants.
    target.kube.patch("batch/v1", "Job", "again", {"metadata": {"finalizers": ["example.com/hold"]}}, namespace)
    target.kube.delete(KAIWO_API, "KaiwoJob", "again", namespace)
    wait_gone(target, "KaiwoJob", "again", namespace)
    wait_for(lambda: (j := target.kube.get("batch/v1", "Job", "again", namespace)) and j["metadata"].get(
        "deletionTimestamp"), target.timeout, "the garbage collector deleting the first Job")
    controller: Any = operator_env.controller("kaiwojob")
    if not labelled:
        # Only now that its owner is gone: while the first KaiwoJob lived, the operator rightly
        # restored the label of its own Job (one more write, and a race with the delete).
        target.kube.patch("batch/v1", "Job", "again", {"metadata": {"labels": {"kaiwo.silogen.ai/run-id": None}}},
                          namespace)
        wait_for(lambda: controller.caches[R.JOBS].get(namespace, "again") is None, target.timeout,
                 "the operator's cache without the unlabelled Job")

    before = controller.stats.reconciles
    successor = target.kube.create(kaiwo_job("again", namespace, entrypoint="sleep 5"))
    assert successor["metadata"]["uid"] != first["metadata"]["uid"]
    # Its first pass and the retry a second later have both seen the leftover.
    wait_for(lambda: controller.stats.reconciles >= before + 2, target.timeout, "two passes over the successor")
    live = target.kube.get(KAIWO_API, "KaiwoJob", "again", namespace)
    assert live is not None and not live.get("status"), live.get("status")
    assert "ChildNameConflict" not in target.kube.event_reasons(namespace, "again", "KaiwoJob")
    writes = operator_writes_to(operator_env, namespace, "jobs", "again")
    assert len(writes) == 1 and writes[0].endswith(" create jobs/again"), writes  # the first Job's creation only

    target.kube.patch("batch/v1", "Job", "again", {"metadata": {"finalizers": None}}, namespace)
    wait_phase(target, "KaiwoJob", "again", namespace, "COMPLETE")
    job = target.kube.get("batch/v1", "Job", "again", namespace)
    assert job is not None and job["metadata"]["uid"] != old["metadata"]["uid"]
    assert [r["uid"] for r in job["metadata"]["ownerReferences"] if r.get("controller")] == [
        successor["metadata"]["uid"]]
