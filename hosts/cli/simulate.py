"""`kaiwo-ray simulate`: replay a workload trace against a queue configuration on a private simulated
cluster with the operator's real controllers, in virtual time, and report waits, GPU allocation,
idle GPU-hours, preemptions and what never started (docs/simulate.md)."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

EXAMPLES = """examples:
  kaiwo-ray trace generate --workloads 200 --seed 1 -o trace.jsonl
  kaiwo-ray simulate --trace trace.jsonl --queue-config examples/queue-config.yaml
  kaiwo-ray simulate --trace trace.jsonl --nodes nodes.yaml --queue-config more-quota.yaml -o json
  kaiwo-ray simulate --trace trace.jsonl --compare today.yaml more-quota.yaml
  kaiwo-ray simulate --trace trace.jsonl --compare today.yaml more-quota.yaml --html report.html
"""


class InputError(Exception):
    """A bad input file: the message is the one line the command prints (exit 2)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", type=Path, required=True, metavar="FILE", help="the workloads (JSON Lines)")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--queue-config", type=Path, metavar="FILE", help="the KaiwoQueueConfig to try (YAML or JSON)")
    which.add_argument("--compare", type=Path, nargs=2, metavar=("A", "B"),
                       help="run the trace under two KaiwoQueueConfigs and show them side by side")
    parser.add_argument("--nodes", type=Path, metavar="FILE",
                        help="the cluster's Nodes (default: the sandbox's: two AMD MI300X, one NVIDIA H100, one CPU)")
    parser.add_argument("--kaiwoconfig", type=Path, metavar="FILE", help="a KaiwoConfig to run the operator with")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.add_argument("--html", type=Path, metavar="FILE",
                        help="also write the report as one self-contained HTML page with charts")
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


def load_inputs(args: argparse.Namespace, queue_config_path: Path) -> Any:
    """The SimulationInputs of the command line with that queue configuration; InputError naming the
    file (and line) otherwise."""
    from hosts.runtime.simulator import SimulationInputs, gpus_per_node, node_gpus, node_rooms
    from kaiwo_ray.manifests import ManifestReadError
    from kaiwo_ray.nodes import default_nodes, load_nodes
    from kaiwo_ray.simulation.trace import TraceError, check_feasible, parse_trace

    queue_config = _one_object(queue_config_path, "KaiwoQueueConfig")
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
        check_feasible(trace, queues, node_gpus(nodes), priorities, gpus_per_node(nodes), node_rooms(nodes))
    except TraceError as err:
        raise InputError(f"{args.trace}: {err}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{args.trace}: {err}") from None
    return SimulationInputs(trace, nodes, queue_config, kaiwo_config, settle_seconds=args.settle,
                            horizon_seconds=args.horizon)


