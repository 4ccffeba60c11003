"""KubeRay scenarios against the sandbox with the official client: RayClusters with KubeRay's pod
names, labels and Services; RayJobs through jobDeploymentStatus/jobStatus to Complete or Failed,
with and without Kueue; shutdownAfterJobFinishes, suspend, the finalizer; RayServices to Ready."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kubernetes
import pytest

from kaiwo_sandbox.testing import RunningSandbox

GPU = "amd.com/gpu"
RAY = ("ray.io", "v1")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
NO_KUEUE = ("volume-binder", "scheduler", "kubelet", "job-controller", "kuberay")
WITH_KUEUE = (*NO_KUEUE, "kueue")
WaitFor = Callable[..., Any]


def cluster_spec(workers: int = 2, gpus: int = 1) -> dict[str, Any]:
    def template(gpu: int) -> dict[str, Any]:
        resources: dict[str, Any] = {"requests": {"cpu": "1", "memory": "2Gi"}}
        if gpu:
            resources["requests"][GPU] = str(gpu)
            resources["limits"] = {GPU: str(gpu)}
        return {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.60.0", "resources": resources}]}}

    return {"headGroupSpec": {"rayStartParams": {}, "template": template(0)},
            "workerGroupSpecs": [{"groupName": "gpu-group", "replicas": workers, "minReplicas": workers,
                                  "maxReplicas": workers, "rayStartParams": {}, "template": template(gpus)}]}


def rayjob(name: str, entrypoint: str = "python train.py", *, queue: str | None = None, **spec: Any) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    body = {"entrypoint": entrypoint, "shutdownAfterJobFinishes": True, "rayClusterSpec": cluster_spec()}
    body.update(spec)
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": name, "labels": labels}, "spec": body}


class Ray:
    def __init__(self, sandbox: RunningSandbox) -> None:
        self.api = sandbox.api_client()
        self.custom = kubernetes.client.CustomObjectsApi(self.api)
        self.core = kubernetes.client.CoreV1Api(self.api)
        self.batch = kubernetes.client.BatchV1Api(self.api)

    def create(self, plural: str, body: dict[str, Any]) -> None:
        self.custom.create_namespaced_custom_object(*RAY, "default", plural, body)

    def get(self, plural: str, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = self.custom.get_namespaced_custom_object(*RAY, "default", plural, name)
        except kubernetes.client.ApiException as err:
            if err.status == 404:
                return None
            raise
        return obj

    def status(self, plural: str, name: str) -> dict[str, Any]:
        status: dict[str, Any] = (self.get(plural, name) or {}).get("status") or {}
        return status

    def events(self, name: str) -> list[tuple[str, str, str]]:
        return [(e.reason, e.message, e.source.component) for e in self.core.list_namespaced_event("default").items
                if e.involved_object.name == name]

    def pods(self, selector: str) -> list[Any]:
        items: list[Any] = self.core.list_namespaced_pod("default", label_selector=selector).items
        return items


@pytest.fixture
def ray_factory(sandbox_factory: Callable[..., RunningSandbox],
                make_node: Callable[..., dict[str, Any]]) -> Callable[..., Ray]:
    def make(controllers: tuple[str, ...] = NO_KUEUE) -> Ray:
        nodes = [make_node(f"gpu-{i}", cpu="64", memory="512Gi", gpus=8, labels={"pool": "mi300x"}) for i in range(2)]
        return Ray(sandbox_factory(nodes=nodes, cluster=controllers, time_factor=0.01))
    return make


def test_rayjob_runs_to_complete_without_kueue(ray_factory: Callable[..., Ray], wait_for: WaitFor) -> None:
    ray = ray_factory()
    ray.create("rayjobs", rayjob("train", "sleep 30", ttlSecondsAfterFinished=2000))
    seen: set[tuple[str, str]] = set()

    def finished() -> bool:
        status = ray.status("rayjobs", "train")
        seen.add((status.get("jobDeploymentStatus", ""), status.get("jobStatus", "")))
        return status.get("jobDeploymentStatus") == "Complete"

    wait_for(finished, timeout=10, interval=0.002, message="RayJob Complete")
    assert ("Running", "RUNNING") in seen
    status = ray.status("rayjobs", "train")
    assert status["jobStatus"] == "SUCCEEDED"
    assert status["startTime"] and status["endTime"]
    cluster_name = status["rayClusterName"]
    assert cluster_name.startswith("train-") and len(cluster_name) == len("train-") + 5
    assert status["jobId"].startswith("train-")
    assert status["dashboardURL"] == f"{cluster_name}-head-svc.default.svc.cluster.local:8265"
    assert "ray.io/rayjob-finalizer" in ray.get("rayjobs", "train")["metadata"]["finalizers"]  # type: ignore[index]

    cluster = ray.get("rayclusters", cluster_name)
    assert cluster is not None, "ttlSecondsAfterFinished keeps the cluster for a while"
    assert cluster["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayJob"
    assert cluster["metadata"]["labels"]["ray.io/originated-from-cr-name"] == "train"
    assert cluster["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
    assert cluster["status"]["state"] == "ready"
    assert cluster["status"]["readyWorkerReplicas"] == 2
    assert cluster["status"]["desiredGPU"] == "2"
    assert cluster["status"]["head"]["podName"].startswith(f"{cluster_name}-head-")

    head = ray.pods(f"ray.io/cluster={cluster_name},ray.io/node-type=head")
    workers = ray.pods(f"ray.io/cluster={cluster_name},ray.io/node-type=worker")
    assert len(head) == 1 and len(workers) == 2
    assert head[0].metadata.labels["ray.io/group"] == "headgroup"
    assert head[0].metadata.labels["ray.io/is-ray-node"] == "yes"
    assert head[0].metadata.labels["ray.io/identifier"] == f"{cluster_name}-head"
    assert head[0].metadata.labels["app.kubernetes.io/created-by"] == "kuberay-operator"
    assert all(w.metadata.name.startswith(f"{cluster_name}-gpu-group-worker-") for w in workers)
    assert workers[0].metadata.labels["ray.io/group"] == "gpu-group"
    assert ray.core.read_namespaced_service(f"{cluster_name}-head-svc", "default").spec.selector == {
        "ray.io/cluster": cluster_name, "ray.io/node-type": "head"}

    submitter = ray.batch.read_namespaced_job("train", "default")
    assert submitter.metadata.owner_references[0].kind == "RayJob"
    assert submitter.spec.template.spec.containers[0].command[:3] == ["ray", "job", "submit"]
    # KubeRay's reasons and wording (rayjob_controller.go / raycluster_controller.go).
    assert {("CreatedRayCluster", f"Created RayCluster default/{cluster_name}", "rayjob-controller"),
            ("CreatedRayJobSubmitter", "Created Kubernetes Job default/train", "rayjob-controller"),
            } <= set(ray.events("train"))
    cluster_events = set(ray.events(cluster_name))
    assert {("CreatedHeadPod", f"Created head Pod default/{head[0].metadata.name}", "raycluster-controller"),
            ("CreatedService", f"Created service default/{cluster_name}-head-svc", "raycluster-controller"),
            *{("CreatedWorkerPod", f"Created worker Pod default/{w.metadata.name}", "raycluster-controller")
              for w in workers}} <= cluster_events


def test_shutdown_after_finish_deletes_the_cluster(ray_factory: Callable[..., Ray], wait_for: WaitFor) -> None:
    ray = ray_factory()
    ray.create("rayjobs", rayjob("quick", "sleep 5", ttlSecondsAfterFinished=0))
    wait_for(lambda: ray.status("rayjobs", "quick").get("jobDeploymentStatus") == "Complete", timeout=10)
    cluster_name = ray.status("rayjobs", "quick")["rayClusterName"]
    wait_for(lambda: ray.get("rayclusters", cluster_name) is None, message="RayCluster deleted after the job")
    assert ("DeletedRayCluster", f"Deleted RayCluster default/{cluster_name}", "rayjob-controller") in \
        ray.events("quick")


def test_failing_entrypoint_fails_the_rayjob(ray_factory: Callable[..., Ray], wait_for: WaitFor) -> None:
    ray = ray_factory()
    ray.create("rayjobs", rayjob("broken", "sleep 2; exit 3", submitterConfig={"backoffLimit": 0}))
    status = wait_for(lambda: (s := ray.status("rayjobs", "broken")).get("jobDeploymentStatus") == "Failed" and s,
                      timeout=10)
    assert (status["jobStatus"], status["reason"]) == ("FAILED", "AppFailed")
    assert "exit code 3" in status["message"]


def test_rayjob_through_kueue_waits_suspended_then_runs(ray_factory: Callable[..., Ray], wait_for: WaitFor) -> None:
    ray = ray_factory(WITH_KUEUE)
    ray.create("rayjobs", rayjob("queued", "sleep 20", queue="team"))
    assert ray.get("rayjobs", "queued")["spec"]["suspend"] is True  # type: ignore[index]
    wait_for(lambda: ray.status("rayjobs", "queued").get("jobDeploymentStatus") == "Suspended")
    assert ray.custom.list_namespaced_custom_object(*RAY, "default", "rayclusters")["items"] == []

    kueue = kubernetes.client.CustomObjectsApi(ray.api)
    kueue.create_cluster_custom_object(*KUEUE, "resourceflavors", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "mi300x"},
        "spec": {"nodeLabels": {"pool": "mi300x"}}})
    kueue.create_cluster_custom_object(*KUEUE, "clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": [{
            "name": "mi300x", "resources": [{"name": "cpu", "nominalQuota": 64}, {"name": "memory", "nominalQuota": "1Ti"},
                                            {"name": GPU, "nominalQuota": 8}]}]}]}})
    kueue.create_namespaced_custom_object(*KUEUE, "default", "localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "team"},
        "spec": {"clusterQueue": "cq"}})
    wait_for(lambda: ray.status("rayjobs", "queued").get("jobDeploymentStatus") == "Complete", timeout=10,
             message="admitted RayJob completes")
    workloads = kueue.list_namespaced_custom_object(*KUEUE, "default", "workloads")["items"]
    assert [w["metadata"]["name"][:len("rayjob-queued-")] for w in workloads] == ["rayjob-queued-"]
    assert [(p["name"], p["count"]) for p in workloads[0]["spec"]["podSets"]] == [
        ("head", 1), ("gpu-group", 2), ("submitter", 1)]
    wait_for(lambda: any(c["type"] == "Finished" and c["status"] == "True" for c in
                         kueue.list_namespaced_custom_object(*KUEUE, "default", "workloads")["items"][0]
                         .get("status", {}).get("conditions", [])), message="Workload Finished")
    spec = ray.get("rayjobs", "queued")["spec"]  # type: ignore[index]
    assert spec["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] == {"pool": "mi300x"}


def test_preempted_rayjob_is_suspended_then_rerun_on_a_new_cluster(ray_factory: Callable[..., Ray],
                                                                   wait_for: WaitFor) -> None:
    ray = ray_factory(WITH_KUEUE)
    kueue = kubernetes.client.CustomObjectsApi(ray.api)
    kueue.create_cluster_custom_object(*KUEUE, "resourceflavors", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "mi300x"}})
    kueue.create_cluster_custom_object(*KUEUE, "clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {}, "preemption": {"withinClusterQueue": "LowerPriority"},
                 "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": [{
                     "name": "mi300x", "resources": [{"name": "cpu", "nominalQuota": 64},
                                                     {"name": "memory", "nominalQuota": "1Ti"},
                                                     {"name": GPU, "nominalQuota": 2}]}]}]}})
    kueue.create_namespaced_custom_object(*KUEUE, "default", "localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "team"},
        "spec": {"clusterQueue": "cq"}})
    kueue.create_cluster_custom_object(*KUEUE, "workloadpriorityclasses", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "urgent"},
        "value": 1000})
    ray.create("rayjobs", rayjob("low", "sleep infinity", queue="team"))
    first = wait_for(lambda: (s := ray.status("rayjobs", "low")).get("jobStatus") == "RUNNING" and s,
                     timeout=10, message="low RayJob running")["rayClusterName"]

    urgent = rayjob("urgent", "sleep 5", queue="team")
    urgent["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "urgent"
    ray.create("rayjobs", urgent)
    wait_for(lambda: ray.status("rayjobs", "low").get("jobDeploymentStatus") == "Suspended", timeout=10,
             message="preempted RayJob suspended")
    wait_for(lambda: ray.get("rayclusters", first) is None, message="preempted RayJob's cluster deleted")
    wait_for(lambda: ray.status("rayjobs", "urgent").get("jobDeploymentStatus") == "Complete", timeout=10,
             message="preemptor completes")
    again = wait_for(lambda: (s := ray.status("rayjobs", "low")).get("jobStatus") == "RUNNING" and s,
                     timeout=10, message="preempted RayJob re-admitted and running")
    assert again["rayClusterName"] != first  # KubeRay starts over with a new cluster
    assert ray.get("rayjobs", "low")["spec"]["suspend"] is False  # type: ignore[index]


def test_queued_rayjob_must_shut_down_its_cluster(ray_factory: Callable[..., Ray]) -> None:
    ray = ray_factory(WITH_KUEUE)
    with pytest.raises(kubernetes.client.ApiException) as caught:
        ray.create("rayjobs", rayjob("keeper", queue="team", shutdownAfterJobFinishes=False))
    assert caught.value.status == 422
    assert "a kueue managed job should delete the cluster after finishing" in caught.value.body


def test_suspending_a_running_rayjob_tears_down_its_cluster(ray_factory: Callable[..., Ray],
                                                           wait_for: WaitFor) -> None:
    ray = ray_factory()
    ray.create("rayjobs", rayjob("pausable", "sleep infinity"))
    wait_for(lambda: ray.status("rayjobs", "pausable").get("jobStatus") == "RUNNING", timeout=10)
    first_cluster = ray.status("rayjobs", "pausable")["rayClusterName"]
    ray.custom.patch_namespaced_custom_object(*RAY, "default", "rayjobs", "pausable", {"spec": {"suspend": True}})
    wait_for(lambda: ray.status("rayjobs", "pausable").get("jobDeploymentStatus") == "Suspended", timeout=10)
    assert ray.get("rayclusters", first_cluster) is None
    ray.custom.patch_namespaced_custom_object(*RAY, "default", "rayjobs", "pausable", {"spec": {"suspend": False}})
    wait_for(lambda: ray.status("rayjobs", "pausable").get("jobStatus") == "RUNNING", timeout=10)
    assert ray.status("rayjobs", "pausable")["rayClusterName"] != first_cluster


def test_deleting_a_rayjob_honours_its_finalizer(ray_factory: Callable[..., Ray], wait_for: WaitFor) -> None:
    ray = ray_factory()
    ray.create("rayjobs", rayjob("gone", "sleep infinity"))
    wait_for(lambda: ray.status("rayjobs", "gone").get("jobDeploymentStatus") == "Running", timeout=10)
    cluster_name = ray.status("rayjobs", "gone")["rayClusterName"]
    ray.custom.delete_namespaced_custom_object(*RAY, "default", "rayjobs", "gone")
    wait_for(lambda: ray.get("rayjobs", "gone") is None, message="finalizer released")
    wait_for(lambda: ray.get("rayclusters", cluster_name) is None, message="cluster deleted with the RayJob")


def test_rayservice_becomes_ready(ray_factory: Callable[..., Ray], wait_for: WaitFor) -> None:
    ray = ray_factory()
    serve_config = "applications:\n- name: llm\n  import_path: serve:app\n  deployments:\n  - name: LLM\n"
    ray.create("rayservices", {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "chat"},
                               "spec": {"serveConfigV2": serve_config, "rayClusterConfig": cluster_spec(1)}})
    status = wait_for(lambda: (s := ray.status("rayservices", "chat")).get("serviceStatus") == "Running" and s,
                      timeout=10)
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "NonZeroServeEndpoints")
    assert status["numServeEndpoints"] == 2
    active = status["activeServiceStatus"]
    assert active["rayClusterName"].startswith("chat-raycluster-")
    assert active["applicationStatuses"]["llm"]["status"] == "RUNNING"
    assert active["applicationStatuses"]["llm"]["serveDeploymentStatuses"]["LLM"]["status"] == "HEALTHY"
    serve = ray.core.read_namespaced_service("chat-serve-svc", "default")
    assert serve.spec.selector == {"ray.io/cluster": active["rayClusterName"], "ray.io/serve": "true"}
    assert ray.core.read_namespaced_service("chat-head-svc", "default") is not None
    cluster = ray.get("rayclusters", active["rayClusterName"])
    assert cluster is not None and cluster["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayService"
    assert {("CreatedRayCluster", f"Created the RayCluster default/{active['rayClusterName']}",
             "rayservice-controller"),
            ("CreatedService", "Created the service default/chat-head-svc", "rayservice-controller"),
            ("CreatedService", "Created the service default/chat-serve-svc", "rayservice-controller"),
            } <= set(ray.events("chat"))


def test_rayservice_upgrades_to_a_new_cluster_and_scales_in_place(ray_factory: Callable[..., Ray],
                                                                    wait_for: WaitFor) -> None:
    """KubeRay's zero-downtime upgrade: a rayClusterConfig change other than replicas (a new image)
    prepares a pending cluster, moves the Services to it once it serves, and deletes the old one;
    a replica change scales the active cluster in place."""
    ray = ray_factory()
    serve_config = "applications:\n- name: llm\n  import_path: serve:app\n"
    ray.create("rayservices", {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "chat"},
                               "spec": {"serveConfigV2": serve_config, "rayClusterConfig": cluster_spec(1)}})
    first = wait_for(lambda: (s := ray.status("rayservices", "chat")).get("serviceStatus") == "Running" and
                     s["activeServiceStatus"]["rayClusterName"], timeout=10)
    scaled = cluster_spec(2)
    ray.custom.patch_namespaced_custom_object(*RAY, "default", "rayservices", "chat",
                                              {"spec": {"rayClusterConfig": scaled}})
    wait_for(lambda: ray.status("rayclusters", first).get("readyWorkerReplicas") == 2, timeout=10)
    assert ray.status("rayservices", "chat")["activeServiceStatus"]["rayClusterName"] == first
    upgraded = cluster_spec(2)
    for group in (upgraded["headGroupSpec"], upgraded["workerGroupSpecs"][0]):
        group["template"]["spec"]["containers"][0]["image"] = "rayproject/ray:2.61.0"
    ray.custom.patch_namespaced_custom_object(*RAY, "default", "rayservices", "chat",
                                              {"spec": {"rayClusterConfig": upgraded}})
    second = wait_for(lambda: (name := ray.status("rayservices", "chat")["activeServiceStatus"]["rayClusterName"])
                      != first and name, timeout=15)
    wait_for(lambda: ray.get("rayclusters", first) is None, timeout=10)
    status = ray.status("rayservices", "chat")
    assert "pendingServiceStatus" not in status or not status["pendingServiceStatus"]
    assert next(c for c in status["conditions"] if c["type"] == "UpgradeInProgress")["status"] == "False"
    assert ray.core.read_namespaced_service("chat-serve-svc", "default").spec.selector["ray.io/cluster"] == second
    head = ray.pods(f"ray.io/cluster={second},ray.io/node-type=head")[0]
    assert head.spec.containers[0].image == "rayproject/ray:2.61.0"
    reasons = [r for r, _, _ in ray.events("chat")]
    assert reasons.count("CreatedRayCluster") == 2 and "DeletedRayCluster" in reasons


def test_standalone_raycluster_scales_its_workers(ray_factory: Callable[..., Ray], wait_for: WaitFor) -> None:
    ray = ray_factory()
    ray.create("rayclusters", {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "solo"},
                               "spec": cluster_spec(workers=1)})
    wait_for(lambda: ray.status("rayclusters", "solo").get("state") == "ready", timeout=10)
    groups = cluster_spec(workers=3)["workerGroupSpecs"]  # a merge patch replaces the whole list
    ray.custom.patch_namespaced_custom_object(*RAY, "default", "rayclusters", "solo",
                                              {"spec": {"workerGroupSpecs": groups}})
    wait_for(lambda: ray.status("rayclusters", "solo").get("readyWorkerReplicas") == 3, timeout=10)
    assert len(ray.pods("ray.io/cluster=solo,ray.io/node-type=worker")) == 3


def test_pod_the_apiserver_refuses_is_reported_not_retried_in_a_loop(ray_factory: Callable[..., Ray],
                                                                       wait_for: WaitFor) -> None:
    ray = ray_factory()
    spec = cluster_spec(workers=0)
    spec["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    ray.create("rayclusters", {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "bad"},
                               "spec": spec})
    failed = wait_for(lambda: [e for e in ray.events("bad") if e[0] == "FailedToCreate"], timeout=10)
    assert failed[0][2] == "raycluster-controller"
    assert ray.pods("ray.io/cluster=bad") == []


def test_kuberay_crds_apply_their_upstream_defaults(ray_factory: Callable[..., Ray]) -> None:
    """KubeRay v1.4.2's CRDs declare defaults (ray.io_rayjobs.yaml etc.); the stored objects carry them."""
    ray = ray_factory(controllers=())  # the API server alone: what the CRD schemas do
    spec = rayjob("defaults", "python train.py")["spec"]
    group = spec["rayClusterSpec"]["workerGroupSpecs"][0]
    for key in ("replicas", "minReplicas", "maxReplicas"):
        del group[key]
    spec["rayClusterSpec"]["headGroupSpec"]["headService"] = {"spec": {"ports": [{"name": "x", "port": 1}]}}
    head_container = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    head_container["ports"] = [{"name": "gcs", "containerPort": 6379}]
    head_container["envFrom"] = [{"secretRef": {}}]
    ray.create("rayjobs", {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "defaults"}, "spec": spec})
    stored = ray.get("rayjobs", "defaults")
    assert stored is not None
    assert stored["spec"]["backoffLimit"] == 0
    assert stored["spec"]["submissionMode"] == "K8sJobMode"
    assert stored["spec"]["ttlSecondsAfterFinished"] == 0
    stored_group = stored["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert (stored_group["numOfHosts"], stored_group["replicas"], stored_group["minReplicas"],
            stored_group["maxReplicas"]) == (1, 0, 0, 2147483647)
    assert stored_group["template"] == group["template"]  # the loose rest is kept as it was
    head_ports = stored["spec"]["rayClusterSpec"]["headGroupSpec"]["headService"]["spec"]["ports"]
    assert head_ports == [{"name": "x", "port": 1, "protocol": "TCP"}]
    # The core types' defaults inside the embedded pod templates (container ports, references).
    stored_head = stored["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert stored_head["ports"] == [{"name": "gcs", "containerPort": 6379, "protocol": "TCP"}]
    assert stored_head["envFrom"] == [{"secretRef": {"name": ""}}]
    # A value the user gave is kept; RayClusters and RayServices default their worker groups too.
    ray.create("rayjobs", rayjob("mine", submissionMode="HTTPMode", backoffLimit=3))
    mine = ray.get("rayjobs", "mine") or {}
    assert (mine["spec"]["submissionMode"], mine["spec"]["backoffLimit"]) == ("HTTPMode", 3)
    ray.create("rayclusters", {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "c"},
                               "spec": cluster_spec()})
    assert (ray.get("rayclusters", "c") or {})["spec"]["workerGroupSpecs"][0]["numOfHosts"] == 1
    ray.create("rayservices", {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "s"},
                               "spec": {"rayClusterConfig": cluster_spec()}})
    assert (ray.get("rayservices", "s") or {})["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["numOfHosts"] == 1


def test_kuberay_writes_its_typed_objects_with_scale_strategy(ray_factory: Callable[..., Ray],
                                                              wait_for: WaitFor) -> None:
    """KubeRay adds its finalizer with an Update of the typed RayJob, and creates the RayCluster from
    its Go types: worker groups gain `scaleStrategy: {}` in both."""
    ray = ray_factory()
    ray.create("rayjobs", rayjob("typed", "sleep 30", ttlSecondsAfterFinished=2000))
    wait_for(lambda: "ray.io/rayjob-finalizer" in ((ray.get("rayjobs", "typed") or {}).get("metadata") or {}).get(
        "finalizers", []), timeout=10, message="finalizer")
    stored = ray.get("rayjobs", "typed") or {}
    assert stored["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["scaleStrategy"] == {}
    wait_for(lambda: ray.status("rayjobs", "typed").get("rayClusterName"), timeout=10, message="cluster name")
    wait_for(lambda: ray.get("rayclusters", ray.status("rayjobs", "typed")["rayClusterName"]) is not None,
             timeout=10, message="RayCluster")
    cluster = ray.get("rayclusters", ray.status("rayjobs", "typed")["rayClusterName"]) or {}
    assert cluster["spec"]["workerGroupSpecs"][0]["scaleStrategy"] == {}
    # Deleting the RayJob still completes: KubeRay removes its finalizer once it has cleaned up.
    ray.custom.delete_namespaced_custom_object(*RAY, "default", "rayjobs", "typed")
    wait_for(lambda: ray.get("rayjobs", "typed") is None, timeout=10, message="RayJob deleted")
