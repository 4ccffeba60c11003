"""`kaiwo explain job/NAME`: why a workload is not running, from the shared pure `explain` of
`kaiwo_ray.views` (the admin API answers with the same); this module only gathers its world."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from kaiwo_ray.cli.access import add_cluster_arguments, connect

if TYPE_CHECKING:
    from kaiwo_ray.cli.api import Api

JsonObj = dict[str, Any]
EXAMPLES = """examples:
  kaiwo explain job/my-training
  kaiwo explain service/my-llm -o json       # the reasons as structured data
"""
KUEUE = ("kueue.x-k8s.io", "v1beta1")
OWNED = [("", "v1", "persistentvolumeclaims"), ("", "v1", "configmaps"), ("batch", "v1", "jobs"),
         ("apps", "v1", "deployments"), ("ray.io", "v1", "rayjobs"), ("ray.io", "v1", "rayservices"),
         ("ray.io", "v1", "rayclusters"), ("workload.codeflare.dev", "v1beta2", "appwrappers")]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workload", metavar="TYPE/NAME", help="job/NAME or service/NAME")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    add_cluster_arguments(parser)


def _maybe(api: Api, path: str) -> list[JsonObj] | None:
    """Items at `path`, or None where the cluster lacks the resource or forbids reading it."""
    from kaiwo_ray.cli.api import ApiStatusError
    from kaiwo_ray.cli.errors import ClusterError

    try:
        return list(api.list(path).get("items") or [])
    except ApiStatusError:
        return None
    except ClusterError as err:
        if err.message.startswith("forbidden"):
            return None
        raise


def run(args: argparse.Namespace) -> int:
    return explain_with(connect(args), args)


def explain_with(api: Api, args: argparse.Namespace) -> int:
    from kaiwo_ray.cli.api import resource_path
    from kaiwo_ray.cli.workloads import fetch, parse_selector
    from kaiwo_ray.views.explain import collect_world, explain

    wtype, name = parse_selector(args.workload)
    namespace = args.namespace or api.access.namespace
    workload = fetch(api, wtype, namespace, name)
    workload.setdefault("kind", wtype.kind)
    owned: list[JsonObj] = []
    for group, version, plural in OWNED:
        owned += _maybe(api, resource_path(group, version, plural, namespace)) or []
    pods = _maybe(api, resource_path("", "v1", "pods", namespace)) or []
    kueue_workloads = _maybe(api, resource_path(*KUEUE, "workloads")) or \
        _maybe(api, resource_path(*KUEUE, "workloads", namespace)) or []
    events = _maybe(api, resource_path("", "v1", "events", namespace)) or []
    cluster_queues = _maybe(api, resource_path(*KUEUE, "clusterqueues"))
    local_queues = _maybe(api, resource_path(*KUEUE, "localqueues"))
    world = collect_world(workload, owned=owned, pods=pods, kueue_workloads=kueue_workloads, events=events,
                          cluster_queues=cluster_queues, local_queues=local_queues)
    explanation = explain(world)
    if args.output == "json":
        sys.stdout.write(explanation.model_dump_json(indent=2) + "\n")
        return 0
    lines = [explanation.summary]
    if explanation.queue_position is not None:
        lines.append(f"  queue: {explanation.queue}, position {explanation.queue_position}")
    for reason in explanation.reasons:
        source = f" [{reason.source.kind}/{reason.source.name}]" if reason.source is not None else ""
        lines.append(f"  - {reason.code}: {reason.message}{source}")
        if reason.detail and reason.detail != reason.message:
            lines.append(f"      {reason.detail}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
