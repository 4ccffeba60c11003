"""`kaiwo-ray simulate`: replay a workload trace against a queue configuration on a private simulated
cluster with the operator's real controllers, in virtual time, and report waits, GPU allocation,
idle GPU-hours, preemptions and what never started (docs/simulate.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

EXAMPLES = """examples:
  kaiwo-ray trace generate --workloads 200 --seed 1 -o trace.jsonl
  kaiwo-ray simulate --trace trace.jsonl --queue-config examples/queue-config.yaml
  kaiwo-ray simulate --trace trace.jsonl --nodes nodes.yaml --queue-config more-quota.yaml -o json
"""


class InputError(Exception):
    """A bad input file: the message is the one line the command prints (exit 2)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", type=Path, required=True, metavar="FILE", help="the workloads (JSON Lines)")
    parser.add_argument("--queue-config", type=Path, required=True, metavar="FILE",
                        help="the KaiwoQueueConfig to try (YAML or JSON)")
    parser.add_argument("--nodes", type=Path, metavar="FILE",
                        help="the cluster's Nodes (default: the sandbox's: two AMD MI300X, one NVIDIA H100, one CPU)")
    parser.add_argument("--kaiwoconfig", type=Path, metavar="FILE", help="a KaiwoConfig to run the operator with")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.add_argument("--settle", type=float, default=600.0, metavar="SECONDS",
                        help="with everything submitted and nothing running, how long (simulated) nothing may "
                             "change before what is pending is reported as never starting (default 600)")
    parser.add_argument("--horizon", type=float, default=None, metavar="SECONDS",
                        help="stop after this much simulated time (default: when everything has finished)")


def _one_object(path: Path, kind: str) -> dict[str, Any]:
    from kaiwo_ray.manifests import ManifestReadError, parse_located, read_source

    try:
        located = parse_located(read_source(str(path)))
    except (ManifestReadError, OSError) as err:
        raise InputError(f"{path}: {err}") from None
    found = [entry.obj for entry in located if entry.obj.get("kind") == kind]
    if len(found) != 1:
        raise InputError(f"{path}: expected one {kind}, found {len(found)}")
    return found[0]


def load_inputs(args: argparse.Namespace) -> Any:
    """The SimulationInputs of the command line; InputError naming the file (and line) otherwise."""
    from hosts.runtime.simulator import SimulationInputs, node_gpus
    from kaiwo_ray.manifests import ManifestReadError
    from kaiwo_ray.nodes import default_nodes, load_nodes
    from kaiwo_ray.simulation.trace import TraceError, check_feasible, parse_trace

    queue_config = _one_object(args.queue_config, "KaiwoQueueConfig")
    kaiwo_config = _one_object(args.kaiwoconfig, "KaiwoConfig") if args.kaiwoconfig is not None else None
    if args.nodes is None:
        nodes = default_nodes()
    else:
        try:
            nodes = load_nodes(str(args.nodes))
        except (ManifestReadError, OSError) as err:
            raise InputError(f"{args.nodes}: {err}") from None
    try:
        with args.trace.open(encoding="utf-8") as lines:
            trace = parse_trace(lines)
        spec = queue_config.get("spec") or {}
        queues = [str(q.get("name")) for q in spec.get("clusterQueues") or [] if isinstance(q, dict)]
        priorities = [str((p.get("metadata") or {}).get("name")) for p in spec.get("workloadPriorityClasses") or []
                      if isinstance(p, dict)]
        check_feasible(trace, queues, node_gpus(nodes), priorities)
    except TraceError as err:
        raise InputError(f"{args.trace}: {err}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{args.trace}: {err}") from None
    return SimulationInputs(trace, nodes, queue_config, kaiwo_config, settle_seconds=args.settle,
                            horizon_seconds=args.horizon)


def _progress(total: int) -> Any:
    """A one-line progress report on stderr, when it is a terminal."""
    if not sys.stderr.isatty():
        return None

    def show(recorder: Any) -> None:
        hours = recorder.now() / 3600
        submitted = sum(1 for tracked in recorder.by_name.values() if tracked.record.submitted is not None)
        sys.stderr.write(f"\rsimulated {hours:7.1f}h  submitted {submitted}/{total}  running {recorder.running}  "
                         f"finished {recorder.finished}\x1b[K")
        sys.stderr.flush()

    return show


def run(args: argparse.Namespace) -> int:
    if args.settle <= 0 or (args.horizon is not None and args.horizon <= 0):
        print("kaiwo-ray simulate: --settle and --horizon must be greater than 0", file=sys.stderr)
        return 2
    try:
        inputs = load_inputs(args)
    except InputError as err:
        print(f"kaiwo-ray simulate: {err}", file=sys.stderr)
        return 2
    from hosts.runtime.simulator import SimulationError, run_simulation, total_gpus
    from kaiwo_ray.simulation.report import build_report, render_table

    progress = _progress(len(inputs.trace))
    try:
        recording = run_simulation(inputs, progress)
    except SimulationError as err:
        print(f"kaiwo-ray simulate: {err}", file=sys.stderr)
        return 2 if err.bad_input else 1
    finally:
        if progress is not None:
            sys.stderr.write("\n")
    report = build_report(inputs.trace, recording, total_gpus(inputs.nodes))
    if args.output == "json":
        sys.stdout.write(json.dumps(report, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_table(report) + "\n")
    return 0
