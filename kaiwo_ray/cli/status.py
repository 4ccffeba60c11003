"""`kaiwo status queues|amd|nvidia|nodes|usage` (usage: kaiwo_ray/cli/usage.py): Kueue queues and GPU nodes as tables, counting GPUs as
well as workloads. The numbers come from the shared read models in `kaiwo_ray.views` (the admin
API shows the same); this module reads the cluster and renders rows."""

from __future__ import annotations

import argparse
import sys
from decimal import Decimal
from typing import TYPE_CHECKING

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.labels import LABEL_NAME
from kaiwo_ray.cli.access import add_cluster_arguments, connect
from kaiwo_ray.kube.resources import CLUSTERQUEUES, LOCALQUEUES, NODES, PODS, WORKLOADS, Resource

if TYPE_CHECKING:
    from kaiwo_ray.cli.api import Api
    from kaiwo_ray.views.nodes import NodeView
    from kaiwo_ray.views.queues import ClusterQueueView

EXAMPLES = """examples:
  kaiwo status queues          # per ClusterQueue: a [TOTAL] row, then one row per LocalQueue
  kaiwo status amd             # AMD GPU nodes: GPUs, CPU, memory and pods used vs allocatable
  kaiwo status nvidia -o json
  kaiwo status nodes           # every node, GPU or not
  kaiwo status usage --by queue --since 30d   # GPU-hours allocated/used/idle/unknown/reclaimed
"""
GPU_KEYS = {"amd": "amd.com/gpu", "nvidia": "nvidia.com/gpu"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    import os

    from kaiwo_ray.telemetry.usage import GROUPS

    parser.add_argument("what", choices=("queues", "amd", "nvidia", "nodes", "usage"), help="which table")
    parser.add_argument("-o", "--output", choices=("table", "json", "csv"), default="table",
                        help="csv: usage only")
    parser.add_argument("--by", choices=GROUPS, default="user", help="usage: group GPU-hours by (default: user)")
    parser.add_argument("--since", default="7d", help="usage: the window, back from now (default: 7d)")
    parser.add_argument("--ledger-namespace", default=os.environ.get("GPU_ACCOUNTING_NAMESPACE") or "kube-system",
                        help="usage: where the GPU ledger's ConfigMaps are (default: $GPU_ACCOUNTING_NAMESPACE, "
                             "else kube-system; kaiwo-system in a deploy/ install)")
    add_cluster_arguments(parser, namespace=False)


def _items(api: Api, res: Resource) -> list[JsonObj]:
    """Every `res` in the cluster, at the version it serves (Kueue's from discovery)."""
    from kaiwo_ray.cli.api import ApiStatusError, path_of
    from kaiwo_ray.cli.errors import ClusterError

    served = api.served(res)
    missing = ClusterError(f"the cluster has no {res.plural}.{res.group or 'core'}: is Kueue installed?")
    if served is None:
        raise missing
    try:
        return list(api.list(path_of(served)).get("items") or [])
    except ApiStatusError as err:
        if err.code == 404:
            raise missing from None
        raise


def _pct(used: float, total: float) -> str:
    return f"{round(100 * used / total)}%" if total else "-"


def _usage(used: float, total: float, fmt: str = "{:g}") -> str:
    return f"{fmt.format(used)}/{fmt.format(total)} ({_pct(used, total)})"


# ---------------------------------------------------------------------------------------- queues (pure)
def queue_rows(views: list[ClusterQueueView], kueue_workloads: list[JsonObj]) -> list[list[str]]:
    from kaiwo_ray.views.explain import requested
    from kaiwo_ray.views.queues import is_pending

    gpus: dict[tuple[str, str], list[Decimal]] = {}  # (ns, localqueue) -> [admitted GPUs, pending GPUs]
    for wl in kueue_workloads:
        meta = wl.get("metadata") or {}
        finished = any(c.get("type") == "Finished" and c.get("status") == "True"
                       for c in (wl.get("status") or {}).get("conditions") or [])
        if finished:
            continue
        asked = requested(wl)
        count = sum((asked.get(k, Decimal(0)) for k in GPU_KEYS.values()), Decimal(0))
        slot = gpus.setdefault((str(meta.get("namespace", "")), str((wl.get("spec") or {}).get("queueName", ""))),
                               [Decimal(0), Decimal(0)])
        slot[1 if is_pending(wl) else 0] += count
    rows = []
    for view in views:
        quota = sum(r.nominal for f in view.flavors for r in f.resources if r.resource in GPU_KEYS.values())
        used = sum(r.used for f in view.flavors for r in f.resources if r.resource in GPU_KEYS.values())
        pending_gpus = sum(gpus.get((lq.namespace, lq.name), [Decimal(0), Decimal(0)])[1] for lq in view.local_queues)
        state = "" if view.exists and view.active else (" (missing)" if not view.exists else " (inactive)")
        rows.append([view.name + state, "[TOTAL]", str(view.admitted), str(len(view.pending)),
                     _usage(float(used), float(quota)), f"{float(pending_gpus):g}"])
        for lq in view.local_queues:
            admitted_gpus, waiting_gpus = gpus.get((lq.namespace, lq.name), [Decimal(0), Decimal(0)])
            rows.append(["", f"{lq.namespace}/{lq.name}", str(lq.admitted), str(lq.pending),
                         f"{float(admitted_gpus):g}", f"{float(waiting_gpus):g}"])
    return rows


QUEUE_HEADERS = ["CLUSTERQUEUE", "LOCALQUEUE", "ADMITTED", "PENDING", "GPUS USED/QUOTA", "GPUS PENDING"]


# ---------------------------------------------------------------------------------------- nodes (pure)
def gpu_model(node: JsonObj, view: NodeView) -> str:
    """Upstream's column: the second token of the `kaiwo/nodepool` label, else the views' model."""
    pool = str(((node.get("metadata") or {}).get("labels") or {}).get("kaiwo/nodepool") or "")
    tokens = pool.split("-")
    if len(tokens) > 1 and tokens[1]:
        return tokens[1]
    return view.gpu_model or ("cpu-only" if not view.gpus_allocatable else "unknown")


def node_rows(nodes: list[JsonObj], views: list[NodeView], pods: list[JsonObj]) -> list[list[str]]:
    by_name = {str((n.get("metadata") or {}).get("name")): n for n in nodes}
    running: dict[str, int] = {}
    workloads: dict[str, set[str]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            running[node] = running.get(node, 0) + 1
            name = ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_NAME)
            if name:
                workloads.setdefault(node, set()).add(f"{pod['metadata'].get('namespace')}/{name}")
    rows = []
    for view in views:
        node = by_name.get(view.name, {})
        max_pods = float(str(((node.get("status") or {}).get("allocatable") or {}).get("pods") or 0) or 0)
        state = "Ready" if view.ready else "NotReady"
        if view.unschedulable:
            state += ",SchedulingDisabled"
        rows.append([view.name, state, gpu_model(node, view), _usage(view.gpus_used, view.gpus_allocatable),
                     _usage(view.cpu_requested, view.cpu_allocatable, "{:.3g}"),
                     f"{binary_size(view.memory_requested)}/{binary_size(view.memory_allocatable)} "
                     f"({_pct(view.memory_requested, view.memory_allocatable)})",
                     _usage(running.get(view.name, 0), max_pods), str(len(workloads.get(view.name, ())))])
    return rows


def binary_size(value: float) -> str:
    """Bytes as kubectl-style binary units, whole numbers: 2375145688Ki -> 2265Gi."""
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value >= size * 10 or (unit == "Ki" and value >= size):
            return f"{value / size:.0f}{unit}"
    return f"{value:.0f}"


NODE_HEADERS = ["NODE", "STATUS", "GPU MODEL", "GPUS", "CPU", "MEMORY", "PODS", "WORKLOADS"]


def run(args: argparse.Namespace) -> int:
    from kaiwo_ray.cli.table import render_table

    api = connect(args)
    if args.what == "usage":
        from kaiwo_ray.cli import usage

        return usage.run(api, args)
    if args.output == "csv":
        sys.stderr.write("error: -o csv is for `kaiwo status usage` only\n")
        return 2
    if args.what == "queues":
        from kaiwo_ray.views.queues import cluster_queue_views

        cluster_queues = _items(api, CLUSTERQUEUES)
        local_queues = _items(api, LOCALQUEUES)
        kueue_workloads = _items(api, WORKLOADS)
        queues = cluster_queue_views(cluster_queues, local_queues, kueue_workloads)
        if args.output == "json":
            import json

            print(json.dumps([v.model_dump(mode="json") for v in queues], indent=2))
            return 0
        if not queues:
            sys.stderr.write("No ClusterQueues found (is the operator running? it creates them from "
                             "KaiwoQueueConfig `kaiwo`).\n")
            return 0
        sys.stdout.write(render_table(QUEUE_HEADERS, queue_rows(queues, kueue_workloads)))
        return 0
    from kaiwo_ray.views.nodes import node_totals, node_views

    nodes = _items(api, NODES)
    pods = _items(api, PODS)
    views = node_views(nodes, pods)
    if args.what in GPU_KEYS:
        views = [v for v in views if v.gpu_resource == GPU_KEYS[args.what]]
        names = {v.name for v in views}
        nodes = [n for n in nodes if (n.get("metadata") or {}).get("name") in names]
    if args.output == "json":
        import json

        print(json.dumps([v.model_dump(mode="json") for v in views], indent=2))
        return 0
    if not views:
        sys.stderr.write(f"No {args.what.upper() + ' GPU ' if args.what in GPU_KEYS else ''}nodes found.\n")
        return 0
    sys.stdout.write(render_table(NODE_HEADERS, node_rows(nodes, views, pods)))
    totals = node_totals(views)
    sys.stdout.write(f"\n{totals.nodes} node(s), {totals.gpu_nodes} with GPUs: {totals.gpus_used}/{totals.gpus} "
                     f"GPUs in use, {totals.gpus_idle} idle, {totals.idle_gpu_nodes} GPU node(s) fully idle\n")
    return 0
