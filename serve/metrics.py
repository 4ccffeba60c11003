"""/metrics: controller-runtime's metric names per controller (so existing operator dashboards work),
collected from the controllers' stats snapshots, and kaiwo's own workload series, rendered by
prometheus_client."""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kaiwo_ray import clock
from kaiwo_ray.api.meta import parse_time
from kaiwo_ray.kube.resources import CLUSTERQUEUES, LOCALQUEUES, NODES, PODS, WORKLOADS
from kaiwo_ray.views._objects import meta, status
from kaiwo_ray.views.nodes import NodeView, node_views
from kaiwo_ray.views.queues import cluster_queue_views
from serve import webhook_metrics
from serve.cache import ClusterCache
from serve.state import GpuSamples, StatsSource

log = logging.getLogger(__name__)

# The latency users feel, from `kubectl apply` to RUNNING: seconds to minutes on a busy queue.
TIME_TO_RUNNING_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)


class _Histograms:
    """One histogram family, a sample set per controller: the text format allows one HELP and TYPE
    per family, so a family written once per controller makes Prometheus reject the whole scrape."""

    def __init__(self, name: str, doc: str, labels: list[str]) -> None:
        self.family = HistogramMetricFamily(name, doc, labels=labels)

    def add(self, values: list[str], snap: dict[str, Any]) -> None:
        cumulative = 0
        buckets = []
        for bound, count in zip([*snap["buckets"], float("inf")], snap["counts"], strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), cumulative))
        self.family.add_metric(values, buckets, snap["sum"])


def _api_host(server: str) -> str:
    """client-go's `host` label: the API server's host:port, as in the request URL."""
    return urlsplit(server).netloc or server


def controller_families(snapshots: Iterable[dict[str, Any]]) -> list[Metric]:
    """controller-runtime's default series (names, labels and help as v0.24 writes them) from the
    controllers' `stats()` snapshots, one family each with a sample set per controller. The
    controllers share no process as Go's do, so `rest_client_requests_total` sums their clients."""
    reconcile = CounterMetricFamily("controller_runtime_reconcile", "Total number of reconciliations per controller",
                                    labels=["controller", "result"])
    errors = CounterMetricFamily("controller_runtime_reconcile_errors",
                                 "Total number of reconciliation errors per controller", labels=["controller"])
    terminal = CounterMetricFamily("controller_runtime_terminal_reconcile_errors",
                                   "Total number of terminal reconciliation errors per controller",
                                   labels=["controller"])
    panics = CounterMetricFamily("controller_runtime_reconcile_panics",
                                 "Total number of reconciliation panics per controller", labels=["controller"])
    timeouts = CounterMetricFamily("controller_runtime_reconcile_timeouts",
                                   "Total number of reconciliation timeouts per controller", labels=["controller"])
    reconcile_time = _Histograms("controller_runtime_reconcile_time_seconds",
                                 "Length of time per reconciliation per controller", ["controller"])
    max_workers = GaugeMetricFamily("controller_runtime_max_concurrent_reconciles",
                                    "Maximum number of concurrent reconciles per controller", labels=["controller"])
    active = GaugeMetricFamily("controller_runtime_active_workers",
                               "Number of currently used workers per controller", labels=["controller"])
    depth = GaugeMetricFamily("workqueue_depth", "Current depth of workqueue by workqueue and priority",
                              labels=["name", "controller", "priority"])
    adds = CounterMetricFamily("workqueue_adds", "Total number of adds handled by workqueue",
                               labels=["name", "controller"])
    queue_duration = _Histograms("workqueue_queue_duration_seconds",
                                 "How long in seconds an item stays in workqueue before being requested",
                                 ["name", "controller"])
    work_duration = _Histograms("workqueue_work_duration_seconds",
                                "How long in seconds processing an item from workqueue takes",
                                ["name", "controller"])
    unfinished = GaugeMetricFamily("workqueue_unfinished_work_seconds",
                                   "How many seconds of work has been done that is in progress and hasn't been "
                                   "observed by work_duration. Large values indicate stuck threads. One can deduce "
                                   "the number of stuck threads by observing the rate at which this increases.",
                                   labels=["name", "controller"])
    longest = GaugeMetricFamily("workqueue_longest_running_processor_seconds",
                                "How many seconds has the longest running processor for workqueue been running.",
                                labels=["name", "controller"])
    retries = CounterMetricFamily("workqueue_retries", "Total number of retries handled by workqueue",
                                  labels=["name", "controller"])
    requests = CounterMetricFamily("rest_client_requests",
                                   "Number of HTTP requests, partitioned by status code, method, and host.",
                                   labels=["code", "method", "host"])
    leader = GaugeMetricFamily("leader_election_master_status",
                               "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
                               "backup, 1 indicates master. 'name' is the string used to identify the lease.",
                               labels=["name"])
    by_request: collections.Counter[tuple[str, str, str]] = collections.Counter()
    for snap in snapshots:
        if not snap.get("reconcile_total"):
            continue  # a controller that has not started yet
        name = str(snap.get("name") or snap.get("controller"))
        for result, count in sorted(snap["reconcile_total"].items()):
            reconcile.add_metric([name, result], count)
        errors.add_metric([name], snap.get("reconcile_errors_total", 0))
        terminal.add_metric([name], snap.get("terminal_reconcile_errors_total", 0))
        panics.add_metric([name], snap.get("reconcile_panics_total", 0))
        timeouts.add_metric([name], snap.get("reconcile_timeouts_total", 0))
        reconcile_time.add([name], snap["reconcile_time_seconds"])
        max_workers.add_metric([name], snap.get("max_concurrent_reconciles", 0))
        active.add_metric([name], snap.get("active_workers", 0))
        # Our queue has one priority; controller-runtime's priority queue writes its default, "0".
        depth.add_metric([name, name, "0"], snap.get("workqueue_depth", 0))
        adds.add_metric([name, name], snap.get("workqueue_adds_total", 0))
        queue_duration.add([name, name], snap["workqueue_queue_duration_seconds"])
        work_duration.add([name, name], snap["workqueue_work_duration_seconds"])
        unfinished.add_metric([name, name], snap.get("workqueue_unfinished_work_seconds", 0.0))
        longest.add_metric([name, name], snap.get("workqueue_longest_running_processor_seconds", 0.0))
        retries.add_metric([name, name], snap.get("workqueue_retries_total", 0))
        host = _api_host(str(snap.get("rest_client_host") or ""))
        for code, method, count in snap.get("rest_client_requests_total") or ():
            by_request[(str(code), str(method), host)] += count
        leader.add_metric([f"kaiwo-ray-{name}"], 1.0 if snap.get("leader_election_master_status") else 0.0)
    for (code, method, host), count in sorted(by_request.items()):
        requests.add_metric([code, method, host], count)
    # No certificate is read (the admin API serves plain HTTP or a cert it was given at start): the
    # counters controller-runtime registers for its cert watcher stay at zero.
    cert_reads = CounterMetricFamily("certwatcher_read_certificate", "Total number of certificate reads")
    cert_reads.add_metric([], 0)
    cert_errors = CounterMetricFamily("certwatcher_read_certificate_errors", "Total number of certificate read errors")
    cert_errors.add_metric([], 0)
    return [reconcile, errors, terminal, panics, timeouts, reconcile_time.family, max_workers, active, depth, adds,
            queue_duration.family, work_duration.family, unfinished, longest, retries, requests, leader, cert_reads,
            cert_errors]


