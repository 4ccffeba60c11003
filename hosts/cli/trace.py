"""`kaiwo-ray trace generate`: a synthetic workload trace (docs/simulate.md) for `kaiwo-ray simulate`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXAMPLES = """examples:
  kaiwo-ray trace generate --workloads 1000 --rate 30 --queues team-a,team-b --seed 7 -o week.jsonl
  kaiwo-ray trace generate --gpus 1,8 --gpu-weights 9,1 --idle-fraction 0.3 > trace.jsonl
"""


def _numbers(kind: type, text: str) -> tuple[float, ...]:
    try:
        return tuple(kind(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
    gen = sub.add_parser("generate", help="write a synthetic trace (JSON Lines)", epilog=EXAMPLES,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    gen.add_argument("--workloads", type=int, default=100, help="how many workloads (default 100)")
    gen.add_argument("--rate", type=float, default=60.0, metavar="PER_HOUR",
                     help="mean arrivals per hour, a Poisson process (default 60)")
    gen.add_argument("--queues", default="kaiwo", help="ClusterQueues, comma-separated, drawn uniformly")
    gen.add_argument("--users", type=int, default=4, help="how many users (user-1 ...), drawn uniformly")
    gen.add_argument("--namespace", default="default")
    gen.add_argument("--gpu-vendor", choices=("amd", "nvidia"), default="amd")
    gen.add_argument("--gpus", type=lambda t: _numbers(int, t), default=(1, 2, 4, 8), metavar="N,N,...",
                     help="GPU counts per workload (default 1,2,4,8)")
    gen.add_argument("--gpu-weights", type=lambda t: _numbers(float, t), default=None, metavar="W,W,...",
                     help="relative weight of each --gpus count (default 4,3,2,1 for the default counts, else equal)")
    gen.add_argument("--duration-median", type=float, default=1800.0, metavar="SECONDS")
    gen.add_argument("--duration-sigma", type=float, default=1.0, help="log-normal shape (default 1.0)")
    gen.add_argument("--duration-min", type=float, default=60.0, metavar="SECONDS")
    gen.add_argument("--duration-max", type=float, default=86400.0, metavar="SECONDS")
    gen.add_argument("--idle-fraction", type=float, default=0.1,
                     help="share of workloads that hold GPUs at 0%% utilization (default 0.1)")
    gen.add_argument("--seed", type=int, default=0, help="the same seed gives the same trace (default 0)")
    gen.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here instead of stdout")


def run(args: argparse.Namespace) -> int:
    from kaiwo_ray.simulation.generate import GeneratorSettings, generate
    from kaiwo_ray.simulation.trace import dump_line

    sizes = tuple(int(size) for size in args.gpus)
    weights = args.gpu_weights if args.gpu_weights is not None else (
        (4.0, 3.0, 2.0, 1.0) if sizes == (1, 2, 4, 8) else tuple(1.0 for _ in sizes))
    settings = GeneratorSettings(
        workloads=args.workloads, rate_per_hour=args.rate,
        queues=tuple(q.strip() for q in args.queues.split(",") if q.strip()), users=args.users,
        namespace=args.namespace, gpu_vendor=args.gpu_vendor, gpu_sizes=sizes,
        gpu_weights=tuple(float(w) for w in weights), duration_median=args.duration_median,
        duration_sigma=args.duration_sigma, duration_min=args.duration_min, duration_max=args.duration_max,
        idle_fraction=args.idle_fraction, seed=args.seed)
    problems = settings.problems()
    if problems:
        print(f"kaiwo-ray trace generate: {problems[0]}", file=sys.stderr)
        return 2
    text = "".join(dump_line(workload) + "\n" for workload in generate(settings))
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        args.output.write_text(text)
    except OSError as err:
        print(f"kaiwo-ray trace generate: cannot write {args.output}: {err.strerror}", file=sys.stderr)
        return 2
    return 0
