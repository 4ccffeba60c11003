"""Stored snapshots are never modified: writes that build their new object from the old one without
copying it all (a /status merge patch, a merge patch of the main resource, a create) leave every
earlier snapshot, as watchers and history hold it, exactly as it was committed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kaiwo_sandbox.contracts import JOBS, NAMESPACES, WatchEvent
from kaiwo_sandbox.storage.store import ObjectStore


@pytest.fixture
def store() -> ObjectStore:
    fresh = ObjectStore()
    fresh.create(NAMESPACES, {"metadata": {"name": "default"}})
    return fresh


def _job() -> dict[str, Any]:
    return {"metadata": {"name": "j", "labels": {"a": "1"}, "finalizers": ["x.io/f"]},
            "spec": {"suspend": True, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}


def test_status_merge_patches_leave_earlier_snapshots_alone(store: ObjectStore) -> None:
    events: list[WatchEvent] = []
    store.subscribe(events.append)
    store.create(JOBS, _job(), namespace="default")
    store.patch(JOBS, "default", "j", {"status": {"active": 1, "conditions": [{"type": "Suspended",
                                                                              "status": "True"}]}},
                "merge", subresource="status")
    committed = [copy.deepcopy(e.object) for e in events]
    # status changes deep inside what the last patch set; spec and metadata in the patch are ignored
    store.patch(JOBS, "default", "j", {"metadata": {"labels": {"a": "2"}}, "spec": {"suspend": False},
                                       "status": {"active": 2, "conditions": [{"type": "Suspended",
                                                                               "status": "False"}]}},
                "merge", subresource="status")
    store.patch(JOBS, "default", "j", {"status": {"active": None, "ready": 0}}, "merge", subresource="status")
    assert [e.object for e in events[:len(committed)]] == committed
    latest = events[-1].object
    assert latest["status"] == {"ready": 0, "conditions": [{"type": "Suspended", "status": "False"}]}
    assert latest["spec"]["suspend"] is True and latest["metadata"]["labels"] == {"a": "1"}
    assert events[-1].old is not None and events[-1].old["status"]["active"] == 2


def test_main_resource_merge_patches_leave_earlier_snapshots_alone(store: ObjectStore) -> None:
    events: list[WatchEvent] = []
    store.subscribe(events.append)
    store.create(JOBS, _job(), namespace="default")
    store.patch(JOBS, "default", "j", {"status": {"active": 1}}, "merge", subresource="status")
    committed = [copy.deepcopy(e.object) for e in events]
    store.patch(JOBS, "default", "j", {"metadata": {"labels": {"b": "2"}, "finalizers": None},
                                       "spec": {"suspend": False}}, "merge")
    assert [e.object for e in events[:len(committed)]] == committed
    latest = events[-1].object
    assert latest["metadata"]["labels"] == {"a": "1", "b": "2"} and "finalizers" not in latest["metadata"]
    assert latest["spec"]["suspend"] is False and latest["status"] == {"active": 1}


def test_a_create_keeps_the_body_it_defaulted_in_place(store: ObjectStore) -> None:
    body = _job()
    stored = store.create_owned(JOBS, body, namespace="default")
    # defaulting happened on the stored object (the Job's selector, the pod template's defaults)
    assert stored["spec"]["template"]["spec"]["containers"][0]["terminationMessagePolicy"] == "File"
    assert stored["spec"]["backoffLimit"] == 6
    assert store.get(JOBS, "default", "j")["spec"] == stored["spec"]