def workload_counts(cache: ClusterCache) -> dict[tuple[str, str, str, str], int]:
    default_queue = cache.default_queue()
    counts: dict[tuple[str, str, str, str], int] = {}
    for wl in cache.workloads():
        key = (str(meta(wl).get("namespace") or ""), str(wl.get("kind") or ""),
               str(status(wl).get("status") or "NEW"),
               str((wl.get("spec") or {}).get("clusterQueue") or default_queue))
        counts[key] = counts.get(key, 0) + 1
    return counts


def workload_families(cache: ClusterCache, counts: dict[tuple[str, str, str, str], int] | None = None) -> list[Metric]:
    """kaiwo's own: workloads by namespace/kind/phase/queue, pending per ClusterQueue."""
    counts = workload_counts(cache) if counts is None else counts
    workloads = GaugeMetricFamily("kaiwo_workloads", "KaiwoJobs and KaiwoServices by namespace, kind, phase and queue",
                                  labels=["namespace", "kind", "phase", "queue"])
    for key, count in sorted(counts.items()):
        workloads.add_metric(list(key), count)
    pending = GaugeMetricFamily("kaiwo_queue_pending_workloads", "Kueue Workloads waiting for quota per ClusterQueue",
                                labels=["cluster_queue"])
    admitted = GaugeMetricFamily("kaiwo_queue_admitted_workloads", "Kueue Workloads holding quota per ClusterQueue",
                                 labels=["cluster_queue"])
    for view in cluster_queue_views(cache.items(CLUSTERQUEUES), cache.items(LOCALQUEUES), cache.items(WORKLOADS)):
        pending.add_metric([view.name], len(view.pending))
        admitted.add_metric([view.name], view.admitted)
    return [workloads, pending, admitted]


def gpu_families(views: Iterable[NodeView]) -> list[Metric]:
    """GPUs per node by state (allocatable, used by pods, idle) and, where telemetry measured them, the
    node's mean GPU utilization. Per-GPU series (utilization, memory, power per pod) are the telemetry
    exporter's (kaiwo_gpu_*, DCGM and AMD names): one scrape target per series, never two."""
    gpus = GaugeMetricFamily("kaiwo_node_gpus", "GPUs per node: allocatable, used (requested by pods), idle",
                             labels=["node", "resource", "state"])
    utilization = GaugeMetricFamily("kaiwo_node_gpu_utilization_percent",
                                    "Mean utilization of the node's GPUs that telemetry measured", labels=["node"])
    for view in views:
        if not view.gpu_resource:
            continue
        for state, count in (("allocatable", view.gpus_allocatable), ("used", view.gpus_used),
                             ("idle", view.gpus_idle)):
            gpus.add_metric([view.name, view.gpu_resource, state], count)
        measured = [g.utilization for g in view.gpus if g.utilization is not None]
        if measured:
            utilization.add_metric([view.name], sum(measured) / len(measured))
    return [gpus, utilization]


