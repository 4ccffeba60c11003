"""The operator's end-to-end scenarios (issue #5 item 6), written against the Kubernetes API only so
each runs unchanged on the sandbox (operator in-process) and on a real cluster (`kaiwo-ray up`).

Every scenario works in namespaces of its own and deletes what it made; the two that touch cluster
singletons (KaiwoConfig, the examples' KaiwoQueueConfig) put them back. Run times are `sleep N`
entrypoints: the sandbox scales them by its time factor, a real cluster runs them for real.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_support import (
    CONFIG_API,
    KAIWO_API,
    TERMINAL_PHASES,
    JsonObj,
    Target,
    condition,
    owned_by,
    phase,
    recording,
    wait_for,
)

from kaiwo_ray.api.quantity import parse_quantity

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAME_LABEL = "kaiwo.silogen.ai/name"
RUN_ID_LABEL = "kaiwo.silogen.ai/run-id"
FINALIZER = "kaiwo.silogen.ai/finalizer"
GPU_KEYS = {"amd": "amd.com/gpu", "nvidia": "nvidia.com/gpu"}
GI = 1 << 30


def kaiwo_job(name: str, namespace: str, **spec: Any) -> JsonObj:
    body: JsonObj = {"user": "e2e@example.com", "image": "busybox:1.36", "entrypoint": "sleep 20"}
    body.update(spec)
    return {"apiVersion": KAIWO_API, "kind": "KaiwoJob", "metadata": {"name": name, "namespace": namespace},
            "spec": body}


def kaiwo_service(name: str, namespace: str, **spec: Any) -> JsonObj:
    body: JsonObj = {"user": "e2e@example.com", "image": "nginx:1.27", "entrypoint": "sleep infinity",
                     "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                   "limits": {"cpu": "200m", "memory": "128Mi"}}}
    body.update(spec)
    return {"apiVersion": KAIWO_API, "kind": "KaiwoService",
            "metadata": {"name": name, "namespace": namespace}, "spec": body}


def wait_phase(target: Target, kind: str, name: str, namespace: str, wanted: str | set[str],
               timeout: float | None = None) -> JsonObj:
    """Wait until the CR's phase is `wanted`; fail early (with the status) if it ended elsewhere."""
    accepted = {wanted} if isinstance(wanted, str) else wanted

    def reached() -> JsonObj | None:
        obj = target.kube.get(KAIWO_API, kind, name, namespace)
        seen = phase(obj)
        if seen in accepted:
            return obj
        if seen in TERMINAL_PHASES:
            pytest.fail(f"{kind} {namespace}/{name} ended {seen}, expected {sorted(accepted)}: {obj!r}")
        return None

    try:
        found = wait_for(reached, timeout or target.timeout, f"{kind} {namespace}/{name} to be {sorted(accepted)}")
    except pytest.fail.Exception as err:
        live = target.kube.get(KAIWO_API, kind, name, namespace)
        pytest.fail(f"{err}; status now: {(live or {}).get('status')!r}")
    return found


def wait_gone(target: Target, kind: str, name: str, namespace: str) -> None:
    wait_for(lambda: target.kube.get(KAIWO_API, kind, name, namespace) is None, target.timeout,
             f"{kind} {namespace}/{name} to be gone")


def delete_and_wait_gone(target: Target, kind: str, name: str, namespace: str) -> None:
    target.kube.delete(KAIWO_API, kind, name, namespace)
    wait_gone(target, kind, name, namespace)


def wait_no_children(target: Target, namespace: str, uid: str, owner: str) -> None:
    wait_for(lambda: not children_of(target, namespace, uid), target.timeout, f"no children of {owner} left")


def owned_children(target: Target, namespace: str, uid: str) -> list[str]:
    """The objects in `namespace` whose controller owner is `uid`."""
    return [f"{kind}/{o['metadata']['name']}"
            for api_version, kind in (("batch/v1", "Job"), ("apps/v1", "Deployment"), ("ray.io/v1", "RayJob"),
                                      ("workload.codeflare.dev/v1beta2", "AppWrapper"),
                                      ("v1", "PersistentVolumeClaim"), ("v1", "ConfigMap"))
            for o in target.kube.items(api_version, kind, namespace) if owned_by(o, uid)]