class ProgressBar:
    """The progress bar on stderr (`kaiwo_ray.simulation.progress.render`), redrawn in place at most
    every `interval` wall seconds, and once more with the last figures when the run ends (also on
    Ctrl-C), followed by a newline so that the report starts on its own line."""

    def __init__(self, total: int, label: str = "", stream: TextIO | None = None, interval: float = 0.1) -> None:
        self.total = total
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.started = time.monotonic()
        self._drawn_at = -interval
        self._recorder: Any = None

    def __call__(self, recorder: Any) -> None:
        self._recorder = recorder
        now = time.monotonic()
        if now - self._drawn_at >= self.interval:
            self._drawn_at = now
            self._draw()

    def _draw(self) -> None:
        from kaiwo_ray.simulation.progress import Progress, render

        recorder = self._recorder
        if recorder is None:
            return
        submitted = sum(1 for tracked in recorder.by_name.values() if tracked.record.submitted is not None)
        progress = Progress(self.total, submitted, recorder.done, recorder.running,
                            recorder.now(), time.monotonic() - self.started)
        width = shutil.get_terminal_size((80, 24)).columns
        self.stream.write("\r" + render(progress, width, self.label) + "\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        self._draw()
        self.stream.write("\n")
        self.stream.flush()


def _progress(total: int, output: str, label: str) -> ProgressBar | None:
    """A progress bar when stderr is a terminal and the output is the table (never for -o json, nor
    when stderr is piped or redirected)."""
    if output == "json" or not sys.stderr.isatty():
        return None
    return ProgressBar(total, label)


@contextlib.contextmanager
def _quiet_operator() -> Iterator[None]:
    """The operator's warnings (a refused Kueue object, retries) would break the bar and repeat what
    the command reports in its one line: only errors are logged while a simulation runs."""
    logger = logging.getLogger("kaiwo_ray")
    level = logger.level
    logger.setLevel(max(level, logging.ERROR))
    try:
        yield
    finally:
        logger.setLevel(level)


def run(args: argparse.Namespace) -> int:
    if args.settle <= 0 or (args.horizon is not None and args.horizon <= 0):
        print("kaiwo-ray simulate: --settle and --horizon must be greater than 0", file=sys.stderr)
        return 2
    configs: list[Path] = list(args.compare) if args.compare else [args.queue_config]
    try:
        chart_js = _chart_library() if args.html is not None else ""
        runs = [load_inputs(args, path) for path in configs]
    except InputError as err:
        print(f"kaiwo-ray simulate: {err}", file=sys.stderr)
        return 2
    from kaiwo_ray.simulation.report import compare_reports, render_comparison, render_table

    reports = []
    for path, inputs in zip(configs, runs, strict=True):
        report = _simulate(inputs, path if len(configs) > 1 else None, args.output)
        if isinstance(report, int):
            return report
        reports.append(report)
        if report["interrupted"]:  # Ctrl-C: what this run has so far, and no further run
            break
    comparison: dict[str, Any] | None = None
    if len(reports) == 1 or reports[-1]["interrupted"]:
        if len(configs) > 1:
            print(f"kaiwo-ray simulate: interrupted while running {configs[len(reports) - 1]}", file=sys.stderr)
        configs = configs[len(reports) - 1:len(reports)]
        reports = reports[-1:]
        text = (json.dumps(reports[0], indent=2, sort_keys=True) if args.output == "json"
                else render_table(reports[0]))
    else:
        comparison = compare_reports(reports[0], reports[1])
        text = (json.dumps({"a": {"queue_config": str(configs[0]), "report": reports[0]},
                            "b": {"queue_config": str(configs[1]), "report": reports[1]},
                            "comparison": comparison}, indent=2, sort_keys=True)
                if args.output == "json" else render_comparison(str(configs[0]), str(configs[1]), comparison))
    sys.stdout.write(text + "\n")
    if args.html is not None:
        from kaiwo_ray.simulation.html import render_html

        page = render_html([(str(path), report) for path, report in zip(configs, reports, strict=True)],
                           chart_js, comparison)
        try:
            args.html.write_text(page, encoding="utf-8")
        except OSError as err:
            print(f"kaiwo-ray simulate: {args.html}: {err}", file=sys.stderr)
            return 1
    return 130 if reports[-1]["interrupted"] else 0


def _chart_library() -> str:
    """Chart.js's source, vendored at build time (`make vendor`): the page inlines it."""
    from serve.dashboard import CHART_JS

    try:
        return CHART_JS.read_text(encoding="utf-8")
    except OSError:
        raise InputError(f"--html needs Chart.js, vendored by `make vendor` at {CHART_JS}") from None


def _simulate(inputs: Any, label: Path | None, output: str = "table") -> dict[str, Any] | int:
    """The report of one run, or the exit status after printing why it could not run."""
    from hosts.runtime.simulator import SimulationError, run_simulation, total_gpus
    from kaiwo_ray.simulation.report import build_report

    progress = _progress(len(inputs.trace), output, label.name if label else "")
    try:
        with _quiet_operator():
            recording = run_simulation(inputs, progress)
    except SimulationError as err:
        if progress is not None:
            progress.stream.write("\r\x1b[K")  # no bar left above the one line
        print(f"kaiwo-ray simulate: {f'{label}: ' if label else ''}{err}", file=sys.stderr)
        return 2 if err.bad_input else 1
    if progress is not None:
        progress.close()
    report: dict[str, Any] = build_report(inputs.trace, recording, total_gpus(inputs.nodes))
    return report