class _Snapshot:
    """A collector over families computed before `generate_latest` runs (collect() is synchronous)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        yield from self.families


class ProcessExtras:
    """The process series client_golang adds to what prometheus_client's ProcessCollector writes:
    the address-space limit and the network bytes of the process's network namespace, read from
    /proc as procfs does. Nothing is written where /proc lacks them (not Linux)."""

    def __init__(self, proc: Path = Path("/proc/self")) -> None:
        self.proc = proc

    def collect(self) -> Iterator[Metric]:
        limit = self._address_space_limit()
        if limit is not None:
            yield GaugeMetricFamily("process_virtual_memory_max_bytes",
                                    "Maximum amount of virtual memory available in bytes.", value=limit)
        traffic = self._network_bytes()
        if traffic is not None:
            yield CounterMetricFamily("process_network_receive_bytes",
                                      "Number of bytes received by the process over the network.", value=traffic[0])
            yield CounterMetricFamily("process_network_transmit_bytes",
                                      "Number of bytes sent by the process over the network.", value=traffic[1])

    def _address_space_limit(self) -> float | None:
        try:
            lines = (self.proc / "limits").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            if line.startswith("Max address space"):
                soft = line[len("Max address space"):].split()[0]
                # procfs reads "unlimited" as the largest uint64, and client_golang writes that
                return float(2 ** 64 - 1) if soft == "unlimited" else float(soft)
        return None

    def _network_bytes(self) -> tuple[float, float] | None:
        try:
            lines = (self.proc / "net" / "dev").read_text().splitlines()[2:]
        except OSError:
            return None
        received = sent = 0.0
        for line in lines:
            _, _, counters = line.partition(":")
            fields = counters.split()
            if len(fields) >= 9:
                received += float(fields[0])
                sent += float(fields[8])
        return received, sent


class AdminMetrics:
    def __init__(self, cache: ClusterCache, stats_source: StatsSource | None,
                 gpu_samples: GpuSamples | None = None) -> None:
        self.cache = cache
        self.stats_source = stats_source
        self.gpu_samples = gpu_samples
        self.registry = CollectorRegistry(auto_describe=False)
        self.transitions = Counter("kaiwo_workload_phase_transitions", "Workload phase changes seen by the watch",
                                   ["kind", "from_phase", "to_phase"], registry=self.registry)
        self.time_to_running = Histogram("kaiwo_workload_time_to_running_seconds",
                                         "From creation to the first RUNNING, per workload kind", ["kind"],
                                         buckets=TIME_TO_RUNNING_BUCKETS, registry=self.registry)
        # The process serving the scrape, as a Go operator's /metrics describes its own process.
        ProcessCollector(registry=self.registry)
        self.registry.register(ProcessExtras())
        cache.phase_listeners.append(self.on_phase)
        self._counts: tuple[int, dict[tuple[str, str, str, str], int]] = (-1, {})

    def on_phase(self, obj: dict[str, Any], before: str, after: str) -> None:
        kind = str(obj.get("kind") or "")
        self.transitions.labels(kind, before or "NEW", after or "NEW").inc()
        if after in ("RUNNING", "READY") and before not in ("RUNNING", "READY"):
            created = parse_time(meta(obj).get("creationTimestamp"))
            if created is not None:
                self.time_to_running.labels(kind).observe(max(0.0, clock.timestamp() - created.timestamp()))

    async def controller_snapshots(self) -> list[dict[str, Any]]:
        if self.stats_source is None:
            return []
        try:
            async with asyncio.timeout(5.0):
                return await self.stats_source()
        except Exception:  # a controller that does not answer must not fail the whole scrape
            log.warning("controller stats unavailable", exc_info=True)
            return []

    async def render(self) -> tuple[bytes, str]:
        snapshots = await self.controller_snapshots()
        registry = CollectorRegistry(auto_describe=False)
        if self._counts[0] != self.cache.workload_version:  # a scrape between changes reuses the counts
            self._counts = (self.cache.workload_version, workload_counts(self.cache))
        samples = list(self.gpu_samples()) if self.gpu_samples is not None else []
        nodes = node_views(self.cache.items(NODES), self.cache.items(PODS), samples)
        registry.register(_Snapshot(controller_families(snapshots) + workload_families(self.cache, self._counts[1])
                                    + gpu_families(nodes)))
        body = generate_latest(registry) + generate_latest(self.registry) + webhook_metrics.exposition()
        return body, CONTENT_TYPE_LATEST
