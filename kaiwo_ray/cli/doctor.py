"""`kaiwo-ray doctor [--kubeconfig PATH | --in-cluster]`: check a cluster before and after installing kaiwo-ray.

One line per check (OK, WARN, FAIL or SKIP), each failure with its fix: kaiwo-ray's CRDs present and
current, the Kueue/KubeRay/AppWrapper versions, the kaiwo-scheduler running, the operator running (its
Leases), the operator's permissions (an access review per rule), GPU device plugins (allocatable GPUs per
GPU node), the default queue, a telemetry worker per GPU node, the admin API. Before the install (none of
kaiwo-ray's CRDs exist) it says so in one TODO line and marks the checks of the install pending (SKIP),
judging only the prerequisites. Exit status 1 when a check fails, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--kubeconfig", type=Path, metavar="PATH",
                       help="kubeconfig of the cluster (default: $KUBECONFIG, else ~/.kube/config)")
    where.add_argument("--in-cluster", action="store_true", help="use the pod's service account")
    parser.add_argument("--namespace", default="kaiwo-system", help="the operator's namespace (default: kaiwo-system)")
    parser.add_argument("--service-account", default="kaiwo-ray", help="the operator's service account")
    parser.add_argument("--admin-url", metavar="URL",
                        help="also ask the admin API at URL (e.g. after kubectl port-forward svc/kaiwo-ray-admin 8000)")


def run(args: argparse.Namespace) -> int:
    from kaiwo_ray.cli.kubeconfig import resolve_kubeconfig
    from kaiwo_ray.doctor.gather import Options, run_checks
    from kaiwo_ray.kube.client import KubeClient

    try:
        kubeconfig = None if args.in_cluster else str(resolve_kubeconfig(args.kubeconfig))
    except ValueError as err:
        print(f"kaiwo-ray doctor: {err}", file=sys.stderr)
        return 2
    options = Options(namespace=args.namespace, service_account=args.service_account, admin_url=args.admin_url)

    async def check() -> list[str]:
        client = KubeClient.in_cluster() if kubeconfig is None else await KubeClient.from_kubeconfig(kubeconfig)
        try:
            return [r.line() for r in await run_checks(client, options)]
        finally:
            await client.close()

    try:
        lines = asyncio.run(check())
    except Exception as err:  # an unusable kubeconfig, no pod environment: one line, not a traceback
        print(f"kaiwo-ray doctor: cannot reach the cluster: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    for line in lines:
        print(line)
    failed = sum(1 for line in lines if line.startswith("FAIL"))
    pending = sum(1 for line in lines if line.startswith("SKIP") and line.endswith(": pending the install"))
    if any(line.startswith("TODO") for line in lines):  # before the install: the prerequisites are what counts
        print(f"kaiwo-ray is not installed yet ({pending} check(s) pending the install); "
              + (f"{failed} prerequisite check(s) failed" if failed else "every prerequisite check passed"))
    else:
        print(f"{failed} check(s) failed" if failed else "every check passed")
    return 1 if failed else 0
