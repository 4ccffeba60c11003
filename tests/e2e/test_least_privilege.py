"""Least privilege, proven: the operator runs in-cluster (the service-account token, CA and namespace from
a mounted directory, KUBERNETES_SERVICE_HOST/PORT) as deploy/'s ServiceAccount, bound to nothing but
deploy/base/rbac-operator.yaml, against a sandbox enforcing RBAC. The end-to-end scenarios pass, with a
queue-configuration churn and a token rotation on top, and then:

- the audit log holds no 403 for the service account;
- every (group, resource, verb) the role grants was used by some request; for each one, the server's own
  SubjectAccessReview says that request is denied by the role without that grant. So removing any single
  grant makes the same run meet a 403 (and the first assertion fail): the role has nothing extra.
"""

from __future__ import annotations

import asyncio
import copy
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from e2e_harness import TIME_FACTOR, in_process_operator
from e2e_scenarios import (
    apply_singleton,
    kaiwo_job,
    kaiwo_service,
    scenario_delete_examples,
    scenario_deletion,
    scenario_examples,
    scenario_invalid_input,
    scenario_job_updates,
    scenario_kaiwoconfig_live,
    scenario_queueing,
    scenario_service_updates,
    wait_gone,
)
from e2e_support import KAIWO_API, JsonObj, Kube, Target, condition, wait_for

from kaiwo_ray.controllers.manager import HostSettings
from kaiwo_ray.kube import incluster
from kaiwo_sandbox.contracts import ApiError
from kaiwo_sandbox.testing import RunningSandbox, start_sandbox

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "base"
NAMESPACE = "kaiwo-system"
SA_USER = f"system:serviceaccount:{NAMESPACE}:kaiwo-ray"
SA_GROUPS = ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated"]
PROBE = "least-privilege-probe"
KUEUE = "kueue.x-k8s.io/v1beta2"
TOPOLOGY_API = "kueue.x-k8s.io/v1beta1"
Atom = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)


def _documents(name: str) -> list[JsonObj]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def operator_roles() -> list[JsonObj]:
    """The ClusterRole and Role of deploy/base/rbac-operator.yaml (their bindings are created as they are)."""
    return [d for d in _documents("rbac-operator.yaml") if d["kind"] in ("ClusterRole", "Role")]


