"""ObjectStore used directly, as the simulated controllers use it (no HTTP, no event loop)."""

from __future__ import annotations

from typing import Any

import pytest

from kaiwo_sandbox.contracts import (
    CONFIGMAPS,
    GVR,
    JOBS,
    KUEUE_VERSION,
    NAMESPACES,
    PODS,
    WORKLOADS,
    ApiError,
    WatchEvent,
)
from kaiwo_sandbox.storage import snapshot
from kaiwo_sandbox.storage.crd_install import install_crds
from kaiwo_sandbox.storage.store import ObjectStore


@pytest.fixture
def store() -> ObjectStore:
    fresh = ObjectStore()
    fresh.create(NAMESPACES, {"metadata": {"name": "default"}})
    return fresh


def _job(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}


def test_subscribers_see_committed_writes_in_order(store: ObjectStore) -> None:
    seen: list[tuple[str, str, str]] = []

    def record(event: WatchEvent) -> None:
        seen.append((event.type, event.object["metadata"]["name"], event.object["metadata"]["resourceVersion"]))

    unsubscribe = store.subscribe(record)
    store.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace="default")
    store.patch(CONFIGMAPS, "default", "a", {"data": {"k": "v"}}, "merge")
    store.patch(CONFIGMAPS, "default", "a", {"data": {"k": "v"}}, "merge")  # no-op: no event
    store.create(CONFIGMAPS, {"metadata": {"name": "dry"}}, namespace="default", dry_run=True)  # no event
    store.delete(CONFIGMAPS, "default", "a")
    unsubscribe()
    store.create(CONFIGMAPS, {"metadata": {"name": "after"}}, namespace="default")
    assert [(t, n) for t, n, _ in seen] == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    rvs = [int(rv) for _, _, rv in seen]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3


def test_watch_events_carry_the_previous_object(store: ObjectStore) -> None:
    events: list[WatchEvent] = []
    store.subscribe(events.append)
    store.create(CONFIGMAPS, {"metadata": {"name": "a"}, "data": {"v": "1"}}, namespace="default")
    store.patch(CONFIGMAPS, "default", "a", {"data": {"v": "2"}}, "merge")
    assert events[-1].old is not None and events[-1].old["data"] == {"v": "1"}
    assert events[-1].object["data"] == {"v": "2"}
    assert events[-1].gvr == CONFIGMAPS


def test_admission_hooks_see_creates_and_updates_but_not_status_writes(store: ObjectStore) -> None:
    calls: list[tuple[str, str]] = []

    def hook(operation: str, gvr: GVR, obj: dict[str, Any], old: Any, user: str) -> None:
        calls.append((operation, user))
        if operation == "CREATE":
            obj["spec"]["suspend"] = True

    store.add_admission_hook(hook)
    job = store.create(JOBS, _job("j"), namespace="default", user="alice")
    assert job["spec"]["suspend"] is True
    store.patch(JOBS, "default", "j", {"metadata": {"labels": {"a": "b"}}}, "merge", user="bob")
    store.patch(JOBS, "default", "j", {"status": {"active": 1}}, "merge", subresource="status")
    assert calls == [("CREATE", "alice"), ("UPDATE", "bob")]


def test_admission_hook_can_reject(store: ObjectStore) -> None:
    def deny(operation: str, gvr: GVR, obj: dict[str, Any], old: Any, user: str) -> None:
        raise ApiError(403, "Forbidden", "admission webhook denied the request")

    remove = store.add_admission_hook(deny)
    with pytest.raises(ApiError) as exc:
        store.create(CONFIGMAPS, {"metadata": {"name": "x"}}, namespace="default")
    assert exc.value.code == 403
    remove()
    store.create(CONFIGMAPS, {"metadata": {"name": "x"}}, namespace="default")


def test_update_with_stale_resource_version_conflicts(store: ObjectStore) -> None:
    first = store.create(CONFIGMAPS, {"metadata": {"name": "c"}, "data": {"a": "1"}}, namespace="default")
    store.update(CONFIGMAPS, {**first, "data": {"a": "2"}})
    with pytest.raises(ApiError) as exc:
        store.update(CONFIGMAPS, {**first, "data": {"a": "3"}})
    assert (exc.value.code, exc.value.reason) == (409, "Conflict")


