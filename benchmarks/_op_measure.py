"""What benchmarks/operator.py measures of one party: the run's size (`Scale`), the sandbox seeded
with the backlog, Kueue Workloads and unrelated objects (`seed`), the backlog drain (`drain`), paced
create -> child Job latency (`latency`), the writes counted from the audit log, and the latency slices
of every party taken in turn (`measure_latencies`), into a `Result` per party.
"""

from __future__ import annotations

import gc
import json
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _diagnosis import GcPauses
from _load import Loader
from _machine import process_cpu_s
from _objects import kaiwojob
from _op_figures import NAMESPACE, out
from _op_lines import sample_rows
from _op_processes import OperatorProcess
from _runtime import api_client, k8s, wait_for
from _sandbox import SandboxProcess
from _stats import Latency, latencies

# The default run's paced load per rate: 400 samples at each rate make each p99 the fifth-worst. Fewer
# swing between runs of unchanged code: 60 samples at 20 CR/s (3 s) compare two parties' worst
# samples (0.81-1.31x), and with 200 (10 s) that p99 ratio passed 1.2x in 3 of 8 pinned runs against
# 1 of 15 runs of 400 (docs/performance.md). The run stays under two minutes with three parties in
# turn: the same-work floor, a reference without a target, is left to --phases and to --scale runs.
DEFAULT_SECONDS_20 = 20.0
DEFAULT_SECONDS_100 = 4.0


@dataclass(frozen=True, slots=True)
class Scale:
    """How big a run is: live KaiwoJobs, unrelated objects beside them, seconds of paced load per rate."""

    crs: int
    unrelated: int
    seconds20: float
    seconds100: float


def kueue_workloads(names: list[str]) -> list[tuple[str, str, str, dict[str, Any]]]:
    """A Kueue Workload per KaiwoJob, shaped as Kueue makes one for its Job (the pod template in its
    podSet, the job-uid label), admitted: what a cluster running N KaiwoJobs holds, and what the
    KaiwoJob controller's unselected Workload watch caches. The uids are made up (no Job exists yet),
    so no Workload maps to a KaiwoJob: they cost memory and list time, never a reconcile."""
    from kaiwo_ray.api.config import KaiwoConfigSpec
    from kaiwo_ray.nodes import default_nodes, with_pool_labels
    from kaiwo_ray.reconcile.workload import parse_workload
    from kaiwo_ray.render import render_all

    config = KaiwoConfigSpec()
    nodes = with_pool_labels(default_nodes(), config)
    rows: list[tuple[str, str, str, dict[str, Any]]] = []
    for i, name in enumerate(names):
        obj = kaiwojob(name, NAMESPACE)
        obj["metadata"]["uid"] = f"00000000-0000-4000-8000-{i:012d}"
        job = next(c for c in render_all(parse_workload(obj), config, nodes) if c["kind"] == "Job")
        template = job["spec"]["template"]
        rows.append(("kueue.x-k8s.io", "v1beta2", "workloads", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"job-{name}-{i:05d}", "namespace": NAMESPACE,
                         "labels": {"kueue.x-k8s.io/job-uid": f"job-uid-{i}"}},
            "spec": {"queueName": "kaiwo", "active": True, "priority": 0, "podSets": [
                {"name": "main", "count": 1, "template": {"metadata": {"labels": template["metadata"]["labels"]},
                                                          "spec": template["spec"]}}]}}))
    return rows


def seed(sandbox: SandboxProcess, scale: Scale, names: list[str]) -> str:
    """The unrelated objects, a Kueue Workload per KaiwoJob, and the backlog of KaiwoJobs, created in
    the sandbox's process (10,000 KaiwoJobs through the load client took longer than the whole
    default run); a line saying so."""
    unrelated_s = sandbox.seed_unrelated(scale.unrelated)
    workloads_s = float(sandbox.ask("seed", kueue_workloads(names)))
    backlog_s = sandbox.seed_kaiwojobs(NAMESPACE, names)
    return (f"  ({len(names)} KaiwoJobs seeded in {backlog_s:.1f} s beside {len(names)} Kueue Workloads "
            f"({workloads_s:.1f} s) and {scale.unrelated} unrelated objects (ConfigMaps, Secrets, Pods, Jobs in 10 "
            f"other namespaces, not labelled for kaiwo; {unrelated_s:.1f} s), in the sandbox's process, no operator "
            f"running; sandbox RSS {sandbox.rss_mb():.0f} MB)")