def atoms(role: JsonObj) -> list[Atom]:
    return [(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
            for v in rule["verbs"]]


def rules_of(grants: list[Atom]) -> list[JsonObj]:
    return [{"apiGroups": [g], "resources": [r], "verbs": [v]} for g, r, v in grants]


# -- the queue-configuration churn: every Kueue verb of the KaiwoQueueConfig controller ------------------

LEVELS = [{"nodeLabel": "kaiwo/topology-block"}, {"nodeLabel": "kaiwo/topology-rack"}]


def _queue(name: str, cpu: int, namespaces: list[str] | None = None) -> JsonObj:
    entry: JsonObj = {"name": name, "spec": {"namespaceSelector": {}, "resourceGroups": [
        {"coveredResources": ["cpu", "memory"], "flavors": [
            {"name": "churn-cpu", "resources": [{"name": "cpu", "nominalQuota": cpu},
                                                {"name": "memory", "nominalQuota": "16Gi"}]}]}]}}
    if namespaces is not None:
        entry["namespaces"] = namespaces
    return entry


def _immutable_topology_flavors(operation: str, gvr: Any, obj: JsonObj, old: JsonObj | None, user: str) -> None:
    """Kueue refuses to change a flavor's topologyName (the operator then recreates the flavor), and keeps
    its in-use finalizer on a flavor (which the recreation strips); the sandbox's simulated Kueue models
    neither, so this admission hook does."""
    if gvr.resource == "resourceflavors" and operation == "CREATE" and obj["metadata"].get("name") == "churn-gpu":
        meta = obj.setdefault("metadata", {})
        meta["finalizers"] = [*(meta.get("finalizers") or []), "kueue.x-k8s.io/resource-in-use"]
    elif gvr.resource == "resourceflavors" and old is not None and \
            (obj.get("spec") or {}).get("topologyName") != (old.get("spec") or {}).get("topologyName"):
        raise ApiError.invalid("ResourceFlavor", "kueue.x-k8s.io", str(obj["metadata"]["name"]), [
            {"reason": "FieldValueInvalid", "field": "spec.topologyName", "message": "field is immutable"}])


def scenario_queue_churn(target: Target) -> None:
    """Create, change and drop topologies, flavors, queues (LocalQueues in listed namespaces) and priority
    classes; a flavor whose topology changes is recreated; a nameless topology is cleaned from the spec."""
    kube = target.kube
    for namespace in ("churn-a", "churn-b"):
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    kqc = {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoQueueConfig", "metadata": {"name": "kaiwo"},
           "spec": {
               "topologies": [{"metadata": {"name": "churn-topo"}, "spec": {"levels": LEVELS}}],
               "resourceFlavors": [{"name": "churn-cpu", "nodeLabels": {"kaiwo/nodepool": "churn"}},
                                   {"name": "churn-gpu", "nodeLabels": {"kaiwo/nodepool": "churn-gpu"},
                                    "topologyName": "churn-topo"}],
               "clusterQueues": [_queue("churn-one", 4, ["churn-a", "churn-b"]), _queue("churn-two", 2)],
               "workloadPriorityClasses": [{"metadata": {"name": "churn-high"}, "value": 100},
                                           {"metadata": {"name": "churn-low"}, "value": 1}]}}

    def names(kind: str, namespace: str | None = None) -> set[str]:
        api = TOPOLOGY_API if kind == "Topology" else KUEUE
        return {o["metadata"]["name"] for o in kube.items(api, kind, namespace)
                if not o["metadata"].get("deletionTimestamp")}

    apply_singleton(target, kqc)
    wait_for(lambda: names("ClusterQueue") == {"churn-one", "churn-two"} and names("LocalQueue", "churn-b")
             and names("WorkloadPriorityClass") == {"churn-high", "churn-low"}
             and names("ResourceFlavor") == {"churn-cpu", "churn-gpu"}, target.timeout, "the churn queues")
    gpu_uid = kube.get(KUEUE, "ResourceFlavor", "churn-gpu")["metadata"]["uid"]  # type: ignore[index]
    changed = copy.deepcopy(kqc)
    spec = changed["spec"]
    spec["topologies"][0]["spec"]["levels"] = LEVELS[:1]                      # Topology update
    spec["resourceFlavors"][1].pop("topologyName")                             # flavor recreated
    spec["clusterQueues"] = [_queue("churn-one", 8, ["churn-a"])]              # update; LocalQueue + queue dropped
    spec["workloadPriorityClasses"] = [{"metadata": {"name": "churn-high"}, "value": 200}]  # update; one dropped
    apply_singleton(target, changed)

    def settled() -> bool:
        flavor = kube.get(KUEUE, "ResourceFlavor", "churn-gpu")
        high = kube.get(KUEUE, "WorkloadPriorityClass", "churn-high")
        return (names("ClusterQueue") == {"churn-one"} and not names("LocalQueue", "churn-b")
                and names("WorkloadPriorityClass") == {"churn-high"} and high is not None and high["value"] == 200
                and flavor is not None and flavor["metadata"]["uid"] != gpu_uid)

    wait_for(settled, target.timeout, "the changed queue configuration")
    spec["topologies"] = [{"spec": {"levels": LEVELS}}]                        # nameless: cleaned (KQC update)
    apply_singleton(target, changed)
    wait_for(lambda: not names("Topology") and not (kube.get("kaiwo.silogen.ai/v1alpha1", "KaiwoQueueConfig", "kaiwo")
                                                      or {}).get("spec", {}).get("topologies"),
             target.timeout, "the nameless topology cleaned and churn-topo deleted")


# -- children whose names a stranger holds: create meets AlreadyExists, then one read (get) per kind ------

RUN_ID = "kaiwo.silogen.ai/run-id"
STORAGE = {"storageEnabled": True, "storageClassName": "standard"}
RAY_HEAD = {"template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.9.0"}]}}}


