"""Property tests: GPU placement never exceeds a node, always covers the request (or says it cannot),
and rendering is deterministic and side-effect free."""

from __future__ import annotations

from typing import Any

import orjson
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from render_fixtures import CONFIG, job, node, pod_templates, service

from kaiwo_ray.api.workloads import KaiwoJob, KaiwoService
from kaiwo_ray.render import (
    compute_resource_config,
    gpu_schedulability,
    gpu_stats,
    render_all,
    render_main,
    sanitize_rfc1123,
    workload_gpu_check,
)
from kaiwo_ray.render.download_config import _RESERVED, dump_download_config
from kaiwo_ray.render.names import _OUTSIDE_ALPHABET as _OUTSIDE
from kaiwo_ray.render.names import _SEPARATOR_RUNS as _RUNS

SETTINGS = settings(suppress_health_check=[HealthCheck.too_slow])


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """AMD nodes of 1-16 GPUs (allocatable absent or 1..N), plus some NVIDIA and CPU-only noise."""
    nodes = []
    for index in range(draw(st.integers(0, 6))):
        gpus = draw(st.integers(1, 16))
        allocatable = draw(st.one_of(st.none(), st.integers(1, gpus)))
        nodes.append(
            node(
                f"amd-mi300x-{gpus}gpu-64core-512gi",
                {} if allocatable is None else {"amd.com/gpu": str(allocatable)},
                name=f"amd-{index}",
            )
        )
    if draw(st.booleans()):
        nodes.append(node("nvidia-h100-8gpu-64core-512gi", {"nvidia.com/gpu": "8"}, name="nv"))
        nodes.append(node("cpu-only-0gpu-8core-32gi", name="cpu"))
    return nodes