def test_status_update_changes_only_status(store: ObjectStore) -> None:
    job = store.create(JOBS, _job("s"), namespace="default")
    job["status"] = {"active": 2}
    job["spec"]["parallelism"] = 7
    updated = store.update(JOBS, job, subresource="status")
    assert updated["status"] == {"active": 2}
    assert updated["spec"]["parallelism"] == 1


def test_bind_sets_node_name_once(store: ObjectStore) -> None:
    store.create(PODS, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
                 namespace="default")
    bound = store.bind("default", "p", "node-1")
    assert bound["spec"]["nodeName"] == "node-1"
    assert any(c["type"] == "PodScheduled" and c["status"] == "True" for c in bound["status"]["conditions"])
    with pytest.raises(ApiError) as exc:
        store.bind("default", "p", "node-2")
    assert exc.value.code == 409


def test_list_across_namespaces_and_copies(store: ObjectStore) -> None:
    store.create(NAMESPACES, {"metadata": {"name": "other"}})
    store.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace="default")
    store.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace="other")
    items, rv = store.list(CONFIGMAPS)
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items] == [("default", "a"), ("other", "a")]
    assert rv == str(store.resource_version)
    items[0]["metadata"]["name"] = "mutated"
    assert store.get(CONFIGMAPS, "default", "a")["metadata"]["name"] == "a"


