"""`kaiwo-ray trace generate`: a synthetic workload trace (docs/simulate.md) for `kaiwo-ray simulate`;
`kaiwo-ray trace export`: the trace of a live cluster's finished KaiwoJobs (batch and Ray), read over its API."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

EXAMPLES = """examples:
  kaiwo-ray trace generate --workloads 1000 --rate 30 --queues team-a,team-b --seed 7 -o week.jsonl
  kaiwo-ray trace generate --gpus 1,8 --gpu-weights 9,1 --idle-fraction 0.3 > trace.jsonl
  kaiwo-ray trace generate --rayjob-share 0.2 --replicas 1,2,4 --replica-weights 6,3,1 -o mixed.jsonl
  kaiwo-ray trace generate --service-share 0.1 -o with-services.jsonl
"""
EXPORT_EXAMPLES = """examples:
  kaiwo-ray trace export --since 7d -A -o last-week.jsonl
  kaiwo-ray trace export --since 2026-12-01T00:00:00Z --until 2026-12-02T00:00:00Z -n team-a -n team-b
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
    gen.add_argument("--rayjob-share", type=float, default=0.0, metavar="SHARE",
                     help="share of workloads that are rayjobs (a head and GPU workers), 0..1 (default 0)")
    gen.add_argument("--service-share", type=float, default=0.0, metavar="SHARE",
                     help="share of workloads that are services (KaiwoServices, deleted after the drawn "
                          "duration), 0..1 (default 0)")
    gen.add_argument("--replicas", type=lambda t: _numbers(int, t), default=(1,), metavar="N,N,...",
                     help="pods per workload (workers of a rayjob), each with the drawn GPUs (default 1)")
    gen.add_argument("--replica-weights", type=lambda t: _numbers(float, t), default=None, metavar="W,W,...",
                     help="relative weight of each --replicas count (default equal)")
    gen.add_argument("--seed", type=int, default=0, help="the same seed gives the same trace (default 0)")
    gen.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here instead of stdout")

    exp = sub.add_parser("export", help="write the trace of a live cluster's finished KaiwoJobs",
                         epilog=EXPORT_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    exp.add_argument("--kubeconfig", metavar="FILE", help="default: $KUBECONFIG, else ~/.kube/config")
    exp.add_argument("--context", help="a kubeconfig context (default: the current one)")
    exp.add_argument("--since", metavar="DURATION|TIME",
                     help="the window's start: 30m, 24h, 7d, 2w before now, or RFC 3339 (default: the first "
                          "KaiwoJob); submit times count from it")
    exp.add_argument("--until", metavar="DURATION|TIME", help="the window's end, the same forms (default: now)")
    exp.add_argument("-n", "--namespace", action="append", dest="namespaces", metavar="NS",
                     help="a namespace to read (repeatable; default: the context's namespace)")
    exp.add_argument("-A", "--all-namespaces", action="store_true")
    exp.add_argument("--ledger-namespace", default=os.environ.get("GPU_ACCOUNTING_NAMESPACE") or "kube-system",
                     help="where the GPU ledger's ConfigMaps are, for utilization (default: "
                          "$GPU_ACCOUNTING_NAMESPACE, else kube-system)")
    exp.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here instead of stdout")


def run(args: argparse.Namespace) -> int:
    if args.trace_command == "export":
        return export(args)
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
        idle_fraction=args.idle_fraction, rayjob_share=args.rayjob_share, service_share=args.service_share,
        replica_counts=tuple(int(count) for count in args.replicas),
        replica_weights=tuple(float(w) for w in (args.replica_weights or tuple(1.0 for _ in args.replicas))),
        seed=args.seed)
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


def _write(command: str, path: Path | None, text: str) -> int:
    if path is None:
        sys.stdout.write(text)
        return 0
    try:
        path.write_text(text)
    except OSError as err:
        print(f"kaiwo-ray trace {command}: cannot write {path}: {err.strerror}", file=sys.stderr)
        return 2
    return 0


