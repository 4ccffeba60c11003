"""Deletion: finalizers, propagation policies, ownerReference garbage collection, namespaces."""

from __future__ import annotations

import json
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

from kaiwo_sandbox.testing import RunningSandbox, eventually


def _owner_ref(obj: Any, *, block: bool = False, kind: str = "ConfigMap") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "name": obj.metadata.name, "uid": obj.metadata.uid,
            "blockOwnerDeletion": block}


def _exists(core: Any, name: str, namespace: str = "default") -> bool:
    try:
        core.read_namespaced_config_map(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def test_finalizers_hold_an_object_until_removed(core: Any) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "f", "finalizers": ["example.com/x"]}})
    core.delete_namespaced_config_map("f", "default")
    held = core.read_namespaced_config_map("f", "default")
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.deletion_grace_period_seconds == 0
    assert held.metadata.finalizers == ["example.com/x"]
    with pytest.raises(ApiException) as exc:  # no new finalizers while deleting
        core.patch_namespaced_config_map("f", "default", {"metadata": {"finalizers": ["example.com/x", "b/c"]}})
    assert exc.value.status == 422
    core.patch_namespaced_config_map("f", "default", {"metadata": {"finalizers": None}})
    assert not _exists(core, "f")


def test_delete_of_finalized_object_answers_200_with_the_object(sandbox: RunningSandbox, core: Any) -> None:
    """The apiserver answers 202 only for orphanDependents=false (deprecated); 200 otherwise."""
    core.create_namespaced_config_map("default", {"metadata": {"name": "f", "finalizers": ["example.com/x"]}})
    status, _, body = sandbox.http("DELETE", "/api/v1/namespaces/default/configmaps/f")
    assert status == 200
    assert json.loads(body)["metadata"]["deletionTimestamp"]
    core.create_namespaced_config_map("default", {"metadata": {"name": "g", "finalizers": ["example.com/x"]}})
    status, _, body = sandbox.http("DELETE", "/api/v1/namespaces/default/configmaps/g?orphanDependents=false")
    assert status == 202
    assert json.loads(body)["metadata"]["deletionTimestamp"]
    status, _, body = sandbox.http("DELETE", "/api/v1/namespaces/default/configmaps/nope")
    assert status == 404


def test_background_gc_deletes_dependents(core: Any) -> None:
    owner = core.create_namespaced_config_map("default", {"metadata": {"name": "owner"}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "dep", "ownerReferences": [_owner_ref(owner)]}})
    core.delete_namespaced_config_map("owner", "default")
    eventually(lambda: not _exists(core, "dep"))


def test_gc_matches_owners_by_uid(core: Any) -> None:
    owner = core.create_namespaced_config_map("default", {"metadata": {"name": "owner"}})
    stale = _owner_ref(owner)
    stale["uid"] = "00000000-0000-0000-0000-000000000000"  # same name, another (gone) incarnation
    core.create_namespaced_config_map("default", {"metadata": {"name": "orphaned", "ownerReferences": [stale]}})
    eventually(lambda: not _exists(core, "orphaned"))
    assert _exists(core, "owner")


def test_dependent_with_a_surviving_owner_loses_only_the_dangling_reference(core: Any) -> None:
    a = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    b = core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "dep", "ownerReferences": [
        _owner_ref(a), _owner_ref(b)]}})
    core.delete_namespaced_config_map("a", "default")
    eventually(lambda: len(core.read_namespaced_config_map("dep", "default").metadata.owner_references) == 1)
    assert core.read_namespaced_config_map("dep", "default").metadata.owner_references[0].name == "b"


def test_orphan_propagation_keeps_dependents_without_the_reference(core: Any) -> None:
    owner = core.create_namespaced_config_map("default", {"metadata": {"name": "owner"}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "dep", "ownerReferences": [_owner_ref(owner)]}})
    core.delete_namespaced_config_map("owner", "default", propagation_policy="Orphan")
    eventually(lambda: not _exists(core, "owner"))
    eventually(lambda: not core.read_namespaced_config_map("dep", "default").metadata.owner_references)