def children_of(target: Target, namespace: str, uid: str) -> list[str]:
    """Every object in `namespace` still owned by `uid` or labelled with it (pods)."""
    return owned_children(target, namespace, uid) + [
        f"Pod/{o['metadata']['name']}"
        for o in target.kube.items("v1", "Pod", namespace, label_selector=f"{RUN_ID_LABEL}={uid}")]


# -- examples ------------------------------------------------------------------------------------


def load_example(filename: str) -> JsonObj:
    docs = [d for d in yaml.safe_load_all((EXAMPLES / filename).read_text()) if d]
    assert len(docs) == 1, f"{filename}: expected one object"
    return dict(docs[0])


def expected_examples() -> dict[str, JsonObj]:
    table: dict[str, JsonObj] = yaml.safe_load((EXAMPLES.parent / "tests" / "examples_expected.yaml").read_text())
    return table


SINGLETON_KINDS = ("KaiwoConfig", "KaiwoQueueConfig")
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
EXAMPLE_SECRETS = {"s3-credentials": {"access-key-id": "e2e", "secret-access-key": "e2e"},
                   "hf-token": {"token": "e2e"}, "inference-api-config": {"config.yaml": "endpoint: none"}}


def apply_singleton(target: Target, obj: JsonObj) -> JsonObj:
    """Make the live cluster singleton's spec equal the manifest's (create it when absent)."""
    live = target.kube.get(obj["apiVersion"], obj["kind"], obj["metadata"]["name"])
    if live is None:
        return target.kube.create(obj)
    live = copy.deepcopy(live)
    live["spec"] = obj.get("spec") or {}
    live.pop("status", None)
    res = target.kube.resource(obj["apiVersion"], obj["kind"])
    replaced: JsonObj = res.replace(body=live).to_dict()
    return replaced


def scenario_examples(target: Target, include_singletons: bool,
                      pod_security: str | None = None) -> tuple[str, dict[str, str]]:
    """Apply every example (singletons first, then the rest) and wait for each expected final phase;
    returns the namespace used and the phase each reached ("" for kinds without one). On a real cluster the workloads go to
    a fresh namespace and the cluster's own singletons are put back afterwards. `pod_security`: the
    Pod Security level that namespace enforces while the examples run (label `pod-security.kubernetes.io/enforce`)."""
    table = expected_examples()
    namespace = "default" if target.sandbox else target.namespace("e2e-examples")
    if pod_security is not None:
        target.kube.patch("v1", "Namespace", namespace, {"metadata": {"labels": {ENFORCE_LABEL: pod_security}}})
    for secret, data in EXAMPLE_SECRETS.items():
        target.kube.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret},
                            "stringData": data}, namespace)
    manifests: list[tuple[str, JsonObj]] = []
    for filename in sorted(table, key=lambda f: (table[f]["kind"] not in SINGLETON_KINDS, f)):
        entry = table[filename]
        if entry["kind"] in SINGLETON_KINDS and not include_singletons:
            continue
        obj = load_example(filename)
        assert obj["kind"] == entry["kind"] and obj["metadata"]["name"] == entry["name"], filename
        if entry["namespace"] is not None:
            obj["metadata"]["namespace"] = namespace
        manifests.append((filename, obj))
    singletons = [obj for _, obj in manifests if obj["kind"] in SINGLETON_KINDS]
    originals = [o for o in (target.kube.get(s["apiVersion"], s["kind"], s["metadata"]["name"]) for s in singletons)
                 if o is not None]
    try:
        for _, obj in manifests:
            if obj["kind"] in SINGLETON_KINDS:
                apply_singleton(target, obj)
            else:
                target.kube.create(obj)
        return namespace, {filename: wait_example(target, filename, obj, table[filename]["phase"])
                           for filename, obj in manifests}
    finally:
        if not target.sandbox:
            for original in originals:
                apply_singleton(target, original)
                if original["kind"] == "KaiwoQueueConfig":
                    spec: JsonObj = original.get("spec") or {}
                    wait_for(lambda: kueue_serves(target, spec), target.timeout,  # noqa: B023 (used at once)
                             "Kueue to serve the restored KaiwoQueueConfig again")


