"""`kaiwo-ray simulate` speed: a generated trace replayed on N nodes of 8 AMD MI300X GPUs, in virtual time,
with the operator's real controllers and the simulated cluster (hosts/runtime/simulator.py).

Workload: `kaiwo-ray trace generate` defaults (60 arrivals per simulated hour, 1/2/4/8 GPUs, log-normal
durations with a 30-minute median, 10 % idle) on one ClusterQueue holding every GPU; at 60 an hour, 10,000
workloads span a simulated week, the issue's target scenario (#37: 10,000 workloads over a simulated week
on 100 nodes of 8 GPUs in <= 10 minutes on the 2-core machine).
Run: `.venv/bin/python benchmarks/simulate.py` (1,000 workloads; `--scale 10000`, `--scale 50000` for the
bigger runs, `--scale 1000,10000` for several; `--rayjob-share 0.2` makes that share of the same trace
rayjobs: a RayJob of a head and one GPU worker each, through the simulated KubeRay; `--service-share 0.2`
services: a KaiwoService of one pod, deleted after its drawn duration). Prints wall seconds,
simulated seconds per wall second and workloads per wall second, each on its own line, with the CPU
seconds the run used and the machine's load average over it (the development machine is shared: wall
time alone says little about the engine); `--progress SECONDS` adds a progress line every SECONDS.

`--gpu-preemption`: the slow case of idle-GPU preemption with a long queue instead. A generated trace of
200 workloads (60 an hour, 30 % idle) on two ClusterQueues of 8 GPUs (2 nodes), about 100 workloads
waiting at once, run for its first `--horizon` simulated seconds (default 2 hours) with a KaiwoConfig
`gpuPreemption` section (the operator's tracker polled every 15 simulated seconds, every waiting and
running workload tracked) and, for comparison, without it.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hosts.runtime.simulator import Recorder, SimulationInputs, run_simulation
from kaiwo_ray.nodes import default_nodes
from kaiwo_ray.simulation.generate import GeneratorSettings, generate
from kaiwo_ray.simulation.report import Recording
from kaiwo_ray.simulation.trace import TraceEntry

TARGET_WORKLOADS = 10_000
TARGET_WALL_SECONDS = 600.0
WEEK = 7 * 86400.0


def gpu_nodes(count: int) -> list[dict[str, object]]:
    """`count` copies of the sandbox's MI300X node (8 GPUs each), named gpu-0001 ..."""
    template = next(n for n in default_nodes() if "mi300x" in n["metadata"]["name"])
    nodes = []
    for index in range(count):
        node = copy.deepcopy(template)
        name = f"gpu-{index + 1:04d}"
        node["metadata"]["name"] = name
        node["metadata"]["labels"]["kubernetes.io/hostname"] = name
        node["metadata"].pop("uid", None)
        nodes.append(node)
    return nodes


def queue_config(gpus: int) -> dict[str, object]:
    quota = [{"name": "cpu", "nominalQuota": 400 * gpus}, {"name": "memory", "nominalQuota": f"{300 * gpus}Gi"},
             {"name": "amd.com/gpu", "nominalQuota": gpus}]
    return {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoQueueConfig", "metadata": {"name": "kaiwo"},
            "spec": {"resourceFlavors": [{"name": "mi300x-pool", "nodeLabels": {"kaiwo/gpu-model": "mi300x"}}],
                     "clusterQueues": [{"name": "kaiwo", "spec": {"namespaceSelector": {}, "resourceGroups": [
                         {"coveredResources": ["cpu", "memory", "amd.com/gpu"],
                          "flavors": [{"name": "mi300x-pool", "resources": quota}]}]}}]}}


def two_queues(gpus_each: int) -> dict[str, object]:
    """team-a and team-b, `gpus_each` GPUs of quota each, no cohort (no borrowing)."""
    quota = [{"name": "cpu", "nominalQuota": 400}, {"name": "memory", "nominalQuota": "4000Gi"},
             {"name": "amd.com/gpu", "nominalQuota": gpus_each}]
    return {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoQueueConfig", "metadata": {"name": "kaiwo"},
            "spec": {"resourceFlavors": [{"name": "mi300x-pool", "nodeLabels": {"kaiwo/gpu-model": "mi300x"}}],
                     "clusterQueues": [{"name": name, "spec": {"namespaceSelector": {}, "resourceGroups": [
                         {"coveredResources": ["cpu", "memory", "amd.com/gpu"],
                          "flavors": [{"name": "mi300x-pool", "resources": quota}]}]}}
                         for name in ("team-a", "team-b")]}}


GPU_PREEMPTION = {"apiVersion": "config.kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoConfig",
                  "metadata": {"name": "kaiwo"}, "spec": {"gpuPreemption": {"defaultThreshold": 5}}}


