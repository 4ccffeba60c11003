"""Create/get/list/update/delete through the official client: the semantics a naive dict store gets wrong."""

from __future__ import annotations

import json
import re
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

from kaiwo_sandbox.contracts import CONFIGMAPS, JOBS
from kaiwo_sandbox.testing import RunningSandbox


def _error(exc: pytest.ExceptionInfo[ApiException]) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.value.body)
    return body


def _job(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "main", "image": "busybox:1.36"}]}}}}


def test_create_assigns_uid_timestamp_and_resource_version(core: Any) -> None:
    created = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}, "data": {"k": "v"}})
    assert re.fullmatch(r"[0-9a-f-]{36}", created.metadata.uid)
    assert created.metadata.creation_timestamp is not None
    assert int(created.metadata.resource_version) > 0
    # ConfigMaps have no generation on a real server; Jobs start at 1.
    assert created.metadata.generation is None


def test_generate_name_appends_five_random_characters(core: Any) -> None:
    created = core.create_namespaced_config_map("default", {"metadata": {"generateName": "cm-"}})
    assert re.fullmatch(r"cm-[bcdfghjklmnpqrstvwxz2456789]{5}", created.metadata.name)


def test_create_twice_is_409_already_exists(core: Any) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "dup"}})
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map("default", {"metadata": {"name": "dup"}})
    assert exc.value.status == 409
    body = _error(exc)
    assert body["reason"] == "AlreadyExists"
    assert body["message"] == 'configmaps "dup" already exists'


def test_create_in_missing_namespace_is_404(core: Any) -> None:
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map("nowhere", {"metadata": {"name": "a"}})
    assert exc.value.status == 404
    assert _error(exc)["message"] == 'namespaces "nowhere" not found'


def test_get_missing_is_404_status(core: Any) -> None:
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_config_map("missing", "default")
    body = _error(exc)
    assert (exc.value.status, body["kind"], body["reason"]) == (404, "Status", "NotFound")
    assert body["message"] == 'configmaps "missing" not found'


def test_update_with_stale_resource_version_is_409_conflict(core: Any) -> None:
    first = core.create_namespaced_config_map("default", {"metadata": {"name": "c"}, "data": {"n": "1"}})
    first.data = {"n": "2"}
    core.replace_namespaced_config_map("c", "default", first)
    first.data = {"n": "3"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as exc:
        core.replace_namespaced_config_map("c", "default", first)
    body = _error(exc)
    assert (exc.value.status, body["reason"]) == (409, "Conflict")
    assert body["message"] == ('Operation cannot be fulfilled on configmaps "c": the object has been modified; '
                               "please apply your changes to the latest version and try again")


def test_noop_update_keeps_resource_version(core: Any) -> None:
    created = core.create_namespaced_config_map("default", {"metadata": {"name": "same"}, "data": {"a": "b"}})
    again = core.replace_namespaced_config_map("same", "default", created)
    assert again.metadata.resource_version == created.metadata.resource_version


def test_generation_bumps_on_spec_changes_only(api: Any) -> None:
    batch = kubernetes.client.BatchV1Api(api)
    job = batch.create_namespaced_job("default", _job("g"))
    assert job.metadata.generation == 1
    labelled = batch.patch_namespaced_job("g", "default", {"metadata": {"labels": {"x": "y"}}})
    assert labelled.metadata.generation == 1
    assert labelled.metadata.resource_version != job.metadata.resource_version
    suspended = batch.patch_namespaced_job("g", "default", {"spec": {"suspend": True}})
    assert suspended.metadata.generation == 2


def test_status_subresource_separation(api: Any) -> None:
    batch = kubernetes.client.BatchV1Api(api)
    batch.create_namespaced_job("default", _job("s"))
    # The main resource ignores .status ...
    batch.patch_namespaced_job("s", "default", {"status": {"active": 5}})
    assert batch.read_namespaced_job("s", "default").status.active is None
    # ... and /status ignores everything else.
    batch.patch_namespaced_job_status("s", "default", {"status": {"active": 1}, "spec": {"parallelism": 9}})
    job = batch.read_namespaced_job("s", "default")
    assert (job.status.active, job.spec.parallelism, job.metadata.generation) == (1, 1, 1)


def test_kind_without_status_subresource_takes_status_on_main_path(sandbox: RunningSandbox, custom: Any) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                                                 "x-kubernetes-preserve-unknown-fields": True}}}]}}
    kubernetes.client.ApiextensionsV1Api(sandbox.api_client()).create_custom_resource_definition(crd)
    custom.create_namespaced_custom_object("example.com", "v1", "default", "widgets",
                                           {"apiVersion": "example.com/v1", "kind": "Widget",
                                            "metadata": {"name": "w"}, "status": {"ok": True}})
    assert custom.get_namespaced_custom_object("example.com", "v1", "default", "widgets", "w")["status"] == \
        {"ok": True}