@dataclass(slots=True)
class Result:
    """What one operator achieved; kopf fills the subset it can."""

    name: str
    drain_s: float = float("nan")  # start -> last of N backlog Jobs observed
    drain_crs: int = 0
    lat20: Latency | None = None
    lat100: Latency | None = None
    rss_mb: float = float("nan")
    cpu_ms_per_cr: float = float("nan")
    sandbox_cpu_ms_per_cr: float = float("nan")
    first_job: str = ""  # the first backlog CR's Job, uids masked (`job_fingerprint`)
    # load client's create -> child Job stored, as the API server answered the child's write (ms per
    # sample, from the audit log): the same samples as lat20/lat100 without the Job watcher's share
    stored20: list[float] = field(default_factory=list)
    stored100: list[float] = field(default_factory=list)

    @property
    def throughput(self) -> float:
        return self.drain_crs / self.drain_s if self.drain_s > 0 else float("nan")


def drain(sandbox: SandboxProcess, handle: OperatorProcess, seen: Any, names: list[str], timeout: float,
           result: Result) -> None:
    """Start the operator with `names` already created; time until the last of their Jobs is seen, and
    the CPU the operator and the sandbox spent per CR meanwhile (what load-independent cost means)."""
    cpu_op, cpu_sb = process_cpu_s(handle.process.pid), sandbox.cpu_s()
    handle.start()
    wanted = set(names)  # the namespace's first Jobs: their count is the watcher's count
    if not wait_for(lambda: seen.count() >= len(wanted), timeout, interval=0.1):
        out(f"  warning: only {len(wanted & seen().keys())} of {len(wanted)} Jobs appeared within {timeout:.0f} s")
    observed = seen()
    result.drain_s = max(observed.get(n, float("nan")) for n in names) - handle.began_wall
    result.drain_crs = len(names)
    result.cpu_ms_per_cr = (process_cpu_s(handle.process.pid) - cpu_op) / len(names) * 1000
    result.sandbox_cpu_ms_per_cr = (sandbox.cpu_s() - cpu_sb) / len(names) * 1000


def latency(loader: Loader, seen: Any, prefix: str, rate: float, seconds: float, warm_s: float = 0.5) -> Latency:
    """Create->child latency at `rate` for `seconds`, after `warm_s` unmeasured at the same rate (4
    creates at least): the load client's threads and every party's connection pools are warm, as in
    steady state (cold, the first few samples paid for TLS handshakes: 14-17 ms against a 7 ms median);
    a later slice, whose connections are kept alive from the first, warms up with the 4 alone."""
    warm = [f"{prefix}-warm-{i}" for i in range(max(int(rate * warm_s), 4))]
    before = seen.count()
    loader.paced(warm, rate)
    wait_for(lambda: seen.count() >= before + len(warm), 20.0, interval=0.1)
    names = [f"{prefix}-{i}" for i in range(int(rate * seconds))]
    before = seen.count()
    # This process sends the creates: its set-up stays out of its collector's sight, and what
    # pauses remain here and in the watcher are reported beside the figure (`spells_line`).
    gc.collect()
    gc.freeze()
    seen.long_gc_pauses()
    loader_gc = GcPauses()
    try:
        sent = loader.paced(names, rate)
    finally:
        loader_gc.close()
    wait_for(lambda: seen.count() >= before + len(names), 20.0, interval=0.1)
    result = latencies(sent, seen())
    result.instrument_pauses = ([(t, ms, "watcher") for t, ms in seen.long_gc_pauses()]
                                + [(t, ms, "loader") for t, ms in loader_gc.long])
    return result


def writes_by_resource(sandbox: SandboxProcess, user: str, since: float) -> Counter[str]:
    """`user`'s successful writes since `since` by "verb resource[/sub]" (counted in the sandbox's
    process: polled while a backlog drains, the records themselves would be 50,000 tuples a poll)."""
    return Counter(sandbox.ask("write_counts", user, since))


def job_fingerprint(kubeconfig: Path, name: str) -> str:
    """The Job `name` as stored, less what differs between two sandboxes for the same rendering: its
    and its owner's uids (also in labels), its timestamps, resourceVersion and managedFields (whose
    manager names differ by design)."""
    batch = k8s().client.BatchV1Api(api_client(kubeconfig))
    job = json.loads(batch.read_namespaced_job(name, NAMESPACE, _preload_content=False).data)
    meta = job["metadata"]
    uids = [meta.get("uid", "")] + [ref.get("uid", "") for ref in meta.get("ownerReferences") or ()]
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"):
        meta.pop(key, None)
    text = json.dumps(job, sort_keys=True)
    for uid in filter(None, uids):
        text = text.replace(uid, "<uid>")
    return text