def test_foreground_deletion_waits_for_blocking_dependents(core: Any) -> None:
    owner = core.create_namespaced_config_map("default", {"metadata": {"name": "owner"}})
    core.create_namespaced_config_map("default", {"metadata": {
        "name": "dep", "ownerReferences": [_owner_ref(owner, block=True)], "finalizers": ["example.com/hold"]}})
    core.delete_namespaced_config_map("owner", "default", propagation_policy="Foreground")
    waiting = core.read_namespaced_config_map("owner", "default")
    assert "foregroundDeletion" in waiting.metadata.finalizers
    assert waiting.metadata.deletion_timestamp is not None
    eventually(lambda: core.read_namespaced_config_map("dep", "default").metadata.deletion_timestamp)
    assert _exists(core, "owner")  # the dependent is held by its own finalizer, so the owner waits
    core.patch_namespaced_config_map("dep", "default", {"metadata": {"finalizers": None}})
    eventually(lambda: not _exists(core, "owner"))


def test_jobs_orphan_pods_by_default_but_not_with_background(api: Any, core: Any) -> None:
    batch = kubernetes.client.BatchV1Api(api)
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    for name in ("keep", "drop"):
        job = batch.create_namespaced_job("default", {"metadata": {"name": name}, "spec": {"template": template}})
        core.create_namespaced_pod("default", {"metadata": {"name": f"{name}-pod", "ownerReferences": [{
            "apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": job.metadata.uid, "controller": True}]},
            "spec": template["spec"]})
    batch.delete_namespaced_job("keep", "default")
    batch.delete_namespaced_job("drop", "default", propagation_policy="Background")
    eventually(lambda: not [p for p in core.list_namespaced_pod("default").items if p.metadata.name == "drop-pod"])
    kept = core.read_namespaced_pod("keep-pod", "default")
    assert not kept.metadata.owner_references


def test_namespace_deletion_empties_it_then_removes_it(core: Any) -> None:
    core.create_namespace({"metadata": {"name": "doomed"}})
    core.create_namespaced_config_map("doomed", {"metadata": {"name": "plain"}})
    core.create_namespaced_config_map("doomed", {"metadata": {"name": "held", "finalizers": ["example.com/x"]}})
    core.delete_namespace("doomed")
    terminating = core.read_namespace("doomed")
    assert terminating.status.phase == "Terminating"
    eventually(lambda: not _exists(core, "plain", "doomed"))
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map("doomed", {"metadata": {"name": "late"}})
    assert exc.value.status == 403
    assert json.loads(exc.value.body)["message"] == (
        'configmaps "late" is forbidden: unable to create new content in namespace doomed because it is being '
        "terminated")
    assert core.read_namespace("doomed").status.phase == "Terminating"  # held by the finalized object
    core.patch_namespaced_config_map("held", "doomed", {"metadata": {"finalizers": None}})

    def gone() -> bool:
        try:
            core.read_namespace("doomed")
        except ApiException as exc:
            return exc.status == 404
        return False

    eventually(gone)


def test_delete_collection_by_label(core: Any) -> None:
    for name, app in (("a", "x"), ("b", "x"), ("c", "y")):
        core.create_namespaced_config_map("default", {"metadata": {"name": name, "labels": {"app": app}}})
    core.delete_collection_namespaced_config_map("default", label_selector="app=x")
    assert [c.metadata.name for c in core.list_namespaced_config_map("default").items] == ["c"]


def test_delete_precondition_resource_version(core: Any) -> None:
    created = core.create_namespaced_config_map("default", {"metadata": {"name": "p"}})
    core.patch_namespaced_config_map("p", "default", {"data": {"a": "b"}})
    with pytest.raises(ApiException) as exc:
        core.delete_namespaced_config_map("p", "default", body={
            "preconditions": {"resourceVersion": created.metadata.resource_version}})
    assert exc.value.status == 409


def test_dry_run_delete_keeps_the_object(core: Any) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "stay"}})
    core.delete_namespaced_config_map("stay", "default", dry_run="All")
    assert _exists(core, "stay")


def test_deleting_a_job_without_policy_warns_about_orphaned_pods(sandbox: RunningSandbox, api: Any) -> None:
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    kubernetes.client.BatchV1Api(api).create_namespaced_job("default", {"metadata": {"name": "j"},
                                                                        "spec": {"template": template}})
    status, headers, _ = sandbox.http("DELETE", "/apis/batch/v1/namespaces/default/jobs/j")
    assert status == 200
    assert "child pods are preserved by default" in headers["warning"]
