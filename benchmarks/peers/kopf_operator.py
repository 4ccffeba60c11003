"""The children-only peer of the operator benchmark, kept as a reference (no target is judged
against it; benchmarks/peers/kopf_equivalent.py is the same-work peer): a kopf operator that turns
each KaiwoJob into the same children as kaiwo-ray does (rendered by `kaiwo_ray.render`) and writes
them the same way (server-side apply through the same thin `KubeClient`), so the benchmark compares
the frameworks, not the renderers or HTTP clients. It writes children only — no status, finalizer or
events — which is less work per KaiwoJob than kaiwo-ray does: 2 writes per CR (the Job and kopf's
annotation) against kaiwo-ray's 5.

Configured to be fast and fair, as a kopf user tuning for throughput would:
- async handlers (no thread pool hop);
- `posting.enabled = False`: no Kubernetes Events for handler progress;
- `peering.standalone = True`: no peering objects watched or written;
- `scanning.disabled = True`: no CRD/namespace discovery watches, only KaiwoJobs are watched;
- watching one namespace (the benchmark's);
- nodes listed once at start-up (instead of a `kopf.index` watch); KaiwoConfig defaults.
kopf still writes its diff-base annotation (`last-handled-configuration`) after each handled change:
that is how `on.update` finds what changed, and part of its design.

Standalone:  PYTHONPATH=benchmarks KUBECONFIG=... kopf run --standalone -n NAMESPACE benchmarks/peers/kopf_operator.py
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import kopf
from _runtime import deployed_loop

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.reconcile.workload import parse_workload
from kaiwo_ray.render import render_all


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.posting.enabled = False
    settings.peering.standalone = True
    settings.scanning.disabled = True
    settings.watching.server_timeout = 300
    memo.client = await KubeClient.from_kubeconfig()
    nodes, _rv = await memo.client.list_all(R.NODES)
    memo.nodes = nodes
    memo.config = KaiwoConfigSpec()


@kopf.on.cleanup()
async def close(memo: kopf.Memo, **_: Any) -> None:
    await memo.client.close()


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    return kopf.login_via_client(**kwargs)


def children_of(body: JsonObj, config: KaiwoConfigSpec, nodes: list[JsonObj]) -> list[JsonObj]:
    """What kaiwo-ray's reconciler would create for this KaiwoJob, in creation order."""
    return render_all(parse_workload(body), config, nodes)


@kopf.on.create("kaiwo.silogen.ai", "v1alpha1", "kaiwojobs")
@kopf.on.update("kaiwo.silogen.ai", "v1alpha1", "kaiwojobs")
async def ensure_children(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    obj: JsonObj = dict(body)
    client: KubeClient = memo.client
    for child in children_of(obj, memo.config, memo.nodes):
        await client.apply(R.for_object(child), child, field_manager="kopf-peer")


def run(namespace: str, stop_flag: threading.Event, ready_flag: threading.Event | None = None) -> None:
    """Run the operator on this thread until `stop_flag` is set (KUBECONFIG names the cluster)."""
    logging.getLogger("kopf").setLevel(logging.WARNING)
    kopf.configure(verbose=False, quiet=True)
    # on uvloop where installed, as `kopf run` deploys it (kopf.run() alone leaves the loop to us)
    with asyncio.Runner(loop_factory=deployed_loop) as runner:
        kopf.run(standalone=True, namespaces=[namespace], clusterwide=False, stop_flag=stop_flag,
                 ready_flag=ready_flag, loop=runner.get_loop())
