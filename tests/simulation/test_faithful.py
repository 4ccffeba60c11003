"""How faithful `kaiwo-ray simulate` is: a small trace with contention, borrowing in a cohort and a
priority preemption, run live (a sandbox with a time factor and the operator's controllers, in real
time) and simulated (virtual time); every start agrees within the issue's tolerance
(max(2 % of the wait, 2 simulated seconds)) and the same workloads are preempted in the same order.
The full-size measurement is benchmarks/simulate_faithful.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml

from hosts.runtime.controller_host import Operator
from hosts.runtime.live_replay import replay_live
from hosts.runtime.simulator import CONTROLLERS, SimulationInputs, run_simulation
from kaiwo_ray.controllers.manager import HostSettings
from kaiwo_ray.nodes import default_nodes
from kaiwo_ray.simulation.faithful import compare
from kaiwo_ray.simulation.report import Recording
from kaiwo_ray.simulation.trace import parse_trace
from kaiwo_sandbox.testing import start_sandbox

DATA = Path(__file__).parent / "data"
# 1 simulated second = 0.3 wall seconds: the trace's 85 simulated seconds take 26 s; the operator's and
# Kueue's reaction (tens of milliseconds, a few hundred on a loaded 2-core machine) stays under the
# 2 simulated seconds (0.6 s) allowed.
TIME_FACTOR = 0.3


def _inputs() -> SimulationInputs:
    with (DATA / "faithful.jsonl").open(encoding="utf-8") as lines:
        trace = parse_trace(lines)
    queue_config = yaml.safe_load((DATA / "cohort.yaml").read_text())
    return SimulationInputs(trace, default_nodes(), queue_config, settle_seconds=60.0)


def _live(inputs: SimulationInputs) -> Recording:
    running = start_sandbox(cluster=True, time_factor=TIME_FACTOR)
    try:
        async def scenario() -> Recording:
            operator = Operator(CONTROLLERS, HostSettings(kubeconfig=str(running.kubeconfig_path), lease=False))
            await operator.start()
            try:
                return await replay_live(str(running.kubeconfig_path), inputs, TIME_FACTOR, timeout_seconds=60.0)
            finally:
                await operator.stop()

        return asyncio.run(scenario())
    finally:
        running.stop()


def test_live_and_simulated_runs_agree() -> None:
    inputs = _inputs()
    live = _live(inputs)
    simulated = run_simulation(inputs)
    result = compare(live, simulated)
    starts = {s.name: (s.live, s.simulated) for s in result.starts}
    assert all(s.agrees for s in result.starts), [
        (s.name, s.live, s.simulated, s.tolerance) for s in result.starts if not s.agrees]
    assert len(starts) == 12 and all(sim is not None for _, sim in starts.values()), starts
    assert result.preemptions_simulated, "the trace is meant to preempt"
    assert result.preemptions_live == result.preemptions_simulated