def _timed(inputs: SimulationInputs, every: float = 0.0) -> tuple[Recording, float, float, float]:
    """The recording, wall and CPU seconds, and the 1-minute load average at the end. `every` > 0:
    a progress line each `every` wall seconds (a long run shows how it goes before it ends)."""
    began, cpu = time.perf_counter(), time.process_time()
    last = [began]

    def progress(recorder: Recorder) -> None:
        now = time.perf_counter()
        if now - last[0] < every:
            return
        last[0] = now
        submitted = sum(1 for t in recorder.by_name.values() if t.record.submitted is not None)
        print(f"  progress: {recorder.now() / 3600:.1f} simulated h after {now - began:.0f} s wall, "
              f"CPU {time.process_time() - cpu:.0f} s, load {os.getloadavg()[0]:.1f}: {submitted} submitted, "
              f"{recorder.running} running, {recorder.finished} finished", flush=True)

    recording = run_simulation(inputs, progress if every > 0 else None)
    return recording, time.perf_counter() - began, time.process_time() - cpu, os.getloadavg()[0]


def measure_gpu_preemption(horizon: float, seed: int) -> None:
    settings = GeneratorSettings(workloads=200, rate_per_hour=60, queues=("team-a", "team-b"), idle_fraction=0.3,
                                 seed=seed)
    trace = [TraceEntry(i + 1, w) for i, w in enumerate(generate(settings))]
    for label, kaiwo_config in (("on", GPU_PREEMPTION), ("off", None)):
        inputs = SimulationInputs(trace, gpu_nodes(2), two_queues(8), kaiwo_config, horizon_seconds=horizon)
        recording, wall, cpu, load = _timed(inputs)
        waiting = sum(1 for r in recording.workloads if r.started is None)
        print(f"simulate_gpu_preemption_{label}_wall: {wall:.1f} s for the first {horizon / 3600:g} simulated "
              f"hours of 200 workloads on 2 nodes x 8 GPUs ({waiting} of 200 not started by then; CPU {cpu:.1f} s, "
              f"load {load:.1f})")
        print(f"simulate_gpu_preemption_{label}_speed: {recording.ended / wall:.0f} simulated s per wall s "
              f"({recording.ended / cpu:.0f} per CPU s)")
        sys.stdout.flush()


def measure(workloads: int, nodes: int, seed: int, rayjob_share: float = 0.0, every: float = 0.0,
            service_share: float = 0.0) -> None:
    settings = GeneratorSettings(workloads=workloads, seed=seed, rayjob_share=rayjob_share,
                                 service_share=service_share)
    trace = [TraceEntry(i + 1, w) for i, w in enumerate(generate(settings))]
    rayjobs = sum(1 for entry in trace if entry.workload.kind == "rayjob")
    services = sum(1 for entry in trace if entry.workload.kind == "service")
    inputs = SimulationInputs(trace, gpu_nodes(nodes), queue_config(8 * nodes))
    recording, wall, cpu, load = _timed(inputs, every)
    started = sum(1 for record in recording.workloads if record.started is not None)
    finished = sum(1 for record in recording.workloads if record.finished is not None)
    # The target's pace: 10,000 workloads in 600 s is 16.7 workloads per wall second.
    pace = TARGET_WORKLOADS / TARGET_WALL_SECONDS
    print(f"simulate_{workloads}_wall: {wall:.1f} s for {workloads} workloads ({rayjobs} rayjobs, {services} services) on {nodes} nodes "
          f"x 8 GPUs ({started} started, {finished} finished, {recording.ended / 3600:.1f} simulated hours; "
          f"load {load:.1f})")
    print(f"simulate_{workloads}_cpu: {cpu:.1f} s of CPU (this process; steadier than wall time on a shared machine)")
    print(f"simulate_{workloads}_speed: {recording.ended / wall:.0f} simulated s per wall s "
          f"(target >= {WEEK / TARGET_WALL_SECONDS:.0f}: a week in 10 minutes; {recording.ended / cpu:.0f} per CPU s)")
    print(f"simulate_{workloads}_rate: {workloads / wall:.1f} workloads per wall s (target >= {pace:.1f}: "
          f"{TARGET_WORKLOADS} in {TARGET_WALL_SECONDS:.0f} s)")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="1000", help="workload counts, comma-separated (default 1000)")
    parser.add_argument("--nodes", type=int, default=100, help="8-GPU nodes (default 100)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--gpu-preemption", action="store_true",
                        help="the idle-GPU preemption case with a long queue instead (see above)")
    parser.add_argument("--horizon", type=float, default=7200.0,
                        help="with --gpu-preemption: simulated seconds to run (default 7200)")
    parser.add_argument("--progress", type=float, default=0.0, metavar="SECONDS",
                        help="print a progress line every SECONDS of wall time (default: none)")
    parser.add_argument("--rayjob-share", type=float, default=0.0,
                        help="share of the workloads that are rayjobs (default 0)")
    parser.add_argument("--service-share", type=float, default=0.0,
                        help="share of the workloads that are services (default 0)")
    args = parser.parse_args()
    if args.gpu_preemption:
        measure_gpu_preemption(args.horizon, args.seed)
        return 0
    for count in (int(part) for part in args.scale.split(",")):
        measure(count, args.nodes, args.seed, args.rayjob_share, args.progress, args.service_share)
    return 0


if __name__ == "__main__":
    sys.exit(main())
