"""`kaiwo-ray simulate` as a command (#37: "a configuration that Kueue would refuse is refused with
Kueue's reason", "a progress bar while it runs").

1. A refused configuration: `kaiwo-ray simulate` run as a process on a queue configuration Kueue's
   webhook refuses (a lendingLimit above the nominal quota), beside the same command on the valid one;
   the wall time until it exits with its one line (target: exit 2, one line, no wait for the queues).
2. The progress bar's cost: a generated trace run once with the bar drawing into memory (as on a
   terminal, every 0.1 s of wall time at most); the time spent drawing against the run's wall time
   (target: <= 1 %), and one render's cost.

Run: `.venv/bin/python benchmarks/simulate_cli.py [--workloads 300]` (about a minute).
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hosts.cli.simulate import ProgressBar  # noqa: E402
from hosts.runtime.simulator import SimulationInputs, run_simulation  # noqa: E402
from kaiwo_ray.nodes import default_nodes  # noqa: E402
from kaiwo_ray.simulation.generate import GeneratorSettings, generate  # noqa: E402
from kaiwo_ray.simulation.progress import Progress, render  # noqa: E402
from kaiwo_ray.simulation.trace import TraceEntry  # noqa: E402

QUEUES = REPO / "tests" / "simulation" / "data" / "cohort.yaml"
KAIWO_RAY = Path(sys.executable).parent / "kaiwo-ray"


def refusal(scratch: Path) -> None:
    trace = scratch / "one.jsonl"
    trace.write_text('{"submit": 0, "user": "u", "queue": "team-a", "gpus": 1, "duration": 5}\n')
    refused = scratch / "refused.yaml"
    refused.write_text(QUEUES.read_text().replace("- {name: amd.com/gpu, nominalQuota: 8}",
                                                  "- {name: amd.com/gpu, nominalQuota: 8, lendingLimit: 12}", 1))
    for label, config in (("valid configuration, 1 workload", QUEUES), ("refused configuration", refused)):
        started = time.monotonic()
        done = subprocess.run([str(KAIWO_RAY), "simulate", "--trace", str(trace), "--queue-config", str(config)],
                              capture_output=True, text=True, timeout=600)
        wall = time.monotonic() - started
        lines = done.stderr.strip().splitlines()
        print(f"{label}: exit {done.returncode}, {len(lines)} line(s) on stderr, {wall:.2f} s wall "
              f"(target for the refused one: exit 2, 1 line)")
        if label.startswith("refused"):
            print(f"  {lines[-1] if lines else ''}")


class TimedBar(ProgressBar):
    def __init__(self, total: int) -> None:
        super().__init__(total, "trace", io.StringIO(), interval=0.1)
        self.draws = 0
        self.drawing = 0.0

    def _draw(self) -> None:
        started = time.perf_counter()
        super()._draw()
        self.drawing += time.perf_counter() - started
        self.draws += 1


def bar_cost(workloads: int) -> None:
    settings = GeneratorSettings(workloads=workloads, queues=("team-a", "team-b"), seed=37)
    trace = [TraceEntry(i + 1, w) for i, w in enumerate(generate(settings))]
    inputs = SimulationInputs(trace, default_nodes(), yaml.safe_load(QUEUES.read_text()))
    bar = TimedBar(len(trace))
    started = time.monotonic()
    run_simulation(inputs, bar)
    bar.close()
    wall = time.monotonic() - started
    print(f"run with the bar: {workloads} workloads in {wall:.1f} s wall, {bar.draws} draws")
    print(f"time spent drawing: {bar.drawing * 1000:.1f} ms = {100 * bar.drawing / wall:.3f} % of the run "
          "(target <= 1 %)")
    progress = Progress(workloads, workloads // 2, workloads // 3, 12, 74_880.0, 30.0)
    per = timeit.timeit(lambda: render(progress, 120, "a.yaml"), number=2000) / 2000
    print(f"one render: {per * 1e6:.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        refusal(Path(scratch))
    bar_cost(args.workloads)


if __name__ == "__main__":
    main()