def _labels_and_allocatable(nodes: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
    sizes, allocatable = [], []
    for item in nodes:
        pool = item["metadata"]["labels"]["kaiwo/nodepool"]
        if pool.startswith("amd-"):
            sizes.append(int(pool.split("-")[2].removesuffix("gpu")))
            value = item["status"]["allocatable"].get("amd.com/gpu")
            if value is not None:
                allocatable.append(int(value))
    return sizes, allocatable


@SETTINGS
@given(nodes=clusters(), gpus=st.integers(1, 80))
def test_auto_split_never_puts_more_gpus_in_a_pod_than_the_smallest_node_has(
    nodes: list[dict[str, Any]], gpus: int
) -> None:
    stats = gpu_stats(nodes, "amd")
    rc = compute_resource_config(
        gpus=gpus, replicas=1, gpus_per_replica=0, stats=stats, default_gpu_resource_key="x"
    )
    sizes, allocatable = _labels_and_allocatable(nodes)
    if sum(allocatable) >= gpus:
        assert rc.gpus_per_replica <= min(allocatable)
    elif sum(sizes) >= gpus:
        assert rc.gpus_per_replica <= min(sizes)
    assert rc.total_gpus == gpus


@SETTINGS
@given(
    nodes=clusters(),
    gpus=st.integers(0, 80),
    replicas=st.one_of(st.none(), st.integers(0, 6)),
    per_replica=st.integers(0, 12),
    batch=st.booleans(),
)
def test_allocation_covers_the_request_or_the_workload_is_not_schedulable(
    nodes: list[dict[str, Any]], gpus: int, replicas: int | None, per_replica: int, batch: bool
) -> None:
    stats = gpu_stats(nodes, "amd")
    rc = compute_resource_config(
        gpus=gpus, replicas=replicas, gpus_per_replica=per_replica, stats=stats, default_gpu_resource_key="x"
    )
    assert rc.total_gpus == max((replicas or 0) * per_replica, gpus)
    allocated = rc.gpus_per_replica if batch else rc.replicas * rc.gpus_per_replica
    check = gpu_schedulability(rc, stats, single_pod=batch)
    assert allocated >= rc.total_gpus or not check.schedulable, (rc, check)
    if check.schedulable and rc.total_gpus > 0:
        assert rc.total_gpus <= stats.total_gpus


def _gpu_request(template: dict[str, Any]) -> int:
    return int(template["spec"]["containers"][0]["resources"]["requests"].get("amd.com/gpu", 0))


@SETTINGS
@given(
    nodes=clusters(),
    gpus=st.integers(0, 40),
    kind=st.sampled_from(["job", "rayjob", "deployment", "rayservice"]),
)
def test_rendered_pods_request_what_the_arithmetic_promises(
    nodes: list[dict[str, Any]], gpus: int, kind: str
) -> None:
    spec = {"image": "i", "gpus": gpus, "ray": kind in ("rayjob", "rayservice")}
    workload: KaiwoJob | KaiwoService = job(spec) if kind in ("job", "rayjob") else service(spec)
    rendered = render_main(workload, CONFIG, nodes)
    check = workload_gpu_check(workload, CONFIG, nodes)
    templates = pod_templates(rendered)
    if kind == "job":
        allocated = _gpu_request(templates[0])
    elif kind == "deployment":
        allocated = rendered["spec"]["replicas"] * _gpu_request(templates[0])
    else:
        assert _gpu_request(templates[0]) == 0  # the Ray head never holds GPUs
        allocated = sum(
            group["replicas"] * _gpu_request(group["template"])
            for group in (
                rendered["spec"]["rayClusterSpec"]
                if kind == "rayjob"
                else rendered["spec"]["components"][0]["template"]["spec"]["rayClusterConfig"]
            )["workerGroupSpecs"]
        )
    assert allocated >= gpus or not check.schedulable


label_text = st.text(alphabet="abcxyz-._", min_size=1, max_size=8).filter(
    lambda s: s[0].isalpha() and s[-1].isalpha()
)


@st.composite
def workloads(draw: st.DrawFn) -> KaiwoJob | KaiwoService:
    spec: dict[str, Any] = {
        "image": "img",
        "gpus": draw(st.integers(0, 20)),
        "replicas": draw(st.integers(1, 4)),
        "ray": draw(st.booleans()),
        "user": draw(st.text(max_size=12)),
        "env": [
            {"name": n, "value": v}
            for n, v in draw(st.dictionaries(label_text, st.text(max_size=5), max_size=3)).items()
        ],
        "podTemplateSpecLabels": draw(st.dictionaries(label_text, label_text, max_size=3)),
        "entrypoint": draw(st.text(alphabet="ab \\\n#!/", max_size=20)),
        "secretVolumes": [{"name": "s", "secretName": "sec", "mountPath": "/s"}]
        if draw(st.booleans())
        else [],
    }
    if draw(st.booleans()):
        spec["storage"] = {
            "storageEnabled": True,
            "data": {
                "storageSize": "1Gi",
                "download": {
                    "s3": [
                        {
                            "endpointUrl": "e",
                            "buckets": [{"name": "b"}],
                            "accessKeyId": {"secretName": "k", "secretKey": "id"},
                        }
                    ]
                },
            },
            "huggingFace": {"storageSize": "2Gi", "preCacheRepos": [{"repoId": "o/m"}]},
        }
    labels = draw(st.dictionaries(label_text, label_text, max_size=3))
    is_job = draw(st.booleans())
    if draw(st.booleans()):  # a user-supplied embedded object: the render must copy, never mutate it
        spec[_EMBEDDED[(is_job, spec["ray"])]] = {"spec": _embedded_spec(is_job, spec["ray"], draw)}
    return (job if is_job else service)(spec, labels=labels)


_EMBEDDED = {
    (True, False): "job",
    (True, True): "rayJob",
    (False, False): "deployment",
    (False, True): "rayService",
}


def _user_template(draw: st.DrawFn, name: str) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "env": [{"name": "MINE", "value": "1"}]}
    if draw(st.booleans()):
        container["resources"] = {"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}}
    return {"metadata": {"labels": {"own": "x"}}, "spec": {"containers": [container], "volumes": []}}


def _embedded_spec(is_job: bool, ray: bool, draw: st.DrawFn) -> dict[str, Any]:
    if not ray:
        base: dict[str, Any] = {"template": _user_template(draw, "main")}
        if is_job:
            base["backoffLimit"] = draw(st.integers(0, 3))
        else:
            base["selector"] = {"matchLabels": {"own": "x"}}
        return base
    cluster = {
        "headGroupSpec": {"rayStartParams": {}, "template": _user_template(draw, "head")},
        "workerGroupSpecs": [
            {"groupName": f"g{index}", "rayStartParams": {}, "template": _user_template(draw, "worker")}
            for index in range(draw(st.integers(0, 2)))
        ],
    }
    return {"rayClusterSpec": cluster} if is_job else {"rayClusterConfig": cluster}


@SETTINGS
@given(workload=workloads(), nodes=clusters())
def test_rendering_is_deterministic_and_does_not_touch_its_input(
    workload: KaiwoJob | KaiwoService, nodes: list[dict[str, Any]]
) -> None:
    before = orjson.dumps(workload.model_dump(mode="json"))
    nodes_before = orjson.dumps(nodes)
    first = orjson.dumps(render_all(workload, CONFIG, nodes))
    second = orjson.dumps(render_all(workload, CONFIG, nodes))
    assert first == second
    reparsed = type(workload).model_validate_json(workload.model_dump_json(by_alias=True, exclude_none=True))
    assert orjson.dumps(render_all(reparsed, CONFIG, nodes)) == first
    assert orjson.dumps(workload.model_dump(mode="json")) == before
    assert orjson.dumps(nodes) == nodes_before


@SETTINGS
@given(workload=workloads())
def test_children_share_no_mutable_objects(workload: KaiwoJob | KaiwoService) -> None:
    objs = render_all(workload, CONFIG, [])
    seen: dict[int, str] = {}

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict | list):
            assert id(value) not in seen, f"{path} is the same object as {seen[id(value)]}"
            seen[id(value)] = path
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                walk(item, f"{path}.{key}")

    for index, obj in enumerate(objs):
        walk(obj, f"[{index}]")


# keys are the downloader's field names, never YAML keywords (the emitter writes keys as they are)
json_keys = st.from_regex(r"[a-z][A-Za-z]{0,8}", fullmatch=True).filter(
    lambda key: key.lower() not in _RESERVED
)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.text(max_size=12))
json_documents = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(json_keys, children, max_size=3),
    ),
    max_leaves=12,
)


@SETTINGS
@given(document=st.dictionaries(json_keys, json_documents, max_size=4))
def test_download_config_yaml_reads_back_as_the_same_document(document: dict[str, Any]) -> None:
    text = dump_download_config(document)
    assert (yaml.safe_load(text) or {}) == document


@SETTINGS
@given(text=st.text(alphabet="aZ09.-_@ ", max_size=80))
def test_sanitizer_fast_path_agrees_with_the_full_routine(text: str) -> None:
    full = _OUTSIDE.sub("-", text.lower()).strip("-.")
    full = _RUNS.sub("-", full)[:63].rstrip("-")
    assert sanitize_rfc1123(text) == full
    assert sanitize_rfc1123(full) == full or full.endswith(".")  # idempotent up to a cut ending in "."
