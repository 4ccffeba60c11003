"""`ObjectCache.in_order`: a few chosen objects, in the order iterating the whole cache gives them."""

from __future__ import annotations

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.kube.cache import ObjectCache


def _pod(name: str, rv: str) -> JsonObj:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


def test_in_order_follows_iteration_order_through_updates_and_removals() -> None:
    cache = ObjectCache()
    for index, name in enumerate(["a", "b", "c", "d"]):
        cache.upsert(_pod(name, str(index + 1)))
    cache.upsert(_pod("b", "10"))  # an update keeps its place
    cache.remove(_pod("a", "11"))
    cache.upsert(_pod("a", "12"))  # removed and added again: last
    wanted = [("ns", "a"), ("ns", "c"), ("ns", "b"), ("ns", "gone"), ("ns", "b")]
    picked = cache.in_order(wanted)
    assert [p["metadata"]["name"] for p in picked] == ["b", "c", "a"]
    assert [p["metadata"]["name"] for p in cache if p["metadata"]["name"] in {"a", "b", "c"}] == ["b", "c", "a"]
    assert picked[0]["metadata"]["resourceVersion"] == "10"
