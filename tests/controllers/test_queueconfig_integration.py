"""The KaiwoQueueConfig controller against the sandbox, through the real `kubernetes` client.

Each test starts a sandbox with the simulated cluster (Kueue included) and runs the operator's
`kaiwoconfig` and `kaiwoqueueconfig` controllers in-process on their own event loop, then acts as
a user would (kubectl-like writes) and polls the API for the outcome under a deadline.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import quote

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from hosts.runtime.controller_host import Operator
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.controllers.config import load_config
from kaiwo_ray.controllers.manager import HostSettings
from kaiwo_ray.controllers.queueconfig import QueueConfigController
from kaiwo_ray.kube.cache import object_key
from kaiwo_sandbox.contracts import GVR, ApiError
from kaiwo_sandbox.testing import RunningSandbox, polling, start_sandbox

T = TypeVar("T")

KAIWO = ("kaiwo.silogen.ai", "v1alpha1", "kaiwoqueueconfigs")
KAIWOCONFIG = ("config.kaiwo.silogen.ai", "v1alpha1", "kaiwoconfigs")
CQ = ("kueue.x-k8s.io", "v1beta2", "clusterqueues")
RF = ("kueue.x-k8s.io", "v1beta2", "resourceflavors")
WPC = ("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses")
TOPO = ("kueue.x-k8s.io", "v1beta1", "topologies")
LQ = ("kueue.x-k8s.io", "v1beta2", "localqueues")
MANAGED = {"kaiwo.silogen.ai/managed-by": "kaiwo-ray"}
WRITE_VERBS = ("create", "update", "patch", "delete")
GI = 1 << 30


# Poll under a deadline: the one polling loop is kaiwo_sandbox.testing.eventually.
wait_for = polling(timeout=15.0, interval=0.02)


class Env:
    """A sandbox plus the two controllers on a private event loop, and API helpers."""

    def __init__(self, sb: RunningSandbox) -> None:
        self.sb = sb
        api = sb.api_client()
        self.custom = kubernetes.client.CustomObjectsApi(api)
        self.core = kubernetes.client.CoreV1Api(api)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="operator", daemon=True)
        self.thread.start()
        self.operator = Operator(["kaiwoconfig", "kaiwoqueueconfig"],
                                 HostSettings(kubeconfig=str(sb.kubeconfig_path), lease=False))
        self.run(self.operator.start())

    def run(self, coro: Any, timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def controller(self) -> QueueConfigController:
        controller = self.operator.host("kaiwoqueueconfig").controller
        assert isinstance(controller, QueueConfigController)
        return controller

    def stop(self) -> None:
        try:
            self.run(self.operator.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)

    # -- reads --------------------------------------------------------------------------------

    def get(self, gvr: tuple[str, str, str], name: str, namespace: str | None = None) -> JsonObj | None:
        try:
            if namespace:
                obj: JsonObj = self.custom.get_namespaced_custom_object(*gvr[:2], namespace, gvr[2], name)
            else:
                obj = self.custom.get_cluster_custom_object(*gvr, name)
            return obj
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    def names(self, gvr: tuple[str, str, str]) -> set[str]:
        items = self.custom.list_cluster_custom_object(*gvr)["items"]
        return {item["metadata"]["name"] for item in items}

    def lq_namespaces(self, name: str) -> set[str]:
        items = self.custom.list_cluster_custom_object(*LQ)["items"]
        return {i["metadata"]["namespace"] for i in items
                if i["metadata"]["name"] == name and not i["metadata"].get("deletionTimestamp")}

    def status(self) -> str:
        kqc = self.get(KAIWO, "kaiwo")
        return str(((kqc or {}).get("status") or {}).get("status") or "")

    def events(self, reason: str | None = None, name: str = "kaiwo") -> list[Any]:
        items = self.core.list_namespaced_event("default").items
        return [e for e in items if e.involved_object.name == name and e.involved_object.kind == "KaiwoQueueConfig"
                and (reason is None or e.reason == reason)]

    def writes(self) -> list[tuple[str, str, str]]:
        return [(r.verb, r.resource + (f"/{r.subresource}" if r.subresource else ""), r.name)
                for r in self.sb.audit.records() if r.verb in WRITE_VERBS]

    # -- writes -------------------------------------------------------------------------------

    def set_spec(self, spec: JsonObj) -> None:
        """A user replacing the whole spec (merge patch of `spec` with every list given whole)."""
        current = self.get(KAIWO, "kaiwo")
        assert current is not None
        current["spec"] = spec
        current.pop("status", None)
        self.custom.replace_cluster_custom_object(*KAIWO, "kaiwo", current)

    def served(self) -> dict[str, dict[tuple[str, str], str]]:
        """Every object the controller watches, as the API server lists it: key -> resourceVersion."""
        listed: dict[str, dict[tuple[str, str], str]] = {}
        for resource, informer in self.controller.informers.items():
            query = f"?labelSelector={quote(informer.label_selector)}" if informer.label_selector else ""
            code, _, body = self.sb.http("GET", resource.path(informer.namespace) + query)
            assert code == 200, body
            listed[resource.plural] = {object_key(item): item["metadata"]["resourceVersion"]
                                       for item in json.loads(body)["items"]}
        return listed

    def settle(self, timeout: float = 15.0) -> None:
        """Wait for a positive signal that the controller has handled every change so far: each of
        its caches holds the very resourceVersions the API server lists (every watch event up to now
        has arrived), nothing is queued or running, and nobody wrote while that was checked."""
        controller = self.controller

        async def seen() -> tuple[bool, dict[str, dict[tuple[str, str], str]]]:
            idle = len(controller.queue) == 0 and controller.health()["in_flight"] == 0
            return idle, {r.plural: {object_key(o): o["metadata"]["resourceVersion"] for o in cache}
                          for r, cache in controller.caches.items()}

        def caught_up() -> bool:
            written = len(self.writes())
            served = self.served()
            idle, cached = self.run(seen())
            return idle and cached == served and len(self.writes()) == written

        wait_for(caught_up, timeout, "controller caught up with the API server and idle")

    def resync(self, name: str = "kaiwo") -> None:
        """Reconcile `name` once more, as a periodic resync or a lost-and-found event would."""
        before = self.controller.health()["reconciles"]
        self.loop.call_soon_threadsafe(self.controller.queue.add, ("", name))
        wait_for(lambda: self.controller.health()["reconciles"] > before, message="resync")
        self.settle()


@pytest.fixture
def env_factory() -> Iterator[Callable[..., Env]]:
    made: list[tuple[RunningSandbox, Env | None]] = []

    def make(**kwargs: Any) -> Env:
        sb = start_sandbox(cluster=True, **kwargs)
        made.append((sb, None))
        env = Env(sb)
        made[-1] = (sb, env)
        return env

    yield make
    for sb, env in reversed(made):
        try:
            if env is not None:
                env.stop()
        finally:
            sb.stop()


def _ready(env: Env) -> Callable[[], bool]:
    return lambda: env.status() == "READY"


# Example A's rules applied to the sandbox's default nodes (kaiwo_ray/nodes.py), by hand:
# cpu-epyc-01 64 cpu / 264039152Ki; 2x MI300X 384 cpu / 2375862488Ki, 8 GPUs; H100 224 cpu / 2113531784Ki, 8 GPUs.
def _pool(cpu: int, memory_ki: int) -> tuple[int, int]:
    gib = memory_ki * 1024 // GI
    return int(cpu * 0.9), int(gib * 0.9 * GI)


CPU_POOL = _pool(64, 264039152)
AMD_POOL = _pool(384, 2375862488)
NVIDIA_POOL = _pool(224, 2113531784)
CPU_FLAVOR = f"cpu-only-0gpu-{CPU_POOL[0]}core-{CPU_POOL[1] // GI}gi"
AMD_FLAVOR = f"amd-mi300x-8gpu-{AMD_POOL[0]}core-{AMD_POOL[1] // GI}gi"
NVIDIA_FLAVOR = f"nvidia-nvidiah10080gbhbm3-8gpu-{NVIDIA_POOL[0]}core-{NVIDIA_POOL[1] // GI}gi"


def _quotas(cq: JsonObj) -> dict[str, dict[str, str]]:
    group = cq["spec"]["resourceGroups"][0]
    return {f["name"]: {r["name"]: str(r["nominalQuota"]) for r in f["resources"]} for f in group["flavors"]}


def _owned_by(obj: JsonObj, uid: str) -> bool:
    return any(ref["uid"] == uid and ref.get("controller") for ref in obj["metadata"].get("ownerReferences") or ())


# --- the default KaiwoQueueConfig ------------------------------------------------------------------


def test_default_queue_config_from_the_sandbox_nodes_and_quiet_resync(env_factory: Callable[..., Env]) -> None:
    env = env_factory()
    wait_for(_ready(env), message="KaiwoQueueConfig kaiwo READY")
    kqc = env.get(KAIWO, "kaiwo")
    assert kqc is not None
    uid = kqc["metadata"]["uid"]
    assert CPU_FLAVOR == "cpu-only-0gpu-57core-225gi"  # the hand arithmetic, spelled out once
    assert env.names(RF) == {CPU_FLAVOR, AMD_FLAVOR, NVIDIA_FLAVOR}
    assert env.names(TOPO) == {"default-topology"}
    cq = wait_for(lambda: env.get(CQ, "kaiwo"))
    assert cq["spec"]["cohortName"] == "kaiwo"
    assert cq["spec"]["namespaceSelector"] == {}
    assert cq["spec"]["resourceGroups"][0]["coveredResources"] == ["cpu", "memory", "amd.com/gpu", "nvidia.com/gpu"]
    assert list(_quotas(cq)) == [CPU_FLAVOR, NVIDIA_FLAVOR, AMD_FLAVOR]  # GPU-less, then GPU count, then cores
    assert _quotas(cq)[AMD_FLAVOR] == {"cpu": str(2 * AMD_POOL[0]), "memory": str(2 * AMD_POOL[1]),
                                       "amd.com/gpu": "16", "nvidia.com/gpu": "0"}
    assert _quotas(cq)[NVIDIA_FLAVOR] == {"cpu": str(NVIDIA_POOL[0]), "memory": str(NVIDIA_POOL[1]),
                                          "amd.com/gpu": "0", "nvidia.com/gpu": "8"}
    for gvr, name in ((CQ, "kaiwo"), (RF, AMD_FLAVOR), (TOPO, "default-topology")):
        obj = env.get(gvr, name)
        assert obj is not None and _owned_by(obj, uid), name
        assert obj["metadata"]["labels"] == MANAGED
    flavor = env.get(RF, AMD_FLAVOR)
    assert flavor is not None
    assert flavor["spec"] == {"nodeLabels": {"kaiwo/nodepool": AMD_FLAVOR}, "topologyName": "default-topology"}
    node = env.core.read_node("gpu-amd-mi300x-01")
    assert node.metadata.labels["kaiwo/nodepool"] == AMD_FLAVOR
    assert node.metadata.labels["kaiwo/worker"] == "true"
    assert node.metadata.labels["kaiwo/gpu-model"] == "mi300x"
    assert "kaiwo/gpu-model" not in env.core.read_node("cpu-epyc-01").metadata.labels
    assert env.events("KaiwoQueueConfigClusterQueueCreated")
    created = env.events("KaiwoQueueConfigDefaultCreated")
    assert [e.message for e in created] == ["Created KaiwoQueueConfig kaiwo from the cluster's nodes"]
    assert env.names(LQ) == set()  # no namespaces listed: LocalQueues come lazily with workloads

    env.settle()
    env.sb.audit.clear()
    env.resync()
    assert env.writes() == []


def test_deleting_the_queue_config_recreates_the_default(env_factory: Callable[..., Env]) -> None:
    env = env_factory()
    wait_for(_ready(env))
    old_uid = env.get(KAIWO, "kaiwo")["metadata"]["uid"]  # type: ignore[index]
    env.custom.delete_cluster_custom_object(*KAIWO, "kaiwo")

    def recreated() -> JsonObj | None:
        kqc = env.get(KAIWO, "kaiwo")
        return kqc if kqc and kqc["metadata"]["uid"] != old_uid and env.status() == "READY" else None

    kqc = wait_for(recreated, message="a new KaiwoQueueConfig kaiwo")
    new_uid = kqc["metadata"]["uid"]

    def owned_again() -> bool:
        objs = [env.get(CQ, "kaiwo"), env.get(RF, AMD_FLAVOR), env.get(TOPO, "default-topology")]
        return all(o is not None and _owned_by(o, new_uid) for o in objs)

    wait_for(owned_again, message="Kueue objects owned by the new KaiwoQueueConfig")


def test_startup_topology_labels_only_where_absent(env_factory: Callable[..., Env]) -> None:
    from kaiwo_ray.nodes import default_nodes

    nodes = default_nodes()
    bare = nodes[0]
    bare["metadata"]["labels"] = {k: v for k, v in bare["metadata"]["labels"].items()
                                  if not k.startswith("kaiwo/topology-")}
    env = env_factory(nodes=nodes)
    wait_for(_ready(env))
    labels = env.core.read_node(bare["metadata"]["name"]).metadata.labels
    assert labels["kaiwo/topology-block"] == "block-a"
    assert labels["kaiwo/topology-rack"] == "rack-a"
    kept = env.core.read_node("gpu-amd-mi300x-02").metadata.labels
    assert (kept["kaiwo/topology-block"], kept["kaiwo/topology-rack"]) == ("block-a", "rack-b")


# --- user-defined configurations (Examples B-D) -------------------------------------------------------


def _cq_entry(name: str, flavor: str, cpu: str = "4", namespaces: list[str] | None = None) -> JsonObj:
    entry: JsonObj = {
        "name": name,
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [{
                "coveredResources": ["cpu", "memory"],
                "flavors": [{"name": flavor, "resources": [{"name": "cpu", "nominalQuota": cpu},
                                                           {"name": "memory", "nominalQuota": "8Gi"}]}],
            }],
        },
    }
    if namespaces is not None:
        entry["namespaces"] = namespaces
    return entry


def _namespace(env: Env, name: str) -> None:
    env.core.create_namespace({"metadata": {"name": name}})


def test_example_b_namespaced_local_queues(env_factory: Callable[..., Env]) -> None:
    env = env_factory()
    wait_for(_ready(env))
    # Another tool's objects: upstream would delete them for not being in the spec.
    env.custom.create_cluster_custom_object(*RF, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                                  "metadata": {"name": "other-tool-flavor"}, "spec": {}})
    _namespace(env, "namespace1")
    spec = {"resourceFlavors": [{"name": "foo", "nodeLabels": {"kaiwo/nodepool": "foo"}}],
            "clusterQueues": [_cq_entry("fizz", "foo", namespaces=["namespace1", "namespace2"])]}
    env.set_spec(spec)

    wait_for(lambda: env.status() == "FAILED", message="FAILED while namespace2 is missing")
    wait_for(lambda: env.lq_namespaces("fizz") == {"namespace1"})
    failed = wait_for(lambda: env.events("KaiwoQueueConfigLocalQueueCreateFailed"))
    assert "namespace2" in failed[0].message
    assert env.names(RF) == {"foo", "other-tool-flavor"}  # the default flavors were ours: gone
    assert env.names(CQ) == {"fizz"}
    foo = env.get(RF, "foo")
    assert foo is not None and foo["spec"]["nodeLabels"] == {"kaiwo/nodepool": "foo", "kaiwo/worker": "true"}

    env.settle()
    env.resync()  # a retry of the same failure is not news
    assert len(env.events("KaiwoQueueConfigLocalQueueCreateFailed")) == 1

    _namespace(env, "namespace2")
    wait_for(_ready(env), message="READY once namespace2 exists")
    wait_for(lambda: env.lq_namespaces("fizz") == {"namespace1", "namespace2"})
    cq = env.get(CQ, "fizz")
    lq = env.get(LQ, "fizz", "namespace2")
    assert cq is not None and lq is not None
    assert lq["spec"] == {"clusterQueue": "fizz", "stopPolicy": "None"}  # + Kueue's CRD default
    assert _owned_by(lq, cq["metadata"]["uid"])
    assert lq["metadata"]["labels"] == MANAGED

    spec["clusterQueues"] = [_cq_entry("fizz", "foo", namespaces=["namespace1"])]
    env.set_spec(spec)
    wait_for(lambda: env.lq_namespaces("fizz") == {"namespace1"}, message="LocalQueue of a dropped namespace deleted")

    env.custom.delete_cluster_custom_object(*CQ, "fizz")  # someone deletes our queue by hand
    wait_for(lambda: (cq2 := env.get(CQ, "fizz")) is not None and cq2["metadata"]["uid"] != cq["metadata"]["uid"],
             message="ClusterQueue recreated")
    wait_for(lambda: env.lq_namespaces("fizz") == {"namespace1"}, message="its LocalQueue back")
    wait_for(_ready(env))

    spec["clusterQueues"] = []
    env.set_spec(spec)
    wait_for(lambda: env.names(CQ) == set(), message="ClusterQueue fizz deleted")
    assert "other-tool-flavor" in env.names(RF)


def test_flavor_taints_and_tolerations_reach_the_kueue_resource_flavor(env_factory: Callable[..., Env]) -> None:
    env = env_factory()
    wait_for(_ready(env))
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    toleration = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    env.set_spec({"resourceFlavors": [{"name": "tainted", "nodeLabels": {"kaiwo/nodepool": "tainted"},
                                       "taints": [taint], "tolerations": [toleration]}],
                  "clusterQueues": [_cq_entry("fizz", "tainted")]})
    flavor = wait_for(lambda: (rf := env.get(RF, "tainted")) and rf.get("spec", {}).get("nodeTaints") and rf,
                      message="the ResourceFlavor with its taints")
    assert flavor["spec"]["nodeTaints"] == [taint]
    assert flavor["spec"]["tolerations"] == [toleration]
    wait_for(_ready(env))


def test_an_upstream_era_kaiwoconfig_with_data_works_and_is_warned_about(env_factory: Callable[..., Env]) -> None:
    env = env_factory()
    wait_for(lambda: env.get(KAIWOCONFIG, "kaiwo") is not None, message="KaiwoConfig kaiwo created")
    config = env.get(KAIWOCONFIG, "kaiwo")
    assert config is not None
    config["spec"] = {"data": {"defaultStorageClass": "rwx-nfs"}}
    env.custom.replace_cluster_custom_object(*KAIWOCONFIG, "kaiwo", config)

    def warnings() -> list[Any]:
        return [e for e in env.core.list_namespaced_event("default").items
                if e.involved_object.kind == "KaiwoConfig" and e.reason == "DeprecatedField"]

    found = wait_for(warnings, message="a DeprecatedField Warning on the KaiwoConfig")
    assert found[0].type == "Warning" and "spec.storage" in found[0].message
    storage = load_config([env.get(KAIWOCONFIG, "kaiwo")]).storage  # what every controller reads
    assert storage.default_storage_class == "rwx-nfs"
    controller = env.operator.host("kaiwoconfig").controller
    assert controller is not None
    before = controller.health()["reconciles"]
    # a label is no new generation: reconciled again, no second Warning
    env.custom.patch_cluster_custom_object(*KAIWOCONFIG, "kaiwo", {"metadata": {"labels": {"touched": "yes"}}})
    wait_for(lambda: controller.health()["reconciles"] > before and controller.health()["in_flight"] == 0,
             message="the KaiwoConfig reconciled again")
    assert len(warnings()) == 1


def test_default_cluster_queue_name_from_the_operators_environment(env_factory: Callable[..., Env],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Seed 001: a workload without `clusterQueue` goes to the queue DEFAULT_CLUSTER_QUEUE_NAME names. The
    KaiwoConfig the operator creates says so, and the default KaiwoQueueConfig builds that queue."""
    monkeypatch.setenv("DEFAULT_CLUSTER_QUEUE_NAME", "research")
    env = env_factory()
    config = wait_for(lambda: env.get(KAIWOCONFIG, "kaiwo"), message="KaiwoConfig kaiwo created")
    assert config["spec"]["defaultClusterQueueName"] == "research"
    assert load_config([config]).default_cluster_queue_name == "research"
    assert load_config([]).default_cluster_queue_name == "research"  # no KaiwoConfig yet: the same default
    wait_for(lambda: env.names(CQ) == {"research"}, message="the default ClusterQueue named research")


