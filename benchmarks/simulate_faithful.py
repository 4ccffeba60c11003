"""How faithful `kaiwo-ray simulate` is (#37): one trace run live, through `kaiwo-ray dev --time-factor F`
(the sandbox as a subprocess, Ray, the operator's controllers, webhooks, in real time), and simulated
(the engine `kaiwo-ray simulate` runs: hosts/runtime/simulator.py, virtual time), then compared workload
by workload (kaiwo_ray/simulation/faithful.py).

Trace (unless `--trace FILE`): `trace generate` with two queues, team-a and team-b, 8 MI300X GPUs of
quota each in one cohort (tests/simulation/data/cohort.yaml: each borrows what the other leaves), on
the sandbox's default nodes (16 MI300X); 1/2/4/8 GPUs, durations log-normal (median 40 s, 10..200 s),
one arrival every 10 s on average (about the cluster's capacity: queues form and drain), every
workload busy (50-100 %); a seeded 20 % of team-a's workloads have priority `high` and preempt lower
ones within team-a. The live run submits each line as the simulator's KaiwoJob at `submit * F` wall
seconds and stamps each Kueue Workload's admission and eviction from a watch, with this process's
monotonic clock / F (hosts/runtime/live_replay.py).

Figures: per workload |start_live - start_sim| against max(2 % of the simulated wait, 2 s) (#37's
tolerance); the share within (target 100 %), the worst offenders, and whether the same workloads were
preempted in the same order (target: yes).

Run: `.venv/bin/python benchmarks/simulate_faithful.py` (30 workloads, time factor 0.2, about 2
minutes with dev's start); `--scale 200` for the issue's 200 workloads (about 8 minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml

from hosts.runtime.live_replay import replay_live
from hosts.runtime.simulator import SimulationInputs, run_simulation
from kaiwo_ray.nodes import default_nodes
from kaiwo_ray.simulation.faithful import compare
from kaiwo_ray.simulation.generate import GeneratorSettings, generate
from kaiwo_ray.simulation.trace import TraceEntry, parse_trace

ROOT = Path(__file__).resolve().parent.parent
QUEUES = ROOT / "tests" / "simulation" / "data" / "cohort.yaml"
READY = "kaiwo-ray dev is ready"


def make_trace(workloads: int, seed: int) -> list[TraceEntry]:
    settings = GeneratorSettings(workloads=workloads, rate_per_hour=360.0, queues=("team-a", "team-b"),
                                 duration_median=40.0, duration_sigma=0.8, duration_min=10.0,
                                 duration_max=200.0, idle_fraction=0.0, seed=seed)
    chooser = random.Random(seed + 1)
    entries = []
    for line, workload in enumerate(generate(settings), start=1):
        if workload.queue == "team-a" and chooser.random() < 0.2:
            workload = workload.model_copy(update={"priority": "high"})
        entries.append(TraceEntry(line, workload))
    return entries


def start_dev(scratch: Path, time_factor: float) -> tuple[subprocess.Popen[bytes], Path]:
    kubeconfig = scratch / "kubeconfig"
    log = scratch / "dev.log"
    command = [sys.executable, "-m", "hosts.cli.main", "dev", "--kubeconfig", str(kubeconfig),
               "--time-factor", repr(time_factor), "--no-admin"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 180.0
    while READY not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            stop_dev(process)
            raise SystemExit(f"kaiwo-ray dev did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)
    return process, kubeconfig


def stop_dev(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(60.0)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=30, help="workloads in the generated trace (default 30)")
    parser.add_argument("--trace", type=Path, help="take this trace (queues team-a, team-b) instead")
    parser.add_argument("--time-factor", type=float, default=0.2, help="wall seconds per simulated second")
    parser.add_argument("--seed", type=int, default=37)
    args = parser.parse_args()
    if args.trace is not None:
        with args.trace.open(encoding="utf-8") as lines:
            trace = parse_trace(lines)
    else:
        trace = make_trace(args.scale, args.seed)
    inputs = SimulationInputs(trace, default_nodes(), yaml.safe_load(QUEUES.read_text()), settle_seconds=120.0)
    span = max(e.workload.submit for e in trace)
    print(f"trace: {len(trace)} workloads over {span:.0f} simulated s; time factor {args.time_factor}")

    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kaiwo-faithful-") as scratch:
        process, kubeconfig = start_dev(Path(scratch), args.time_factor)
        print(f"dev start: {time.monotonic() - began:.1f} s")
        try:
            live_began = time.monotonic()
            live = asyncio.run(replay_live(str(kubeconfig), inputs, args.time_factor, timeout_seconds=3600.0))
            live_wall = time.monotonic() - live_began
        finally:
            stop_dev(process)
    sim_began = time.monotonic()
    simulated = run_simulation(inputs)
    sim_wall = time.monotonic() - sim_began

    result = compare(live, simulated)
    started = sum(1 for s in result.starts if s.simulated is not None)
    differences = sorted(s.difference for s in result.starts if s.difference is not None)
    print(f"live run: {live_wall:.1f} s wall for {live.ended:.0f} simulated s")
    print(f"simulated run: {sim_wall:.1f} s wall for {simulated.ended:.0f} simulated s")
    print(f"workloads started (simulated): {started} of {len(result.starts)}")
    print(f"starts within max(2% of wait, 2 s): {result.within} of {len(result.starts)} "
          f"({100 * result.share_within:.1f} %) (target: 100 %)")
    if differences:
        print(f"start difference p50: {differences[len(differences) // 2]:.2f} simulated s")
        print(f"start difference max: {differences[-1]:.2f} simulated s")
    print(f"preemptions live: {sum(len(g) for g in result.preemptions_live)}; "
          f"simulated: {sum(len(g) for g in result.preemptions_simulated)}")
    print(f"same preemptions in the same order: {'yes' if result.same_preemptions else 'no'} (target: yes)")
    for s in result.worst(5):
        if s.agrees:
            break
        live_start = "never" if s.live is None else f"{s.live:.1f}"
        sim_start = "never" if s.simulated is None else f"{s.simulated:.1f}"
        print(f"  outside: {s.name} live {live_start} s, simulated {sim_start} s, tolerance {s.tolerance:.1f} s")
    if not result.same_preemptions:
        print(f"  preempted live:      {[sorted(g) for g in result.preemptions_live]}")
        print(f"  preempted simulated: {[sorted(g) for g in result.preemptions_simulated]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
