"""`kaiwo-ray up`: run the operator's controller actors on Ray against a cluster until SIGINT/SIGTERM.

Ray is imported only inside `run` (the module is imported by `kaiwo-ray --help` and every other
sub-command). Without `--ray-address` a private local Ray is started and shut down on exit; with
one, the actors are detached so that they keep reconciling if this process dies, and a later `up`
adopts them. `--no-ray` runs the same controllers in this process instead.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

from hosts.cli import telemetry_flags
from hosts.runtime.cpu_policy import batch_wanted
from hosts.runtime.operator_runtime import (
    ActorHealth,
    StopSignal,
    adopted,
    format_health,
    health_changes,
    parse_controller_names,
)
from kaiwo_ray.cli.kubeconfig import resolve_kubeconfig
from kaiwo_ray.controllers.manager import CONTROLLERS, HostSettings, default_controller_names
from kaiwo_ray.kube.discovery import KUEUE, Dependency, missing_line

IN_CLUSTER_LEASE_NAMESPACE = "kaiwo-system"  # deploy/'s namespace, when the pod's is not mounted


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--kubeconfig", type=Path, metavar="PATH",
                       help="kubeconfig of the cluster (default: $KUBECONFIG, else ~/.kube/config)")
    where.add_argument("--in-cluster", action="store_true",
                       help="use the pod's service account (when Ray runs inside the cluster)")
    parser.add_argument("--ray-address", metavar="ADDR",
                        help="Ray cluster to join (e.g. auto, ray://head:10001; default: $RAY_ADDRESS, "
                             "else start a local Ray)")
    parser.add_argument("--controllers", metavar="a,b",
                        help=f"run only these controllers (default: all of {','.join(CONTROLLERS)})")
    parser.add_argument("--no-lease", action="store_true",
                        help="write without leader election (only safe when no other instance can run)")
    parser.add_argument("--ray-namespace", default="kaiwo", help="Ray namespace of the named actors")
    parser.add_argument("--identity", help="Lease holder identity (default: host-pid-random)")
    parser.add_argument("--lease-namespace", default=None,
                        help="namespace of the Leases (default: with --in-cluster the pod's own namespace, "
                             "else kube-system)")
    parser.add_argument("--health-interval", type=float, default=10.0, metavar="SECONDS",
                        help="how often to check the actors (and restart missing ones)")
    parser.add_argument("--no-ray", action="store_true",
                        help="run the controllers in this process instead of Ray actors (no restarts by Ray)")
    parser.add_argument("--grace", type=float, default=10.0, metavar="SECONDS",
                        help="how long in-flight reconciles may take to finish on shutdown")
    from serve.cli_hooks import add_cli_arguments, add_metrics_arguments

    add_cli_arguments(parser, default_auth="kubernetes")
    add_metrics_arguments(parser)
    telemetry_flags.add_arguments(parser, dev=False)


def host_settings(args: argparse.Namespace) -> HostSettings:
    settings = HostSettings(lease=not args.no_lease, tune_gc=True, batch_scheduling=batch_wanted(os.environ))
    if args.in_cluster:
        from kaiwo_ray.kube import incluster

        config = incluster.load()  # InClusterError (a ValueError) names what is missing
        settings.in_cluster = True
        settings.lease_namespace = args.lease_namespace or config.namespace() or IN_CLUSTER_LEASE_NAMESPACE
    else:
        settings.kubeconfig = str(resolve_kubeconfig(args.kubeconfig))
        settings.lease_namespace = args.lease_namespace or settings.lease_namespace
    if args.identity:
        settings.identity = args.identity
    return settings


def run(args: argparse.Namespace) -> int:
    try:
        names = parse_controller_names(args.controllers)
        settings = host_settings(args)
        if args.health_interval <= 0 or args.grace < 0:
            raise ValueError("--health-interval must be > 0 and --grace >= 0")
        problem = telemetry_flags.configure(args, settings)
        if problem is not None:
            raise ValueError(problem)
        from serve.metrics_server import parse_bind_address

        parse_bind_address(args.metrics_bind_address)
        names = names if args.controllers else default_controller_names(settings)
    except ValueError as err:
        print(f"kaiwo-ray up: {err}", file=sys.stderr)
        return 2
    if args.no_ray and args.ray_address:
        print("kaiwo-ray up: --no-ray and --ray-address exclude each other", file=sys.stderr)
        return 2
    missing = asyncio.run(missing_dependencies(settings))
    for dep in missing:
        print(f"kaiwo-ray up: {missing_line(dep)}", file=sys.stderr, flush=True)
    if any(dep.name == KUEUE.name for dep in missing):
        return 1  # nothing can be queued without Kueue: say so instead of starting controllers that wait
    if args.no_ray:
        return asyncio.run(run_in_process(names, settings, args.health_interval, args.grace, args))
    address = args.ray_address or os.environ.get("RAY_ADDRESS") or None

    from actors.supervisor import StartInterrupted, Supervisor, SupervisorError, init_ray

    with StopSignal() as stop:
        started_ray = False
        fleet = None
        try:
            try:
                started_ray = init_ray(address, namespace=args.ray_namespace)
            except Exception as err:  # Ray raises plain Exception/ConnectionError: name it, don't crash
                print(f"kaiwo-ray up: cannot {'join Ray at ' + address if address else 'start Ray'}: {err}",
                      file=sys.stderr)
                return 1
            stop.install()
            if stop.event.is_set():
                return 0
            where = "a local Ray (started)" if started_ray else f"Ray at {address}"
            print(f"kaiwo-ray up: {', '.join(names)} on {where}, Ray namespace {args.ray_namespace!r}, "
                  f"identity {settings.identity!r}" + ("" if settings.lease else ", no lease"), flush=True)
            fleet = telemetry_flags.start_fleet(args, settings, args.ray_namespace, detached=not started_ray)
            supervisor = Supervisor(settings, names, namespace=args.ray_namespace, detached=not started_ray)
            try:
                rows = supervisor.start(interrupted=stop.event.is_set)
            except StartInterrupted:
                return 0
            except SupervisorError as err:
                print(f"kaiwo-ray up: controllers failed to start: {err}", file=sys.stderr)
                return 1
            print(format_health(rows), flush=True)
            for row in adopted(rows, settings.identity):
                print(f"{row.name}: adopted the running actor of {row.identity!r} (it keeps its own settings; "
                      "stop that instance first to change them)", flush=True)
            from serve.cli_hooks import start_from_cli, stop_admin

            admin_url = start_from_cli(args, kubeconfig=settings.kubeconfig, in_cluster=settings.in_cluster,
                                       ray_namespace=args.ray_namespace)
            if admin_url:
                print(f"Admin API and dashboard: {admin_url}", flush=True)
            from serve.metrics_server import MetricsSources
            from serve.ray_stats import actor_stats_source
            from serve.telemetry_samples import AggregatorSamples

            metrics = start_metrics(args, MetricsSources(
                kubeconfig=settings.kubeconfig, in_cluster=settings.in_cluster,
                stats_source=actor_stats_source(args.ray_namespace),
                gpu_samples=AggregatorSamples(args.ray_namespace)))
            print("Running. Press Ctrl-C to stop.", flush=True)
            supervise(supervisor, stop, args.health_interval)
            if metrics is not None:
                metrics.stop()
            if admin_url:
                with contextlib.suppress(Exception):
                    stop_admin()
            stop_supervisor(supervisor, args.grace, sys.stdout)
            return 0
        finally:
            telemetry_flags.stop_fleet(fleet)
            if started_ray:
                import ray

                ray.shutdown()


def start_metrics(args: argparse.Namespace, sources: Any) -> Any:
    """The operator's metrics endpoint when --metrics-bind-address asks for one (its URL printed); a
    failure to start it is printed and the operator runs on, as with the admin API."""
    from serve.cli_hooks import start_metrics_from_cli

    try:
        server = start_metrics_from_cli(args, sources)
    except (ValueError, RuntimeError, OSError) as err:
        print(f"metrics endpoint not started: {err}", file=sys.stderr, flush=True)
        return None
    if server is not None:
        print(f"Metrics: {server.url}" + (" (TokenReview + SubjectAccessReview)" if args.metrics_secure else ""),
              flush=True)
    return server


async def missing_dependencies(settings: HostSettings) -> list[Dependency]:
    """The dependencies the cluster lacks (kube/discovery.py). When discovery itself fails (no cluster at that
    address, bad credentials) nothing is reported here: starting the controllers names that failure."""
    from kaiwo_ray.controllers.manager import make_client
    from kaiwo_ray.kube.discovery import detect

    try:
        client = await make_client(settings)
    except Exception:  # the kubernetes package raises assorted errors for unusable configs
        return []
    try:
        return (await detect(client)).missing()
    except Exception:
        return []
    finally:
        await client.close()


def supervise(supervisor: Any, stop: StopSignal, interval: float, out: TextIO | None = None) -> None:
    """Until a stop signal: recreate actors that are gone, print what changed in their health."""
    out = out or sys.stdout
    last = supervisor.health()
    while not stop.wait(interval):
        for name in supervisor.ensure():
            print(f"{name}: actor was gone; started a new one", file=out, flush=True)
        rows = supervisor.health()
        for line in health_changes(last, rows):
            print(line, file=out, flush=True)
        last = rows


def stop_supervisor(supervisor: Any, grace: float, out: TextIO) -> None:
    print(f"Stopping: in-flight reconciles get up to {grace:.0f}s to finish...", file=out, flush=True)
    rows = supervisor.stop(grace_seconds=grace)
    stuck = [row.name for row in rows if row.error and row.error != "stopped"]
    if stuck:
        print(f"not stopped cleanly: {', '.join(stuck)}", file=out, flush=True)
    print("Controllers stopped.", file=out, flush=True)


async def run_in_process(names: list[str], settings: HostSettings, interval: float, grace: float,
                         args: argparse.Namespace | None = None) -> int:
    """`--no-ray`: the same controllers and Leases on this process's event loop (the lead's
    `Operator`), for machines without Ray or to take Ray out of the picture while debugging."""
    import psutil

    from hosts.runtime.controller_host import Operator

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    process = psutil.Process()

    def rows() -> list[ActorHealth]:
        extra = {"pid": process.pid, "rss_bytes": process.memory_info().rss, "identity": settings.identity}
        return [ActorHealth.from_report(host.name, {**host.health(), **extra}) for host in operator.hosts]

    from serve.metrics_server import MetricsSources

    operator = Operator(names, settings)
    metrics: Any = None
    print(f"kaiwo-ray up: {', '.join(names)} in this process (no Ray), identity {settings.identity!r}"
          + ("" if settings.lease else ", no lease"), flush=True)
    try:
        starting = asyncio.create_task(operator.start())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not starting.done():  # a signal while the caches warm up (an API that does not answer)
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)
            return 0
        if starting.exception() is not None:
            err = starting.exception()
            print(f"kaiwo-ray up: controllers failed to start: {type(err).__name__}: {err}", file=sys.stderr)
            return 1
        print(format_health(rows()), flush=True)
        if args is not None:
            metrics = await asyncio.to_thread(start_metrics, args, MetricsSources(
                kubeconfig=settings.kubeconfig, in_cluster=settings.in_cluster,
                stats_source=_in_process_stats(operator, loop)))
        print("Running. Press Ctrl-C to stop.", flush=True)
        last = rows()
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await stop.wait()
            current = rows()
            for line in health_changes(last, current):
                print(line, flush=True)
            last = current
        print(f"Stopping: in-flight reconciles get up to {grace:.0f}s to finish...", flush=True)
    finally:
        if metrics is not None:
            await asyncio.to_thread(metrics.stop)
        await asyncio.gather(*(host.stop(grace_seconds=grace) for host in operator.hosts), return_exceptions=True)
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    print("Controllers stopped.", flush=True)
    return 0


def _in_process_stats(operator: Any, loop: asyncio.AbstractEventLoop) -> Any:
    """The in-process controllers' stats for the metrics server's thread, read on the operator's own loop."""
    async def collect() -> list[dict[str, Any]]:
        async def on_operator_loop() -> list[dict[str, Any]]:
            return [host.stats() for host in operator.hosts]

        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(on_operator_loop(), loop))

    return collect
