"""The Job watcher, in a child process of its own: it watches a namespace and timestamps when each
object first met a condition (a Job's ADDED event by default, a KaiwoJob RUNNING, a Pod Running),
from raw watch lines, so that the figure is the operator's latency and not the watcher's decoding.
`job_watcher` yields a `JobWatch` that reads those timestamps across the pipe.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from _diagnosis import GcPauses
from _objects import GROUP, VERSION
from _runtime import CONTEXT, api_client, k8s


def _first_seen(what: str, event: dict[str, Any]) -> str | None:
    """The key an event makes `what` true for the first time, if it does: "jobs" - a Job's ADDED
    (keyed by name); "kaiwojobs-running" - a KaiwoJob whose status says RUNNING; "pods-running" - a
    Pod in phase Running (keyed by its Job's name)."""
    obj = event.get("object") or {}
    meta = obj.get("metadata") or {}
    if what == "jobs":
        return str(meta["name"]) if event.get("type") == "ADDED" else None
    status = obj.get("status") or {}
    if what == "kaiwojobs-running":
        return str(meta["name"]) if status.get("status") == "RUNNING" else None
    if what == "pods-running":
        job = (meta.get("labels") or {}).get("batch.kubernetes.io/job-name")
        return str(job) if job and status.get("phase") == "Running" else None
    raise ValueError(f"unknown watch {what!r}")


def _watcher_main(conn: Connection, kubeconfig: str, namespace: str, what: str = "jobs") -> None:
    """Record when each object first met `what` (`_first_seen`), from raw watch lines parsed with
    orjson: the cheapest client-side decode, so the figure is the operator's, not the watcher's."""
    import orjson

    kubernetes = k8s()
    client = api_client(Path(kubeconfig))
    if what == "jobs":
        lister: Callable[..., Any] = partial(kubernetes.client.BatchV1Api(client).list_namespaced_job, namespace)
    elif what == "pods-running":
        lister = partial(kubernetes.client.CoreV1Api(client).list_namespaced_pod, namespace)
    else:
        lister = partial(kubernetes.client.CustomObjectsApi(client).list_namespaced_custom_object,
                         GROUP, VERSION, namespace, "kaiwojobs")
    seen: dict[str, float] = {}
    lock = threading.Lock()
    rv = orjson.loads(lister(limit=1, _preload_content=False).data)["metadata"]["resourceVersion"]
    # The instrument's own pauses are not the operator's latency: what is imported and set up stays
    # out of the collector's sight, and the pauses left are reported ("gc").
    gc.collect()
    gc.freeze()
    pauses = GcPauses()

    def watch() -> None:
        nonlocal rv
        while True:
            response = lister(watch=True, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=300,
                              _preload_content=False)
            for line in kubernetes.watch.watch.iter_resp_lines(response):
                now = time.time()
                event = orjson.loads(line)
                rv = (event.get("object") or {}).get("metadata", {}).get("resourceVersion", rv)
                key = _first_seen(what, event)
                if key is not None:
                    with lock:
                        seen.setdefault(key, now)

    threading.Thread(target=watch, daemon=True).start()
    conn.send("ready")
    while True:
        command = conn.recv()
        if command == "stop":
            return
        if command == "gc":
            conn.send(pauses.long[:])
            pauses.clear()
            continue
        with lock:
            conn.send(len(seen) if command == "count" else dict(seen))


class JobWatch:
    """`watch()`: Job name -> wall time its first ADDED event reached the watcher; `watch.count()`:
    how many, without shipping 10,000 entries across the pipe at every poll."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def __call__(self) -> dict[str, float]:
        self._conn.send("collect")
        result: dict[str, float] = self._conn.recv()
        return result

    def count(self) -> int:
        self._conn.send("count")
        return int(self._conn.recv())

    def long_gc_pauses(self) -> list[tuple[float, float]]:
        """The watcher process's collector pauses of 10 ms or more since the last ask: (wall, ms)."""
        self._conn.send("gc")
        return list(self._conn.recv())


@contextmanager
def job_watcher(kubeconfig: Path, namespace: str, what: str = "jobs") -> Iterator[JobWatch]:
    """Yields a `JobWatch` of the objects in `namespace` (Jobs' ADDED events by default; `_first_seen`
    says what else)."""
    parent, child = CONTEXT.Pipe()
    process = CONTEXT.Process(target=_watcher_main, args=(child, str(kubeconfig), namespace, what), daemon=True,
                              name=f"watcher ({what})")
    process.start()
    if not parent.poll(60):
        process.kill()
        raise RuntimeError("the Job watcher did not start within 60 s")
    parent.recv()
    time.sleep(0.3)  # the watch request is sent right after "ready": a pacing gap, not synchronisation
    try:
        yield JobWatch(parent)
    finally:
        parent.send("stop")
        process.join(timeout=10)
        if process.is_alive():
            process.kill()
