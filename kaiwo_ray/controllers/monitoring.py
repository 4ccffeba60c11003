"""The resource monitor (spec/cluster.md §9): every polling interval, each RUNNING KaiwoJob and
KaiwoService with GPU pods is evaluated against `KaiwoConfig.resourceMonitoring` using our own
telemetry (or a scrape endpoint, upstream's mode), and its `ResourceUnderutilization` condition,
`GpuUtilizationLow` events and - with `terminateUnderutilized` - TERMINATING status are written.
The workload controllers then terminate a TERMINATING workload as for duration preemption.

Settings, as upstream's environment (read where the controller runs, overridable by the
`kaiwo-ray up|dev` flags through `HostSettings.controller_options`):
`RESOURCE_MONITORING_ENABLED`, `RESOURCE_MONITORING_METRICS_ENDPOINT` (empty: our telemetry),
`RESOURCE_MONITORING_POLLING_INTERVAL` (Go duration, default 10s here; upstream has no default).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kaiwo_ray import clock
from kaiwo_ray.api.durations import parse_go_duration
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.labels import LABEL_NAME, LABEL_TYPE
from kaiwo_ray.controllers.base import Controller, Key, Watch
from kaiwo_ray.controllers.config import load_config
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.errors import Conflict, KubeError, NotFound
from kaiwo_ray.kube.events import EventRecorder
from kaiwo_ray.reconcile import phases as ph
from kaiwo_ray.reconcile.monitoring import EVENT_COMPONENT, GpuUse, evaluate

log = logging.getLogger(__name__)
GPU_PREFIXES = ("amd.com/", "nvidia.com/gpu")
TRUE = frozenset({"true", "1", "yes"})


@dataclass(frozen=True, slots=True)
class MonitorSettings:
    enabled: bool = False
    endpoint: str = ""  # a Prometheus endpoint to scrape; empty: kaiwo-ray's own telemetry
    polling_interval: float = 10.0

    @staticmethod
    def from_env(env: Mapping[str, str] | None = None) -> MonitorSettings:
        """Raises ValueError naming the variable when a value is unusable (startup fails, as upstream)."""
        env = os.environ if env is None else env
        enabled = env.get("RESOURCE_MONITORING_ENABLED", "").strip().lower() in TRUE
        endpoint = env.get("RESOURCE_MONITORING_METRICS_ENDPOINT", "").strip()
        if endpoint and not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"RESOURCE_MONITORING_METRICS_ENDPOINT={endpoint!r}: must be an http(s) URL")
        interval_text = env.get("RESOURCE_MONITORING_POLLING_INTERVAL", "").strip() or "10s"
        try:
            interval = parse_go_duration(interval_text).total_seconds()
        except ValueError as err:
            raise ValueError(f"RESOURCE_MONITORING_POLLING_INTERVAL={interval_text!r}: {err}") from err
        if interval <= 0:
            raise ValueError(f"RESOURCE_MONITORING_POLLING_INTERVAL={interval_text!r}: must be greater than 0")
        return MonitorSettings(enabled, endpoint, interval)


def pod_gpu_count(pod: JsonObj) -> int:
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        for block in (resources.get("limits") or {}, resources.get("requests") or {}):
            amount = sum(_int(v) for k, v in block.items() if k.startswith(GPU_PREFIXES))
            if amount:
                total += amount
                break
    return total


def _int(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


class ResourceMonitorController(Controller):
    name = "resourcemonitor"

    def __init__(self, client: Any, *, settings: MonitorSettings | None = None, source: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self.settings = settings or MonitorSettings.from_env()
        if source is None:
            from kaiwo_ray.telemetry.sources import NativeSource, ScrapeSource

            source = ScrapeSource(self.settings.endpoint) if self.settings.endpoint else NativeSource()
        self.source = source
        self.recorder = EventRecorder(client, EVENT_COMPONENT)
        self.writes = 0
        self.ticks = 0
        self._loop: asyncio.Task[None] | None = None

    def watches(self) -> list[Watch]:
        if not self.settings.enabled:
            return [Watch(R.KAIWOCONFIGS)]  # nothing to do; one tiny cache keeps the host's contract
        return [
            Watch(R.KAIWOJOBS), Watch(R.KAIWOSERVICES), Watch(R.KAIWOCONFIGS),
            Watch(R.PODS, label_selector=LABEL_NAME, index_labels=(LABEL_NAME,)),
        ]

    async def start(self) -> None:
        await super().start()
        if self.settings.enabled:
            self._loop = asyncio.create_task(self._run(), name="resource-monitor")

    async def stop(self, *, grace_seconds: float = 10.0) -> None:
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.gather(self._loop, return_exceptions=True)
        await super().stop(grace_seconds=grace_seconds)

    async def reconcile(self, key: Key) -> float | None:
        return None  # the monitor is driven by its clock, not by events

    async def _run(self) -> None:
        while True:
            if self.writes_enabled.is_set():
                try:
                    await self.tick()
                except Exception:  # one bad tick must not end the monitor
                    log.exception("resource monitor tick failed")
            await clock.sleep_to_multiple(self.settings.polling_interval)

    def _workloads(self) -> list[tuple[JsonObj, list[JsonObj]]]:
        pods = self.caches[R.PODS]
        found: list[tuple[JsonObj, list[JsonObj]]] = []
        for resource, kind_label in ((R.KAIWOJOBS, "job"), (R.KAIWOSERVICES, "service")):
            for obj in self.caches[resource]:
                if str((obj.get("status") or {}).get("status") or "") != ph.RUNNING:
                    continue
                meta = obj.get("metadata") or {}
                mine = [p for p in pods.with_label(LABEL_NAME, meta.get("name", ""))
                        if (p.get("metadata") or {}).get("namespace") == meta.get("namespace")
                        and ((p.get("metadata") or {}).get("labels") or {}).get(LABEL_TYPE, kind_label) == kind_label
                        and (p.get("status") or {}).get("phase") == "Running"]
                found.append((obj, mine))
        return found

    async def tick(self, now: datetime | None = None) -> int:
        """One evaluation of every RUNNING workload; returns how many statuses were written."""
        self.ticks += 1
        config = load_config(self.caches[R.KAIWOCONFIGS]).resource_monitoring
        workloads = [(obj, pods) for obj, pods in self._workloads() if sum(map(pod_gpu_count, pods)) > 0]
        if not workloads:
            return 0
        keys = [((p["metadata"].get("namespace") or ""), p["metadata"]["name"], p["metadata"].get("uid") or "")
                for _, pods in workloads for p in pods]
        readings = await self.source.readings(keys)
        moment = now or clock.now()
        written = 0
        for obj, pods in workloads:
            uses: list[GpuUse] = []
            for pod in pods:
                uses.extend(readings.get((pod["metadata"].get("namespace") or "", pod["metadata"]["name"]), []))
            decision = evaluate(obj, uses, sum(map(pod_gpu_count, pods)), config, moment)
            for event_type, reason, message in decision.events:
                self.recorder.emit(obj, event_type, reason, message)
            if decision.status is not None and await self._write(obj, decision.status):
                written += 1
        return written

    async def _write(self, obj: JsonObj, status: JsonObj) -> bool:
        meta = obj["metadata"]
        resource = R.KAIWOJOBS if obj.get("kind") == "KaiwoJob" else R.KAIWOSERVICES
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": status}
        try:
            result = await self.client.patch(resource, meta["name"], patch, meta.get("namespace"),
                                             subresource="status")
        except (Conflict, NotFound):
            return False  # changed or gone meanwhile: the next tick sees the new version
        except KubeError as err:
            log.warning("resource monitor: status of %s/%s: %s", meta.get("namespace"), meta["name"], err)
            return False
        self.writes += 1
        result.setdefault("kind", obj.get("kind"))
        with contextlib.suppress(Exception):
            self.caches[resource].upsert_if_newer(result)
        return True

    async def drain(self) -> None:
        await self.recorder.flush()

    def health(self) -> JsonObj:
        report = super().health()
        report.update(ticks=self.ticks, source=getattr(self.source, "name", ""),
                      source_error=getattr(self.source, "last_error", ""), enabled=self.settings.enabled)
        return report


def resource_monitor_controller(client: Any, **kwargs: Any) -> ResourceMonitorController:
    return ResourceMonitorController(client, **kwargs)
