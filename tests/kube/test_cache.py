"""The cache's indexes follow every upsert/remove, and a relist explains itself as events."""

from __future__ import annotations

from typing import Any

import pytest

from kaiwo_ray.kube.cache import ObjectCache


def obj(name: str, rv: str, owner: str | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "resourceVersion": rv, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "kind": "KaiwoJob", "name": "o", "apiVersion": "x/v1"}]
    return {"metadata": meta}


def test_owner_and_label_indexes_follow_updates() -> None:
    cache = ObjectCache(label_keys=["kaiwo.silogen.ai/run-id"])
    cache.upsert(obj("a", "1", owner="u1", labels={"kaiwo.silogen.ai/run-id": "r1"}))
    cache.upsert(obj("b", "2", owner="u1"))
    assert [o["metadata"]["name"] for o in cache.owned_by("u1")] == ["a", "b"]
    assert [o["metadata"]["name"] for o in cache.with_label("kaiwo.silogen.ai/run-id", "r1")] == ["a"]
    # ownership and label move
    cache.upsert(obj("a", "3", owner="u2", labels={"kaiwo.silogen.ai/run-id": "r2"}))
    assert [o["metadata"]["name"] for o in cache.owned_by("u1")] == ["b"]
    assert cache.with_label("kaiwo.silogen.ai/run-id", "r1") == []
    assert [o["metadata"]["name"] for o in cache.owned_by("u2")] == ["a"]
    cache.remove(obj("b", "4"))
    assert cache.owned_by("u1") == []
    assert len(cache) == 1


def test_unindexed_label_lookup_is_an_error() -> None:
    with pytest.raises(KeyError):
        ObjectCache().with_label("app", "x")


def test_replace_all_synthesizes_added_modified_deleted() -> None:
    cache = ObjectCache()
    cache.upsert(obj("keep", "1"))
    cache.upsert(obj("change", "1"))
    cache.upsert(obj("vanish", "1"))
    events = cache.replace_all([obj("keep", "1"), obj("change", "5"), obj("new", "6")], "9")
    assert [(t, o["metadata"]["name"]) for t, o, _ in events] == [
        ("MODIFIED", "change"), ("ADDED", "new"), ("DELETED", "vanish")]
    assert cache.resource_version == "9"
    assert cache.get("ns", "vanish") is None


def test_cached_objects_carry_no_managed_fields() -> None:
    cache = ObjectCache()
    managed = [{"manager": "kaiwo-ray", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]
    cache.upsert({"metadata": {"name": "a", "resourceVersion": "1", "managedFields": managed}})
    cache.replace_all([{"metadata": {"name": "b", "resourceVersion": "2", "managedFields": managed}}], "2")
    assert cache.upsert_if_newer({"metadata": {"name": "b", "resourceVersion": "3", "managedFields": managed}})
    assert all("managedFields" not in obj["metadata"] for obj in cache)


def test_phase_index_follows_updates_and_removals() -> None:
    cache = ObjectCache()
    cache.upsert({"metadata": {"name": "a", "resourceVersion": "1"}, "status": {"status": "PENDING"}})
    cache.upsert({"metadata": {"name": "b", "resourceVersion": "1"}, "status": {"status": "PENDING"}})
    cache.upsert({"metadata": {"name": "c", "resourceVersion": "1"}, "status": {"phase": "Bound"}})
    assert sorted(o["metadata"]["name"] for o in cache.in_phase("PENDING")) == ["a", "b"]
    cache.upsert({"metadata": {"name": "a", "resourceVersion": "2"}, "status": {"status": "RUNNING"}})
    cache.remove({"metadata": {"name": "b"}})
    assert cache.in_phase("PENDING") == [] and [o["metadata"]["name"] for o in cache.in_phase("RUNNING")] == ["a"]


def test_snapshot_is_one_tuple_until_the_cache_changes() -> None:
    """Memos key on the snapshot's identity (the nodes' GPU counts): it must change with any change."""
    cache = ObjectCache()
    cache.upsert(obj("a", "1"))
    first = cache.snapshot()
    assert cache.snapshot() is first and [o["metadata"]["name"] for o in first] == ["a"]
    cache.remove(obj("absent", "1"))  # nothing removed: nothing changed
    assert cache.snapshot() is first
    cache.upsert(obj("a", "2"))
    second = cache.snapshot()
    assert second is not first and second[0]["metadata"]["resourceVersion"] == "2"
    cache.upsert(obj("b", "3"))
    third = cache.snapshot()
    assert len(third) == 2
    cache.remove(obj("a", "4"))
    assert [o["metadata"]["name"] for o in cache.snapshot()] == ["b"]
    cache.replace_all([obj("c", "5")], "5")
    assert [o["metadata"]["name"] for o in cache.snapshot()] == ["c"]


def test_a_write_answer_older_than_a_seen_removal_is_not_written_back() -> None:
    """The answer to a write made before an object's deletion, processed after the watch delivered the
    DELETED event, would bring back an object no event removes again (a ghost)."""
    cache = ObjectCache()
    cache.upsert(obj("a", "5"))
    cache.remove(obj("a", "7"))  # the DELETED event carries the deletion's version
    assert not cache.upsert_if_newer(obj("a", "6"))  # an answer from before the deletion
    assert not cache.upsert_if_newer(obj("a", "7"))
    assert cache.get("ns", "a") is None
    assert cache.upsert_if_newer(obj("a", "8"))  # a new object of that name, created after it
    assert cache.get("ns", "a") is not None


def test_a_relist_removal_refuses_answers_up_to_the_lists_version() -> None:
    cache = ObjectCache()
    cache.replace_all([obj("a", "3")], "3")
    cache.replace_all([], "9")  # `a` went while nobody watched, at some version up to 9
    assert not cache.upsert_if_newer(obj("a", "4"))
    assert cache.upsert_if_newer(obj("a", "10"))


def test_an_update_only_write_through_never_adds_an_object() -> None:
    cache = ObjectCache()
    assert not cache.upsert_if_newer(obj("a", "4"), update_only=True)
    assert cache.get("ns", "a") is None
    cache.upsert(obj("a", "4"))
    assert cache.upsert_if_newer(obj("a", "5"), update_only=True)
    assert cache.get("ns", "a")["metadata"]["resourceVersion"] == "5"  # type: ignore[index]


def test_removed_keys_are_remembered_up_to_a_bound() -> None:
    from kaiwo_ray.kube.cache import TOMBSTONES

    cache = ObjectCache()
    for i in range(TOMBSTONES + 1):
        cache.remove(obj(f"o{i}", "7"))
    assert cache.upsert_if_newer(obj("o0", "6"))  # the oldest, forgotten
    assert not cache.upsert_if_newer(obj(f"o{TOMBSTONES}", "6"))
