"""Shared pieces of the operator benchmarks: a sandbox in a child process (with per-user kubeconfigs
so the audit log tells who wrote what), a Job watcher in a child process that timestamps each Job's
first watch event, a paced KaiwoJob creator, and the queue objects a KaiwoJob needs.

Every actor of a measurement runs in its own process (sandbox, operator, watcher, load client), so
none of them shares a GIL with another; wall-clock timestamps (`time.time()`) are compared across
processes on the same machine.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

GROUP, VERSION = "kaiwo.silogen.ai", "v1alpha1"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
CONTEXT = multiprocessing.get_context("spawn")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def k8s() -> Any:
    """The kubernetes package, untyped here: its generated signatures want models, we pass dicts."""
    import kubernetes

    return kubernetes


def api_client(kubeconfig: Path) -> Any:
    return k8s().config.new_client_from_config(config_file=str(kubeconfig))


# -- the sandbox process --------------------------------------------------------------------------


def _sandbox_main(conn: Connection, workdir: str, cluster: bool | list[str], time_factor: float,
                  users: list[str]) -> None:
    import psutil

    from kaiwo_ray.api.config import KaiwoConfigSpec
    from kaiwo_ray.api.crd import all_crds
    from kaiwo_ray.gc_tuning import tune_for_long_lived_caches
    from kaiwo_ray.nodes import default_nodes, with_pool_labels
    from kaiwo_sandbox.instance import Sandbox, SandboxConfig, write_kubeconfig

    async def main() -> None:
        admin = Path(workdir) / "admin.kubeconfig"
        # the node-pool labels the KaiwoQueueConfig controller would have put on the nodes
        nodes = with_pool_labels(default_nodes(), KaiwoConfigSpec())
        sandbox = Sandbox(SandboxConfig(nodes=nodes, cluster=cluster, time_factor=time_factor,
                                        kubeconfig_path=admin, extra_crds=list(all_crds())))
        await sandbox.start()
        tune_for_long_lived_caches()  # as `kaiwo-ray sandbox` runs it
        paths = {"admin": str(admin)}
        for user in users:
            path = Path(workdir) / f"{user}.kubeconfig"
            write_kubeconfig(path, sandbox.url, sandbox.mint_token(user),
                             sandbox.cert.cert_pem if sandbox.cert else None)
            paths[user] = str(path)
        conn.send(paths)
        process = psutil.Process()
        loop = asyncio.get_running_loop()
        while True:
            command, *args = await loop.run_in_executor(None, conn.recv)
            if command == "stop":
                break
            if command == "rss_mb":
                conn.send(process.memory_info().rss / 2**20)
            elif command == "cpu_s":
                times = process.cpu_times()
                conn.send(times.user + times.system)
            elif command == "writes":  # (user, since timestamp) -> [(verb, resource, subresource, ns, name)]
                user, since = args
                conn.send([(r.verb, r.resource, r.subresource, r.namespace, r.name)
                           for r in sandbox.audit.records(user=user)
                           if r.verb in WRITE_VERBS and r.timestamp >= since and r.code < 300])
            elif command == "errors":
                conn.send(sandbox.cluster.errors if sandbox.cluster else 0)
            else:
                conn.send(None)
        await sandbox.stop()
        conn.send("stopped")

    asyncio.run(main())


class SandboxProcess:
    """Handle on the sandbox child: kubeconfigs per user, RSS/CPU, and the audit log's writes."""

    def __init__(self, conn: Connection, process: Any, kubeconfigs: dict[str, Path]) -> None:
        self._conn = conn
        self.process = process
        self.kubeconfigs = kubeconfigs
        self._lock = threading.Lock()

    def ask(self, *command: Any) -> Any:
        with self._lock:
            self._conn.send(command)
            return self._conn.recv()

    def rss_mb(self) -> float:
        return float(self.ask("rss_mb"))

    def cpu_s(self) -> float:
        return float(self.ask("cpu_s"))

    def writes(self, user: str, since: float = 0.0) -> list[tuple[str, str, str, str, str]]:
        return list(self.ask("writes", user, since))