def _strangers(namespace: str) -> list[tuple[JsonObj, JsonObj]]:
    """(a foreign object, a workload whose first child would take its name), one pair per child kind."""
    def meta(name: str) -> JsonObj:
        return {"name": name, "namespace": namespace}

    pod_template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}}
    return [
        ({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta("c-pvc-data"), "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "standard"}},
         kaiwo_job("c-pvc", namespace, storage={**STORAGE, "data": {"storageSize": "1Gi"}})),
        ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("c-cm-download"), "data": {"mine": "yes"}},
         kaiwo_job("c-cm", namespace, storage={**STORAGE, "huggingFace": {
             "storageSize": "1Gi", "preCacheRepos": [{"repoId": "org/model"}]}})),
        ({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("c-job"),
          "spec": {"suspend": True, "template": pod_template}},
         kaiwo_job("c-job", namespace)),
        ({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta("c-ray"),
          "spec": {"suspend": True, "entrypoint": "python -V", "rayClusterSpec": {"headGroupSpec": RAY_HEAD}}},
         kaiwo_job("c-ray", namespace, ray=True)),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("c-deploy"), "spec": {
            "replicas": 0, "selector": {"matchLabels": {"app": "mine"}},
            "template": {"metadata": {"labels": {"app": "mine"}}, "spec": {
                "containers": [{"name": "c", "image": "busybox:1.36"}]}}}},
         kaiwo_service("c-deploy", namespace)),
        ({"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper", "metadata": meta("c-aw"),
          "spec": {"suspend": True, "components": []}},
         kaiwo_service("c-aw", namespace, ray=True, serveConfigV2="applications: []\n")),
    ]


def scenario_child_name_conflicts(target: Target) -> None:
    """Each child kind's name held by a stranger: the operator reads it once (get), reports
    ChildNameConflict and writes nothing to it."""
    namespace = target.namespace("conflicts")
    pairs = _strangers(namespace)
    for stranger, workload in pairs:
        target.kube.create(stranger)
        target.kube.create(workload)
    for stranger, workload in pairs:
        kind, name = workload["kind"], workload["metadata"]["name"]

        def reported(kind: str = kind, name: str = name) -> JsonObj | None:
            cond = condition(target.kube.get(KAIWO_API, kind, name, namespace), "Schedulable")
            return cond if cond and cond.get("reason") == "ChildNameConflict" else None

        cond = wait_for(reported, target.timeout, f"{kind} {name} to report ChildNameConflict "
                        f"(now: {(target.kube.get(KAIWO_API, kind, name, namespace) or {}).get('status')})")
        assert f"{stranger['kind']} {stranger['metadata']['name']}" in cond["message"], cond
    for _, workload in pairs:
        target.kube.delete(KAIWO_API, workload["kind"], workload["metadata"]["name"], namespace)
    for stranger, workload in pairs:
        wait_gone(target, workload["kind"], workload["metadata"]["name"], namespace)
        api = stranger["apiVersion"]
        assert target.kube.get(api, stranger["kind"], stranger["metadata"]["name"], namespace) is not None


def scenario_drift_repair(target: Target) -> None:
    """Someone changes a label the operator set on a child (ConfigMap, PVC, RayJob, AppWrapper): the
    operator applies the child again (patch) and the label comes back."""
    namespace = target.namespace("drift")
    target.kube.create(kaiwo_job("d-job", namespace, storage={**STORAGE, "huggingFace": {
        "storageSize": "1Gi", "preCacheRepos": [{"repoId": "org/model"}]}}))
    target.kube.create(kaiwo_job("d-ray", namespace, ray=True))
    target.kube.create(kaiwo_service("d-aw", namespace, ray=True, serveConfigV2="applications: []\n"))
    children = [("v1", "ConfigMap", "d-job-download"), ("v1", "PersistentVolumeClaim", "d-job-hf"),
                ("ray.io/v1", "RayJob", "d-ray"), ("workload.codeflare.dev/v1beta2", "AppWrapper", "d-aw")]
    for api, kind, name in children:
        live = wait_for(lambda api=api, kind=kind, name=name: target.kube.get(api, kind, name, namespace),
                        target.timeout, f"{kind} {name}")
        labels = live["metadata"].get("labels") or {}
        # A label other than the run-id is tampered with: the watch sees it and the child is applied again.
        # The ConfigMap and PVC carry only the run-id label: without it they leave the operator's watch, so
        # its next create meets AlreadyExists, reads the object (get), finds it its own and applies it.
        key = next((k for k in sorted(labels) if k != RUN_ID), RUN_ID)
        target.kube.patch(api, kind, name, {"metadata": {"labels": {key: None if key == RUN_ID else "tampered"}}},
                          namespace)

        def restored(api: str = api, kind: str = kind, name: str = name, key: str = key,
                     value: str = labels[key]) -> bool:
            now = target.kube.get(api, kind, name, namespace) or {}
            return bool((now.get("metadata", {}).get("labels") or {}).get(key) == value)

        wait_for(restored, target.timeout, f"{kind} {name}'s label {key} restored")
    for kind, name in (("KaiwoJob", "d-job"), ("KaiwoJob", "d-ray"), ("KaiwoService", "d-aw")):
        target.kube.delete(KAIWO_API, kind, name, namespace)
        wait_gone(target, kind, name, namespace)


