"""benchmarks/operator.py's phase `running`, on a sandbox with the simulated cluster (Kueue, the Job
controller, the scheduler, the kubelet): API writes per KaiwoJob from create to RUNNING and on a no-op
resync (`bench_to_running`), and KaiwoJob create -> RUNNING against the same Job created directly ->
its pod Running (`bench_end_to_end`).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from _load import Loader
from _objects import kaiwojob, setup_cluster_objects
from _op_figures import TARGET_WRITES_TO_RUNNING, out
from _op_measure import writes_by_resource
from _op_processes import operator_process
from _runtime import api_client, k8s, wait_for
from _sandbox import sandbox_process
from _stats import latencies
from _watcher import job_watcher

RUNNING_RATE = 10.0  # KaiwoJobs created per second for the steady writes-to-RUNNING figure
RUNNING_BURST = 10  # KaiwoJobs created at once, against a cold operator, for the burst figure


def bench_to_running(count: int) -> None:
    """Writes per KaiwoJob from create to RUNNING, and on a no-op resync, with the simulated cluster.
    Two figures: a burst of RUNNING_BURST created at once as the operator starts (cold, and every party
    of the 2 cores busy at once), then `count` created at RUNNING_RATE per second, each counted from
    its own create. The steady figure is the operator's write discipline; the burst one shows where it
    gives: there the simulated Kueue takes about the settle window (50 ms) to admit, so PENDING and
    STARTING each last about as long as the window, and a phase that outlasts the window is written
    (docs/compatibility.md, "Status timing"), so the burst's figure swings with the machine's load
    (3.7-4.7 in seven runs on this machine). The steady one is a Job create and one or two status
    writes (2.00-3.00 in five runs): the simulated pod runs about 60 ms after its Job is created, about
    when the settle pass looks, so it finds RUNNING or STARTING (docs/performance.md)."""
    namespace = "run"
    with sandbox_process(cluster=True, time_factor=0.05, users=("kaiwo-ray", "loader")) as sandbox:
        setup_cluster_objects(sandbox.kubeconfigs["admin"], [namespace])
        loader = Loader(sandbox.kubeconfigs["loader"], namespace)
        custom = k8s().client.CustomObjectsApi(k8s().config.new_client_from_config(
            config_file=str(sandbox.kubeconfigs["admin"])))

        def phases() -> Counter[str]:
            items = custom.list_namespaced_custom_object("kaiwo.silogen.ai", "v1alpha1", namespace, "kaiwojobs")
            return Counter((i.get("status") or {}).get("status", "") for i in items["items"])

        def writes_line(figure: str, names: list[str], since: float, how: str, ok: bool, gate: bool) -> None:
            wanted = set(names)
            # (an Event is named "<object>.<suffix>")
            timed = [(what, name.split(".", 1)[0]) for _, what, name in sandbox.timed_writes("kaiwo-ray", since)
                     if name.split(".", 1)[0] in wanted]
            writes = Counter(what for what, _ in timed)
            non_event = sum(v for k, v in writes.items() if not k.endswith(" events"))
            # how many status writes each KaiwoJob got (1: straight to RUNNING; 2: one phase before it)
            per_cr = Counter(Counter(n for what, n in timed if what == "patch kaiwojobs/status").values())
            count = len(names)
            verdict = " MISSED" if gate and non_event / count > TARGET_WRITES_TO_RUNNING else ""
            out(f"{figure}: {non_event / count:.2f} writes + {(sum(writes.values()) - non_event) / count:.2f} "
                f"Events ({'target <= ' + str(TARGET_WRITES_TO_RUNNING) if gate else 'not a target'}; {how}"
                f"{'' if ok else ', NOT all RUNNING: ' + str(dict(phases()))}; "
                f"{', '.join(f'{k}: {v / count:.2f}' for k, v in sorted(writes.items()))}; KaiwoJobs by status "
                f"writes: {', '.join(f'{k}: {v}' for k, v in sorted(per_cr.items()))}){verdict}")

        with operator_process(sandbox.kubeconfigs["kaiwo-ray"]) as op:
            op.start()
            since = time.time()
            burst = [f"burst-{i}" for i in range(RUNNING_BURST)]
            # sleep 600 at time factor 0.05 = 30 s of running: long enough to resync while RUNNING
            loader.create_many(burst, threads=2)
            ok = wait_for(lambda: phases().get("RUNNING", 0) == len(burst), 60.0, interval=0.2)
            op.ask("drain")
            writes_line("kaiwojob_writes_per_cr_to_running_burst", burst, since,
                        f"{len(burst)} KaiwoJobs created at once as the operator starts", ok, gate=False)
            steady = [f"run-{i}" for i in range(count)]
            since = time.time()
            loader.paced(steady, RUNNING_RATE)
            ok = wait_for(lambda: phases().get("RUNNING", 0) == len(burst) + count, 60.0, interval=0.2)
            op.ask("drain")
            writes_line("kaiwojob_writes_per_cr_to_running", steady, since,
                        f"{count} KaiwoJobs created at {RUNNING_RATE:.0f}/s", ok, gate=True)
            since = time.time()
            resync = op.ask("resync")
            writes = writes_by_resource(sandbox, "kaiwo-ray", since)
            out(f"kaiwojob_writes_noop_resync: {sum(writes.values())} writes for {resync['reconciles']} reconciles "
                f"of RUNNING KaiwoJobs (target 0){' MISSED ' + str(dict(writes)) if writes else ''}")


def _plain_job(name: str, namespace: str) -> dict[str, Any]:
    """The Job kaiwo-ray renders for the KaiwoJob `name`, as a user would create it by hand: no owner,
    no kaiwo labels (so the operator never looks at it), Kueue's queue label and the same pod spec."""
    from kaiwo_ray.api.config import KaiwoConfigSpec
    from kaiwo_ray.nodes import default_nodes, with_pool_labels
    from kaiwo_ray.reconcile.workload import parse_workload
    from kaiwo_ray.render import render_all

    obj = kaiwojob(name, namespace, E2E_ENTRYPOINT)
    obj["metadata"]["uid"] = "plain"
    config = KaiwoConfigSpec()
    job = next(c for c in render_all(parse_workload(obj), config, with_pool_labels(default_nodes(), config))
               if c["kind"] == "Job")
    job["metadata"].pop("ownerReferences", None)
    for meta in (job["metadata"], job["spec"]["template"]["metadata"]):
        meta["labels"] = {k: v for k, v in (meta.get("labels") or {}).items() if not k.startswith("kaiwo.silogen.ai/")}
    return dict(job)


