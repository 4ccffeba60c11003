"""The floor of the operator benchmark: the least any operator can do for a KaiwoJob — watch, render
the children with `kaiwo_ray.render.render_all` (the function kaiwo-ray uses), server-side apply them
through the same `KubeClient` — with no cache, queue, status, finalizer or Events, and no framework.

Its create -> child latency is the sandbox's path (the load client's create, a watch hop, an apply,
a watch hop) plus one render: what no operator on this machine can beat. It is printed beside the
peers so that a ratio target can be read against what is reachable at all.

Hosted like the kopf peers: `run(namespace, stop_flag, ready_flag)` on a thread, KUBECONFIG naming
the cluster.

BENCH_FLOOR_WATCH_JOBS=1 (diagnosis only, both floors): the floor also watches the Jobs it makes,
with our operator's selector, and reads every event (no cache, no reaction): what a child watch,
which every real operator needs to read its children's status, costs the Job event's other watchers.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable

from _runtime import run_deployed

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.controllers.workloads import CHILD_SELECTOR
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.reconcile.workload import parse_workload
from kaiwo_ray.render import render_all


async def apply_children(client: KubeClient, obj: JsonObj, config: KaiwoConfigSpec,
                         nodes: list[JsonObj]) -> list[JsonObj]:
    """Render the KaiwoJob's children and apply them in order; returns them."""
    obj.setdefault("kind", "KaiwoJob")
    obj.setdefault("apiVersion", R.KAIWOJOBS.api_version)
    children = render_all(parse_workload(obj), config, nodes)
    for child in children:
        await client.apply(R.for_object(child), child, field_manager="floor-peer")
    return children


Admit = Callable[[KubeClient, JsonObj, KaiwoConfigSpec, list[JsonObj]], Awaitable[object]]
"""What the floor does for each KaiwoJob it sees created (each in a task of its own)."""


async def _serve(namespace: str, stop_flag: threading.Event, ready_flag: threading.Event | None,
                 admit: Admit) -> None:
    # KUBECONFIG read now, not when the kubernetes package was imported (its default is fixed then)
    client = await KubeClient.from_kubeconfig(os.environ.get("KUBECONFIG") or None)
    config = KaiwoConfigSpec()
    nodes, _ = await client.list_all(R.NODES)
    pending: set[asyncio.Task[None]] = set()

    def handle(obj: JsonObj) -> None:
        task = asyncio.create_task(admit(client, obj, config, nodes))
        pending.add(task)
        task.add_done_callback(pending.discard)

    async def watch() -> None:
        items, rv = await client.list_all(R.KAIWOJOBS, namespace)
        for item in items:
            handle(item)
        if ready_flag is not None:
            ready_flag.set()
        while True:
            async for event in client.watch(R.KAIWOJOBS, namespace, resource_version=rv, timeout_seconds=300):
                obj = event.get("object") or {}
                rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                if event.get("type") == "ADDED":
                    handle(obj)

    async def watch_jobs() -> None:  # BENCH_FLOOR_WATCH_JOBS: events read and dropped
        rv = ""
        while True:
            if not rv:  # at start, and after an ERROR (a 410): list again
                _, rv = await client.list_all(R.JOBS, label_selector=CHILD_SELECTOR)
            async for event in client.watch(R.JOBS, resource_version=rv, timeout_seconds=300,
                                            label_selector=CHILD_SELECTOR):
                if event.get("type") == "ERROR":
                    rv = ""
                    break
                rv = ((event.get("object") or {}).get("metadata") or {}).get("resourceVersion", rv)

    watchers = [asyncio.create_task(watch())]
    if os.environ.get("BENCH_FLOOR_WATCH_JOBS"):
        watchers.append(asyncio.create_task(watch_jobs()))
    try:
        while not stop_flag.is_set() and not any(w.done() for w in watchers):
            await asyncio.sleep(0.05)  # polling the thread's stop flag, not synchronisation
    finally:
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, *pending, return_exceptions=True)
        await client.close()


def serve(namespace: str, stop_flag: threading.Event, ready_flag: threading.Event | None, admit: Admit) -> None:
    """Watch and `admit` on this thread until `stop_flag` is set, on the loop our operator gets in its
    Ray actor (`_runtime.deployed_loop`), so the floor is measured on the same one."""
    run_deployed(_serve(namespace, stop_flag, ready_flag, admit))


def run(namespace: str, stop_flag: threading.Event, ready_flag: threading.Event | None = None) -> None:
    """Run on this thread until `stop_flag` is set."""
    serve(namespace, stop_flag, ready_flag, apply_children)