def test_example_c_priority_classes_and_a_user_queue_edit(env_factory: Callable[..., Env]) -> None:
    env = env_factory()
    wait_for(_ready(env))
    spec: JsonObj = {
        "resourceFlavors": [{"name": "default"}],
        "workloadPriorityClasses": [
            {"metadata": {"name": "high-priority"}, "value": 1000, "description": "High priority class"},
            {"metadata": {"name": "low-priority"}, "value": 10},
        ],
        "clusterQueues": [_cq_entry("workload-priority-class-test-queue", "default", cpu="500m")],
    }
    env.set_spec(spec)
    wait_for(lambda: env.names(WPC) == {"high-priority", "low-priority"})
    wait_for(lambda: env.names(CQ) == {"workload-priority-class-test-queue"})
    default = env.get(RF, "default")
    assert default is not None and default["spec"] == {"nodeLabels": {"kaiwo/worker": "true"}}
    high = env.get(WPC, "high-priority")
    assert high is not None and (high["value"], high["description"]) == (1000, "High priority class")
    wait_for(_ready(env))

    spec["workloadPriorityClasses"][1]["value"] = 20
    env.set_spec(spec)
    wait_for(lambda: (env.get(WPC, "low-priority") or {}).get("value") == 20, message="value updated")

    env.settle()
    env.sb.audit.clear()
    spec["workloadPriorityClasses"][0]["description"] = "changed"
    before = env.controller.health()["reconciles"]
    env.set_spec(spec)
    wait_for(lambda: env.controller.health()["reconciles"] > before)
    env.settle()
    assert [w for w in env.writes() if w[1] == "workloadpriorityclasses"] == []  # upstream: value only

    # A user edits the queue's quota in the KaiwoQueueConfig: it reaches Kueue.
    spec["clusterQueues"] = [_cq_entry("workload-priority-class-test-queue", "default", cpu="2")]
    env.set_spec(spec)

    def quota() -> str:
        cq = env.get(CQ, "workload-priority-class-test-queue") or {}
        return str(_quotas(cq)["default"]["cpu"]) if cq else ""

    wait_for(lambda: quota() == "2", message="quota edit propagated")
    # Someone edits the Kueue object directly: the KaiwoQueueConfig wins.
    cq = env.get(CQ, "workload-priority-class-test-queue")
    assert cq is not None
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "99"
    cq.pop("status", None)
    env.custom.replace_cluster_custom_object(*CQ, "workload-priority-class-test-queue", cq)
    wait_for(lambda: quota() == "2", message="direct edit reverted")


