"""`kaiwo-ray sandbox`: run the Kubernetes API sandbox (with the simulated cluster) until Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
import time
from pathlib import Path

from kaiwo_sandbox.cluster import CONTROLLERS, OPT_IN


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", required=True, type=Path,
                        help="where to write the kubeconfig that points kubectl and clients at the sandbox")
    parser.add_argument("--nodes", metavar="NODES.yaml",
                        help="seed exactly these Nodes (default: two AMD MI300X, one NVIDIA H100, one CPU node)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    parser.add_argument("--state", type=Path, metavar="DIR", help="persist objects in DIR across restarts")
    parser.add_argument("--no-cluster", action="store_true",
                        help="API server only: no simulated scheduler, kubelet, Job controller, Kueue, KubeRay")
    parser.add_argument("--without", action="append", default=[], metavar="CONTROLLER", choices=list(CONTROLLERS),
                        help="leave this simulated controller off (repeatable; one of: "
                             + ", ".join(CONTROLLERS) + ")")
    parser.add_argument("--with", dest="with_", action="append", default=[], metavar="ADD_ON", choices=sorted(OPT_IN),
                        help="also run this opt-in add-on with its CRDs (repeatable; one of: "
                             + ", ".join(sorted(OPT_IN)) + ")")
    parser.add_argument("--authorization", choices=["allow-all", "rbac"], default="allow-all",
                        help="allow-all (default): every authenticated request is allowed; rbac: Roles, ClusterRoles "
                             "and their bindings decide, as on a real cluster (the kubeconfig's admin is in "
                             "system:masters either way)")
    parser.add_argument("--time-factor", type=float, default=1.0,
                        help="scale simulated durations (0.1 = ten times faster than real time)")
    add_clock_arguments(parser)
    add_local_image_argument(parser)


def add_clock_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scaled-clock", action="store_true",
                        help="with --time-factor F: the cluster's clock itself runs 1/F times as fast (timestamps, "
                             "every timer; under `dev` the operator's durations, grace periods and polls too), so "
                             "a duration is the same number in specs, timestamps and `kaiwo-ray simulate` "
                             "(kubectl's AGE runs ahead of the wall clock)")
    parser.add_argument("--clock-origin", type=float, metavar="UNIX_SECONDS",
                        help="with --scaled-clock: when the cluster's clock reads the wall clock (default: now)")


def add_local_image_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--local-image", action="append", default=[], metavar="NAME", dest="local_images",
                        help="run the pods of image NAME (any tag) as real processes on this machine, each in "
                             "its own network namespace (repeatable; needs root; docs/sandbox.md)")
    parser.add_argument("--local-commands", action="store_true",
                        help="also run, as real processes, the pods whose every container's command can run on "
                             "this machine (sh, python3, echo, ...; needs root; docs/sandbox.md)")


def run(args: argparse.Namespace) -> int:
    try:  # the sandbox's own dependencies come with the `sandbox` extra, not with the operator
        import cryptography  # noqa: F401
    except ImportError:
        print("kaiwo-ray sandbox: the sandbox's dependencies are not installed; "
              "install them with: pip install 'kaiwo-ray[sandbox]'", file=sys.stderr)
        return 2
    from kaiwo_sandbox.apiserver.auth.authz import parse_mode
    from kaiwo_sandbox.instance import Sandbox, SandboxConfig, new_event_loop

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.time_factor <= 0:
        print("kaiwo-ray sandbox: --time-factor must be greater than 0", file=sys.stderr)
        return 2
    if args.clock_origin is not None and not args.scaled_clock:
        print("kaiwo-ray sandbox: --clock-origin needs --scaled-clock", file=sys.stderr)
        return 2
    from kaiwo_ray.api.crd import all_crds
    from kaiwo_ray.nodes import default_nodes
    from kaiwo_sandbox.contracts import ScaledClock

    nodes = default_nodes()
    if args.nodes:
        from kaiwo_ray.manifests import ManifestReadError
        from kaiwo_ray.nodes import load_nodes

        try:
            nodes = load_nodes(args.nodes)
        except (ManifestReadError, OSError) as exc:
            print(f"kaiwo-ray sandbox: --nodes {args.nodes}: {exc}", file=sys.stderr)
            return 2
    # The sandbox knows no Kaiwo: the product hands it its CRDs and the node set a fresh cluster has.
    config = SandboxConfig(port=args.port, nodes=list(nodes), cluster=_cluster(args), time_factor=args.time_factor,
                           state_dir=args.state, kubeconfig_path=args.kubeconfig.expanduser().resolve(),
                           extra_crds=list(all_crds()), authorization=parse_mode(args.authorization),
                           local_images=list(args.local_images),
                           local_commands=bool(getattr(args, "local_commands", False)),
                           clock=ScaledClock(args.time_factor, time.time() if args.clock_origin is None
                                             else args.clock_origin) if args.scaled_clock else None)
    try:
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            runner.run(_serve(Sandbox(config)))
    except (OSError, ValueError) as exc:
        print(f"kaiwo-ray sandbox: {exc}", file=sys.stderr)
        return 1
    return 0


def _cluster(args: argparse.Namespace) -> bool | list[str]:
    """`SandboxConfig.cluster`: off, every controller, or every one but those named by --without, with the
    opt-in add-ons named by --with."""
    if args.no_cluster:
        return False
    if not args.without and not args.with_:
        return True
    return [name for name in CONTROLLERS
            if name not in args.without and (name not in OPT_IN or name in args.with_)]


async def _serve(sandbox: object) -> None:
    from hosts.runtime.gc_tuning import tune_for_long_lived_caches
    from kaiwo_sandbox.instance import Sandbox

    assert isinstance(sandbox, Sandbox)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
    await sandbox.start()
    # The store holds every object for the process's lifetime: spare it the collector's pauses
    # (a real apiserver's Go GC does not stop the world for 100 ms either); what it stores as it runs
    # is frozen once it survived a collection (hosts.runtime.gc_tuning).
    tune_for_long_lived_caches(freeze_after=0)
    kubeconfig = sandbox.config.kubeconfig_path
    print(f"Kubernetes API sandbox listening on {sandbox.url} (authorization: {sandbox.config.authorization})",
          flush=True)
    print(f"Kubeconfig written to {kubeconfig} (context kaiwo-sandbox)", flush=True)
    print("Point kubectl at it with either of:", flush=True)
    print(f"  export KUBECONFIG={kubeconfig}", flush=True)
    print(f"  kubectl --kubeconfig {kubeconfig} get nodes", flush=True)
    if sandbox.config.state_dir is not None:
        print(f"State is kept in {sandbox.config.state_dir}", flush=True)
    print("Press Ctrl-C to stop.", flush=True)
    try:
        await stop.wait()
    finally:
        await sandbox.stop()
        print("Sandbox stopped" + (", state saved." if sandbox.config.state_dir is not None else "."), flush=True)