def _quotas(cq_spec: JsonObj) -> dict[tuple[str, str], Decimal]:
    return {(flavor["name"], res["name"]): parse_quantity(res.get("nominalQuota", 0))
            for group in cq_spec.get("resourceGroups") or () for flavor in group.get("flavors") or ()
            for res in flavor.get("resources") or ()}


def kueue_serves(target: Target, queue_config_spec: JsonObj) -> bool:
    """Every ClusterQueue of a KaiwoQueueConfig spec exists with its quotas (and no other one does)."""
    wanted = {q["name"]: _quotas(q.get("spec") or {}) for q in queue_config_spec.get("clusterQueues") or ()}
    live = {cq["metadata"]["name"]: _quotas(cq.get("spec") or {})
            for cq in target.kube.items(target.kube.kueue_api, "ClusterQueue")
            if not cq["metadata"].get("deletionTimestamp")}
    return live == wanted


def scenario_delete_examples(target: Target, namespace: str, *, earlier_version: bool = False) -> None:
    """Delete every Kaiwo workload in `namespace` (the examples) and wait until they and everything
    they made — storage, download Jobs, Ray clusters, pods, Kueue Workloads — are gone.

    `earlier_version`: first give each the finalizer an earlier version put on every workload (an
    upgraded cluster's workloads): the operator then deletes their children itself, of every kind the
    examples make, and releases each workload only once nothing of it is left."""
    owners = [o for kind in ("KaiwoJob", "KaiwoService") for o in target.kube.items(KAIWO_API, kind, namespace)]
    if earlier_version:
        for obj in owners:
            target.kube.patch(KAIWO_API, obj["kind"], obj["metadata"]["name"], {"metadata": {
                "finalizers": [*(obj["metadata"].get("finalizers") or []), FINALIZER]}}, namespace)
    for obj in owners:
        target.kube.delete(KAIWO_API, obj["kind"], obj["metadata"]["name"], namespace)
    for obj in owners:
        wait_gone(target, obj["kind"], obj["metadata"]["name"], namespace)
        if earlier_version:  # released only after its children: none outlives it, even for a moment
            left = owned_children(target, namespace, obj["metadata"]["uid"])
            assert left == [], f"{obj['metadata']['name']} released before its children {left}"
        wait_no_children(target, namespace, obj["metadata"]["uid"], obj["metadata"]["name"])

    def leftovers() -> list[str]:
        left = [f"{kind}/{o['metadata']['name']}"
                for api_version, kind in (("ray.io/v1", "RayCluster"), ("ray.io/v1", "RayService"),
                                          (target.kube.kueue_api, "Workload"))
                for o in target.kube.items(api_version, kind, namespace)]
        return left + [f"Pod/{o['metadata']['name']}"
                       for o in target.kube.items("v1", "Pod", namespace, label_selector=NAME_LABEL)]

    wait_for(lambda: not leftovers(), target.timeout, f"nothing left in {namespace} (had {leftovers()})")


def wait_example(target: Target, filename: str, obj: JsonObj, wanted: str | None) -> str:
    meta = obj["metadata"]
    if wanted is None:
        assert target.kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")), filename
        return ""

    def at_phase() -> str:
        live = target.kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        seen = phase(live)
        if seen in TERMINAL_PHASES | {"ERROR"} and seen != wanted:
            pytest.fail(f"{filename}: {obj['kind']} ended {seen}, expected {wanted}: {live!r}")
        return seen if seen == wanted else ""

    try:
        reached: str = wait_for(at_phase, target.timeout, f"{filename} to reach {wanted}")
    except pytest.fail.Exception:
        live = target.kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        pytest.fail(f"{filename} did not reach {wanted} within {target.timeout:.0f}s; "
                    f"status now: {(live or {}).get('status')!r}")
    return reached


# -- queueing through Kueue ------------------------------------------------------------------------


def _gpu_quota(target: Target, queue: str, resource: str) -> int:
    cq = target.kube.get(target.kube.kueue_api, "ClusterQueue", queue)
    total = 0
    for group in ((cq or {}).get("spec") or {}).get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            for res in flavor.get("resources") or ():
                if res.get("name") == resource:
                    total += int(str(res.get("nominalQuota", 0)))
    return total