def _immutable_topology_flavors(operation: str, gvr: GVR, obj: JsonObj, old: JsonObj | None, user: str) -> None:
    """Kueue's webhooks, as far as this test needs them: a flavor's topologyName cannot change, and
    the flavor under test carries the in-use finalizer (which Kueue would drop once no queue uses it)."""
    if gvr.resource != "resourceflavors":
        return
    if operation == "CREATE" and obj["metadata"].get("name") == "topo-flavor":
        meta = obj.setdefault("metadata", {})
        meta["finalizers"] = [*(meta.get("finalizers") or []), "kueue.x-k8s.io/resource-in-use"]
    elif old is not None and (obj.get("spec") or {}).get("topologyName") != (old.get("spec") or {}).get("topologyName"):
        name = str(obj["metadata"]["name"])
        raise ApiError.invalid("ResourceFlavor", "kueue.x-k8s.io", name, [
            {"reason": "FieldValueInvalid", "field": "spec.topologyName", "message": "field is immutable"}])


def test_example_d_topology_flavor_is_recreated(env_factory: Callable[..., Env]) -> None:
    env = env_factory()
    env.sb.call(env.sb.store.add_admission_hook, _immutable_topology_flavors)
    wait_for(_ready(env))
    levels = [{"nodeLabel": "kaiwo/topology-block"}, {"nodeLabel": "kaiwo/topology-rack"},
              {"nodeLabel": "kubernetes.io/hostname"}]
    spec: JsonObj = {
        "topologies": [{"metadata": {"name": "test-topo"}, "spec": {"levels": levels}}],
        "resourceFlavors": [
            {"name": "no-topo-flavor", "nodeLabels": {"kaiwo/nodepool": "no-topo"}},
            {"name": "topo-flavor", "nodeLabels": {"kaiwo/nodepool": "topo"}, "topologyName": "test-topo"},
        ],
    }
    env.set_spec(spec)
    wait_for(lambda: env.names(TOPO) == {"test-topo"} and env.names(RF) == {"no-topo-flavor", "topo-flavor"})
    topo = env.get(RF, "topo-flavor")
    assert topo is not None
    assert topo["spec"] == {"nodeLabels": {"kaiwo/nodepool": "topo"}, "topologyName": "test-topo"}
    assert env.get(RF, "no-topo-flavor")["spec"]["nodeLabels"] == {  # type: ignore[index]
        "kaiwo/nodepool": "no-topo", "kaiwo/worker": "true"}
    wait_for(_ready(env))
    old_uid = topo["metadata"]["uid"]

    spec["resourceFlavors"][1].pop("topologyName")
    env.set_spec(spec)

    def recreated() -> JsonObj | None:
        flavor = env.get(RF, "topo-flavor")
        return flavor if flavor and flavor["metadata"]["uid"] != old_uid else None

    flavor = wait_for(recreated, message="topo-flavor recreated")
    assert flavor["spec"] == {"nodeLabels": {"kaiwo/nodepool": "topo", "kaiwo/worker": "true"}}
    wait_for(lambda: env.events("KaiwoQueueConfigResourceFlavorRecreated"))
    wait_for(_ready(env))


