"""Benchmark: the installed form's start-up and footprint (issue 31).

Figures (each with its unit and target; never fails on a miss):

1. `kubectl apply -k deploy/` to every kaiwo-system pod Ready, and to the RayService Ready (both Serve
   applications RUNNING), against a sandbox that runs the kaiwo-ray image's pods as real processes
   (`--local-image kaiwo-ray`, RBAC enforced). Target: every pod Ready <= 60 s on a 2-core machine.
2. RSS and idle CPU of every process of the installed cluster (Ray head and worker: GCS, raylets,
   dashboard and its agents, Serve controller and proxy, each controller actor, telemetry and
   aggregator actors), measured over an idle window, grouped by pod and process name.
3. The same totals for `kaiwo-ray dev` (local Ray, the same controllers, the admin API), so the
   footprint a cluster pays beyond the workstation form is known.

    sudo .venv/bin/python benchmarks/install.py [--idle-seconds S]

Needs root (network namespaces) and kubectl.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import psutil
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kaiwo_ray.api.crd import all_crds  # noqa: E402
from kaiwo_ray.nodes import default_nodes  # noqa: E402
from kaiwo_sandbox.testing import eventually, start_sandbox  # noqa: E402

POD_READY_TARGET_S = 60.0


def process_name(proc: psutil.Process) -> str:
    """A stable label: Ray's workers name themselves `ray::Actor`; daemons by their executable."""
    try:
        title = " ".join(proc.cmdline())
    except psutil.Error:
        return "?"
    match = re.match(r"(ray::[\w.:-]+)", title)
    if match:
        return match.group(1)
    for daemon in ("gcs_server", "raylet", "dashboard.py", "agent.py", "log_monitor.py", "monitor.py",
                   "runtime_env/agent", "ray start", "dashboard/agent"):
        if daemon in title:
            return daemon
    return Path(title.split(" ", 1)[0]).name or "?"


def sample(pids: list[int], seconds: float) -> dict[str, tuple[float, float, int]]:
    """name -> (RSS MiB, CPU % of one core over `seconds`, count)."""
    procs = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            procs.append((proc, proc.cpu_times()))
        except psutil.Error:
            continue
    time.sleep(seconds)  # the idle window being measured, not synchronisation
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for proc, before in procs:
        try:
            after = proc.cpu_times()
            rss = proc.memory_info().rss / 2**20
        except psutil.Error:
            continue
        row = totals[process_name(proc)]
        row[0] += rss
        row[1] += 100 * ((after.user + after.system) - (before.user + before.system)) / seconds
        row[2] += 1
    return {name: (row[0], row[1], int(row[2])) for name, row in totals.items()}


def print_table(title: str, rows: dict[str, tuple[float, float, int]]) -> tuple[float, float]:
    print(f"-- {title}")
    for name, (rss, cpu, count) in sorted(rows.items(), key=lambda item: -item[1][0]):
        print(f"  {name:45s} x{count:<2d} rss {rss:8.1f} MiB   idle cpu {cpu:5.1f} %")
    rss_total = sum(r[0] for r in rows.values())
    cpu_total = sum(r[1] for r in rows.values())
    print(f"{title}_rss_total: {rss_total:.0f} MiB (no target)")
    print(f"{title}_idle_cpu_total: {cpu_total:.1f} % of one core (no target)")
    return rss_total, cpu_total


def installed(idle_seconds: float) -> None:
    kubectl_bin = shutil.which("kubectl")
    assert kubectl_bin, "kubectl is needed (make tools)"
    with start_sandbox(nodes=default_nodes(), cluster=True, time_factor=1.0, authorization="RBAC",
                       extra_crds=list(all_crds()), local_images=["kaiwo-ray"]) as sandbox:
        def kubectl(*args: str) -> str:
            return subprocess.run([kubectl_bin, "--kubeconfig", str(sandbox.kubeconfig_path), *args], check=True,
                                  capture_output=True, text=True, cwd=ROOT).stdout

        def ready(obj: dict[str, object]) -> bool:
            conditions = (obj.get("status") or {}).get("conditions") or []  # type: ignore[union-attr]
            return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

        rendered = [d for d in yaml.safe_load_all(kubectl("kustomize", "deploy/")) if d]
        service = next(d for d in rendered if d["kind"] == "RayService")
        ray_pods = 1 + sum(int(g.get("replicas") or 0) for g in service["spec"]["rayClusterConfig"].get(
            "workerGroupSpecs") or [])
        began = time.monotonic()
        kubectl("apply", "-k", "deploy/")

        def every_pod_ready() -> float | None:
            pods = json.loads(kubectl("get", "pods", "-n", "kaiwo-system", "-o", "json"))["items"]
            rays = [p for p in pods if (p["metadata"].get("labels") or {}).get("ray.io/is-ray-node") == "yes"]
            return time.monotonic() - began if len(rays) == ray_pods and all(ready(p) for p in pods) else None
        pods_ready = eventually(every_pod_ready, timeout=600, interval=0.5)
        service_ready = eventually(lambda: time.monotonic() - began if ready(json.loads(
            kubectl("get", "rayservice", "-n", "kaiwo-system", "kaiwo-ray", "-o", "json"))) else None,
            timeout=600, interval=0.5)
        verdict = "met" if pods_ready <= POD_READY_TARGET_S else "MISSED"
        print(f"apply_to_every_pod_ready: {pods_ready:.1f} s (target <= {POD_READY_TARGET_S:.0f} s: {verdict})")
        print(f"apply_to_rayservice_ready: {service_ready:.1f} s (both Serve applications RUNNING; no target)")
        runtime = sandbox.sandbox.local_runtime
        assert runtime is not None and runtime.network is not None
        for index, pod in enumerate(sorted(runtime.pods(), key=lambda p: ("-head-" not in p.name, p.name))):
            pids = [int(p) for p in subprocess.run([runtime.network.ip_binary, "netns", "pids", pod.iface.netns],
                                                   capture_output=True, text=True).stdout.split()]
            role = "installed_head" if "-head-" in pod.name else f"installed_worker_{index}"
            print_table(role, sample(pids, idle_seconds))
        sandbox_proc = psutil.Process(os.getpid())
        print(f"sandbox_process_rss: {sandbox_proc.memory_info().rss / 2**20:.0f} MiB (API server and simulated "
              "cluster, this process; no target)")


def dev(idle_seconds: float) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-dev-") as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        process = subprocess.Popen([sys.executable, "-m", "hosts.cli.main", "dev", "--kubeconfig", str(kubeconfig)],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                                   start_new_session=True)
        try:
            assert process.stdout is not None
            began = time.monotonic()
            for line in process.stdout:
                if "kaiwo-ray dev is ready" in line:
                    break
            print(f"kaiwo_ray_dev_to_ready: {time.monotonic() - began:.1f} s (no target)")
            root = psutil.Process(process.pid)
            pids = [root.pid] + [c.pid for c in root.children(recursive=True)]
            print_table("kaiwo_ray_dev", sample(pids, idle_seconds))  # sandbox, Ray, controllers, admin API
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:  # dev stops its Ray and sandbox first; do not outlive them
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle-seconds", type=float, default=10.0, help="the idle window CPU is measured over")
    parser.add_argument("--skip-dev", action="store_true", help="measure the installed form only")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("benchmarks/install.py: the real install needs root (network namespaces)", file=sys.stderr)
        return 2
    installed(args.idle_seconds)
    if not args.skip_dev:
        dev(args.idle_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