def test_builtin_defaults_are_applied(api: Any) -> None:
    job = kubernetes.client.BatchV1Api(api).create_namespaced_job("default", _job("d"))
    assert (job.spec.backoff_limit, job.spec.completions, job.spec.parallelism) == (6, 1, 1)
    # The selector is generated from the uid, so the uid exists before defaulting runs.
    assert job.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": job.metadata.uid}
    pod_spec = job.spec.template.spec
    assert pod_spec.dns_policy == "ClusterFirst"
    assert pod_spec.scheduler_name == "default-scheduler"
    assert pod_spec.termination_grace_period_seconds == 30
    assert pod_spec.containers[0].image_pull_policy == "IfNotPresent"


def test_pods_start_pending_with_qos_class(core: Any) -> None:
    pod = core.create_namespaced_pod("default", {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox",
                                 "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]},
        "status": {"phase": "Running"}})
    assert pod.status.phase == "Pending"
    assert pod.status.qos_class == "Guaranteed"


def test_dry_run_stores_nothing(sandbox: RunningSandbox, core: Any) -> None:
    before = sandbox.call(lambda: sandbox.store.resource_version)
    created = core.create_namespaced_config_map("default", {"metadata": {"name": "dry"}}, dry_run="All")
    assert created.metadata.name == "dry"
    with pytest.raises(ApiException):
        core.read_namespaced_config_map("dry", "default")
    assert sandbox.call(lambda: sandbox.store.resource_version) == before


def test_list_with_label_and_field_selectors(core: Any) -> None:
    for name, tier in (("a", "web"), ("b", "db"), ("c", "web")):
        core.create_namespaced_config_map("default", {"metadata": {"name": name, "labels": {"tier": tier}}})
    names = [i.metadata.name for i in core.list_namespaced_config_map("default", label_selector="tier=web").items]
    assert names == ["a", "c"]
    names = [i.metadata.name for i in
             core.list_namespaced_config_map("default", label_selector="tier in (db,cache)").items]
    assert names == ["b"]
    names = [i.metadata.name for i in
             core.list_namespaced_config_map("default", field_selector="metadata.name!=a").items]
    assert names == ["b", "c"]


def test_unsupported_field_selector_is_400(core: Any) -> None:
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_config_map("default", field_selector="spec.nothing=x")
    assert exc.value.status == 400


def test_list_pagination_is_a_consistent_snapshot(sandbox: RunningSandbox, core: Any) -> None:
    for i in range(5):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"cm-{i}"}})
    first = core.list_namespaced_config_map("default", limit=2)
    assert [i.metadata.name for i in first.items] == ["cm-0", "cm-1"]
    assert first.metadata.remaining_item_count == 3
    # Writes after the first page don't show up in later pages: the token pins the snapshot.
    core.delete_namespaced_config_map("cm-3", "default")
    core.create_namespaced_config_map("default", {"metadata": {"name": "cm-9"}})
    second = core.list_namespaced_config_map("default", limit=2, _continue=first.metadata._continue)
    third = core.list_namespaced_config_map("default", limit=2, _continue=second.metadata._continue)
    assert [i.metadata.name for i in second.items + third.items] == ["cm-2", "cm-3", "cm-4"]
    assert third.metadata._continue is None
    assert second.metadata.resource_version == first.metadata.resource_version


def test_lists_page_in_etcd_key_order_as_objects_come_and_go(core: Any) -> None:
    """The apiserver lists in etcd's key order, "namespace/name" as text: "team-b" (a "-") sorts before
    "team" + "/", and "team0" after it. A page is cut from the store's kept order, so creates and
    deletes between lists must keep it exact (no item skipped or served twice)."""
    for namespace in ("team", "team-b", "team0"):
        core.create_namespace({"metadata": {"name": namespace}})
        for name in ("b", "a-1", "a"):
            core.create_namespaced_config_map(namespace, {"metadata": {"name": name, "labels": {"t": "1"}}})

    def walk(namespace: str | None = None) -> list[str]:
        names, token = [], None
        while True:
            if namespace is None:
                page = core.list_config_map_for_all_namespaces(limit=2, label_selector="t=1", _continue=token)
            else:
                page = core.list_namespaced_config_map(namespace, limit=2, label_selector="t=1", _continue=token)
            names += [f"{i.metadata.namespace}/{i.metadata.name}" for i in page.items]
            token = page.metadata._continue
            if not token:
                return names

    expected = sorted(f"{ns}/{n}" for ns in ("team", "team-b", "team0") for n in ("b", "a-1", "a"))
    assert walk() == expected
    assert expected[:3] == ["team-b/a", "team-b/a-1", "team-b/b"]
    assert walk("team") == ["team/a", "team/a-1", "team/b"]
    core.delete_namespaced_config_map("a-1", "team")
    core.create_namespaced_config_map("team", {"metadata": {"name": "a-0", "labels": {"t": "1"}}})
    core.create_namespaced_config_map("team", {"metadata": {"name": "c", "labels": {"t": "1"}}})
    assert walk("team") == ["team/a", "team/a-0", "team/b", "team/c"]
    assert walk() == sorted({*expected, "team/a-0", "team/c"} - {"team/a-1"})


