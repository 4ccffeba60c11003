"""Where the resource monitor (and GPU preemption) get per-pod GPU utilization from:

* `NativeSource`: our own telemetry, asking the aggregator actor on Ray (the default);
* `ScrapeSource`: a Prometheus endpoint in the AMD exporter's format (`gpu_gfx_activity`) or
  DCGM's (`DCGM_FI_DEV_GPU_UTIL`), upstream Kaiwo's mode, when an endpoint is configured.

Both answer `{(namespace, pod): [GpuUse]}`; a pod absent from the answer, or a GPU with
utilization None, is unknown. A source that cannot be read answers {} (everything unknown): the
consumers then decide nothing, rather than reading silence as 0 %.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from kaiwo_ray import clock
from kaiwo_ray.reconcile.monitoring import GpuUse
from kaiwo_ray.telemetry.settings import SAMPLE_PHASE

log = logging.getLogger(__name__)

PodKey = tuple[str, str]
# §8.6: the first non-empty of these labels names the namespace / pod / GPU.
NAMESPACE_LABELS = ("namespace", "kubernetes_namespace", "k8s_namespace_name", "k8s.namespace.name")
POD_LABELS = ("pod", "pod_name", "kubernetes_pod_name", "k8s_pod_name", "k8s.pod.name")
GPU_LABELS = ("gpu_id", "gpu")
FAMILIES = ("gpu_gfx_activity", "DCGM_FI_DEV_GPU_UTIL")


class UtilizationSource(Protocol):
    name: str

    async def readings(self, pods: Sequence[tuple[str, str, str]]) -> dict[PodKey, list[GpuUse]]: ...


def _first(labels: dict[str, str], keys: tuple[str, ...]) -> str:
    return next((labels[k] for k in keys if labels.get(k)), "")


def parse_exposition(text: str) -> dict[PodKey, list[GpuUse]]:
    """Per (namespace, pod): every GPU sample of the utilization families (all of them, not the
    last one per pod as upstream keeps)."""
    found: dict[PodKey, dict[tuple[str, str], GpuUse]] = {}
    for family in text_string_to_metric_families(text):
        if family.name not in FAMILIES:
            continue
        for sample in family.samples:
            labels = sample.labels
            namespace, pod = _first(labels, NAMESPACE_LABELS), _first(labels, POD_LABELS)
            gpu = _first(labels, GPU_LABELS) or labels.get("UUID", "")
            if not namespace or not pod or not gpu:
                continue
            host = labels.get("hostname") or labels.get("Hostname") or ""
            partition = labels.get("gpu_partition_id") or "0"
            found.setdefault((namespace, pod), {})[(host, gpu + "/" + partition)] = GpuUse(
                pod, gpu, round(float(sample.value), 2), partition)
    return {key: list(gpus.values()) for key, gpus in found.items()}


class ScrapeSource:
    name = "scrape"

    def __init__(self, endpoint: str, timeout: float = 5.0, ca_file: str | None = None) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self.ca_file = ca_file  # a private CA for an https endpoint (the sandbox's, say)
        self.last_error = ""

    async def readings(self, pods: Sequence[tuple[str, str, str]]) -> dict[PodKey, list[GpuUse]]:
        try:
            ssl_context = ssl.create_default_context(cafile=self.ca_file) if self.ca_file else None
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout)) as session, \
                    session.get(self.endpoint, ssl=ssl_context if ssl_context is not None else True) as response:
                if response.status // 100 != 2:
                    raise RuntimeError(f"HTTP {response.status}")
                text = await response.text()
            parsed = parse_exposition(text)
        except Exception as err:  # unreachable, timeout, not Prometheus text: everything unknown
            message = f"scrape {self.endpoint}: {type(err).__name__}: {err}"
            if message != self.last_error:
                log.warning("%s", message)
            self.last_error = message
            return {}
        self.last_error = ""
        wanted = {(ns, name) for ns, name, _ in pods}
        return {key: uses for key, uses in parsed.items() if key in wanted}


class NativeSource:
    """The aggregator actor of this Ray namespace (looked up per call: it may have restarted)."""

    name = "telemetry"

    def __init__(self, ray_namespace: str | None = None, timeout: float = 5.0) -> None:
        self.ray_namespace = ray_namespace
        self.timeout = timeout
        self.last_error = ""

    async def readings(self, pods: Sequence[tuple[str, str, str]]) -> dict[PodKey, list[GpuUse]]:
        import asyncio

        import ray

        from kaiwo_ray.telemetry.settings import AGGREGATOR_NAME

        try:
            namespace = self.ray_namespace or ray.get_runtime_context().namespace
            aggregator = ray.get_actor(AGGREGATOR_NAME, namespace=namespace)
            async with asyncio.timeout(self.timeout):
                answer: dict[PodKey, list[Any]] = await aggregator.pod_readings.remote(list(pods))
        except Exception as err:  # no aggregator (telemetry off), Ray hiccup: everything unknown
            self.last_error = f"{type(err).__name__}: {err}"
            return {}
        self.last_error = ""
        return {key: [GpuUse(key[1], r.gpu_id, r.utilization) for r in rows] for key, rows in answer.items() if rows}


class SamplingSource:
    """Our telemetry without Ray: a sampler read on demand into an aggregator core in this
    process (`kaiwo-ray up --no-ray`, tests). Same answers as `NativeSource`.

    With an `interval` (`kaiwo-ray simulate`) it answers as the telemetry actors would have: they
    sample every `interval` seconds at SAMPLE_PHASE of it, so a pod that started running after the
    latest of those moments (`started`: pod uid -> when, on this clock) is in no sample yet and has no
    reading (unknown, as live). Each read still samples now, which costs no timers in virtual time."""

    name = "telemetry-local"

    def __init__(self, sampler: Any, aggregator: Any, interval: float | None = None,
                 started: Mapping[str, float] | None = None) -> None:
        self.sampler = sampler
        self.aggregator = aggregator
        self.interval = interval
        self.started = started if started is not None else {}
        self.last_error = ""

    async def readings(self, pods: Sequence[tuple[str, str, str]]) -> dict[PodKey, list[GpuUse]]:
        # Received and read on the operator's clock (virtual in `kaiwo-ray simulate`).
        samples = await self.sampler.node_samples()
        now = clock.timestamp()
        for sample in samples:
            self.aggregator.ingest(sample, received=now)
        sampled = None if self.interval is None else clock.last_multiple(now, self.interval,
                                                                          SAMPLE_PHASE * self.interval)
        answer: dict[PodKey, list[GpuUse]] = {}
        for namespace, name, uid in pods:
            if sampled is not None and self.started.get(uid, sampled) > sampled:
                continue  # not in the telemetry actors' latest sample yet
            rows = self.aggregator.pod_readings(namespace, name, uid, now)
            if rows:
                answer[(namespace, name)] = [GpuUse(name, r.gpu_id, r.utilization) for r in rows]
        return answer


# What the GPU ledger needs of a NodeSample, as plain tuples (a tenth of the pickling cost of the models
# when 1,000 nodes' samples cross from the aggregator to the accounting controller every second):
# (node, timestamp, unreadable, ((vendor, model, utilization or None, ((namespace, pod, uid), ...)), ...))
CompactGpu = tuple[str, str, float | None, tuple[tuple[str, str, str], ...]]
CompactSample = tuple[str, float, bool, tuple[CompactGpu, ...]]


def compact(samples: Any) -> list[CompactSample]:
    """NodeSamples as the ledger reads them (a GPU that could not be read: utilization None)."""
    return [(s.node, s.timestamp, bool(s.error),
             tuple((g.vendor, g.model, None if g.error else g.utilization,
                    tuple((r.namespace, r.pod, r.uid) for r in g.pods if r.pod or r.uid)) for g in s.gpus))
            for s in samples]


class SampleFeed(Protocol):
    """Node samples for the GPU ledger (kaiwo_ray/controllers/accounting.py), compacted."""

    name: str

    async def node_samples(self) -> list[CompactSample]: ...


class AggregatorFeed:
    """The latest sample of every node from the aggregator actor of this Ray namespace. Polled at the
    telemetry interval; a sample seen twice is dropped by the ledger's watermark, one missed only
    coarsens the integration (its neighbour's reading stands for it)."""

    name = "telemetry"

    def __init__(self, ray_namespace: str | None = None, timeout: float = 5.0) -> None:
        self.ray_namespace = ray_namespace
        self.timeout = timeout
        self.last_error = ""

    async def node_samples(self) -> list[CompactSample]:
        import asyncio

        import ray

        from kaiwo_ray.telemetry.settings import AGGREGATOR_NAME

        try:
            namespace = self.ray_namespace or ray.get_runtime_context().namespace
            aggregator = ray.get_actor(AGGREGATOR_NAME, namespace=namespace)
            async with asyncio.timeout(self.timeout):
                samples: list[CompactSample] = await aggregator.compact_snapshot.remote()
        except Exception as err:  # no aggregator: no samples; the ledger counts the time as unknown
            self.last_error = f"{type(err).__name__}: {err}"
            return []
        self.last_error = ""
        return samples


class SamplerFeed:
    """A sampler read directly (`kaiwo-ray up --no-ray`, tests)."""

    name = "telemetry-local"

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler

    async def node_samples(self) -> list[CompactSample]:
        return compact(await self.sampler.node_samples())
