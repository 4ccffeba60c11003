"""AppWrapper scenarios against the sandbox with the official client: queued by Kueue while
suspended, components created on admission (RayService becomes Ready), PodsReady, Succeeded from
a wrapped Job, and re-suspension deleting the components."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import kubernetes
import pytest

from kaiwo_sandbox.testing import RunningSandbox

GPU = "amd.com/gpu"
AW = ("workload.codeflare.dev", "v1beta2")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
RAY = ("ray.io", "v1")
CONTROLLERS = ("volume-binder", "scheduler", "kubelet", "job-controller", "kuberay", "appwrapper", "kueue")
WaitFor = Callable[..., Any]
USER, USER_ID = "workload.codeflare.dev/user", "workload.codeflare.dev/userid"


def pod_template(gpus: int = 0, command: list[str] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "1"}}
    if gpus:
        resources["requests"][GPU] = str(gpus)
        resources["limits"] = {GPU: str(gpus)}
    container: dict[str, Any] = {"name": "main", "image": "rayproject/ray:2.60.0", "resources": resources}
    if command:
        container["command"] = command
    return {"spec": {"containers": [container]}}


def wrapped_rayservice(name: str) -> dict[str, Any]:
    service = {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": name},
               "spec": {"serveConfigV2": "applications:\n- name: app\n  import_path: a:b\n",
                        "rayClusterConfig": {
                            "headGroupSpec": {"rayStartParams": {}, "template": pod_template()},
                            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 2,
                                                  "maxReplicas": 2, "rayStartParams": {},
                                                  "template": pod_template(gpus=2)}]}}}
    return {"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "team"}},
            "spec": {"components": [{"template": service, "podSets": [
                {"replicas": 1, "path": "template.spec.rayClusterConfig.headGroupSpec.template"},
                {"replicas": 2, "path": "template.spec.rayClusterConfig.workerGroupSpecs[0].template"}]}]}}


class World:
    def __init__(self, sandbox: RunningSandbox) -> None:
        self.api = sandbox.api_client()
        self.custom = kubernetes.client.CustomObjectsApi(self.api)
        self.core = kubernetes.client.CoreV1Api(self.api)

    def queue(self, gpus: int = 8) -> None:
        self.custom.create_cluster_custom_object(*KUEUE, "resourceflavors", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "mi300x"},
            "spec": {"nodeLabels": {"pool": "mi300x"}}})
        self.custom.create_cluster_custom_object(*KUEUE, "clusterqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", GPU], "flavors": [{
                "name": "mi300x", "resources": [{"name": "cpu", "nominalQuota": 64}, {"name": GPU, "nominalQuota": gpus}]}]}]}})
        self.custom.create_namespaced_custom_object(*KUEUE, "default", "localqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "team"},
            "spec": {"clusterQueue": "cq"}})

    def appwrapper(self, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = self.custom.get_namespaced_custom_object(*AW, "default", "appwrappers", name)
        return obj

    def phase(self, name: str) -> str:
        return str((self.appwrapper(name).get("status") or {}).get("phase", ""))

    def rayservice(self, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = self.custom.get_namespaced_custom_object(*RAY, "default", "rayservices", name)
        except kubernetes.client.ApiException as err:
            if err.status == 404:
                return None
            raise
        return obj


@pytest.fixture
def world(sandbox_factory: Callable[..., RunningSandbox], make_node: Callable[..., dict[str, Any]]) -> World:
    nodes = [make_node(f"gpu-{i}", cpu="64", gpus=8, labels={"pool": "mi300x"}) for i in range(2)]
    return World(sandbox_factory(nodes=nodes, cluster=CONTROLLERS, time_factor=0.01))


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == ctype)


def test_appwrapped_rayservice_goes_from_suspended_to_running_and_ready(world: World, wait_for: WaitFor) -> None:
    world.custom.create_namespaced_custom_object(*AW, "default", "appwrappers", wrapped_rayservice("chat"))
    assert world.appwrapper("chat")["spec"]["suspend"] is True
    wait_for(lambda: world.phase("chat") == "Suspended", message="suspended while not admitted")
    assert world.rayservice("chat") is None

    world.queue()
    wait_for(lambda: world.phase("chat") == "Running", timeout=10, message="admitted and deployed")
    service = wait_for(lambda: (s := world.rayservice("chat")) and (s.get("status") or {}).get("serviceStatus")
                       == "Running" and s, timeout=10, message="wrapped RayService Ready")
    assert condition(service, "Ready")["status"] == "True"
    assert service["metadata"]["ownerReferences"][0]["kind"] == "AppWrapper"
    workers = service["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]
    assert workers["spec"]["nodeSelector"] == {"pool": "mi300x"}
    assert workers["metadata"]["labels"]["workload.codeflare.dev/appwrapper"] == "chat"
    aw = wait_for(lambda: condition(a := world.appwrapper("chat"), "PodsReady")["status"] == "True" and a)
    assert condition(aw, "QuotaReserved")["status"] == "True"
    assert condition(aw, "ResourcesDeployed")["status"] == "True"
    infos = aw["spec"]["components"][0]["podSetInfos"]
    assert [i["nodeSelector"] for i in infos] == [{"pool": "mi300x"}, {"pool": "mi300x"}]

    workloads = world.custom.list_namespaced_custom_object(*KUEUE, "default", "workloads")["items"]
    assert [(p["name"], p["count"]) for p in workloads[0]["spec"]["podSets"]] == [("chat-0", 1), ("chat-1", 2)]
    assert workloads[0]["metadata"]["name"].startswith("appwrapper-chat-")


def test_resuspending_an_appwrapper_deletes_its_components(world: World, wait_for: WaitFor) -> None:
    # Not queued (Kueue would unsuspend an admitted AppWrapper again, as it does for any job).
    unqueued = wrapped_rayservice("svc")
    unqueued["metadata"]["labels"] = {}
    unqueued["spec"]["suspend"] = False
    world.custom.create_namespaced_custom_object(*AW, "default", "appwrappers", unqueued)
    wait_for(lambda: world.phase("svc") == "Running", timeout=10)
    wait_for(lambda: world.rayservice("svc") is not None)
    world.custom.patch_namespaced_custom_object(*AW, "default", "appwrappers", "svc", {"spec": {"suspend": True}})
    wait_for(lambda: world.phase("svc") == "Suspended", timeout=10, message="components undeployed")
    assert world.rayservice("svc") is None
    assert condition(world.appwrapper("svc"), "ResourcesDeployed")["status"] == "False"


def test_appwrapped_job_succeeds(world: World, wait_for: WaitFor) -> None:
    world.queue()
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "batch"},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "main", "image": "busybox", "command": ["sleep", "10"],
                "resources": {"requests": {"cpu": "1", GPU: "1"}, "limits": {GPU: "1"}}}]}}}}
    world.custom.create_namespaced_custom_object(*AW, "default", "appwrappers", {
        "apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
        "metadata": {"name": "batch", "labels": {"kueue.x-k8s.io/queue-name": "team"}},
        "spec": {"components": [{"template": job, "podSets": [{"replicas": 1, "path": "template.spec.template"}]}]}})
    wait_for(lambda: world.phase("batch") == "Succeeded", timeout=10, message="AppWrapper Succeeded")
    workloads = world.custom.list_namespaced_custom_object(*KUEUE, "default", "workloads")["items"]
    finished = [c for c in workloads[0]["status"]["conditions"] if c["type"] == "Finished"]
    wait_for(lambda: finished or [c for c in world.custom.list_namespaced_custom_object(
        *KUEUE, "default", "workloads")["items"][0]["status"]["conditions"] if c["type"] == "Finished"])


def test_components_are_rendered_with_owner_label_and_pod_set_infos() -> None:
    from kaiwo_sandbox.cluster.kuberay.appwrapper import component_gvr, expected_pods, render_component

    aw = wrapped_rayservice("chat")
    aw["metadata"].update({"namespace": "team", "uid": "aw-uid"})
    aw["apiVersion"], aw["kind"] = "workload.codeflare.dev/v1beta2", "AppWrapper"
    aw["spec"]["components"][0]["podSetInfos"] = [{"nodeSelector": {"pool": "a"}},
                                                  {"nodeSelector": {"pool": "b"}, "labels": {"x": "y"}}]
    service = render_component(aw, 0)
    assert component_gvr(service).resource == "rayservices"
    assert service["metadata"]["namespace"] == "team"
    assert service["metadata"]["ownerReferences"][0]["uid"] == "aw-uid"
    cluster = service["spec"]["rayClusterConfig"]
    head, worker = cluster["headGroupSpec"]["template"], cluster["workerGroupSpecs"][0]["template"]
    assert head["spec"]["nodeSelector"] == {"pool": "a"}
    assert worker["spec"]["nodeSelector"] == {"pool": "b"}
    assert worker["metadata"]["labels"] == {"workload.codeflare.dev/appwrapper": "chat", "x": "y"}
    assert expected_pods(aw) == 3
    assert "nodeSelector" not in aw["spec"]["components"][0]["template"]["spec"]["rayClusterConfig"][
        "headGroupSpec"]["template"]["spec"], "the AppWrapper itself is not modified"


def test_component_the_apiserver_refuses_fails_the_appwrapper(world: World, wait_for: WaitFor) -> None:
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}}
    world.custom.create_namespaced_custom_object(*AW, "default", "appwrappers", {
        "apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper", "metadata": {"name": "odd"},
        "spec": {"suspend": False, "components": [{"template": widget, "podSets": []}]}})
    aw = wait_for(lambda: world.phase("odd") == "Failed" and world.appwrapper("odd"), timeout=10)
    unhealthy = condition(aw, "Unhealthy")
    assert (unhealthy["status"], unhealthy["reason"]) == ("True", "CreateFailed")
    assert unhealthy["message"].startswith("error creating components: ")


def test_the_webhooks_label_the_creator_and_keep_components_immutable(
        sandbox_factory: Callable[..., RunningSandbox]) -> None:
    """AppWrapper's CRD declares no defaults; its mutating webhook labels a new AppWrapper with the
    creator's (sanitised) name and uid, and its validating webhook refuses changing those labels or the
    components (403 "attempt to change immutable field"), as v1.1-v1.2.1 do."""
    sandbox = sandbox_factory(cluster=("appwrapper",))
    world = World(sandbox)
    account = world.core.create_namespaced_service_account("default", {"metadata": {"name": "submitter"}})
    token = world.core.create_namespaced_service_account_token("submitter", "default", {"spec": {}}).status.token
    as_account = kubernetes.client.CustomObjectsApi(sandbox.api_client(token))
    body = wrapped_rayservice("svc")
    body["metadata"]["labels"][USER] = "someone-else"  # the webhook's value wins
    as_account.create_namespaced_custom_object(*AW, "default", "appwrappers", body)
    labels = world.appwrapper("svc")["metadata"]["labels"]
    assert labels[USER] == "system_serviceaccount_default_submitter"
    assert labels[USER_ID] == account.metadata.uid
    assert labels["kueue.x-k8s.io/queue-name"] == "team"

    world.custom.patch_namespaced_custom_object(*AW, "default", "appwrappers", "svc",
                                                {"metadata": {"labels": {"team": "a"}}})  # other labels: fine
    immutable = "Forbidden: attempt to change immutable field"
    for patch, detail in (({"metadata": {"labels": {USER: "me"}}}, f"metadata.labels[{USER}]: {immutable}"),
                          ({"spec": {"components": [{"template": {"kind": "Job"}}]}},  # podSets dropped too
                           f"[spec.components[0].template.raw: {immutable}, spec.components[0].podsets: {immutable}]")):
        with pytest.raises(kubernetes.client.ApiException) as refused:
            world.custom.patch_namespaced_custom_object(*AW, "default", "appwrappers", "svc", patch)
        assert refused.value.status == 403
        assert json.loads(refused.value.body)["message"] == (
            f'admission webhook "vappwrapper.kb.io" denied the request: {detail}')
    world.custom.create_namespaced_custom_object(*AW, "default", "appwrappers", wrapped_rayservice("admin"))
    assert world.appwrapper("admin")["metadata"]["labels"][USER] == "kaiwo-admin"
    assert world.appwrapper("admin")["metadata"]["labels"][USER_ID] == ""
