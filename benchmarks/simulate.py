"""`kaiwo-ray simulate` speed: a generated trace replayed on N nodes of 8 AMD MI300X GPUs, in virtual time,
with the operator's real controllers and the simulated cluster (hosts/runtime/simulator.py).

Workload: `kaiwo-ray trace generate` defaults (60 arrivals per simulated hour, 1/2/4/8 GPUs, log-normal
durations with a 30-minute median, 10 % idle) on one ClusterQueue holding every GPU; at 60 an hour, 10,000
workloads span a simulated week, the issue's target scenario (#37: 10,000 workloads over a simulated week
on 100 nodes of 8 GPUs in <= 10 minutes on the 2-core machine).
Run: `.venv/bin/python benchmarks/simulate.py` (1,000 workloads; `--scale 10000`, `--scale 50000` for the
bigger runs, `--scale 1000,10000` for several; `--rayjob-share 0.2` makes that share of the same trace
rayjobs: a RayJob of a head and one GPU worker each, through the simulated KubeRay). Prints wall seconds, simulated seconds per wall second
and workloads per wall second, each on its own line.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hosts.runtime.simulator import SimulationInputs, run_simulation
from kaiwo_ray.nodes import default_nodes
from kaiwo_ray.simulation.generate import GeneratorSettings, generate
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


def measure(workloads: int, nodes: int, seed: int, rayjob_share: float = 0.0) -> None:
    settings = GeneratorSettings(workloads=workloads, seed=seed, rayjob_share=rayjob_share)
    trace = [TraceEntry(i + 1, w) for i, w in enumerate(generate(settings))]
    rayjobs = sum(1 for entry in trace if entry.workload.kind == "rayjob")
    inputs = SimulationInputs(trace, gpu_nodes(nodes), queue_config(8 * nodes))
    began, cpu_began = time.perf_counter(), time.process_time()
    recording = run_simulation(inputs)
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    started = sum(1 for record in recording.workloads if record.started is not None)
    finished = sum(1 for record in recording.workloads if record.finished is not None)
    # The target's pace: 10,000 workloads in 600 s is 16.7 workloads per wall second.
    pace = TARGET_WORKLOADS / TARGET_WALL_SECONDS
    print(f"simulate_{workloads}_wall: {wall:.1f} s for {workloads} workloads ({rayjobs} rayjobs) on {nodes} nodes "
          f"x 8 GPUs ({started} started, {finished} finished, {recording.ended / 3600:.1f} simulated hours)")
    print(f"simulate_{workloads}_cpu: {cpu:.1f} s of CPU (this process; steadier than wall time on a shared machine)")
    print(f"simulate_{workloads}_speed: {recording.ended / wall:.0f} simulated s per wall s "
          f"(target >= {WEEK / TARGET_WALL_SECONDS:.0f}: a week in 10 minutes)")
    print(f"simulate_{workloads}_rate: {workloads / wall:.1f} workloads per wall s (target >= {pace:.1f}: "
          f"{TARGET_WORKLOADS} in {TARGET_WALL_SECONDS:.0f} s)")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="1000", help="workload counts, comma-separated (default 1000)")
    parser.add_argument("--nodes", type=int, default=100, help="8-GPU nodes (default 100)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rayjob-share", type=float, default=0.0,
                        help="share of the workloads that are rayjobs (default 0)")
    args = parser.parse_args()
    for count in (int(part) for part in args.scale.split(",")):
        measure(count, args.nodes, args.seed, args.rayjob_share)
    return 0


if __name__ == "__main__":
    sys.exit(main())