def test_expired_continue_token_is_410(sandbox: RunningSandbox, core: Any) -> None:
    for i in range(3):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"cm-{i}"}})
    first = core.list_namespaced_config_map("default", limit=1)
    core.create_namespaced_config_map("default", {"metadata": {"name": "later"}})
    sandbox.call(lambda: sandbox.store.fanout.expire(sandbox.store.resource_version))
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_config_map("default", limit=1, _continue=first.metadata._continue)
    assert (exc.value.status, _error(exc)["reason"]) == (410, "Expired")


def test_store_api_returns_copies(sandbox: RunningSandbox) -> None:
    def mutate_returned() -> str:
        obj = sandbox.store.create(CONFIGMAPS, {"metadata": {"name": "x"}, "data": {"a": "1"}},
                                   namespace="default")
        obj["data"]["a"] = "changed"
        sandbox.store.get(CONFIGMAPS, "default", "x")["data"]["a"] = "changed too"
        return str(sandbox.store.get(CONFIGMAPS, "default", "x")["data"]["a"])

    assert sandbox.call(mutate_returned) == "1"


def test_admission_hook_mutates_creates(sandbox: RunningSandbox) -> None:
    def hook(operation: str, gvr: Any, obj: dict[str, Any], old: Any, user: str) -> None:
        if operation == "CREATE" and gvr.resource == "jobs":
            obj["spec"]["suspend"] = True

    def run() -> bool:
        remove = sandbox.store.add_admission_hook(hook)
        job = sandbox.store.create(JOBS, _job("h"), namespace="default")
        remove()
        return bool(job["spec"]["suspend"])

    assert sandbox.call(run) is True


def test_requests_without_the_token_are_401(sandbox: RunningSandbox) -> None:
    configuration = kubernetes.client.Configuration()
    configuration.host = sandbox.url
    configuration.ssl_ca_cert = str(sandbox.ca_cert_path)
    core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))
    with pytest.raises(ApiException) as exc:
        core.list_namespace()
    assert exc.value.status == 401
    wrong = kubernetes.client.CoreV1Api(sandbox.api_client(token="wrong"))
    with pytest.raises(ApiException) as exc:
        wrong.list_namespace()
    assert (exc.value.status, _error(exc)["reason"]) == (401, "Unauthorized")


def test_system_namespaces_exist(core: Any) -> None:
    names = [n.metadata.name for n in core.list_namespace().items]
    assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]
    assert core.read_namespace("default").status.phase == "Active"


def test_leases_round_trip_micro_time(api: Any) -> None:
    coordination = kubernetes.client.CoordinationV1Api(api)
    lease = coordination.create_namespaced_lease("kube-system", {
        "metadata": {"name": "leader"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
                 "renewTime": "2026-01-01T00:00:00.123456Z"}})
    lease.spec.holder_identity = "b"
    replaced = coordination.replace_namespaced_lease("leader", "kube-system", lease)
    assert replaced.spec.holder_identity == "b"
    assert replaced.spec.renew_time.microsecond == 123456
    lease.spec.holder_identity = "c"  # stale: another candidate won in between
    with pytest.raises(ApiException) as exc:
        coordination.replace_namespaced_lease("leader", "kube-system", lease)
    assert exc.value.status == 409


def test_events_field_selector_on_involved_object(core: Any) -> None:
    for name, pod in (("e1", "a"), ("e2", "b")):
        core.create_namespaced_event("default", {
            "metadata": {"name": name}, "involvedObject": {"kind": "Pod", "name": pod, "namespace": "default"},
            "reason": "Started", "message": "m", "type": "Normal"})
    selected = core.list_namespaced_event("default", field_selector="involvedObject.name=b,involvedObject.kind=Pod")
    assert [e.metadata.name for e in selected.items] == ["e2"]


def test_list_at_an_exact_past_resource_version(core: Any) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}, "data": {"v": "1"}})
    past = core.list_namespaced_config_map("default").metadata.resource_version
    core.patch_namespaced_config_map("a", "default", {"data": {"v": "2"}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
    then = core.list_namespaced_config_map("default", resource_version=past, resource_version_match="Exact")
    assert [(c.metadata.name, c.data) for c in then.items] == [("a", {"v": "1"})]
    assert then.metadata.resource_version == past
    now = core.list_namespaced_config_map("default")
    assert [c.metadata.name for c in now.items] == ["a", "b"]


def test_dry_run_patch_changes_nothing(core: Any) -> None:
    created = core.create_namespaced_config_map("default", {"metadata": {"name": "d"}, "data": {"v": "1"}})
    preview = core.patch_namespaced_config_map("d", "default", {"data": {"v": "2"}}, dry_run="All")
    assert preview.data == {"v": "2"}
    stored = core.read_namespaced_config_map("d", "default")
    assert (stored.data, stored.metadata.resource_version) == ({"v": "1"}, created.metadata.resource_version)


def test_builtin_validation_answers_422_naming_the_field(api: Any) -> None:
    job = _job("bad")
    job["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    with pytest.raises(ApiException) as exc:
        kubernetes.client.BatchV1Api(api).create_namespaced_job("default", job)
    body = _error(exc)
    assert (exc.value.status, body["reason"]) == (422, "Invalid")
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.template.spec.restartPolicy"]
