"""`kaiwo logs job/NAME`: the logs of one of the workload's pods (-f follows, --tail, -c, --pod)."""

from __future__ import annotations

import argparse
import sys

from kaiwo_ray.cli.access import add_cluster_arguments, connect

EXAMPLES = """examples:
  kaiwo logs job/my-training
  kaiwo logs job/my-training -f --tail 100
  kaiwo logs service/my-llm --pod my-llm-head-abcde -c ray-head
With several pods or containers, a terminal gets a numbered picker; otherwise the first running pod
(the Ray head first) and its default container are used and named on stderr.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workload", metavar="TYPE/NAME", help="job/NAME or service/NAME")
    parser.add_argument("-f", "--follow", action="store_true", help="keep streaming new output")
    parser.add_argument("--tail", type=int, default=-1, metavar="N", help="only the last N lines (default: all)")
    parser.add_argument("-c", "--container", help="container name")
    parser.add_argument("--pod", help="pod name (default: pick one)")
    parser.add_argument("-p", "--previous", action="store_true", help="the previous run of a restarted container")
    add_cluster_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kaiwo_ray.cli.api import ApiStatusError, path_of
    from kaiwo_ray.cli.errors import ClusterError
    from kaiwo_ray.cli.pick import choose
    from kaiwo_ray.cli.workloads import fetch, parse_selector, pods_of
    from kaiwo_ray.kube.resources import PODS

    wtype, name = parse_selector(args.workload)
    api = connect(args)
    namespace = args.namespace or api.access.namespace
    workload = fetch(api, wtype, namespace, name)
    pod, container = choose(pods_of(api, workload), args.workload, pod=args.pod, container=args.container)
    query = {"container": container, "follow": args.follow, "previous": args.previous,
             "tailLines": args.tail if args.tail >= 0 else None}
    path = path_of(PODS, namespace, pod["metadata"]["name"], "log")
    try:
        for chunk in api.stream(path, query=query, timeout=None if args.follow else 60):
            sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
    except ApiStatusError as err:
        raise ClusterError(f"logs of pod {pod['metadata']['name']}: {err.message}") from None
    return 0
