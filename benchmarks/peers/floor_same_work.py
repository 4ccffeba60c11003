"""The floor for kaiwo-ray's own writes: the floor operator (floor_operator.py: watch, render, apply,
no framework) that then also writes what kaiwo-ray writes on a KaiwoJob's way to PENDING, through
the same `KubeClient`: the finalizer (a merge patch), status PENDING with kaiwo-ray's conditions (a
merge patch on /status) and the Events ResourceCreated and WorkloadPending; 5 writes, as ours.

Against the floor operator it prices those four writes on this machine (their server and client
CPU, and the latency they add to the next KaiwoJob's path); against kaiwo-ray, what kaiwo-ray's own
machinery (cache, queue, decide, settle window, Event recorder) adds beyond the writes it owes.
Like ours it writes the child first; the four others follow at once, not after a settle window.

Hosted like the other peers: `run(namespace, stop_flag, ready_flag)` on a thread.
"""

from __future__ import annotations

import secrets
import threading
from datetime import UTC, datetime
from typing import Any

from peers.floor_operator import serve
from peers.same_work import PENDING_EVENT, created_message, pending_status

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.reconcile.workload import FINALIZER, parse_workload
from kaiwo_ray.render import render_all

JsonObj = dict[str, Any]
COMPONENT = "floor-same-work"


def _event(involved: JsonObj, reason: str, message: str) -> JsonObj:
    """An Event shaped as kaiwo-ray's recorder makes one (kaiwo_ray/kube/events.py)."""
    meta = involved["metadata"]
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}", "namespace": meta["namespace"]},
            "involvedObject": {"apiVersion": involved["apiVersion"], "kind": involved["kind"], "name": meta["name"],
                               "namespace": meta["namespace"], "uid": meta.get("uid", ""),
                               "resourceVersion": meta.get("resourceVersion", "")},
            "reason": reason, "message": message, "type": "Normal", "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT, "reportingInstance": COMPONENT, "firstTimestamp": now,
            "lastTimestamp": now, "count": 1}


async def _admit(client: KubeClient, obj: JsonObj, config: KaiwoConfigSpec, nodes: list[JsonObj]) -> None:
    obj.setdefault("kind", "KaiwoJob")
    obj.setdefault("apiVersion", R.KAIWOJOBS.api_version)
    meta = obj["metadata"]
    children = render_all(parse_workload(obj), config, nodes)
    for child in children:
        await client.apply(R.for_object(child), child, field_manager="floor-peer")
    if (obj.get("status") or {}).get("status"):
        return  # (a restart's relist: already admitted)
    await client.patch(R.KAIWOJOBS, meta["name"], {"metadata": {"finalizers": [FINALIZER]}}, meta["namespace"])
    await client.patch(R.KAIWOJOBS, meta["name"], {"status": pending_status(obj, config, nodes, datetime.now(UTC))},
                       meta["namespace"], subresource="status")
    for child in children:
        await client.create(R.EVENTS, _event(obj, "ResourceCreated", created_message(child)), meta["namespace"])
    await client.create(R.EVENTS, _event(obj, *PENDING_EVENT), meta["namespace"])


def run(namespace: str, stop_flag: threading.Event, ready_flag: threading.Event | None = None) -> None:
    """Run on this thread until `stop_flag` is set (the floor operator's watch and loop)."""
    serve(namespace, stop_flag, ready_flag, _admit)