def scenario_namespace_config(target: Target) -> None:
    """An AIMNamespaceConfig (its status: the Secrets and Gateway it names) and a Ray KaiwoService's HTTPRoute
    through its life: created, patched when the gateway changes, read (get) after it left the operator's watch
    (its run-id label removed) and applied again, deleted when the config drops the gateway."""
    kube, namespace = target.kube, target.namespace("lp-aim")
    gateway_api, config_api = "gateway.networking.k8s.io/v1", "config.kaiwo.silogen.ai/v1alpha1"
    for name in ("gw-a", "gw-b"):
        kube.create({"apiVersion": gateway_api, "kind": "Gateway", "metadata": {"name": name, "namespace": namespace},
                     "spec": {"gatewayClassName": "kgateway", "listeners": [{"name": "http", "protocol": "HTTP",
                                                                             "port": 80}]}})
    kube.create({"apiVersion": config_api, "kind": "AIMNamespaceConfig", "metadata": {"name": "tenant",
                 "namespace": namespace}, "spec": {"gateway": {"name": "gw-a"}, "images": {"imagePullSecrets": ["reg"]}}})
    wait_for(lambda: condition(kube.get(config_api, "AIMNamespaceConfig", "tenant", namespace), "GatewayFound"),
             target.timeout, "the AIMNamespaceConfig status")
    kube.create(kaiwo_service("lp-route", namespace, ray=True, image="rayproject/ray:2.47.1-py311",
                              entrypoint="app:deployment"))

    def parent() -> str | None:
        route = kube.get(gateway_api, "HTTPRoute", "lp-route", namespace) or {}
        return str(((route.get("spec") or {}).get("parentRefs") or [{}])[0].get("name")) if route else None

    wait_for(lambda: parent() == "gw-a", target.timeout, "the HTTPRoute")
    kube.patch(config_api, "AIMNamespaceConfig", "tenant", {"spec": {"gateway": {"name": "gw-b"}}}, namespace)
    wait_for(lambda: parent() == "gw-b", target.timeout, "the HTTPRoute on gw-b")
    kube.patch(gateway_api, "HTTPRoute", "lp-route", {"metadata": {"labels": {RUN_ID: None}}}, namespace)
    kube.patch(config_api, "AIMNamespaceConfig", "tenant", {"spec": {"gateway": {"name": "gw-a"}}}, namespace)
    wait_for(lambda: parent() == "gw-a" and RUN_ID in ((kube.get(gateway_api, "HTTPRoute", "lp-route", namespace)
                                                       or {}).get("metadata", {}).get("labels") or {}),
             target.timeout, "the HTTPRoute applied again")
    kube.patch(config_api, "AIMNamespaceConfig", "tenant", {"spec": {"gateway": None}}, namespace)
    wait_for(lambda: kube.get(gateway_api, "HTTPRoute", "lp-route", namespace) is None, target.timeout,
             "the HTTPRoute deleted")
    kube.delete(KAIWO_API, "KaiwoService", "lp-route", namespace)
    wait_gone(target, "KaiwoService", "lp-route", namespace)


# -- the in-cluster operator under the role -------------------------------------------------------------


