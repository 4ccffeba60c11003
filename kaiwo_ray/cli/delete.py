"""`kaiwo delete job/NAME`: delete workloads (their children go with them); --wait until the workload,
its children and their pods are gone (a foreground deletion: the GPUs are free when it returns)."""

from __future__ import annotations

import argparse
import time

from kaiwo_ray.cli.access import add_cluster_arguments, connect

EXAMPLES = """examples:
  kaiwo delete job/my-training
  kaiwo delete job/a service/b --wait
  kaiwo list -o name --user jane@example.com | xargs kaiwo delete
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workloads", nargs="+", metavar="TYPE/NAME", help="job/NAME or service/NAME")
    parser.add_argument("--wait", action="store_true",
                        help="return only once each workload, its children and their pods are gone (GPUs free)")
    parser.add_argument("--timeout", type=float, default=120, metavar="SECONDS", help="with --wait (default 120)")
    add_cluster_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kaiwo_ray.cli.api import ApiStatusError
    from kaiwo_ray.cli.errors import ClusterError
    from kaiwo_ray.cli.workloads import parse_selector

    targets = [parse_selector(w) for w in args.workloads]
    api = connect(args)
    namespace = args.namespace or api.access.namespace
    failed = 0
    for wtype, name in targets:
        try:
            # Foreground with --wait: the workload stays (deleting) until the garbage collector has
            # removed its children, and theirs (a Job's pods) in turn, so its going is the signal.
            api.delete(wtype.path(namespace, name), propagation="Foreground" if args.wait else "Background")
        except ApiStatusError as err:
            if err.code != 404:
                raise
            import sys

            sys.stderr.write(f'error: {wtype.short}/{name} not found in namespace "{namespace}"\n')
            failed += 1
            continue
        print(f'{wtype.qualified} "{name}" deleted')
        if args.wait:
            deadline = time.monotonic() + args.timeout
            while api.get_or_none(wtype.path(namespace, name)) is not None:
                if time.monotonic() > deadline:
                    raise ClusterError(f"{wtype.short}/{name} still exists after {args.timeout:g} s, "
                                       "waiting for its children and their pods to go (a finalizer "
                                       f"holds one?): see what is left with `kubectl get all -n {namespace}`")
                time.sleep(0.2)  # poll period under the --timeout deadline
    return 1 if failed else 0