@contextmanager
def sandbox_process(*, cluster: bool | list[str] = False, time_factor: float = 1.0,
                    users: tuple[str, ...] = ("kaiwo-ray", "loader")) -> Iterator[SandboxProcess]:
    with tempfile.TemporaryDirectory(prefix="kaiwo-opbench-") as tmp:
        parent, child = CONTEXT.Pipe()
        process = CONTEXT.Process(target=_sandbox_main, args=(child, tmp, cluster, time_factor, list(users)),
                                  daemon=True, name="sandbox")
        process.start()
        if not parent.poll(90):
            process.kill()
            raise RuntimeError("the sandbox process did not start within 90 s")
        paths = parent.recv()
        handle = SandboxProcess(parent, process, {user: Path(p) for user, p in paths.items()})
        try:
            yield handle
        finally:
            try:
                parent.send(("stop",))
                parent.poll(15)
            except (BrokenPipeError, OSError):
                pass
            process.join(timeout=15)
            if process.is_alive():
                process.kill()


# -- the Job watcher process ----------------------------------------------------------------------


def _watcher_main(conn: Connection, kubeconfig: str, namespace: str) -> None:
    """Record when each Job's first ADDED event arrives (raw lines, parsed with orjson: the cheapest
    client-side decode, so the figure is the operator's, not the watcher's)."""
    import orjson

    kubernetes = k8s()
    batch = kubernetes.client.BatchV1Api(api_client(Path(kubeconfig)))
    seen: dict[str, float] = {}
    lock = threading.Lock()
    rv = batch.list_namespaced_job(namespace, limit=1).metadata.resource_version

    def watch() -> None:
        nonlocal rv
        while True:
            response = batch.list_namespaced_job(namespace, watch=True, resource_version=rv,
                                                 allow_watch_bookmarks=True, timeout_seconds=300,
                                                 _preload_content=False)
            for line in kubernetes.watch.watch.iter_resp_lines(response):
                now = time.time()
                event = orjson.loads(line)
                meta = event.get("object", {}).get("metadata", {})
                rv = meta.get("resourceVersion", rv)
                if event.get("type") == "ADDED":
                    with lock:
                        seen.setdefault(meta["name"], now)

    threading.Thread(target=watch, daemon=True).start()
    conn.send("ready")
    while True:
        command = conn.recv()
        if command == "stop":
            return
        with lock:
            conn.send(dict(seen))


@contextmanager
def job_watcher(kubeconfig: Path, namespace: str) -> Iterator[Callable[[], dict[str, float]]]:
    """Yields `seen()`: Job name -> wall time its first ADDED event reached the watcher."""
    parent, child = CONTEXT.Pipe()
    process = CONTEXT.Process(target=_watcher_main, args=(child, str(kubeconfig), namespace), daemon=True,
                              name="job-watcher")
    process.start()
    if not parent.poll(60):
        process.kill()
        raise RuntimeError("the Job watcher did not start within 60 s")
    parent.recv()
    time.sleep(0.3)  # the watch request is sent right after "ready": a pacing gap, not synchronisation

    def seen() -> dict[str, float]:
        parent.send("collect")
        result: dict[str, float] = parent.recv()
        return result

    try:
        yield seen
    finally:
        parent.send("stop")
        process.join(timeout=10)
        if process.is_alive():
            process.kill()


def wait_for(check: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)  # polling under a deadline
    return check()


# -- load ----------------------------------------------------------------------------------------


def kaiwojob(name: str, namespace: str, entrypoint: str = "sleep 600") -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "KaiwoJob",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"user": "bench@example.com", "image": "busybox", "entrypoint": entrypoint}}


