"""Version detection at start (kube/discovery.py): against a sandbox serving Kueue at v1beta1 only and no
KubeRay or AppWrapper, the operator starts (no informer waits on a 404), writes its Kueue objects as
v1beta1, runs a plain KaiwoJob, and puts Ray workloads in ERROR with a condition naming what to install;
`kaiwo-ray up` says so in one line per missing dependency, and stops at once without Kueue."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from e2e_harness import in_process_operator

from kaiwo_ray.controllers.manager import HostSettings
from kaiwo_ray.kube.discovery import ClusterApis, parse_group_list
from kaiwo_ray.kube.resources import CLUSTERQUEUES, RAYJOBS, TOPOLOGIES
from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox

KAIWO = ("kaiwo.silogen.ai", "v1alpha1")


def _crds(groups: set[str], *, kueue_v1beta1_only: bool) -> list[dict[str, Any]]:
    """CRDs as a default sandbox serves them (read over its API), limited to `groups`; Kueue's cut down to
    the v1beta1 that Kueue before 0.15 served."""
    with start_sandbox(nodes=[]) as donor:
        listed = kubernetes.client.ApiextensionsV1Api(donor.api_client()).list_custom_resource_definition()
        crds = [donor.api_client().sanitize_for_serialization(c) for c in listed.items]
    chosen = []
    for crd in crds:
        if crd["spec"]["group"] not in groups:
            continue
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": crd["metadata"]["name"]}, "spec": copy.deepcopy(crd["spec"])}
        if kueue_v1beta1_only and crd["spec"]["group"] == "kueue.x-k8s.io":
            versions = [v for v in crd["spec"]["versions"] if v["name"] != "v1beta2"]
            for version in versions:
                version["storage"] = True
                version.pop("deprecated", None)
            crd["spec"]["versions"] = versions
        chosen.append(crd)
    return chosen


def _install(sb: RunningSandbox, crds: list[dict[str, Any]]) -> None:
    api = kubernetes.client.ApiextensionsV1Api(sb.api_client())
    for crd in crds:
        api.create_custom_resource_definition(crd)


@pytest.fixture(scope="module")
def old_kueue() -> Iterator[RunningSandbox]:
    crds = _crds({"kaiwo.silogen.ai", "config.kaiwo.silogen.ai", "kueue.x-k8s.io"}, kueue_v1beta1_only=True)
    with start_sandbox(install_crds=False, cluster=["scheduler", "kubelet", "job-controller"],
                       time_factor=0.05) as sb:
        _install(sb, crds)
        yield sb


def test_discovery_reads_what_is_served() -> None:
    groups = parse_group_list({"groups": [{"name": "kueue.x-k8s.io", "versions": [{"version": "v1beta1"}]},
                                          {"name": "ray.io", "versions": [{"version": "v1"}]}]})
    apis = ClusterApis(groups, "v1alpha1")
    assert apis.kueue_version == "v1beta1"
    assert apis.served(CLUSTERQUEUES) == CLUSTERQUEUES.with_version("v1beta1")
    assert apis.served(TOPOLOGIES) == TOPOLOGIES.with_version("v1alpha1")
    assert apis.served(RAYJOBS) == RAYJOBS
    assert [d.name for d in apis.missing()] == ["AppWrapper"]
    assert [d.name for d in ClusterApis({}, None).missing()] == ["Kueue", "KubeRay", "AppWrapper"]
    assert ClusterApis.everything().missing() == []


def test_the_operator_runs_on_kueue_v1beta1_without_kuberay_or_appwrapper(old_kueue: RunningSandbox) -> None:
    sb = old_kueue
    custom: Any = kubernetes.client.CustomObjectsApi(sb.api_client())
    # no informer waits on a 404: the start returns
    with in_process_operator(HostSettings(kubeconfig=str(sb.kubeconfig_path), lease=False)):
        queues = eventually(lambda: custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta1",
                                                                      "clusterqueues")["items"], timeout=30)
        assert queues[0]["apiVersion"] == "kueue.x-k8s.io/v1beta1" and queues[0]["spec"]["cohort"]
        job = {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob", "metadata": {"name": "plain"},
               "spec": {"entrypoint": "sleep 1", "image": "busybox"}}
        ray_job = copy.deepcopy(job) | {"metadata": {"name": "ray-job"}}
        ray_job["spec"]["ray"] = True
        ray_service = {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoService",
                       "metadata": {"name": "ray-svc"}, "spec": {"ray": True, "image": "rayproject/ray:2.60.0",
                                                                 "serveConfigV2": "applications: []"}}
        custom.create_namespaced_custom_object(*KAIWO, "default", "kaiwojobs", job)
        custom.create_namespaced_custom_object(*KAIWO, "default", "kaiwojobs", ray_job)
        custom.create_namespaced_custom_object(*KAIWO, "default", "kaiwoservices", ray_service)
        batch = kubernetes.client.BatchV1Api(sb.api_client())
        created = eventually(lambda: batch.list_namespaced_job("default", label_selector="kaiwo.silogen.ai/name=plain")
                             .items, timeout=30)
        assert created[0].metadata.labels["kueue.x-k8s.io/queue-name"] == "kaiwo"
        for plural, name, needs in (("kaiwojobs", "ray-job", ["KubeRay"]),
                                    ("kaiwoservices", "ray-svc", ["AppWrapper", "KubeRay"])):
            def errored(plural: str = plural, name: str = name) -> dict[str, Any] | None:
                obj: dict[str, Any] = custom.get_namespaced_custom_object(*KAIWO, "default", plural, name)
                return obj if (obj.get("status") or {}).get("status") == "ERROR" else None

            status = eventually(errored, timeout=30)["status"]
            (cond,) = [c for c in status["conditions"] if c["type"] == "Schedulable"]
            assert cond["status"] == "False" and cond["reason"] == "DependencyMissing"
            named = {n for n in ("KubeRay", "AppWrapper") if f"{n} is not installed" in cond["message"]}
            assert named == set(needs), cond["message"]
            assert "then restart kaiwo-ray" in cond["message"]


def _up(kubeconfig: Path, tmp_path: Path, timeout: float) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "hosts.cli.main", "up", "--no-ray", "--kubeconfig",
                             str(kubeconfig), "--controllers", "kaiwoconfig", "--no-lease"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)


def test_up_names_each_missing_dependency_in_one_line(old_kueue: RunningSandbox, tmp_path: Path) -> None:
    up = _up(old_kueue.kubeconfig_path, tmp_path, 60)
    try:
        assert up.stdout is not None and up.stderr is not None
        lines = [up.stderr.readline() for _ in range(2)]
        assert lines[0].startswith("kaiwo-ray up: KubeRay is not installed (the cluster serves no ray.io/v1): ")
        assert lines[1].startswith("kaiwo-ray up: AppWrapper is not installed (the cluster serves no "
                                   "workload.codeflare.dev/v1beta2): ")
        eventually(lambda: up.poll() is not None or "Running." in (up.stdout.readline() if up.stdout else ""),
                   timeout=60)
        assert up.poll() is None
    finally:
        up.terminate()
        up.wait(30)


def test_up_without_kueue_stops_with_one_line(tmp_path: Path) -> None:
    crds = _crds({"kaiwo.silogen.ai", "config.kaiwo.silogen.ai", "ray.io", "workload.codeflare.dev"},
                 kueue_v1beta1_only=False)
    with start_sandbox(nodes=[], install_crds=False) as sb:
        _install(sb, crds)
        result = subprocess.run([sys.executable, "-m", "hosts.cli.main", "up", "--no-ray", "--kubeconfig",
                                 str(sb.kubeconfig_path)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "kaiwo-ray up: Kueue is not installed (the cluster serves no kueue.x-k8s.io/v1beta1): every workload "
        "(queueing) and KaiwoQueueConfig cannot run; install Kueue >= 0.9 (v1beta1), >= 0.15 (v1beta2); tested "
        "with 0.12 and 0.15, then restart kaiwo-ray"]


DOCS = {name: (Path(__file__).resolve().parents[2] / name).read_text()
        for name in ("README.md", "docs/install.md", "docs/compatibility.md")}


def test_the_three_documents_state_the_same_supported_versions() -> None:
    """README, install.md and compatibility.md say the same Kubernetes and Kueue versions, and those are
    the Kueue minimums `kaiwo-ray up` prints (kube/discovery.py)."""
    import re

    from kaiwo_ray.kube.discovery import KUEUE

    v1beta1, v1beta2 = re.findall(r">= (0\.\d+) \((v1beta\d)\)", KUEUE.supported)
    assert [v1beta1[1], v1beta2[1]] == ["v1beta1", "v1beta2"]
    kueue = f"`v1beta1` from {v1beta1[0]}, `v1beta2` from {v1beta2[0]}"
    for name, text in DOCS.items():
        assert kueue in text, f"{name} does not say {kueue!r}"
        assert "1.29 or newer" in text, f"{name} does not say Kubernetes 1.29 or newer"
        # no other statement of either: a Kubernetes range or bound, a Kueue minimum for v1beta2
        assert not re.findall(r"\b1\.\d\d ?(?:-|\u2013|\+|to) ?(?:1\.\d\d)?", text), name
        for line in text.splitlines():
            pattern = r"(?:>=|from) ?(0\.\d+) (?:\(|with )`?v1beta2|v1beta2`? from (0\.\d+)"
            for version in re.findall(pattern, line):
                found = next(v for v in version if v)
                assert found == v1beta2[0], f"{name}: v1beta2 from {found}, not {v1beta2[0]}: {line.strip()}"