@dataclass
class Run:
    sb: RunningSandbox
    target: Target
    records: list[Any]


def _mount(directory: Path, sb: RunningSandbox, token: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    assert sb.ca_cert_path is not None
    shutil.copy(sb.ca_cert_path, directory / "ca.crt")
    (directory / "namespace").write_text(NAMESPACE)
    rotate(directory, token)


def rotate(directory: Path, token: str) -> None:
    """Swap the token file atomically, as the kubelet swaps a projected token."""
    fresh = directory / ".token.new"
    fresh.write_text(token)
    fresh.replace(directory / "token")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    mount = tmp_path_factory.mktemp("serviceaccount")
    with start_sandbox(cluster=True, time_factor=TIME_FACTOR, authorization="RBAC") as sb, \
            pytest.MonkeyPatch.context() as env:
        kube = Kube(sb.api_client())
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        for doc in _documents("serviceaccount.yaml") + _documents("rbac-operator.yaml"):
            kube.create(doc)
        sb.call(sb.store.add_admission_hook, _immutable_topology_flavors)
        old_token = sb.service_account_token(NAMESPACE, "kaiwo-ray")
        _mount(mount, sb, old_token)
        env.setenv(incluster.DIR_VARIABLE, str(mount))
        env.setenv(incluster.HOST_VARIABLE, "127.0.0.1")
        env.setenv(incluster.PORT_VARIABLE, str(sb.sandbox.port))
        config = incluster.load()
        settings = HostSettings(in_cluster=True, lease=True, lease_namespace=config.namespace() or "",
                                identity="in-cluster")
        target = Target(kube, "sandbox", 30.0, sandbox=True)
        with in_process_operator(settings):  # leaving it stops the operator, which releases its Leases
            wait_for(lambda: kube.get(kube.kueue_api, "ClusterQueue", "kaiwo"), 30.0, "the default ClusterQueue")
            scenario_queueing(target)
            scenario_job_updates(target)
            # Token rotation: a new token in the file, the old one revoked; the operator carries on.
            rotate(mount, sb.service_account_token(NAMESPACE, "kaiwo-ray"))
            assert sb.revoke_token(old_token)
            scenario_service_updates(target)
            scenario_deletion(target)
            scenario_invalid_input(target)
            scenario_kaiwoconfig_live(target)
            namespace, _ = scenario_examples(target, include_singletons=True)
            scenario_delete_examples(target, namespace, earlier_version=True)  # the upgrade path's deletes
            scenario_child_name_conflicts(target)  # these two before the churn drops the default queue
            scenario_drift_repair(target)
            scenario_namespace_config(target)
            scenario_queue_churn(target)
        yield Run(sb, target, sb.audit.records(user=SA_USER))


@pytest.mark.slow
def test_the_operator_runs_the_scenarios_without_one_forbidden_request(run: Run) -> None:
    assert run.records, "the operator made no request as its service account"
    forbidden = [r for r in run.records if r.code == 403]
    assert forbidden == [], forbidden[:5]
    # Leader election ran in the operator's own namespace, one Lease per controller.
    leases = {r.name for r in run.records if r.resource == "leases" and r.verb != "create"}  # a POST names none
    assert leases == {f"kaiwo-ray-{c}" for c in ("kaiwoconfig", "kaiwoqueueconfig", "aimnamespaceconfig", "kaiwojob",
                                                  "kaiwoservice")}
    assert {r.namespace for r in run.records if r.resource == "leases"} == {NAMESPACE}


def _used(records: list[Any]) -> dict[Atom, Any]:
    """One request per (group, resource, verb) the service account made and was not refused for."""
    used: dict[Atom, Any] = {}
    for r in records:
        if r.code != 403:
            resource = f"{r.resource}/{r.subresource}" if r.subresource else r.resource
            used.setdefault((r.group, resource, r.verb), r)
    return used


def _allowed(sb: RunningSandbox, user: str, groups: list[str], record: Any) -> bool:
    review = kubernetes.client.AuthorizationV1Api(sb.api_client()).create_subject_access_review({"spec": {
        "user": user, "groups": groups, "resourceAttributes": {
            "verb": record.verb, "group": record.group, "resource": record.resource,
            "subresource": record.subresource, "namespace": record.namespace, "name": record.name}}})
    return bool(review.status.allowed)


@pytest.mark.slow
def test_every_grant_is_used_and_removing_any_one_denies_a_request_the_run_made(run: Run) -> None:
    used = _used(run.records)
    roles = operator_roles()
    granted = {kind: atoms(role) for kind, role in ((r["kind"], r) for r in roles)}
    unused = [a for grants in granted.values() for a in grants if a not in used]
    assert unused == [], f"granted but never used by the scenarios: {unused}"
    # The probe: a second service account bound to the role with one grant taken away at a time.
    kube = run.target.kube
    kube.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": PROBE, "namespace": NAMESPACE}})
    rbac = kubernetes.client.RbacAuthorizationV1Api(run.sb.api_client())
    cluster_role = next(r for r in roles if r["kind"] == "ClusterRole")
    lease_role = next(r for r in roles if r["kind"] == "Role")
    rbac.create_cluster_role({"metadata": {"name": PROBE}, "rules": cluster_role["rules"]})
    rbac.create_namespaced_role(NAMESPACE, {"metadata": {"name": PROBE}, "rules": lease_role["rules"]})
    subject = [{"kind": "ServiceAccount", "name": PROBE, "namespace": NAMESPACE}]
    rbac.create_cluster_role_binding({"metadata": {"name": PROBE}, "subjects": subject, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": PROBE}})
    rbac.create_namespaced_role_binding(NAMESPACE, {"metadata": {"name": PROBE}, "subjects": subject, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": PROBE}})
    probe_user = f"system:serviceaccount:{NAMESPACE}:{PROBE}"
    probe_groups = SA_GROUPS
    for kind, grants in granted.items():
        for atom in grants:
            record = used[atom]
            assert _allowed(run.sb, SA_USER, SA_GROUPS, record), atom
            rest = rules_of([a for a in grants if a != atom])
            if kind == "ClusterRole":
                rbac.patch_cluster_role(PROBE, {"rules": rest})
            else:
                rbac.patch_namespaced_role(PROBE, NAMESPACE, {"rules": rest})
            assert not _allowed(run.sb, probe_user, probe_groups, record), \
                f"without {atom} the request {record} would still be allowed: the grant is redundant"
            restore = rules_of(grants)
            if kind == "ClusterRole":
                rbac.patch_cluster_role(PROBE, {"rules": restore})
            else:
                rbac.patch_namespaced_role(PROBE, NAMESPACE, {"rules": restore})


def test_token_rotation_is_picked_up_from_the_file(tmp_path: Path) -> None:
    """The client re-reads the token file on a 401: after the old token is revoked the next call works."""
    with start_sandbox(nodes=[], authorization="RBAC") as sb, pytest.MonkeyPatch.context() as env:
        kube = Kube(sb.api_client())
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        for doc in _documents("serviceaccount.yaml") + _documents("rbac-operator.yaml"):
            kube.create(doc)
        first = sb.service_account_token(NAMESPACE, "kaiwo-ray")
        _mount(tmp_path, sb, first)
        env.setenv(incluster.DIR_VARIABLE, str(tmp_path))
        env.setenv(incluster.HOST_VARIABLE, "127.0.0.1")
        env.setenv(incluster.PORT_VARIABLE, str(sb.sandbox.port))

        async def calls() -> tuple[int, int]:
            from kaiwo_ray.kube import resources as R
            from kaiwo_ray.kube.client import KubeClient

            client = KubeClient.in_cluster()
            try:
                before = len((await client.list(R.NODES))["items"])
                rotate(tmp_path, sb.service_account_token(NAMESPACE, "kaiwo-ray"))
                assert sb.revoke_token(first)
                after = len((await client.list(R.NODES))["items"])
                return before, after
            finally:
                await client.close()

        assert asyncio.run(calls()) == (0, 0)
        assert sb.http("GET", "/api/v1/nodes", token=first)[0] == 401  # the first token is no more
        codes = [r.code for r in sb.audit.records(user=SA_USER, resource="nodes")]
        assert codes == [200, 200], codes  # the second list went out with the file's new token
