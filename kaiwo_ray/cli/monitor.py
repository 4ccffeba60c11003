"""`kaiwo monitor job/NAME`: the GPUs of a workload's pods, from the vendor's tool run in the pod
(nvidia-smi for NVIDIA, amd-smi else rocm-smi for AMD), once or every -w seconds."""

from __future__ import annotations

import argparse
import sys
import time

from kaiwo_ray.cli.access import add_cluster_arguments, connect

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


def run(args: argparse.Namespace) -> int:
    import io

    from kaiwo_ray.cli.api import resource_path
    from kaiwo_ray.cli.errors import ClusterError
    from kaiwo_ray.cli.exec_cmd import execute
    from kaiwo_ray.cli.workloads import fetch, gpu_vendor_of, parse_selector, pods_of

    wtype, name = parse_selector(args.workload)
    api = connect(args)
    namespace = args.namespace or api.access.namespace
    workload = fetch(api, wtype, namespace, name)
    while True:
        pods = [p for p in pods_of(api, workload) if (p.get("status") or {}).get("phase") == "Running"]
        gpu_pods = [(p, found) for p in pods if (found := gpu_vendor_of(p)) is not None]
        if not gpu_pods:
            raise ClusterError(f"{args.workload} has no running pod with GPUs"
                               + (f" ({len(pods)} running without GPU limits)" if pods else ""))
        if args.watch and sys.stdout.isatty():
            sys.stdout.write("\x1b[H\x1b[2J")
        for pod, (vendor, container) in gpu_pods:
            print(f"== {pod['metadata']['name']} (container {container}, {vendor}) ==", flush=True)
            path = resource_path("", "v1", "pods", namespace, pod["metadata"]["name"], "exec")
            for tool in TOOLS[vendor]:
                errors = io.BytesIO()
                code = execute(api, path, container, tool, stdin=False, tty=False, stderr=errors)
                if code != 127:
                    sys.stderr.buffer.write(errors.getvalue())
                    break
            else:
                sys.stderr.write(f"no {' or '.join(t[0] for t in TOOLS[vendor])} in the image of "
                                 f"{pod['metadata']['name']}\n")
        if not args.watch:
            return 0
        time.sleep(args.watch)  # the refresh period the user asked for
