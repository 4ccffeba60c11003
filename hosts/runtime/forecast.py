"""Estimated start times of pending KaiwoJobs: the cluster's state (kaiwo_ray/simulation/forecast.py)
replayed forward by the simulator (hosts/runtime/simulator.py) once per run-time scenario.

`python -m hosts.runtime.forecast` reads `{"now", "kaiwojobs", "kaiwoservices" (optional), "nodes",
"queueConfig", "kaiwoConfig", "scores"}` (scores: how far the cluster's past estimates missed and their size class,
kaiwo_ray/simulation/forecast.py `score`)
as JSON on stdin and writes the estimates as a JSON list: the admin API runs it as a child process,
because a simulation takes seconds of CPU and sets the process's operator clock to virtual time.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from hosts.runtime.simulator import Features, SimulationInputs, gpus_per_node, run_simulation
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.simulation.forecast import (
    QUANTILES,
    ClusterState,
    Estimate,
    Score,
    cluster_state,
    estimates,
    forecast_trace,
    widening,
)

HORIZON_SECONDS = 7 * 86400.0
"""How far ahead a forecast simulates: a workload not started by then has no estimate."""


def _node(node: Mapping[str, Any]) -> JsonObj:
    """What the simulated cluster needs of a real Node: its name, labels, taints and resources."""
    meta = node.get("metadata") or {}
    status = node.get("status") or {}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": meta.get("name"), "labels": dict(meta.get("labels") or {})},
            "spec": {k: v for k, v in (node.get("spec") or {}).items() if k in ("taints", "unschedulable")},
            "status": {"capacity": dict(status.get("capacity") or {}),
                       "allocatable": dict(status.get("allocatable") or status.get("capacity") or {})}}


def node_gpus(nodes: Sequence[Mapping[str, Any]]) -> int:
    """The most GPUs one node has, of any vendor (0 with no GPU node): what a workload's size class is
    relative to."""
    return max((max(sizes) for sizes in gpus_per_node([dict(n) for n in nodes]).values()), default=0)


def _config(obj: Mapping[str, Any] | None) -> JsonObj | None:
    if obj is None:
        return None
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "metadata": {"name": (obj.get("metadata") or {}).get("name")}, "spec": obj.get("spec") or {}}


def forecast(state: ClusterState, now: datetime, nodes: Sequence[Mapping[str, Any]], queue_config: Mapping[str, Any],
             kaiwo_config: Mapping[str, Any] | None = None, scores: Sequence[Score] = ()) -> list[Estimate]:
    """Each pending job's estimate, its span widened by the conformal quantile of the cluster's past
    `scores` for its size class (kaiwo_ray/simulation/forecast.py, `widening`); blocks for the
    simulations (seconds each)."""
    if not state.pending:
        return []
    node_objects = [_node(n) for n in nodes]
    simulated: dict[str, dict[tuple[str, str], float | None]] = {}
    starts: dict[float, Mapping[tuple[str, str], float | None]] = {}
    for q in QUANTILES:
        trace = forecast_trace(state, now, q)
        key = json.dumps([e.workload.model_dump(mode="json") for e in trace], sort_keys=True)
        if key not in simulated:  # every run time declared: the three scenarios are one
            recording = run_simulation(SimulationInputs(
                trace=trace, nodes=node_objects, queue_config=_config(queue_config) or {},
                kaiwo_config=_config(kaiwo_config), horizon_seconds=HORIZON_SECONDS,
                # It knows no workload's future GPU utilization: no idle-GPU preemption, no resource
                # monitor (with the cluster's sections on, every running job would count as idle).
                features=Features()))
            by_line = {e.line: (e.workload.namespace, e.name) for e in trace}
            simulated[key] = {by_line[r.line]: r.started for r in recording.workloads}
        starts[q] = simulated[key]
    return estimates(state, now, starts, widening(scores), node_gpus(nodes))


def _score(item: Sequence[Any]) -> Score:
    """A score as JSON gives it: [below, above, size], or [below, above] (pooled only)."""
    return float(item[0]), float(item[1]), str(item[2]) if len(item) > 2 else ""


def main() -> None:
    logging.basicConfig(level=logging.WARNING)

    request = json.load(sys.stdin)
    now = datetime.fromisoformat(request["now"]) if request.get("now") else datetime.now(UTC)
    state = cluster_state(request.get("kaiwojobs") or [], request.get("kaiwoservices") or [])
    result = forecast(state, now, request.get("nodes") or [],
                      request.get("queueConfig") or {}, request.get("kaiwoConfig"),
                      [_score(item) for item in request.get("scores") or []])
    json.dump([e.model_dump(mode="json") for e in result], sys.stdout)


if __name__ == "__main__":
    main()