# --- ownership -----------------------------------------------------------------------------------------


def test_a_colliding_object_of_another_tool_survives(env_factory: Callable[..., Env]) -> None:
    env = env_factory()
    wait_for(_ready(env))
    theirs = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "shared"},
              "spec": {"namespaceSelector": {}, "resourceGroups": []}}
    env.custom.create_cluster_custom_object(*CQ, theirs)
    spec = {"resourceFlavors": [{"name": "foo"}], "clusterQueues": [_cq_entry("shared", "foo")]}
    env.set_spec(spec)
    wait_for(lambda: env.status() == "FAILED", message="FAILED on the name collision")
    event = wait_for(lambda: env.events("KaiwoQueueConfigClusterQueueCreateFailed"))[0]
    assert "not managed by KaiwoQueueConfig" in event.message
    env.settle()
    survivor = env.get(CQ, "shared")
    assert survivor is not None
    assert survivor["spec"]["resourceGroups"] == [] and not survivor["metadata"].get("ownerReferences")

    spec["clusterQueues"] = []  # the colliding entry removed: we still leave their queue alone
    env.set_spec(spec)
    wait_for(_ready(env))
    assert env.get(CQ, "shared") is not None


def test_other_names_and_invalid_specs_fail_once(env_factory: Callable[..., Env]) -> None:
    env = env_factory()
    wait_for(_ready(env))
    env.custom.create_cluster_custom_object(*KAIWO, {"apiVersion": "kaiwo.silogen.ai/v1alpha1",
                                                     "kind": "KaiwoQueueConfig", "metadata": {"name": "other"},
                                                     "spec": {}})

    def other_status() -> str:
        return str(((env.get(KAIWO, "other") or {}).get("status") or {}).get("status") or "")

    wait_for(lambda: other_status() == "FAILED")
    event = wait_for(lambda: env.events("KaiwoQueueConfigInvalidName", name="other"))[0]
    assert event.message == "only a KaiwoQueueConfig named 'kaiwo' is allowed"
    env.settle()
    env.sb.audit.clear()
    env.resync("other")
    assert env.writes() == []  # no second status write, no second event, no retry loop
    assert len(env.events("KaiwoQueueConfigInvalidName", name="other")) == 1

    # A spec the CRD accepts but Kueue would not: a flavor without a quota for every covered resource.
    bad = _cq_entry("q", "foo")
    bad["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()
    env.set_spec({"resourceFlavors": [{"name": "foo"}], "clusterQueues": [bad]})
    wait_for(lambda: env.status() == "FAILED", message="FAILED on an invalid spec")
    event = wait_for(lambda: env.events("KaiwoQueueConfigInvalidSpec"))[0]
    assert "coveredResources" in event.message
    assert env.controller.health()["errors"] == 0  # reported, not crashed


# --- dynamic mode -------------------------------------------------------------------------------------


def test_dynamic_mode_follows_a_cordon(env_factory: Callable[..., Env]) -> None:
    env = env_factory()
    wait_for(_ready(env))
    config = wait_for(lambda: env.custom.list_cluster_custom_object(*KAIWOCONFIG)["items"])[0]
    env.custom.patch_cluster_custom_object(*KAIWOCONFIG, config["metadata"]["name"],
                                           {"spec": {"dynamicallyUpdateDefaultClusterQueue": True}})

    def amd_gpus() -> str:
        cq = env.get(CQ, "kaiwo")
        return _quotas(cq)[AMD_FLAVOR]["amd.com/gpu"] if cq else ""

    assert amd_gpus() == "16"
    env.core.patch_node("gpu-amd-mi300x-02", {"spec": {"unschedulable": True}})
    wait_for(lambda: amd_gpus() == "8", message="quota down to one MI300X node")
    assert env.events("KaiwoQueueConfigDefaultUpdated")
    kqc = env.get(KAIWO, "kaiwo")
    assert kqc is not None
    entry = next(q for q in kqc["spec"]["clusterQueues"] if q["name"] == "kaiwo")
    assert _quotas(entry)[AMD_FLAVOR]["amd.com/gpu"] == "8"  # the KaiwoQueueConfig itself follows the nodes
    env.core.patch_node("gpu-amd-mi300x-02", {"spec": {"unschedulable": False}})
    wait_for(lambda: amd_gpus() == "16", message="quota back after uncordon")
    wait_for(_ready(env))

    env.settle()
    env.sb.audit.clear()
    # A heartbeat-like status change is no trigger and certainly no write.
    env.core.patch_node_status("gpu-amd-mi300x-01", {"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok",
         "lastHeartbeatTime": "2026-02-01T00:00:00Z"}]}})
    env.settle()
    env.resync()  # re-derived from the nodes, equal to what is stored: nothing to write
    assert env.writes() == [("patch", "nodes/status", "gpu-amd-mi300x-01")]  # the test's own write only


