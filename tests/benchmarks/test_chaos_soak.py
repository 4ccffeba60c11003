"""The chaos soak of issue 14 (benchmarks/chaos.py) in `make test`: the same scenario at a tiny
scale with the fault schedule compressed (pace 0.25: watch cuts every 2.5 s, an actor kill, a leader
failover with a 3 s Lease, a sandbox restart from --state), the operator in real Ray actors. Its
correctness figures must be 0 and it must converge; timings are printed by the benchmark, not
asserted. The verdict's own functions are checked on hand-made snapshots, so a duplicate, an orphan,
an unfinished CR or a touched look-alike is known to be counted."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name: str) -> ModuleType:
    """A module of benchmarks/ from its file (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


verdict = load("_chaos_verdict")


def workload(kind: str, name: str, uid: str, status: str = "", reason: str = "") -> dict[str, Any]:
    conditions = [{"type": "Schedulable", "status": "False", "reason": reason}] if reason else []
    return {"kind": kind, "metadata": {"name": name, "namespace": "ns", "uid": uid},
            "status": {"status": status, "conditions": conditions}}


def child(kind: str, name: str, owner_kind: str = "", owner_uid: str = "", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    if owner_uid:
        meta["ownerReferences"] = [{"kind": owner_kind, "uid": owner_uid, "controller": True, "name": "x"}]
    return {"kind": kind, "metadata": meta, **extra}


WANTED = [verdict.Wanted("KaiwoJob", "ns", "done", "COMPLETE", (("Job", 1),)),
          verdict.Wanted("KaiwoService", "ns", "web", "RUNNING", (("Deployment", 1),)),
          verdict.Wanted("KaiwoJob", "ns", "clash", "CONFLICT", (("Job", 1),)),
          verdict.Wanted("KaiwoJob", "ns", "deleted", "GONE", (("Job", 1),))]


def healthy() -> Any:
    snapshot = verdict.Snapshot()
    for obj in (workload("KaiwoJob", "done", "u1", "COMPLETE"), workload("KaiwoService", "web", "u2", "RUNNING"),
                workload("KaiwoJob", "clash", "u3", "ERROR", "ChildNameConflict")):
        snapshot.workloads[(obj["kind"], "ns", obj["metadata"]["name"])] = obj
    snapshot.objects = [child("Job", "done", "KaiwoJob", "u1"), child("Deployment", "web", "KaiwoService", "u2"),
                        child("Job", "clash")]  # the look-alike: nobody's
    return snapshot


def test_the_verdict_passes_a_converged_cluster() -> None:
    assert verdict.judge(WANTED, healthy()).converged


def test_the_verdict_counts_each_kind_of_failure() -> None:
    snapshot = healthy()
    snapshot.objects.append(child("Job", "done-2", "KaiwoJob", "u1"))  # a second Job of `done`
    snapshot.objects.append(child("Job", "deleted", "KaiwoJob", "u9"))  # its owner is gone
    snapshot.workloads[("KaiwoJob", "ns", "clash")]["status"] = {"status": "ERROR", "conditions": []}
    snapshot.workloads[("KaiwoJob", "ns", "deleted")] = workload("KaiwoJob", "deleted", "u4", "RUNNING")
    found = verdict.judge(WANTED, snapshot)
    assert verdict.duplicate_count(found) == 1 and found.duplicates[0].startswith("1 extra Job of KaiwoJob ns/done")
    assert found.orphans == ["Job ns/deleted (owner KaiwoJob gone)"]
    assert [line.split(" (")[0] for line in found.unfinished] == ["KaiwoJob ns/clash", "KaiwoJob ns/deleted"]
    assert not found.converged


def test_a_touched_look_alike_is_counted() -> None:
    pvc = child("PersistentVolumeClaim", "clash-data", spec={"volumeName": "pv-1"}, status={"phase": "Bound"})
    before = {verdict.foreign_key(pvc): verdict.fingerprint(pvc)}
    assert verdict.foreign_modified(before, [pvc], set()) == []
    status_only = {**pvc, "status": {"phase": "Lost"}}  # the simulated cluster's to write
    assert verdict.foreign_modified(before, [status_only], set()) == []
    adopted = child("PersistentVolumeClaim", "clash-data", "KaiwoJob", "u1", spec={"volumeName": "pv-1"})
    assert verdict.foreign_modified(before, [adopted], set()) == [
        "PersistentVolumeClaim ns/clash-data: ownerReferences changed"]
    assert verdict.foreign_modified(before, [], set()) == ["PersistentVolumeClaim ns/clash-data: gone"]
    assert verdict.foreign_modified(before, [pvc], {("persistentvolumeclaims", "ns", "clash-data")}) == [
        "PersistentVolumeClaim ns/clash-data: written by the operator"]


@pytest.mark.slow
def test_the_chaos_soak_converges_with_nothing_lost_duplicated_orphaned_or_taken(tmp_path: Path) -> None:
    figures_path = tmp_path / "chaos.json"
    done = subprocess.run([sys.executable, str(BENCHMARKS / "chaos.py"), "--scale", "10", "--pace", "0.25",
                           "--lease-seconds", "3", "--no-baseline", "--converge-timeout", "90",
                           "--json", str(figures_path)],
                          capture_output=True, text=True, timeout=280, cwd=BENCHMARKS)
    assert figures_path.exists(), done.stdout[-4000:] + done.stderr[-4000:]
    figures = json.loads(figures_path.read_text())
    report = done.stdout[-4000:]
    # the faults happened: requests failed, watches were cut (one round with 410), an actor was
    # killed, the standby took over the Leases and the sandbox came back from its state
    faults = figures["faults"]
    assert sum(figures["fault_hits"].values()) > 0 and figures["fault_hits"].get("500", 0) > 0, report
    assert faults["cuts"] >= 3 and faults["expired_cuts"] >= 1 and faults["streams_cut"] > 0, report
    assert faults["kills"] >= 1 and math.isfinite(faults["restart_s"]), report
    assert math.isfinite(faults["failover_s"]), report
    # ... and the operator came through: every CR at its final phase, nothing twice, nothing left
    # behind, no look-alike touched
    assert figures["crs_not_final"] == 0, report
    assert figures["duplicated_children"] == 0, report
    assert figures["orphaned_children"] == 0, report
    assert figures["foreign_objects_modified"] == 0, report
    assert math.isfinite(figures["seconds_last_fault_to_convergence"]), report
    assert done.returncode == 0, report + done.stderr[-3000:]


def test_the_soak_sizes_its_cluster_for_the_services_it_keeps_running() -> None:
    """A node holds 110 pods and the services' pods run for good: one CPU node per 110 of services +
    100 job pods, each a distinct node (name, address, pod CIDR, machine) in the same node pool, so
    Kueue's CPU quota grows with them."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        chaos = load("chaos")
        objects = load("_objects")
    finally:
        sys.path.remove(str(BENCHMARKS))
    assert [chaos.cpu_nodes_for(s) for s in (1, 10, 11, 100, 500)] == [1, 1, 2, 2, 6]
    from kaiwo_ray.api.config import KaiwoConfigSpec
    from kaiwo_ray.nodes import default_nodes, with_pool_labels

    nodes = with_pool_labels(objects.sized_nodes(3), KaiwoConfigSpec())
    assert len(nodes) == len(default_nodes()) + 2
    cpu = [n for n in nodes if n["metadata"]["name"].startswith("cpu-epyc-")]
    assert [n["metadata"]["name"] for n in cpu] == ["cpu-epyc-01", "cpu-epyc-02", "cpu-epyc-03"]
    distinct = [(n["metadata"]["labels"]["kubernetes.io/hostname"], n["status"]["addresses"][0]["address"],
                 n["spec"]["podCIDR"], n["status"]["nodeInfo"]["machineID"]) for n in nodes]
    for column in zip(*distinct, strict=True):
        assert len(set(column)) == len(nodes)
    assert len({n["metadata"]["labels"]["kaiwo/nodepool"] for n in cpu}) == 1
