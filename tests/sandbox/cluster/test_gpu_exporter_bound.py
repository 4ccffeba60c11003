"""The GPU exporter's index of the pods that can hold GPUs equals a filter over every stored pod,
through binding, finishing, deletion and re-creation."""

from __future__ import annotations

from kaiwo_sandbox.cluster.nodes.gpu_exporter import BoundPods, holds_gpus
from kaiwo_sandbox.contracts import NAMESPACES, NODES, PODS, JsonObj
from kaiwo_sandbox.storage.store import ObjectStore


def _pod(name: str) -> JsonObj:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def _names(pods: list[JsonObj]) -> list[str]:
    return sorted(p["metadata"]["name"] for p in pods)


def test_bound_pods_follow_the_store() -> None:
    store = ObjectStore()
    store.create(NAMESPACES, {"metadata": {"name": "default"}})
    store.create(NODES, {"metadata": {"name": "node-1"}})
    store.create(PODS, _pod("seeded"), namespace="default")
    store.bind("default", "seeded", "node-1")
    bound = BoundPods(store)  # started after a pod was bound: it is there
    for name in ("a", "b", "c"):
        store.create(PODS, _pod(name), namespace="default")
    store.bind("default", "a", "node-1")
    store.bind("default", "b", "node-1")
    store.patch(PODS, "default", "b", {"status": {"phase": "Succeeded"}}, "merge", subresource="status")
    store.delete(PODS, "default", "seeded")

    def expected() -> list[str]:
        return _names([p for p in store.refs(PODS) if holds_gpus(p)])

    assert _names(bound.pods()) == expected() == ["a"]
    store.delete(PODS, "default", "a")
    store.create(PODS, _pod("a"), namespace="default")  # the same name again, not bound yet
    assert _names(bound.pods()) == expected() == []
    bound.unsubscribe()
    store.bind("default", "c", "node-1")
    assert _names(bound.pods()) == []  # no longer kept