def export(args: argparse.Namespace) -> int:
    """Read KaiwoJobs, their pods, KaiwoServices (counted, not exported) and the GPU ledger; map them
    (kaiwo_ray.simulation.export); write the lines; say on stderr what was left out."""
    from datetime import UTC, datetime

    from kaiwo_ray.api.labels import LABEL_RUN_ID
    from kaiwo_ray.cli import kubeconfig
    from kaiwo_ray.cli.api import Api, ApiStatusError, path_of
    from kaiwo_ray.cli.errors import CliError, ClusterError
    from kaiwo_ray.kube.resources import CONFIGMAPS, KAIWOJOBS, KAIWOSERVICES, PODS, RAYJOBS
    from kaiwo_ray.simulation.export import export_trace, parse_moment
    from kaiwo_ray.simulation.shape import uses_ray
    from kaiwo_ray.simulation.trace import dump_line
    from kaiwo_ray.telemetry.ledger_store import LABEL, assemble

    def fail(message: str, code: int) -> int:
        print(f"kaiwo-ray trace export: {message}", file=sys.stderr)
        return code

    now = datetime.now(UTC)
    try:
        since = parse_moment(args.since, now) if args.since else None
        until = parse_moment(args.until, now) if args.until else now
    except ValueError as err:
        return fail(f"--since/--until: {err}", 2)
    if since is not None and since >= until:
        return fail(f"--since ({since.isoformat()}) is not before --until ({until.isoformat()})", 2)
    try:
        access = kubeconfig.load(args.kubeconfig, args.context)
        api = Api(access, timeout=30.0)
        namespaces: list[str | None] = [None] if args.all_namespaces else list(args.namespaces or [access.namespace])
        jobs: list[dict[str, object]] = []
        pods: list[dict[str, object]] = []
        rayjobs: list[dict[str, object]] = []
        services = 0
        for namespace in namespaces:
            listed = api.list(path_of(KAIWOJOBS, namespace)).get("items") or []
            jobs += listed
            pods += api.list(path_of(PODS, namespace), labelSelector=LABEL_RUN_ID).get("items") or []
            services += len(api.list(path_of(KAIWOSERVICES, namespace)).get("items") or [])
            if any(uses_ray(job.get("spec") or {}) for job in listed):
                try:  # a Ray KaiwoJob's run is its RayJob's (its pods are gone once it ends)
                    rayjobs += api.list(path_of(RAYJOBS, namespace)).get("items") or []
                except ApiStatusError as err:
                    if err.code != 404:  # 404: no KubeRay, so no RayJobs
                        raise
                except ClusterError as err:  # 403
                    print(f"kaiwo-ray trace export: RayJobs not read ({err.message}); Ray KaiwoJobs' runs "
                          "from their own status", file=sys.stderr)
        try:
            ledger, _ = assemble(list(api.list(path_of(CONFIGMAPS, args.ledger_namespace),
                                               labelSelector=LABEL).get("items") or []))
            rows = ledger.rows
        except ApiStatusError as err:  # no ledger to read: the lines go without utilization
            print(f"kaiwo-ray trace export: GPU ledger not read ({err.message}); no utilization written",
                  file=sys.stderr)
            rows = {}
    except CliError as err:
        return fail(err.message, 1)
    result = export_trace(jobs, pods, since=since, until=until, ledger_rows=rows, rayjobs=rayjobs,
                          other={"KaiwoService (not a trace kind)": services} if services else None)
    code = _write("export", args.output, "".join(dump_line(workload) + "\n" for workload in result.workloads))
    skipped = ", ".join(f"{count} {reason}" for reason, count in result.skipped.items())
    print(f"kaiwo-ray trace export: {len(result.workloads)} workloads written"
          + (f"; left out: {skipped}" if skipped else ""), file=sys.stderr)
    return code