@dataclass
class Party:
    """One operator on its own sandbox, set up and drained: what the interleaved latency slices need."""

    result: Result
    sandbox: SandboxProcess
    user: str  # its audit-log identity
    child_write: str  # its child Job's write in the audit log ("create jobs", "patch jobs")
    measure: Callable[[float, float, str, float], Latency]  # (rate, seconds, name prefix, warm-up s) -> samples
    settle: Callable[[], None]  # returns once the last slice's trailing work is done
    report: Callable[[], None]  # prints its figures once every slice ran


def _writes_held_still(sandbox: SandboxProcess, user: str, since: float, *, polls: int, interval: float,
                       timeout: float, expected: float = float("inf")) -> int:
    """Poll `user`'s write count since `since` every `interval` s until it reached `expected` or held
    still over the last `polls` polls, or `timeout` passed; returns the last count."""
    counts: list[int] = []

    def settled() -> bool:
        counts.append(sum(writes_by_resource(sandbox, user, since).values()))
        return counts[-1] >= expected or (len(counts) > polls and counts[-1] == counts[-1 - polls])

    wait_for(settled, timeout, interval=interval)
    return counts[-1]


def measure_latencies(parties: list[Party], scale: Scale, rounds: int) -> None:
    """Every party's create -> child Job latency at 20 and 100 CR/s, each rate in `rounds` slices taken
    in turn, the order rotated each round. On these machines a spell of noise (seconds long) lands on
    whichever party runs then: one long phase per party handed it all to one of them (the floor
    operator's own p99 at 100 CR/s swung 9-19 ms between runs), while short slices in turn spread it
    over all, so the ratios measure the operators, not the moment. Each slice starts with the warm-up
    `latency` describes and ends with the party's trailing writes landed (`Party.settle`)."""
    slice_cpu = bool(os.environ.get("BENCH_SLICE_CPU"))
    for rate, seconds in ((20, scale.seconds20), (100, scale.seconds100)):
        slices: list[list[Latency]] = [[] for _ in parties]
        for r in range(rounds):
            shift = r % len(parties)
            for i in [*range(shift, len(parties)), *range(shift)]:
                began = time.time()
                if slice_cpu:
                    import psutil
                    procs = [psutil.Process(), *psutil.Process().children(recursive=True)]
                    before = {p.pid: (p.name(), sum(p.cpu_times()[:2])) for p in procs}
                slices[i].append(parties[i].measure(rate, seconds / rounds, f"l{rate}-r{r}", 0.5 if r == 0 else 0.0))
                if slice_cpu:
                    used = sorted(((sum(p.cpu_times()[:2]) - before[p.pid][1], p.pid, " ".join(p.cmdline())[-40:])
                                   for p in procs if p.is_running()), reverse=True)
                    lat = slices[i][-1]
                    out(f"    slice {parties[i].result.name} {rate} r{r}: p50 {lat.p(50):.1f} p99 {lat.p(99):.1f}; "
                        f"{time.time() - began:.1f} s; cpu " + ", ".join(f"{pid}:{c:.2f}" for c, pid, _ in used[:6]))
                parties[i].settle()
                # still for 0.2 s: a slice's trailing status patches and Events must not land in the next
                _writes_held_still(parties[i].sandbox, parties[i].user, began, polls=2, interval=0.1, timeout=10.0)
        for party, parts in zip(parties, slices, strict=True):
            merged = Latency.merged(parts)
            stored = [row[0] + row[1] for row in sample_rows(party.sandbox, merged, party.user, party.child_write)]
            if rate == 20:
                party.result.lat20, party.result.stored20 = merged, stored
            else:
                party.result.lat100, party.result.stored100 = merged, stored


def settled_writes(sandbox: SandboxProcess, user: str, since: float, expected: int) -> tuple[Counter[str], float]:
    """The user's writes since `since`, once `expected` of them landed (a peer's last status patches,
    annotations and Events trail its last Job: at 10,000 CRs, 40,000 of them for the same-work floor)
    or, short of that, once the count held still for 2 s; and the wall time it saw them all (0.2 s
    resolution; NaN when short). A peer's backlog still writing would load the latency runs after it."""
    count = _writes_held_still(sandbox, user, since, polls=10, interval=0.2, timeout=max(15.0, expected / 400),
                               expected=expected)
    return writes_by_resource(sandbox, user, since), time.time() if count >= expected else float("nan")
