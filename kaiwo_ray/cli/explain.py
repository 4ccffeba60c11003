"""`kaiwo explain job/NAME`: why a workload is not running, from the shared pure `explain` of
`kaiwo_ray.views` (the admin API answers with the same); this module only gathers its world."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.cli.access import add_cluster_arguments, connect
from kaiwo_ray.cli.estimate import estimate_line, fetch_estimate
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.resources import Resource

if TYPE_CHECKING:
    from kaiwo_ray.cli.api import Api

EXAMPLES = """examples:
  kaiwo explain job/my-training
  kaiwo explain service/my-llm -o json       # the reasons as structured data
"""
# What a workload owns, at the versions the cluster serves; its HTTPRoute explains nothing about why
# it does not run.
OWNED = tuple(res for res in R.WORKLOAD_OWNED if res is not R.HTTPROUTES)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workload", metavar="TYPE/NAME", help="job/NAME or service/NAME")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    add_cluster_arguments(parser)


def _maybe(api: Api, res: Resource, namespace: str | None = None) -> list[JsonObj] | None:
    """Items of `res` (in `namespace`, else cluster-wide), or None where the cluster lacks the resource
    or forbids reading it."""
    from kaiwo_ray.cli.api import ApiStatusError, path_of
    from kaiwo_ray.cli.errors import ClusterError

    served = api.served(res)
    if served is None:
        return None
    try:
        return list(api.list(path_of(served, namespace)).get("items") or [])
    except ApiStatusError:
        return None
    except ClusterError as err:
        if err.message.startswith("forbidden"):
            return None
        raise


def run(args: argparse.Namespace) -> int:
    return explain_with(connect(args), args)


def explain_with(api: Api, args: argparse.Namespace) -> int:
    from kaiwo_ray.cli.workloads import fetch, parse_selector
    from kaiwo_ray.views.explain import collect_world, explain

    wtype, name = parse_selector(args.workload)
    namespace = args.namespace or api.access.namespace
    workload = fetch(api, wtype, namespace, name)
    workload.setdefault("kind", wtype.kind)
    owned: list[JsonObj] = []
    for res in OWNED:
        owned += _maybe(api, res, namespace) or []
    pods = _maybe(api, R.PODS, namespace) or []
    kueue_workloads = _maybe(api, R.WORKLOADS) or _maybe(api, R.WORKLOADS, namespace) or []
    events = _maybe(api, R.EVENTS, namespace) or []
    cluster_queues = _maybe(api, R.CLUSTERQUEUES)
    local_queues = _maybe(api, R.LOCALQUEUES)
    world = collect_world(workload, owned=owned, pods=pods, kueue_workloads=kueue_workloads, events=events,
                          cluster_queues=cluster_queues, local_queues=local_queues)
    explanation = explain(world)
    if not explanation.running and workload.get("kind") == "KaiwoJob":
        explanation.estimated_start = fetch_estimate(api, namespace, name)
    if args.output == "json":
        sys.stdout.write(explanation.model_dump_json(indent=2) + "\n")
        return 0
    lines = [explanation.summary]
    if explanation.queue_position is not None:
        lines.append(f"  queue: {explanation.queue}, position {explanation.queue_position}")
    if explanation.estimated_start is not None:
        lines.append(estimate_line(explanation.estimated_start, datetime.now(UTC)))
    for reason in explanation.reasons:
        source = f" [{reason.source.kind}/{reason.source.name}]" if reason.source is not None else ""
        lines.append(f"  - {reason.code}: {reason.message}{source}")
        if reason.detail and reason.detail != reason.message:
            lines.append(f"      {reason.detail}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0