class Loader:
    """Creates KaiwoJobs with the real `kubernetes` client, as its own user."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self._local = threading.local()
        # paced() keeps its threads (and so their clients' connections) from one call to the next,
        # so that a warm-up call leaves warm connections to the measured one
        self._paced_pool = ThreadPoolExecutor(4, thread_name_prefix="paced-loader")

    def _api(self) -> Any:
        api = getattr(self._local, "api", None)
        if api is None:
            api = k8s().client.CustomObjectsApi(api_client(self.kubeconfig))
            self._local.api = api
        return api

    def create(self, name: str, entrypoint: str = "sleep 600") -> None:
        self._api().create_namespaced_custom_object(GROUP, VERSION, self.namespace, "kaiwojobs",
                                                    kaiwojob(name, self.namespace, entrypoint),
                                                    _preload_content=False).release_conn()

    def create_many(self, names: list[str], threads: int = 4, entrypoint: str = "sleep 600") -> float:
        """Create as fast as `threads` clients can; returns the seconds it took."""
        began = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda n: self.create(n, entrypoint), names))
        return time.perf_counter() - began

    def paced(self, names: list[str], rate: float) -> dict[str, float]:
        """Create at `rate` per second; returns name -> wall time just before its request was sent.
        Runs on two threads so a slow create does not delay the next one's send time."""
        sent: dict[str, float] = {}
        interval = 1.0 / rate
        start = time.perf_counter() + 0.05

        def one(index_name: tuple[int, str]) -> None:
            index, name = index_name
            delay = start + index * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)  # pacing, not synchronisation
            sent[name] = time.time()
            self.create(name)

        list(self._paced_pool.map(one, enumerate(names)))
        return sent


def setup_cluster_objects(kubeconfig: Path, namespaces: list[str]) -> None:
    """Namespaces, plus the Kueue objects of the default queue config for the sandbox's nodes and a
    LocalQueue `kaiwo` in each namespace: what a KaiwoJob's Job needs (the KaiwoQueueConfig
    controller is not what is measured, so its output is created directly)."""
    from kaiwo_ray.api.config import KaiwoConfigSpec
    from kaiwo_ray.api.queueconfig import KaiwoQueueConfig
    from kaiwo_ray.nodes import default_nodes, with_pool_labels
    from kaiwo_ray.render.nodepools import default_queue_config
    from kaiwo_ray.render.queue import render_queue_config

    kubernetes = k8s()
    client = api_client(kubeconfig)
    core = kubernetes.client.CoreV1Api(client)
    custom = kubernetes.client.CustomObjectsApi(client)
    for namespace in namespaces:
        core.create_namespace({"metadata": {"name": namespace}})
    config = KaiwoConfigSpec()
    spec = default_queue_config(with_pool_labels(default_nodes(), config), config)
    kqc = KaiwoQueueConfig.model_validate({"metadata": {"name": "kaiwo", "uid": "bench"},
                                           "spec": spec.model_dump(by_alias=True, exclude_none=True)})
    plurals = {"Topology": "topologies", "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues",
               "LocalQueue": "localqueues", "WorkloadPriorityClass": "workloadpriorityclasses"}
    queue = ""
    for obj in render_queue_config(kqc):
        obj["metadata"].pop("ownerReferences", None)
        group, version = obj["apiVersion"].split("/")
        if obj["kind"] == "ClusterQueue":
            queue = obj["metadata"]["name"]
        if obj["kind"] == "LocalQueue":
            continue
        custom.create_cluster_custom_object(group, version, plurals[obj["kind"]], obj)
    for namespace in namespaces:
        custom.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", namespace, "localqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": queue, "namespace": namespace}, "spec": {"clusterQueue": queue}})


@dataclass(slots=True)
class Latency:
    sent: int
    observed: int
    ms: list[float]

    def p(self, q: float) -> float:
        return percentile(self.ms, q)


def latencies(sent: dict[str, float], seen: dict[str, float]) -> Latency:
    ms = [(seen[name] - at) * 1000 for name, at in sent.items() if name in seen]
    return Latency(len(sent), len(ms), ms)


def process_rss_mb(pid: int) -> float:
    import psutil

    return float(psutil.Process(pid).memory_info().rss / 2**20)


def process_cpu_s(pid: int) -> float:
    import psutil

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def machine_load() -> str:
    return f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