def gpu_job_size(target: Target, queue: str = "kaiwo") -> tuple[str, int]:
    """A (vendor, gpus) for which the queue has quota for exactly one such job at a time and one node
    can run it; skip when the cluster offers none."""
    nodes = target.kube.items("v1", "Node")
    for vendor, key in GPU_KEYS.items():
        per_node = max((int(str((n.get("status") or {}).get("allocatable", {}).get(key, 0))) for n in nodes),
                       default=0)
        quota = _gpu_quota(target, queue, key)
        gpus = min(per_node, quota)
        if gpus > 0 and quota < 2 * gpus:
            return vendor, gpus
    pytest.skip(f"no GPU vendor whose quota in ClusterQueue {queue!r} fits exactly one node-sized job")


def scenario_queueing(target: Target) -> tuple[list[str], list[str]]:
    """Two GPU jobs, quota for one: the second waits PENDING while the first runs, then both
    complete. Returns both status histories as seen by a watch."""
    vendor, gpus = gpu_job_size(target)
    namespace = target.namespace("e2e-queue")
    with recording(target.kube, KAIWO_API, "KaiwoJob", namespace) as history:
        target.kube.create(kaiwo_job("first", namespace, gpus=gpus, gpuVendor=vendor, entrypoint="sleep 60"))
        wait_phase(target, "KaiwoJob", "first", namespace, "RUNNING")
        target.kube.create(kaiwo_job("second", namespace, gpus=gpus, gpuVendor=vendor, entrypoint="sleep 20"))

        def first_running_second_pending() -> bool:
            first = target.kube.get(KAIWO_API, "KaiwoJob", "first", namespace)
            second = target.kube.get(KAIWO_API, "KaiwoJob", "second", namespace)
            return phase(first) == "RUNNING" and phase(second) == "PENDING"

        wait_for(first_running_second_pending, target.timeout, "second PENDING while first RUNNING")
        second = target.kube.get(KAIWO_API, "KaiwoJob", "second", namespace)
        admitted = condition(second, "Admitted")
        assert admitted is not None and admitted["status"] == "False", second
        wait_phase(target, "KaiwoJob", "first", namespace, "COMPLETE")
        wait_phase(target, "KaiwoJob", "second", namespace, "COMPLETE")
        wait_for(lambda: history.of("second")[-1:] == ["COMPLETE"], target.timeout, "watch saw second COMPLETE")
        return history.of("first"), history.of("second")


def is_subsequence(wanted: list[str], seen: list[str]) -> bool:
    it = iter(seen)
    return all(any(s == w for s in it) for w in wanted)


# -- spec updates ------------------------------------------------------------------------------------


def scenario_job_updates(target: Target) -> None:
    """A label added to a running KaiwoJob reaches its Job; an entrypoint change (the Job's pod
    template cannot change) is reported with a SpecChangeNotPropagated event and nothing breaks."""
    namespace = target.namespace("e2e-update")
    target.kube.create(kaiwo_job("labelled", namespace, entrypoint="sleep 3600"))
    wait_phase(target, "KaiwoJob", "labelled", namespace, "RUNNING")
    target.kube.patch(KAIWO_API, "KaiwoJob", "labelled", {"metadata": {"labels": {"team": "e2e-blue"}}}, namespace)

    def job_labelled() -> bool:
        job = target.kube.get("batch/v1", "Job", "labelled", namespace)
        labels: dict[str, str] = ((job or {}).get("metadata") or {}).get("labels") or {}
        return labels.get("team") == "e2e-blue"

    wait_for(job_labelled, target.timeout, "the new label on the Job")
    before = target.kube.get("batch/v1", "Job", "labelled", namespace)
    assert before is not None
    target.kube.patch(KAIWO_API, "KaiwoJob", "labelled", {"spec": {"entrypoint": "sleep 7200"}}, namespace)
    wait_for(lambda: "SpecChangeNotPropagated" in target.kube.event_reasons(namespace, "labelled", "KaiwoJob"),
             target.timeout, "a SpecChangeNotPropagated event")
    after = target.kube.get("batch/v1", "Job", "labelled", namespace)
    assert after is not None
    assert after["spec"]["template"] == before["spec"]["template"], "a frozen field changed"
    assert after["metadata"]["uid"] == before["metadata"]["uid"], "the Job was recreated"
    assert phase(target.kube.get(KAIWO_API, "KaiwoJob", "labelled", namespace)) == "RUNNING"
    delete_and_wait_gone(target, "KaiwoJob", "labelled", namespace)


