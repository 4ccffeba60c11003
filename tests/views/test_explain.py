"""`explain` on real-shaped objects: a world captured from the sandbox (operator + simulated Kueue,
scheduler, kubelet: tests/views/data/sandbox_world.json holds three 8-GPU KaiwoJobs on a 16-GPU
queue, one naming an unknown queue, one with a PVC of a missing storage class), plus hand-made
variants of its objects for the holds that sandbox run did not show (image pulls, crash loops,
preemption, the download Job, missing LocalQueue, taints and selectors)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.views.explain import (
    Explanation,
    ReasonCode,
    WorkloadWorld,
    collect_world,
    explain,
    scheduling_verdicts,
)

DATA = json.loads((Path(__file__).parent / "data" / "sandbox_world.json").read_text())


def world_of(name: str, data: dict[str, list[JsonObj]] | None = None, **overrides: Any) -> WorkloadWorld:
    data = data or DATA
    kj = next(o for o in data["KaiwoJob"] if o["metadata"]["name"] == name)
    owned = data["Job"] + data["PersistentVolumeClaim"]
    world = collect_world(kj, owned=owned, pods=data["Pod"], kueue_workloads=data["Workload"],
                          events=data["Event"], cluster_queues=data["ClusterQueue"],
                          local_queues=data["LocalQueue"])
    if overrides:
        from dataclasses import replace
        world = replace(world, **overrides)
    return world


def explained(name: str, **overrides: Any) -> Explanation:
    return explain(world_of(name, **overrides))


def test_running_workload_has_nothing_holding_it() -> None:
    result = explained("big0")
    assert result.running
    assert result.reasons == []
    assert result.summary == "KaiwoJob default/big0 is RUNNING: nothing holds it back."


def test_quota_names_the_flavor_free_vs_asked_and_position() -> None:
    result = explained("big2")
    assert not result.running
    assert result.codes()[0] == ReasonCode.QUOTA
    quota = result.reasons[0]
    assert quota.source is not None and quota.source.kind == "Workload"
    offered = [g for g in quota.quota if g.nominal > 0]
    assert [(g.flavor, g.resource, g.requested, g.free, g.nominal) for g in offered] == [
        ("amd-mi300x-8gpu-345core-2038gi", "amd.com/gpu", 8.0, 0.0, 16.0)]
    # The flavors Kueue also named (no amd.com/gpu quota at all) are kept, with nominal 0.
    assert {g.flavor for g in quota.quota if g.nominal == 0} == {
        "cpu-only-0gpu-57core-225gi", "nvidia-nvidiah10080gbhbm3-8gpu-201core-1813gi"}
    assert result.queue == "kaiwo"
    assert result.queue_position == 1
    assert "position 1" in result.summary
    assert "has 0 of 16 amd.com/gpu free" in result.summary


def test_unknown_cluster_queue() -> None:
    result = explained("noq")
    assert result.phase == "ERROR"
    assert result.codes() == [ReasonCode.CLUSTER_QUEUE_NOT_FOUND]
    assert "ClusterQueue nope does not exist" in result.summary


def test_unbound_pvc_names_the_provisioner_error_and_the_scheduler_agrees() -> None:
    result = explained("pvc")
    assert result.codes() == [ReasonCode.PVC_UNBOUND, ReasonCode.UNSCHEDULABLE]
    pvc = result.reasons[0]
    assert pvc.detail == 'storageclass.storage.k8s.io "nonexistent" not found'
    assert "pvc-data is not bound" in pvc.message
    assert [v.category for v in result.reasons[1].nodes] == ["volume"]


def test_collect_world_picks_only_the_workloads_objects() -> None:
    world = world_of("big2")
    assert [c["metadata"]["name"] for c in world.children] == ["big2"]
    assert [w["metadata"]["name"] for w in world.kueue_workloads] == ["job-big2-0ecbf"]
    assert world.pods == []
    kinds = {(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in world.events}
    assert kinds == {("KaiwoJob", "big2"), ("Job", "big2"), ("Workload", "job-big2-0ecbf")}


def _with_pod_status(name: str, container_status: JsonObj) -> Explanation:
    data = copy.deepcopy(DATA)
    pod = next(p for p in data["Pod"] if p["metadata"]["labels"].get("kaiwo.silogen.ai/name") == name)
    pod["status"]["phase"] = "Pending"
    pod["status"]["containerStatuses"] = [container_status]
    return explain(world_of(name, data))


@pytest.mark.parametrize(("waiting", "code", "words"), [
    ({"reason": "ImagePullBackOff", "message": 'Back-off pulling image "busybox:nope"'}, ReasonCode.IMAGE_PULL,
     "cannot pull image 'busybox:nope'"),
    ({"reason": "ErrImagePull", "message": "manifest unknown"}, ReasonCode.IMAGE_PULL, "manifest unknown"),
    ({"reason": "CreateContainerConfigError", "message": 'secret "hf-token" not found'},
     ReasonCode.CONTAINER_CONFIG, 'secret "hf-token" not found'),
    ({"reason": "RunContainerError", "message": 'exec: "pyhton": executable file not found in $PATH'},
     ReasonCode.CONTAINER_CONFIG, "check its command"),
])
def test_container_waiting_reasons(waiting: JsonObj, code: ReasonCode, words: str) -> None:
    result = _with_pod_status("big0", {"name": "workload", "image": "busybox:nope", "ready": False,
                                       "restartCount": 0, "state": {"waiting": waiting}})
    assert result.codes() == [code]
    assert not result.running
    assert words in result.summary


def _pod_of(data: dict[str, list[JsonObj]], name: str) -> JsonObj:
    return next(p for p in data["Pod"] if p["metadata"]["labels"].get("kaiwo.silogen.ai/name") == name)


@pytest.mark.parametrize(("message", "words"), [
    ('secret "hf-token" not found', "Secret hf-token does not exist (env HF_TOKEN needs its key token)"),
    ("couldn't find key token in Secret default/hf-token", "Secret hf-token has no key token"),
])
def test_a_missing_secret_in_env_is_named_with_its_key(message: str, words: str) -> None:
    data = copy.deepcopy(DATA)
    pod = _pod_of(data, "big0")
    pod["spec"]["containers"][0]["env"] = [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}]
    pod["status"]["phase"] = "Pending"
    pod["status"]["containerStatuses"] = [{"name": pod["spec"]["containers"][0]["name"], "ready": False,
                                           "restartCount": 0, "state": {"waiting": {
                                               "reason": "CreateContainerConfigError", "message": message}}}]
    result = explain(world_of("big0", data))
    assert result.codes() == [ReasonCode.CONTAINER_CONFIG]
    assert words in result.reasons[0].message and result.reasons[0].detail == message


def test_a_volume_that_cannot_mount_is_named_from_the_failed_mount_event() -> None:
    data = copy.deepcopy(DATA)
    pod = _pod_of(data, "big0")
    pod["spec"]["volumes"] = [{"name": "creds", "secret": {"secretName": "s3-credentials", "items": [
        {"key": "access-key-id", "path": "id"}, {"key": "secret-access-key", "path": "key"}]}}]
    pod["status"]["phase"] = "Pending"
    pod["status"]["containerStatuses"] = [{"name": "workload", "ready": False, "restartCount": 0,
                                           "state": {"waiting": {"reason": "ContainerCreating"}}}]
    message = 'MountVolume.SetUp failed for volume "creds" : secret "s3-credentials" not found'
    data["Event"].append({"kind": "Event", "metadata": {"name": "m", "namespace": "default"}, "reason": "FailedMount",
                          "type": "Warning", "message": message, "lastTimestamp": "2026-11-24T18:40:00Z",
                          "involvedObject": {"kind": "Pod", "name": pod["metadata"]["name"],
                                             "uid": pod["metadata"]["uid"]}})
    result = explain(world_of("big0", data))
    assert result.codes() == [ReasonCode.CONTAINER_CONFIG]
    assert result.reasons[0].message == (
        f"pod {pod['metadata']['name']} cannot start: volume creds needs Secret s3-credentials, which does not "
        "exist (keys access-key-id, secret-access-key)")


def test_crash_loop_reports_restarts_and_last_exit_code() -> None:
    result = _with_pod_status("big0", {
        "name": "workload", "image": "busybox", "ready": False, "restartCount": 3,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container"}},
        "lastState": {"terminated": {"exitCode": 2, "reason": "Error"}}})
    assert result.codes() == [ReasonCode.CRASH_LOOP]
    assert "restarted 3 times, last exit code 2, Error" in result.reasons[0].message


def test_failed_workload_names_the_container_exit() -> None:
    data = copy.deepcopy(DATA)
    kj = next(o for o in data["KaiwoJob"] if o["metadata"]["name"] == "big0")
    kj["status"]["status"] = "FAILED"
    pod = next(p for p in data["Pod"] if p["metadata"]["name"].startswith("big0-"))
    pod["status"]["phase"] = "Failed"
    pod["status"]["containerStatuses"] = [{"name": "workload", "image": "busybox", "restartCount": 0, "state": {
        "terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-11-24T18:40:00Z"}}}]
    result = explain(world_of("big0", data))
    assert result.codes() == [ReasonCode.FAILED, ReasonCode.CONTAINER_FAILED]
    assert result.summary.startswith("KaiwoJob default/big0 is FAILED: it failed (1 more reason below)")
    assert "exited with code 137 (OOMKilled)" in result.reasons[1].message


def _kueue_variant(name: str, reason: str, message: str, **conditions: JsonObj) -> Explanation:
    data = copy.deepcopy(DATA)
    wl = next(w for w in data["Workload"] if w["metadata"]["ownerReferences"][0]["name"] == name)
    conds = [{"type": "QuotaReserved", "status": "False", "reason": reason, "message": message,
              "lastTransitionTime": "2026-11-24T18:36:00Z"}]
    conds += [{"type": t, **c} for t, c in conditions.items()]
    wl["status"] = {"conditions": conds}
    return explain(world_of(name, data))


def test_missing_local_queue_from_kueue_and_from_the_listing() -> None:
    result = _kueue_variant("big2", "Inadmissible", "LocalQueue kaiwo doesn't exist")
    # The LocalQueue listing also has it: both sources agree and one reason is given.
    assert ReasonCode.LOCAL_QUEUE_NOT_FOUND in result.codes()
    world = world_of("big2", local_queues=[])
    codes = explain(world).codes()
    assert codes[0] == ReasonCode.LOCAL_QUEUE_NOT_FOUND
    assert "has no LocalQueue kaiwo" in explain(world).summary


def test_missing_cluster_queue_object() -> None:
    result = explain(world_of("big2", cluster_queues=[]))
    assert result.codes()[0] == ReasonCode.CLUSTER_QUEUE_NOT_FOUND


def test_inactive_cluster_queue() -> None:
    result = _kueue_variant("big2", "Inadmissible", "ClusterQueue kaiwo is inactive")
    assert result.codes() == [ReasonCode.CLUSTER_QUEUE_INACTIVE]


def test_preemption_pending_and_quota_both_reported() -> None:
    message = ("couldn't assign flavors to pod set main: insufficient unused quota for amd.com/gpu in flavor "
               "amd-mi300x-8gpu-345core-2038gi, 8 more needed. Pending the preemption of 1 workload(s)")
    result = _kueue_variant("big2", "Pending", message)
    assert result.codes() == [ReasonCode.QUOTA, ReasonCode.PREEMPTION_PENDING]
    assert result.reasons[1].message.startswith("Kueue is preempting 1 lower-priority workload ")


def test_preempted_workload() -> None:
    evicted = {"status": "True", "reason": "Preempted", "message": "Preempted to accommodate a workload (UID: x)",
               "lastTransitionTime": "2026-11-24T18:36:00Z"}
    result = _kueue_variant("big2", "Pending", "couldn't assign flavors to pod set main: insufficient unused "
                            "quota for amd.com/gpu in flavor amd-mi300x-8gpu-345core-2038gi, 8 more needed",
                            Evicted=evicted)
    assert result.codes() == [ReasonCode.PREEMPTED, ReasonCode.QUOTA]
    assert result.reasons[0].detail.startswith("Preempted to accommodate")


def test_namespace_not_selected() -> None:
    result = _kueue_variant("big2", "Pending", "Workload namespace doesn't match ClusterQueue selector")
    assert result.codes() == [ReasonCode.NAMESPACE_NOT_SELECTED]


def test_quota_from_usage_when_kueue_words_it_differently() -> None:
    result = _kueue_variant("big2", "Pending", "some future wording")
    gaps = result.reasons[0].quota
    assert result.codes() == [ReasonCode.QUOTA]
    assert ("amd-mi300x-8gpu-345core-2038gi", "amd.com/gpu") in {(g.flavor, g.resource) for g in gaps}


def test_download_job_running_then_failed() -> None:
    data = copy.deepcopy(DATA)
    kj = next(o for o in data["KaiwoJob"] if o["metadata"]["name"] == "pvc")
    kj["status"]["status"] = "DOWNLOADING"
    pvc = next(p for p in data["PersistentVolumeClaim"] if p["metadata"]["name"] == "pvc-data")
    pvc["status"] = {"phase": "Bound"}
    data["Pod"] = []
    data["Workload"] = [w for w in data["Workload"] if w["metadata"]["ownerReferences"][0]["name"] != "pvc"]
    data["Job"] = [j for j in data["Job"] if j["metadata"]["name"] != "pvc"]
    download = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "pvc-download", "namespace": "default", "uid": "dl-1",
        "ownerReferences": [{"kind": "KaiwoJob", "name": "pvc", "uid": kj["metadata"]["uid"], "controller": True}]},
        "status": {"active": 1}}
    data["Job"].append(download)
    result = explain(world_of("pvc", data))
    assert result.codes() == [ReasonCode.DOWNLOAD_RUNNING]
    download["status"] = {"failed": 1, "conditions": [{"type": "Failed", "status": "True",
                                                       "reason": "BackoffLimitExceeded",
                                                       "message": "Job has reached the specified backoff limit"}]}
    kj["status"]["status"] = "FAILED"
    result = explain(world_of("pvc", data))
    assert result.codes() == [ReasonCode.FAILED, ReasonCode.DOWNLOAD_FAILED]
    assert "backoff limit" in result.reasons[1].message


def test_invalid_spec_and_too_few_gpus() -> None:
    data = copy.deepcopy(DATA)
    kj = next(o for o in data["KaiwoJob"] if o["metadata"]["name"] == "noq")
    kj["status"]["conditions"] = [
        {"type": "Schedulable", "status": "False", "reason": "InsufficientGPUs",
         "message": "Cluster has 16 amd.com/gpu, workload asks 32"},
        {"type": "SpecValid", "status": "False", "reason": "InvalidSpec", "message": "spec.replicas: must be >= 1"}]
    result = explain(world_of("noq", data))
    # `noq` also names a queue that does not exist: that is reported after its own conditions.
    assert result.codes() == [ReasonCode.SPEC_INVALID, ReasonCode.INSUFFICIENT_GPUS,
                              ReasonCode.CLUSTER_QUEUE_NOT_FOUND]
    assert "spec.replicas: must be >= 1" in result.summary


def test_not_observed_yet() -> None:
    data = copy.deepcopy(DATA)
    kj = next(o for o in data["KaiwoJob"] if o["metadata"]["name"] == "big0")
    kj.pop("status")
    data["Job"], data["Pod"], data["Workload"] = [], [], []
    result = explain(world_of("big0", data))
    assert result.codes() == [ReasonCode.NOT_OBSERVED]


def test_scheduler_messages_are_categorised() -> None:
    message = ("0/5 nodes are available: 1 node(s) had untolerated taint {gpu: reserved, team: a}, "
               "2 Insufficient amd.com/gpu, 2 node(s) didn't match Pod's node affinity/selector. "
               "preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.")
    verdicts = scheduling_verdicts(message)
    assert [(v.count, v.category, v.resource) for v in verdicts] == [
        (1, "taint", None), (2, "resources", "amd.com/gpu"), (2, "selector", None)]
    assert scheduling_verdicts("no nodes available to schedule pods")[0].category == "no-nodes"


def test_unschedulable_pod_from_its_condition() -> None:
    data = copy.deepcopy(DATA)
    pod = next(p for p in data["Pod"] if p["metadata"]["name"].startswith("big1-"))
    pod["status"] = {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/4 nodes are available: 2 Insufficient amd.com/gpu, 2 node(s) didn't match Pod's node "
                   "affinity/selector. preemption: 0/4 nodes are available: 4 Preemption is not helpful."}]}
    result = explain(world_of("big1", data))
    assert result.codes() == [ReasonCode.UNSCHEDULABLE]
    assert "2 nodes: not enough amd.com/gpu" in result.summary
