"""`kaiwo monitor job/NAME`: the GPUs of a workload's pods, from the vendor's tool run in the pod
(nvidia-smi for NVIDIA, amd-smi else rocm-smi for AMD), once or every -w seconds."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any, BinaryIO

from kaiwo_ray.cli.access import add_cluster_arguments, connect

if TYPE_CHECKING:
    from kaiwo_ray.cli.api import Api

JsonObj = dict[str, Any]
EXAMPLES = """examples:
  kaiwo monitor job/my-training
  kaiwo monitor service/my-llm -w 2            # refresh every 2 s until Ctrl-C
"""
TOOLS = {"nvidia": [["nvidia-smi"]], "amd": [["amd-smi", "monitor"], ["rocm-smi"]]}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workload", metavar="TYPE/NAME", help="job/NAME or service/NAME")
    parser.add_argument("-w", "--watch", type=float, default=0, metavar="SECONDS",
                        help="refresh every SECONDS (default: once)")
    add_cluster_arguments(parser)


def gpu_report(api: Api, namespace: str, pods: list[JsonObj], out: BinaryIO) -> int:
    """Each running GPU pod's header and its vendor tool's output into `out`; how many pods had GPUs."""
    import io

    from kaiwo_ray.cli.api import resource_path
    from kaiwo_ray.cli.exec_cmd import execute
    from kaiwo_ray.cli.workloads import gpu_vendor_of

    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    gpu_pods = [(p, found) for p in running if (found := gpu_vendor_of(p)) is not None]
    for pod, (vendor, container) in gpu_pods:
        out.write(f"== {pod['metadata']['name']} (container {container}, {vendor}) ==\n".encode())
        out.flush()
        path = resource_path("", "v1", "pods", namespace, pod["metadata"]["name"], "exec")
        for tool in TOOLS[vendor]:
            errors = io.BytesIO()
            code = execute(api, path, container, tool, stdin=False, tty=False, stdout=out, stderr=errors)
            if code != 127:
                out.write(errors.getvalue())
                break
        else:
            out.write(f"no {' or '.join(t[0] for t in TOOLS[vendor])} in the image of "
                      f"{pod['metadata']['name']}\n".encode())
    return len(gpu_pods)


def run(args: argparse.Namespace) -> int:
    from kaiwo_ray.cli.errors import ClusterError
    from kaiwo_ray.cli.workloads import fetch, parse_selector, pods_of

    wtype, name = parse_selector(args.workload)
    api = connect(args)
    namespace = args.namespace or api.access.namespace
    workload = fetch(api, wtype, namespace, name)
    while True:
        pods = pods_of(api, workload)
        if args.watch and sys.stdout.isatty():
            sys.stdout.write("\x1b[H\x1b[2J")
            sys.stdout.flush()
        if not gpu_report(api, namespace, pods, sys.stdout.buffer):
            running = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running")
            raise ClusterError(f"{args.workload} has no running pod with GPUs"
                               + (f" ({running} running without GPU limits)" if running else ""))
        if not args.watch:
            return 0
        time.sleep(args.watch)  # the refresh period the user asked for
