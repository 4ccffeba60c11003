"""The GPU preemption controller's index of which pods and Workloads may belong to which root: a pass
tests only these, so every object that could be a root's must be among its candidates."""

from __future__ import annotations

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.controllers.gpupreemption import _Members


def _pod(name: str, uid: str, owner: str | None = None, gpus: int = 0, namespace: str = "team") -> JsonObj:
    resources = {"limits": {"amd.com/gpu": gpus}} if gpus else {}
    meta: JsonObj = {"name": name, "namespace": namespace, "uid": uid}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": owner,
                                    "controller": True}]
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "resources": resources}]}}


def _owner(uid: str) -> JsonObj:
    return {"metadata": {"uid": uid}}


def test_an_object_is_a_candidate_of_every_root_it_may_belong_to() -> None:
    members = _Members()
    chains: dict[str, list[JsonObj]] = {"known": [_owner("job-1"), _owner("kaiwojob-1")]}
    members.update(_pod("cpu-only", "p1", owner="job-0"), chains)
    members.update(_pod("gpu-known", "known", owner="job-1", gpus=1), chains)
    members.update(_pod("gpu-unknown", "unknown", owner="job-2", gpus=1), chains)
    members.update(_pod("elsewhere", "other", owner="job-1", gpus=1, namespace="other"), chains)

    def names(root: str, namespace: str = "team") -> set[str]:
        return {key[1] for key in members.candidates(namespace, root)}

    assert names("job-0") == {"cpu-only", "gpu-unknown"}  # owner reference; a chain not known yet
    assert names("kaiwojob-1") == {"gpu-known", "gpu-unknown"}  # through the known chain
    assert names("p1") == {"cpu-only", "gpu-unknown"}  # a pod is its own root
    assert names("kaiwojob-2") == {"gpu-unknown"}
    members.chained("unknown", [_owner("job-2"), _owner("kaiwojob-2")])
    assert names("kaiwojob-2") == {"gpu-unknown"}
    assert names("kaiwojob-1") == {"gpu-known"}
    members.remove(("team", "gpu-known"))
    assert names("kaiwojob-1") == set()
    assert names("job-1", "other") == {"elsewhere"}
