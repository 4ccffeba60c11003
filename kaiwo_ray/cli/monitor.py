"""`kaiwo monitor job/NAME`: the GPUs of a workload's pods, once or every -w seconds.

From kaiwo-ray's telemetry when its admin API is known (`--admin-url`, `$KAIWO_ADMIN_URL`, the aggregated group
admin.kaiwo.silogen.ai through the Kubernetes API, or the
kubeconfig's `kaiwo.silogen.ai/admin-api` extension, see admin_link.py) and has samples for its pods
(`GET /api/v1/namespaces/NS/PLURAL/NAME/gpus`: whoever may get the workload may see them);
else from the vendor's tool run in each pod (nvidia-smi for NVIDIA, amd-smi else rocm-smi for AMD).
`--source` forces one of the two."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, BinaryIO

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.cli.access import add_cluster_arguments, connect

if TYPE_CHECKING:
    from kaiwo_ray.cli.admin_link import AdminLink
    from kaiwo_ray.cli.api import Api

EXAMPLES = """examples:
  kaiwo monitor job/my-training
  kaiwo monitor service/my-llm -w 2            # refresh every 2 s until Ctrl-C
  kaiwo monitor job/my-training --source pod    # run amd-smi/nvidia-smi in the pods instead
"""
TOOLS = {"nvidia": [["nvidia-smi"]], "amd": [["amd-smi", "monitor"], ["rocm-smi"]]}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workload", metavar="TYPE/NAME", help="job/NAME or service/NAME")
    parser.add_argument("-w", "--watch", type=float, default=0, metavar="SECONDS",
                        help="refresh every SECONDS (default: once)")
    parser.add_argument("--source", choices=("auto", "telemetry", "pod"), default="auto",
                        help="telemetry: kaiwo-ray's GPU telemetry via its admin API; pod: the vendor's tool "
                             "in each pod; auto (default): telemetry when it has these pods, else pod")
    parser.add_argument("--admin-url", metavar="URL",
                        help="kaiwo-ray's admin API (default: $KAIWO_ADMIN_URL, else the kubeconfig's "
                             "kaiwo.silogen.ai/admin-api extension, which `kaiwo-ray dev` writes)")
    add_cluster_arguments(parser)


def telemetry_rows(samples: list[JsonObj]) -> list[list[str]]:
    """The admin API's per-GPU samples of a workload (`GET .../{plural}/{name}/gpus`) as table rows (pure)."""
    rows = []
    for gpu in samples:
        pod = gpu.get("pod") or {}
        utilization = gpu.get("utilization")
        used, total = gpu.get("memory_used_bytes"), gpu.get("memory_total_bytes")
        memory = (f"{_gib(used)}/{_gib(total)} GiB" if used is not None and total is not None
                  else f"{_gib(used)} GiB" if used is not None else "<unknown>")
        rows.append([str(pod.get("name") or ""), str(gpu.get("node") or ""), str(gpu.get("index")),
                     "<unknown>" if utilization is None else f"{utilization:.0f}%", memory])
    return sorted(rows, key=lambda r: (r[0], r[1], int(r[2]) if r[2].isdigit() else 0))


def _gib(value: float | None) -> str:
    return "?" if value is None else f"{value / 2**30:.1f}"


def telemetry_report(api: Api, admin: AdminLink, workload: JsonObj, out: BinaryIO) -> bool:
    """The workload's GPUs from kaiwo-ray's telemetry into `out`; False (nothing written) when it has none."""
    from urllib.parse import quote

    from kaiwo_ray.cli.table import render_table
    from kaiwo_ray.cli.workloads import type_of

    meta = workload.get("metadata") or {}
    path = (f"/api/v1/namespaces/{quote(str(meta.get('namespace') or ''), safe='')}/{type_of(workload).plural}/"
            f"{quote(str(meta.get('name') or ''), safe='')}/gpus")
    rows = telemetry_rows(list(admin.get(path, api.access).get("items") or []))
    if not rows:
        return False
    out.write(f"GPUs of {len({r[0] for r in rows})} pod(s), from kaiwo-ray telemetry ({admin.where})\n".encode())
    out.write(render_table(["POD", "NODE", "GPU", "UTILIZATION", "MEMORY"], rows).encode())
    out.flush()
    return True


def gpu_report(api: Api, namespace: str, pods: list[JsonObj], out: BinaryIO) -> int:
    """Each running GPU pod's header and its vendor tool's output into `out`; how many pods had GPUs."""
    import io

    from kaiwo_ray.cli.api import path_of
    from kaiwo_ray.cli.exec_cmd import execute
    from kaiwo_ray.cli.workloads import gpu_vendor_of
    from kaiwo_ray.kube.resources import PODS

    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    gpu_pods = [(p, found) for p in running if (found := gpu_vendor_of(p)) is not None]
    for pod, (vendor, container) in gpu_pods:
        out.write(f"== {pod['metadata']['name']} (container {container}, {vendor}) ==\n".encode())
        out.flush()
        path = path_of(PODS, namespace, pod["metadata"]["name"], "exec")
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
    from kaiwo_ray.cli.admin_link import link
    from kaiwo_ray.cli.errors import UsageError
    from kaiwo_ray.cli.workloads import fetch, parse_selector

    wtype, name = parse_selector(args.workload)
    api = connect(args)
    namespace = args.namespace or api.access.namespace
    workload = fetch(api, wtype, namespace, name)
    admin = link(args.admin_url, api) if args.source != "pod" else None
    if args.source == "telemetry" and admin is None:
        raise UsageError("no kaiwo-ray admin API known for GPU telemetry: pass --admin-url or set "
                         "KAIWO_ADMIN_URL (or use --source pod)")
    while True:
        if args.watch and sys.stdout.isatty():
            sys.stdout.write("\x1b[H\x1b[2J")
            sys.stdout.flush()
        _show(api, args, admin, workload, namespace)
        if not args.watch:
            return 0
        time.sleep(args.watch)  # the refresh period the user asked for


def _show(api: Api, args: argparse.Namespace, admin: AdminLink | None, workload: JsonObj, namespace: str) -> None:
    """One refresh: kaiwo-ray telemetry when it has the workload's GPUs, else the vendor tool in each pod."""
    from kaiwo_ray.cli.admin_link import AdminUnavailable
    from kaiwo_ray.cli.errors import ClusterError
    from kaiwo_ray.cli.workloads import pods_of

    if admin is not None:
        try:
            if telemetry_report(api, admin, workload, sys.stdout.buffer):
                return
            problem = f"kaiwo-ray telemetry has no GPU samples for the pods of {args.workload}"
        except AdminUnavailable as err:
            problem = str(err)
        if args.source == "telemetry":
            raise ClusterError(problem)
        print(f"({problem}: asking the GPU tool in each pod)", file=sys.stderr, flush=True)
    pods = pods_of(api, workload)
    if not gpu_report(api, namespace, pods, sys.stdout.buffer):
        running = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running")
        raise ClusterError(f"{args.workload} has no running pod with GPUs"
                           + (f" ({running} running without GPU limits)" if running else ""))