E2E_ENTRYPOINT = "sleep 40"  # 2 s at the time factor 0.05: RUNNING long enough to be seen, quota freed soon


def bench_end_to_end(pairs: int, rate: float = 3.0) -> None:
    """KaiwoJob create -> status RUNNING through Kueue, the scheduler and the kubelet (the simulated
    cluster), against the same Job created directly -> its pod Running: what the operator adds end to
    end. Created in pairs at `rate` pairs per second, each path first in every other pair, so both see
    the same load and the simulated controllers' cycles."""
    namespace = "e2e"
    with sandbox_process(cluster=True, time_factor=0.05, users=("kaiwo-ray", "loader")) as sandbox, \
            operator_process(sandbox.kubeconfigs["kaiwo-ray"]) as op:
        setup_cluster_objects(sandbox.kubeconfigs["admin"], [namespace])
        loader = Loader(sandbox.kubeconfigs["loader"], namespace)
        batch = k8s().client.BatchV1Api(api_client(sandbox.kubeconfigs["loader"]))
        op.start()
        with job_watcher(sandbox.kubeconfigs["admin"], namespace, "kaiwojobs-running") as running, \
                job_watcher(sandbox.kubeconfigs["admin"], namespace, "pods-running") as pods:
            sent_kaiwo: dict[str, float] = {}
            sent_plain: dict[str, float] = {}
            plain_jobs = [_plain_job(f"plain-{i}", namespace) for i in range(pairs)]  # rendered before the clock runs
            began = time.perf_counter()
            for i in range(pairs):
                delay = began + i / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)  # pacing, not synchronisation
                for kaiwo_first in (i % 2 == 0, i % 2 == 1):  # alternately first: neither path waits on the other
                    if kaiwo_first:
                        sent_kaiwo[f"kj-{i}"] = time.time()
                        loader.create(f"kj-{i}", E2E_ENTRYPOINT)
                    else:
                        sent_plain[f"plain-{i}"] = time.time()
                        batch.create_namespaced_job(namespace, plain_jobs[i], _preload_content=False).release_conn()
            wait_for(lambda: running.count() >= pairs and pods.count() >= 2 * pairs, 60.0, interval=0.2)
            kaiwo = latencies(sent_kaiwo, running())
            plain = latencies(sent_plain, pods())
        for q in (50, 99):
            out(f"end_to_end_create_to_running_p{q}: KaiwoJob {kaiwo.p(q):.0f} ms, plain Job {plain.p(q):.0f} ms: "
                f"the operator adds {kaiwo.p(q) - plain.p(q):.0f} ms (KaiwoJob create -> status RUNNING vs Job create "
                f"-> pod Running, Kueue + scheduler + kubelet simulated at time factor 0.05; n={kaiwo.observed}/"
                f"{kaiwo.sent} and {plain.observed}/{plain.sent})")
