"""The floor for kaiwo-ray's own writes: the floor operator (floor_operator.py: watch, render, apply,
no framework) that then also writes what kaiwo-ray writes on a KaiwoJob's way to PENDING, through
the same `KubeClient`: status PENDING with kaiwo-ray's conditions (a merge patch on /status) and the
Events ResourceCreated and WorkloadPending; 4 writes, as ours (no finalizer, as upstream).

Against the floor operator it prices those three writes on this machine (their server and client
CPU, and the latency they add to the next KaiwoJob's path); against kaiwo-ray, what kaiwo-ray's own
machinery (cache, queue, decide, settle window, Event recorder) adds beyond the writes it owes.
Like ours it writes the child first; the three others follow at once, not after a settle window.

Hosted like the other peers: `run(namespace, stop_flag, ready_flag)` on a thread.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from peers.floor_operator import apply_children, serve
from peers.same_work import PENDING_EVENT, created_message, pending_status

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.events import EventRecorder

COMPONENT = "floor-same-work"


async def _admit(client: KubeClient, obj: JsonObj, config: KaiwoConfigSpec, nodes: list[JsonObj]) -> None:
    children = await apply_children(client, obj, config, nodes)  # the floor operator's step, as is
    meta = obj["metadata"]
    if (obj.get("status") or {}).get("status"):
        return  # (a restart's relist: already admitted)
    await client.patch(R.KAIWOJOBS, meta["name"], {"status": pending_status(obj, config, nodes, datetime.now(UTC))},
                       meta["namespace"], subresource="status")
    # each Event written at once, in this task: kaiwo-ray's recorder body, none of its queue
    events = EventRecorder(client, COMPONENT, COMPONENT)
    for child in children:
        await events.record(obj, "Normal", "ResourceCreated", created_message(child))
    await events.record(obj, "Normal", *PENDING_EVENT)


def run(namespace: str, stop_flag: threading.Event, ready_flag: threading.Event | None = None) -> None:
    """Run on this thread until `stop_flag` is set (the floor operator's watch and loop)."""
    serve(namespace, stop_flag, ready_flag, _admit)