def scenario_service_updates(target: Target) -> None:
    """replicas and image of a KaiwoService reach its Deployment, which rolls out and runs again."""
    namespace = target.namespace("e2e-svc")
    target.kube.create(kaiwo_service("web", namespace, replicas=1))
    wait_phase(target, "KaiwoService", "web", namespace, "RUNNING")
    target.kube.patch(KAIWO_API, "KaiwoService", "web", {"spec": {"replicas": 2, "image": "nginx:1.28"}}, namespace)

    def deployment_updated() -> JsonObj | None:
        deployment = target.kube.get("apps/v1", "Deployment", "web", namespace)
        if deployment is None:
            return None
        spec = deployment["spec"]
        images = [c.get("image") for c in spec["template"]["spec"]["containers"]]
        return deployment if spec.get("replicas") == 2 and images == ["nginx:1.28"] else None

    wait_for(deployment_updated, target.timeout, "replicas 2 and image nginx:1.28 on the Deployment")

    def service_running_with_two() -> bool:
        deployment = target.kube.get("apps/v1", "Deployment", "web", namespace) or {}
        available = (deployment.get("status") or {}).get("availableReplicas") or 0
        obj = target.kube.get(KAIWO_API, "KaiwoService", "web", namespace)
        return available == 2 and phase(obj) == "RUNNING"

    wait_for(service_running_with_two, target.timeout, "KaiwoService RUNNING with 2 available replicas")
    delete_and_wait_gone(target, "KaiwoService", "web", namespace)


# -- deletion -------------------------------------------------------------------------------------


def scenario_deletion(target: Target) -> None:
    """Deleting a running KaiwoJob and KaiwoService removes the CRs at once (no finalizer, as
    upstream), and the garbage collector their children."""
    namespace = target.namespace("e2e-delete")
    target.kube.create(kaiwo_job("doomed-job", namespace, entrypoint="sleep 3600"))
    target.kube.create(kaiwo_service("doomed-svc", namespace, replicas=2))
    job = wait_phase(target, "KaiwoJob", "doomed-job", namespace, "RUNNING")
    svc = wait_phase(target, "KaiwoService", "doomed-svc", namespace, "RUNNING")
    for obj in (job, svc):
        assert FINALIZER not in obj["metadata"].get("finalizers", []), obj["metadata"]
    uids = {"doomed-job": job["metadata"]["uid"], "doomed-svc": svc["metadata"]["uid"]}
    assert children_of(target, namespace, uids["doomed-job"]), "the running job has no children"
    assert children_of(target, namespace, uids["doomed-svc"]), "the running service has no children"
    target.kube.delete(KAIWO_API, "KaiwoJob", "doomed-job", namespace)
    target.kube.delete(KAIWO_API, "KaiwoService", "doomed-svc", namespace)
    for kind, name in (("KaiwoJob", "doomed-job"), ("KaiwoService", "doomed-svc")):
        wait_gone(target, kind, name, namespace)
    for name, uid in uids.items():
        wait_no_children(target, namespace, uid, name)
    workloads = [w["metadata"]["name"] for w in target.kube.items(target.kube.kueue_api, "Workload", namespace)
                 if not (w["metadata"].get("deletionTimestamp"))]
    wait_for(lambda: not [w for w in target.kube.items(target.kube.kueue_api, "Workload", namespace)],
             target.timeout, f"no Kueue Workloads left (had {workloads})")


# -- invalid input ---------------------------------------------------------------------------------