def test_without_the_topology_api_flavors_lose_their_topology() -> None:
    """Kueue without the Topology kind (upstream: "no matches for kind"): no Topologies are synced and
    every flavor is written without `topologyName`, so it gets `kaiwo/worker` instead."""
    sb = start_sandbox(cluster=True)
    try:
        extensions = kubernetes.client.ApiextensionsV1Api(sb.api_client())
        extensions.delete_custom_resource_definition("topologies.kueue.x-k8s.io")
        wait_for(lambda: "topologies.kueue.x-k8s.io" not in {
            c.metadata.name for c in extensions.list_custom_resource_definition().items})
        env = Env(sb)
        try:
            wait_for(_ready(env))
            assert env.controller.topology_api_available is False
            flavor = env.get(RF, AMD_FLAVOR)
            assert flavor is not None
            assert flavor["spec"] == {"nodeLabels": {"kaiwo/nodepool": AMD_FLAVOR, "kaiwo/worker": "true"}}
        finally:
            env.stop()
    finally:
        sb.stop()


def test_converges_through_api_faults_and_watch_cuts(env_factory: Callable[..., Env]) -> None:
    env = env_factory()
    wait_for(_ready(env))
    for name in ("namespace1", "namespace2"):
        _namespace(env, name)
    faults = env.sb.faults
    faults.seed(7)
    kinds = ["resourceflavors", "clusterqueues", "localqueues", "workloadpriorityclasses", "topologies", "events"]
    faults.fail(code=500, verbs=["create", "update", "patch", "delete"], resources=kinds, probability=0.1)
    faults.fail(code=429, verbs=["create", "update", "patch", "delete"], resources=kinds, probability=0.1)
    faults.fail(code=500, verbs=["patch"], resources=["kaiwoqueueconfigs"], probability=0.2)
    spec = {
        "resourceFlavors": [{"name": "foo"}, {"name": "bar", "nodeLabels": {"kaiwo/nodepool": "bar"}}],
        "workloadPriorityClasses": [{"metadata": {"name": "high"}, "value": 100}],
        "clusterQueues": [_cq_entry("fizz", "foo", namespaces=["namespace1", "namespace2"]), _cq_entry("buzz", "bar")],
    }
    env.set_spec(spec)
    env.sb.faults.cut_watches(after_events=2)
    env.sb.faults.expire_next(2)

    def converged() -> bool:
        return (env.status() == "READY" and env.names(RF) == {"foo", "bar"} and env.names(CQ) == {"fizz", "buzz"}
                and env.names(WPC) == {"high"} and env.lq_namespaces("fizz") == {"namespace1", "namespace2"})

    wait_for(converged, timeout=40, message="converged under faults")
    assert sum(rule.hits for rule in faults.rules()) > 0  # the faults really hit the controller
    faults.clear()
    env.settle()
    kqc_uid = env.get(KAIWO, "kaiwo")["metadata"]["uid"]  # type: ignore[index]
    for gvr in (RF, CQ, WPC, TOPO):
        for item in env.custom.list_cluster_custom_object(*gvr)["items"]:
            assert _owned_by(item, kqc_uid), item["metadata"]["name"]  # nothing orphaned, nothing foreign
    assert not [e for e in env.events() if e.type == "Warning"]  # transient errors are retried, not reported


def test_gpu_taints_follow_a_live_kaiwoconfig_change(env_factory: Callable[..., Env]) -> None:
    env = env_factory()
    wait_for(_ready(env))
    config = wait_for(lambda: env.custom.list_cluster_custom_object(*KAIWOCONFIG)["items"])[0]
    env.custom.patch_cluster_custom_object(*KAIWOCONFIG, config["metadata"]["name"],
                                           {"spec": {"nodes": {"addTaintsToGpuNodes": True}}})

    def taints(node: str) -> list[tuple[str, str]]:
        return [(t.key, t.effect) for t in env.core.read_node(node).spec.taints or []]

    gpu_taint = ("kaiwo.silogen.ai/gpu", "NoSchedule")
    for node in ("gpu-amd-mi300x-01", "gpu-amd-mi300x-02", "gpu-nvidia-h100-01"):
        wait_for(lambda node=node: gpu_taint in taints(node), message=f"{node} tainted")  # type: ignore[misc]
    assert gpu_taint not in taints("cpu-epyc-01")
    env.settle()
    env.sb.audit.clear()
    env.resync()
    assert env.writes() == []  # tainted once; a taint already there is not added again