def test_kueue_objects_are_stored_once_across_versions(store: ObjectStore) -> None:
    from kaiwo_sandbox.cluster.crds import kueue_crds

    install_crds(store, kueue_crds())
    store.create(WORKLOADS, {"metadata": {"name": "w"}, "spec": {"queueName": "q"}}, namespace="default")
    old = store.get(GVR("kueue.x-k8s.io", "v1beta1", "workloads"), "default", "w")
    assert old["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    events: list[WatchEvent] = []
    store.subscribe(events.append)
    store.patch(GVR("kueue.x-k8s.io", "v1beta1", "workloads"), "default", "w", {"spec": {"queueName": "r"}},
                "merge")
    assert events[0].gvr == WORKLOADS and events[0].object["apiVersion"] == f"kueue.x-k8s.io/{KUEUE_VERSION}"


def test_dump_and_load_keep_objects_and_resource_version(store: ObjectStore) -> None:
    store.create(CONFIGMAPS, {"metadata": {"name": "kept"}}, namespace="default")
    state = snapshot.dump(store)
    restored = ObjectStore()
    snapshot.restore(restored, state)
    assert restored.get(CONFIGMAPS, "default", "kept")["metadata"]["uid"] == \
        store.get(CONFIGMAPS, "default", "kept")["metadata"]["uid"]
    created = restored.create(CONFIGMAPS, {"metadata": {"name": "new"}}, namespace="default")
    assert int(created["metadata"]["resourceVersion"]) > store.resource_version


def test_unknown_resource_is_404(store: ObjectStore) -> None:
    with pytest.raises(ApiError) as exc:
        store.get(GVR("example.com", "v1", "nothings"), "default", "x")
    assert exc.value.code == 404


def test_preinstalled_crds_are_upgraded_in_place(store: ObjectStore) -> None:
    from kaiwo_sandbox.cluster.crds import kueue_crds

    assert install_crds(store, kueue_crds()) == 6
    assert install_crds(store, kueue_crds()) == 0  # unchanged: nothing rewritten
    newer = kueue_crds()
    newer[-1]["spec"]["names"]["shortNames"] = ["topo"]
    assert install_crds(store, newer) == 1
    info = store.registry.find("kueue.x-k8s.io", "topologies")
    assert info is not None and info.short_names == ("topo",)


def test_events_expire_after_their_ttl(store: ObjectStore) -> None:
    from datetime import timedelta

    from kaiwo_sandbox.contracts import EVENTS, rfc3339
    from kaiwo_sandbox.storage.event_ttl import expire_events

    now = store.clock.now()
    for name, age in (("old", 7200), ("fresh", 60)):
        store.create(EVENTS, {"metadata": {"name": name}, "involvedObject": {"kind": "Pod", "name": "p"},
                              "reason": "R", "message": "m", "type": "Normal",
                              "lastTimestamp": rfc3339(now - timedelta(seconds=age))}, namespace="default")
    deleted: list[str] = []
    store.subscribe(lambda e: deleted.append(e.object["metadata"]["name"]) if e.type == "DELETED" else None)
    assert expire_events(store, ttl_seconds=3600) == 1
    assert deleted == ["old"]
    assert [e["metadata"]["name"] for e in store.list(EVENTS)[0]] == ["fresh"]


def test_event_expiry_reads_each_time_format_and_never_expires_early(store: ObjectStore) -> None:
    """Timestamps as clients write them: second precision, MicroTime (eventTime), an offset, or
    unreadable (kept). One just inside the TTL stays, one just outside goes."""
    from datetime import timedelta, timezone

    from kaiwo_sandbox.contracts import EVENTS, rfc3339, rfc3339_micro
    from kaiwo_sandbox.storage.event_ttl import expire_events

    now = store.clock.now()
    ages = {"just-inside": ("lastTimestamp", rfc3339(now - timedelta(seconds=3598))),
            "just-outside": ("lastTimestamp", rfc3339(now - timedelta(seconds=3602))),
            "micro-old": ("eventTime", rfc3339_micro(now - timedelta(seconds=3700))),
            "micro-fresh": ("eventTime", rfc3339_micro(now - timedelta(seconds=10))),
            "offset-old": ("lastTimestamp", (now - timedelta(hours=2)).astimezone(timezone(timedelta(hours=2)))
                           .strftime("%Y-%m-%dT%H:%M:%S+02:00")),
            "offset-fresh": ("lastTimestamp", (now - timedelta(seconds=30)).astimezone(timezone(timedelta(hours=-5)))
                             .strftime("%Y-%m-%dT%H:%M:%S-05:00"))}
    for name, (field, stamp) in ages.items():
        event = {"metadata": {"name": name}, "involvedObject": {"kind": "Pod", "name": "p"},
                 "reason": "R", "message": "m", "type": "Normal", field: stamp}
        if field == "eventTime":  # a MicroTime event names who reported it and what it did
            event.update(reportingComponent="tester", reportingInstance="tester-1", action="Testing")
        store.create(EVENTS, event, namespace="default")
    assert expire_events(store, ttl_seconds=3600) == 3
    assert sorted(e["metadata"]["name"] for e in store.list(EVENTS)[0]) == ["just-inside", "micro-fresh",
                                                                            "offset-fresh"]


def test_event_expiry_runs_in_slices_and_keeps_an_event_seen_again_meanwhile(store: ObjectStore) -> None:
    """The periodic pass serves the API between slices (etcd expires each lease on its own, never the
    store at once); an event recorded again while the pass runs (a newer lastTimestamp) is kept."""
    import asyncio
    from datetime import timedelta

    from kaiwo_sandbox.contracts import EVENTS, rfc3339
    from kaiwo_sandbox.storage.event_ttl import expire_events_in_slices

    now = store.clock.now()
    old, fresh = rfc3339(now - timedelta(hours=2)), rfc3339(now - timedelta(seconds=5))
    for i in range(6):
        store.create(EVENTS, {"metadata": {"name": f"e{i}"}, "involvedObject": {"kind": "Pod", "name": "p"},
                              "reason": "R", "message": "m", "type": "Normal",
                              "lastTimestamp": fresh if i == 5 else old}, namespace="default")
    turns: list[int] = []

    async def body() -> int:
        async def meanwhile() -> None:
            await asyncio.sleep(0)  # runs when the first slice yields
            turns.append(len(store.list(EVENTS)[0]))
            store.patch(EVENTS, "default", "e4", {"lastTimestamp": fresh}, "merge")

        other = asyncio.create_task(meanwhile())
        expired = await expire_events_in_slices(store, ttl_seconds=3600, slice_size=2)
        await other
        return expired

    assert asyncio.run(body()) == 4
    assert turns and turns[0] < 6  # the API was served after the first slice, before the last
    assert sorted(e["metadata"]["name"] for e in store.list(EVENTS)[0]) == ["e4", "e5"]