INVALID_JOBS: dict[str, tuple[JsonObj, str, str]] = {
    # name: (spec overrides, condition type, reason)
    "ray-without-cluster": ({"rayJob": {"spec": {"entrypoint": "python -c 'print(1)'"}}}, "SpecValid",
                            "InvalidSpec"),
    "unknown-queue": ({"clusterQueue": "no-such-queue"}, "Schedulable", "ClusterQueueNotFound"),
    "too-many-gpus": ({"gpus": 4096, "gpuVendor": "amd"}, "Schedulable", "InsufficientGPUs"),
}


def scenario_invalid_input(target: Target) -> dict[str, JsonObj]:
    """Each bad KaiwoJob ends in ERROR with a False condition and a Warning event naming the reason;
    a valid job created after them still completes. Returns the bad jobs as last seen."""
    namespace = target.namespace("e2e-invalid")
    for name, (spec, _, _) in INVALID_JOBS.items():
        target.kube.create(kaiwo_job(name, namespace, **spec))
    target.kube.create(kaiwo_job("valid", namespace, entrypoint="sleep 5"))
    seen: dict[str, JsonObj] = {}
    for name, (_, cond_type, reason) in INVALID_JOBS.items():
        obj = wait_phase(target, "KaiwoJob", name, namespace, {"ERROR", "FAILED"})
        cond = condition(obj, cond_type)
        assert cond is not None and cond["status"] == "False" and cond["reason"] == reason, (name, obj["status"])
        assert cond["message"], (name, cond)

        def warned(name: str = name, reason: str = reason) -> bool:
            return any(e.get("type") == "Warning" and e.get("reason") == reason
                       for e in target.kube.events(namespace, name, "KaiwoJob"))

        wait_for(warned, target.timeout, f"a Warning event {reason} for {name}")
        assert target.kube.get("batch/v1", "Job", name, namespace) is None, f"{name}: a Job was created"
        assert target.kube.get("ray.io/v1", "RayJob", name, namespace) is None, f"{name}: a RayJob was created"
        seen[name] = obj
    wait_phase(target, "KaiwoJob", "valid", namespace, "COMPLETE")
    return seen


# -- KaiwoConfig read live ---------------------------------------------------------------------------


def _head_memory(rayjob: JsonObj) -> tuple[Any, Any]:
    container = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    resources = container.get("resources") or {}
    return (resources.get("requests") or {}).get("memory"), (resources.get("limits") or {}).get("memory")


def scenario_kaiwoconfig_live(target: Target) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
    """Changing KaiwoConfig `ray.headPodMemory` reaches the next RayJob's head without a restart;
    the RayJob made before keeps its head. Restores the KaiwoConfig. Returns (before, after) head
    memory (request, limit)."""
    namespace = target.namespace("e2e-config")
    live = target.kube.get(CONFIG_API, "KaiwoConfig", "kaiwo")
    assert live is not None, "the operator keeps KaiwoConfig kaiwo in place"
    original = ((live.get("spec") or {}).get("ray") or {}).get("headPodMemory")
    ray_spec = {"ray": True, "entrypoint": "sleep 3600", "image": "rayproject/ray:2.47.1-py311",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}
    try:
        target.kube.create(kaiwo_job("ray-before", namespace, **ray_spec))
        before: JsonObj = wait_for(lambda: target.kube.get("ray.io/v1", "RayJob", "ray-before", namespace),
                                   target.timeout, "RayJob ray-before")
        target.kube.patch(CONFIG_API, "KaiwoConfig", "kaiwo", {"spec": {"ray": {"headPodMemory": "3Gi"}}})
        target.kube.create(kaiwo_job("ray-after", namespace, **ray_spec))
        after: JsonObj = wait_for(lambda: target.kube.get("ray.io/v1", "RayJob", "ray-after", namespace),
                                  target.timeout, "RayJob ray-after")
        before_now = target.kube.get("ray.io/v1", "RayJob", "ray-before", namespace)
        assert before_now is not None and _head_memory(before_now) == _head_memory(before)
        for name in ("ray-before", "ray-after"):
            delete_and_wait_gone(target, "KaiwoJob", name, namespace)
        return _head_memory(before), _head_memory(after)
    finally:
        target.kube.patch(CONFIG_API, "KaiwoConfig", "kaiwo", {"spec": {"ray": {"headPodMemory": original}}})
