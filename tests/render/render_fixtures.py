"""Builders shared by the renderer tests: manifests as plain dicts, nodes, and lookups into children."""

from __future__ import annotations

from typing import Any

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.workloads import KaiwoJob, KaiwoService
from kaiwo_ray.render import render_all, render_main


def job(spec: JsonObj | None = None, **meta: Any) -> KaiwoJob:
    metadata = {"name": "wl", "namespace": "ns", "uid": "UID-1", **meta}
    return KaiwoJob.model_validate(
        {
            "apiVersion": "kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoJob",
            "metadata": metadata,
            "spec": spec or {},
        }
    )


def service(spec: JsonObj | None = None, **meta: Any) -> KaiwoService:
    metadata = {"name": "wl", "namespace": "ns", "uid": "UID-1", **meta}
    return KaiwoService.model_validate(
        {
            "apiVersion": "kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoService",
            "metadata": metadata,
            "spec": spec or {},
        }
    )


def node(pool: str | None, allocatable: JsonObj | None = None, name: str = "n") -> JsonObj:
    labels = {"kaiwo/nodepool": pool} if pool is not None else {}
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": allocatable or {}}}


def gpu_nodes(vendor: str, count: int, gpus: int, allocatable: int | None = None) -> list[JsonObj]:
    """`count` nodes labelled `<vendor>-model-<gpus>gpu-...` with `allocatable` (default: all) GPUs."""
    alloc = gpus if allocatable is None else allocatable
    return [
        node(
            f"{vendor}-model-{gpus}gpu-64core-512gi", {f"{vendor}.com/gpu": str(alloc)}, name=f"{vendor}-{i}"
        )
        for i in range(count)
    ]


CONFIG = KaiwoConfigSpec()


def main(
    workload: KaiwoJob | KaiwoService, nodes: list[JsonObj] | None = None, config: KaiwoConfigSpec = CONFIG
) -> JsonObj:
    return render_main(workload, config, nodes or [])


def children(
    workload: KaiwoJob | KaiwoService, nodes: list[JsonObj] | None = None, config: KaiwoConfigSpec = CONFIG
) -> list[JsonObj]:
    return render_all(workload, config, nodes or [])


def pod_templates(obj: JsonObj) -> list[JsonObj]:
    """Every pod template of a main object (Ray: head first, then workers)."""
    kind = obj["kind"]
    if kind in ("Job", "Deployment"):
        return [obj["spec"]["template"]]
    if kind == "RayJob":
        cluster = obj["spec"]["rayClusterSpec"]
    elif kind == "AppWrapper":
        cluster = obj["spec"]["components"][0]["template"]["spec"]["rayClusterConfig"]
    else:
        raise AssertionError(kind)
    return [cluster["headGroupSpec"]["template"], *(g["template"] for g in cluster["workerGroupSpecs"])]


def container(obj: JsonObj, index: int = 0) -> JsonObj:
    """First container of the index-th pod template."""
    return pod_templates(obj)[index]["spec"]["containers"][0]  # type: ignore[no-any-return]


def env_of(c: JsonObj) -> list[tuple[str, Any]]:
    return [(var["name"], var.get("value", var.get("valueFrom"))) for var in c.get("env", [])]
