"""benchmarks/operator.py's phase `ray`: every default controller in its Ray actor, as `kaiwo-ray
up` runs them, with each actor's RSS idle and with the N KaiwoJobs, beside Ray's own processes.
"""

from __future__ import annotations

import logging
import time

from _objects import setup_cluster_objects
from _op_figures import NAMESPACE, TARGET_RSS_MB, out
from _op_measure import Scale, seed
from _runtime import wait_for
from _sandbox import sandbox_process


def _ray_processes() -> list[tuple[str, int, float]]:
    """(name, pid, RSS MB) of the Ray processes this driver started (its descendants): daemons and
    workers, never another user's Ray on the same machine."""
    import psutil

    rows: list[tuple[str, int, float]] = []
    for proc in psutil.Process().children(recursive=True):
        try:
            name, cmdline, rss = proc.name(), " ".join(proc.cmdline()), proc.memory_info().rss
        except psutil.Error:
            continue
        if not (name.startswith("ray::") or "ray" in cmdline or "raylet" in name or "gcs_server" in name):
            continue
        script = next((part.rsplit("/", 1)[-1] for part in proc.cmdline() if part.endswith(".py")), "")
        rows.append((name if name.startswith("ray::") or not script else script, proc.pid, rss / 2**20))
    return sorted(rows)


def bench_ray(scale: Scale) -> None:
    """Every default controller in its Ray actor (actors/), as `kaiwo-ray up` runs them: each actor's
    RSS idle (caches synced, no KaiwoJob yet), then with N live KaiwoJobs and 5N unrelated objects
    seeded once the KaiwoJob actor drained them, beside Ray's own processes."""
    import ray

    from actors.supervisor import Supervisor, init_ray
    from kaiwo_ray.controllers.manager import HostSettings

    crs = scale.crs
    with sandbox_process(users=("kaiwo-ray", "loader")) as sandbox:
        setup_cluster_objects(sandbox.kubeconfigs["admin"], [NAMESPACE])
        began = time.monotonic()
        started_ray = init_ray(num_cpus=2)
        # log_level ERROR: the KaiwoQueueConfig actor warns that it does not own the queue objects made above
        supervisor = Supervisor(HostSettings(kubeconfig=str(sandbox.kubeconfigs["kaiwo-ray"]), lease=False,
                                             tune_gc=True, batch_scheduling=True), log_level=logging.ERROR)
        try:
            supervisor.start(timeout=180.0, leader_wait=0.0)
            out(f"  (Ray and {len(supervisor.names)} actors up in {time.monotonic() - began:.1f} s: "
                f"{', '.join(supervisor.names)})")
            for row in supervisor.health():
                out(f"actor_idle_rss_{row.name}: {(row.rss_bytes or 0) / 2**20:.0f} MB (caches synced, no "
                    f"KaiwoJob yet; pid {row.pid})")
            out(seed(sandbox, scale, [f"live-{i}" for i in range(crs)]))
            handle = supervisor.handle("kaiwojob")

            def drained() -> bool:
                report = ray.get(handle.health.remote())
                return bool(report.get("reconciles", 0) >= crs and report.get("queue") == 0
                            and report.get("in_flight") == 0)

            if not wait_for(drained, max(180.0, crs / 20), interval=0.5):
                out(f"  warning: the KaiwoJob actor did not drain {crs} KaiwoJobs in time")
            report = ray.get(handle.health.remote())
            rss = report["rss_bytes"] / 2**20
            out(f"kaiwojob_actor_rss_{crs}_crs: {rss:.0f} MB (target <= {TARGET_RSS_MB:.0f} MB; Ray actor pid "
                f"{report['pid']}, cached {report['cached'].get('kaiwojobs')} KaiwoJobs and "
                f"{report['cached'].get('jobs')} Jobs; {scale.unrelated} unrelated objects beside them)"
                f"{' MISSED' if rss > TARGET_RSS_MB else ''}")
            for row in supervisor.health():
                out(f"actor_rss_{row.name}_{crs}_crs: {(row.rss_bytes or 0) / 2**20:.0f} MB (pid {row.pid})")
            rows = _ray_processes()
            for label, pid, mb in rows:
                out(f"  ray process {label} (pid {pid}): {mb:.0f} MB")
            out(f"ray_total_rss: {sum(mb for _l, _p, mb in rows):.0f} MB over {len(rows)} processes "
                "(the actors included)")
        finally:
            supervisor.stop(grace_seconds=5.0)
            if started_ray:
                ray.shutdown()
