"""GPU-time accounting, the shell: every `interval` seconds the leader reads the telemetry's node
samples, charges each held GPU to its root workload (kaiwo_ray/telemetry/charging.py), feeds the
ledger (kaiwo_ray/telemetry/ledger.py), books the reclaims idle preemption and resource monitoring
made, and every `checkpoint_seconds` writes the ledger to its ConfigMaps
(kaiwo_ray/telemetry/ledger_store.py). Only the Lease holder accounts: on winning the Lease it
reloads the stored ledger and continues from its watermarks, on losing it drops what it had not
written (the new leader accounts that time from the stored watermarks), and on a clean stop it
writes first. What the admin API, /metrics and `kaiwo status usage` show is read from the store.

Settings (environment, overridable through `HostSettings.controller_options["accounting"]`):
`GPU_ACCOUNTING_ENABLED`, `GPU_ACCOUNTING_NAMESPACE` (the ConfigMaps' namespace; default the
operator's Lease namespace), `GPU_ACCOUNTING_INTERVAL` (1s), `GPU_ACCOUNTING_CHECKPOINT` (10s),
`GPU_ACCOUNTING_IDLE_THRESHOLD` (5, percent), `GPU_ACCOUNTING_RECLAIM_HORIZON` (1h: the remainder
assumed for a workload that declares no duration).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kaiwo_ray import clock
from kaiwo_ray.api.durations import parse_go_duration
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.controllers.base import Controller, Key, Watch
from kaiwo_ray.kube import resources as R
from kaiwo_ray.telemetry import charging
from kaiwo_ray.telemetry.ledger import DEFAULT_IDLE_THRESHOLD, Holder, Ledger, Owner, vendor_of
from kaiwo_ray.telemetry.ledger_store import LedgerConflict, LedgerStore
from kaiwo_ray.telemetry.sources import CompactSample

log = logging.getLogger(__name__)
TRUE = ("true", "1", "yes")
INDEX_SECONDS = 5.0  # how stale a workload's owner, user or queue may be in the ledger


def _seconds(env: Mapping[str, str], name: str, default: str) -> float:
    text = env.get(name, "").strip() or default
    try:
        value = parse_go_duration(text).total_seconds()
    except ValueError as err:
        raise ValueError(f"{name}={text!r}: {err}") from err
    if value <= 0:
        raise ValueError(f"{name}={text!r}: must be greater than 0")
    return value


@dataclass(frozen=True, slots=True)
class AccountingSettings:
    enabled: bool = False
    namespace: str = "kube-system"
    interval: float = 1.0
    checkpoint_seconds: float = 10.0
    idle_threshold: float = DEFAULT_IDLE_THRESHOLD
    stale_after: float = 5.0
    reclaim_horizon: float = 3600.0
    bucket_seconds: int = 3600

    @staticmethod
    def from_env(env: Mapping[str, str] | None = None, *, namespace: str = "kube-system") -> AccountingSettings:
        env = os.environ if env is None else env
        enabled = env.get("GPU_ACCOUNTING_ENABLED", "").strip().lower() in TRUE
        text = env.get("GPU_ACCOUNTING_IDLE_THRESHOLD", "").strip() or str(DEFAULT_IDLE_THRESHOLD)
        try:
            threshold = float(text.rstrip("%"))
        except ValueError:
            threshold = -1.0
        if not 0 <= threshold <= 100:
            raise ValueError(f"GPU_ACCOUNTING_IDLE_THRESHOLD={text!r}: must be a percentage between 0 and 100")
        interval = _seconds(env, "GPU_ACCOUNTING_INTERVAL", "1s")
        return AccountingSettings(
            enabled=enabled, namespace=env.get("GPU_ACCOUNTING_NAMESPACE", "").strip() or namespace,
            interval=interval, checkpoint_seconds=_seconds(env, "GPU_ACCOUNTING_CHECKPOINT", "10s"),
            idle_threshold=threshold, stale_after=3 * interval + 2.0,
            reclaim_horizon=_seconds(env, "GPU_ACCOUNTING_RECLAIM_HORIZON", "1h"))


KINDS = {"KaiwoJob": R.KAIWOJOBS, "KaiwoService": R.KAIWOSERVICES, "Job": R.JOBS, "Deployment": R.DEPLOYMENTS}


class AccountingController(Controller):
    name = "accounting-controller"

    def __init__(self, client: Any, *, settings: AccountingSettings | None = None, feed: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self.settings = settings or AccountingSettings.from_env()
        if feed is None:
            from kaiwo_ray.telemetry.sources import AggregatorFeed

            feed = AggregatorFeed()
        self.feed = feed
        self.store = LedgerStore(client, self.settings.namespace)
        self.ledger: Ledger | None = None  # None: not loaded (not the leader, or not yet)
        self._loop: asyncio.Task[None] | None = None
        self.ticks = 0
        self.saves = 0
        self.conflicts = 0
        self.last_error = ""
        self._indexed_at = float("-inf")
        self._kaiwo: dict[str, tuple[str, JsonObj]] = {}
        self._trackers: dict[tuple[str, str], JsonObj] = {}
        self._pod_uids: dict[str, JsonObj] = {}
        self._queues: dict[tuple[str, str], str] = {}
        self._owners: dict[tuple[str, str, str], Owner] = {}
        self._gpus_held: dict[str, tuple[int, str]] = {}  # owner key -> (GPUs, vendor) when last seen holding
        self._booked_at = float("-inf")
        self._provisional: dict[tuple[str, str, str], str] = {}  # pods charged to themselves until cached
        self._rekeys: list[tuple[str, str]] = []

    def watches(self) -> list[Watch]:
        return [Watch(R.PODS), Watch(R.KAIWOJOBS), Watch(R.KAIWOSERVICES), Watch(R.GPUWORKLOADS),
                Watch(R.LOCALQUEUES), Watch(R.JOBS), Watch(R.DEPLOYMENTS)]

    async def reconcile(self, key: Key) -> float | None:
        return None  # no per-object work: the loop below accounts

    async def start(self) -> None:
        await super().start()
        if self.settings.enabled:
            self._loop = asyncio.create_task(self._run(), name="accounting-loop")

    async def stop(self, *, grace_seconds: float = 10.0) -> None:
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.gather(self._loop, return_exceptions=True)
            if self.ledger is not None and self.writes_enabled.is_set():
                with contextlib.suppress(Exception):  # a clean stop writes what it accounted
                    await self.save()
        await super().stop(grace_seconds=grace_seconds)

    # -- the loop ---------------------------------------------------------------------------------

    async def _run(self) -> None:
        last_save = time.monotonic()
        while True:
            if not self.writes_enabled.is_set():
                self.ledger = None  # someone else accounts: their watermarks rule when we lead again
                await self.writes_enabled.wait()
            try:
                if self.ledger is None:
                    await self.load()
                    last_save = time.monotonic()
                await self.tick()
                if time.monotonic() - last_save >= self.settings.checkpoint_seconds:
                    await self.save()
                    last_save = time.monotonic()
                self.last_error = ""
            except asyncio.CancelledError:
                raise
            except LedgerConflict as err:
                self.conflicts += 1
                log.warning("GPU ledger changed under us (%s): reloading", err)
                self.ledger = None
            except Exception as err:  # the API server away: keep the ledger, try again next tick
                self.last_error = f"{type(err).__name__}: {err}"
                log.warning("GPU accounting: %s", self.last_error)
            await clock.sleep(self.settings.interval)

    async def load(self) -> None:
        ledger = Ledger(idle_threshold=self.settings.idle_threshold, stale_after=self.settings.stale_after,
                        bucket_seconds=self.settings.bucket_seconds)
        await self.store.load(ledger)
        self.ledger = ledger

    async def save(self) -> None:
        if self.ledger is not None:
            await self.store.save(self.ledger, clock.timestamp())
            self.saves += 1

    async def tick(self, now: float | None = None) -> None:
        ledger = self.ledger
        if ledger is None:
            return
        samples = await self.feed.node_samples()
        moment = time.monotonic()
        if moment - self._booked_at >= INDEX_SECONDS:  # early ends are booked at their own time, not ours
            self._booked_at = moment
            self.book_reclaims(ledger)
        self.account(ledger, samples)
        ledger.advance(clock.timestamp() if now is None else now, self._pod_alive)
        self.ticks += 1

    def _pod_alive(self, holder: Holder) -> bool:
        """Whether a silent node's holder still holds its GPUs as far as the API server knows."""
        if not holder.pod:
            return True  # attributed by UID only: kept until its node speaks again
        namespace, _, name = holder.pod.partition("/")
        pod = self.caches[R.PODS].get(namespace, name)
        return pod is not None and ((pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))

    # -- charging ---------------------------------------------------------------------------------

    def account(self, ledger: Ledger, samples: list[CompactSample], now: float | None = None) -> None:
        moment = time.monotonic() if now is None else now
        if moment - self._indexed_at >= INDEX_SECONDS:
            self._reindex(moment)
        for node, timestamp, unreadable, gpus in samples:
            cursor = ledger.nodes.get(node)
            if cursor is not None and timestamp <= cursor.until:
                continue  # seen it (the aggregator answers its latest sample until a newer one comes)
            holders: list[Holder] = []
            for vendor, model, utilization, refs in gpus:
                for namespace, pod, uid in refs:
                    owner = self.owner_of_pod(namespace, pod, uid)
                    ledger.owners[owner.key] = owner  # latest wins: a queue or annotation may change
                    holders.append(Holder(owner.key, vendor_of(vendor), model, utilization, 1.0 / len(refs),
                                          f"{namespace}/{pod}" if pod else ""))
            for earlier, owner_key in self._rekeys:
                ledger.rekey(earlier, owner_key)
            self._rekeys.clear()
            ledger.observe(node, timestamp, holders, error=unreadable)
            held: dict[str, list[Any]] = {}
            for holder in holders:
                entry = held.setdefault(holder.owner, [0.0, holder.vendor])
                entry[0] += holder.share
            for owner_key, (gpus, vendor) in held.items():  # what an early end releases, kept after it
                self._gpus_held[owner_key] = (round(gpus), vendor)

    def _reindex(self, moment: float) -> None:
        """Lookups rebuilt every INDEX_SECONDS (and the owners resolved through them forgotten), so a
        tick costs dictionary reads, not scans of every cached workload per GPU."""
        self._kaiwo = {str((o.get("metadata") or {}).get("uid") or ""): (kind, o)
                       for kind in ("KaiwoJob", "KaiwoService") for o in self.caches[KINDS[kind]]}
        self._trackers = {((t.get("metadata") or {}).get("namespace") or "", str(p.get("podName") or "")): t
                          for t in self.caches[R.GPUWORKLOADS]
                          for p in (t.get("status") or {}).get("trackedPods") or ()}
        self._pod_uids = {str((p.get("metadata") or {}).get("uid") or ""): p for p in self.caches[R.PODS]}
        self._queues = {((lq.get("metadata") or {}).get("namespace") or "", (lq.get("metadata") or {}).get("name")
                         or ""): str((lq.get("spec") or {}).get("clusterQueue") or "")
                        for lq in self.caches[R.LOCALQUEUES]}
        self._owners.clear()
        self._indexed_at = moment

    def owner_of_pod(self, namespace: str, name: str, uid: str) -> Owner:
        key = (namespace, name, uid)
        found = self._owners.get(key)
        if found is not None:
            return found
        pod = self.caches[R.PODS].get(namespace, name) if name else None
        if pod is None and uid:
            pod = self._pod_uids.get(uid)
        if pod is None:  # not in the cache yet (or gone already): charged to the pod, until it is known
            provisional = Owner(key=uid or f"pod:{namespace}/{name}", namespace=namespace, kind="Pod", name=name)
            if len(self._provisional) < 100_000:
                self._provisional[key] = provisional.key
            return provisional

        def get(kind: str, ns: str, obj_name: str) -> JsonObj | None:
            res = KINDS.get(kind)
            return self.caches[res].get(ns, obj_name) if res is not None else None

        owner = charging.resolve(pod, kaiwo_by_uid=self._kaiwo.get,
                                 tracker_for_pod=lambda ns, pod_name: self._trackers.get((ns, pod_name)), get=get,
                                 local_queues=self._queues)
        self._owners[key] = owner
        earlier = self._provisional.pop(key, None)
        if earlier is not None and earlier != owner.key:
            self._rekeys.append((earlier, owner.key))  # its first seconds move to its workload
        return owner

    def book_reclaims(self, ledger: Ledger) -> None:
        horizon = self.settings.reclaim_horizon
        for owner_key in [k for k in self._gpus_held if k not in ledger.owners]:
            del self._gpus_held[owner_key]  # sealed away
        kaiwo = {str((o.get("metadata") or {}).get("uid") or ""): o
                 for res in (R.KAIWOJOBS, R.KAIWOSERVICES) for o in self.caches[res]}
        for tracker in self.caches[R.GPUWORKLOADS]:
            root_uid = str(((tracker.get("spec") or {}).get("workloadRef") or {}).get("uid") or "")
            known = ledger.owners.get(root_uid)
            if known is not None and not known.preemption:  # tracked: preemption is on for it
                ledger.owners[root_uid] = dataclasses.replace(known, preemption=True)
            if ((tracker.get("status") or {}).get("phase")) != "Preempted":
                continue
            if (root_uid, charging.PREEMPTION) in ledger.reclaims:
                continue
            started, duration = _declared(kaiwo.get(root_uid))
            reclaim = charging.tracker_reclaim(tracker, started, duration, horizon)
            if reclaim is not None:
                if root_uid not in ledger.owners:
                    ref = (tracker.get("spec") or {}).get("workloadRef") or {}
                    ledger.owners[root_uid] = Owner(root_uid, (tracker.get("metadata") or {}).get("namespace") or "",
                                                    str(ref.get("kind") or ""), str(ref.get("name") or ""),
                                                    preemption=True)
                ledger.book(reclaim)
        for uid, obj in kaiwo.items():
            conditions = (obj.get("status") or {}).get("conditions") or ()
            if not any(c.get("type") == "WorkloadTerminatedEarly" for c in conditions) \
                    or (uid, charging.MONITORING) in ledger.reclaims:
                continue
            spec = obj.get("spec") or {}
            gpus, vendor = self._gpus_held.get(uid) or (int(spec.get("gpus") or 0),
                                                        vendor_of(str(spec.get("gpuVendor") or "amd")))
            reclaim = charging.monitor_reclaim(obj, gpus, vendor, horizon)
            if reclaim is not None:
                ledger.book(reclaim)

    def health(self) -> JsonObj:
        report = super().health()
        report["accounting"] = {"ticks": self.ticks, "saves": self.saves, "conflicts": self.conflicts,
                                "last_error": self.last_error, "nodes": len(self.ledger.nodes) if self.ledger else 0}
        return report


def _declared(obj: JsonObj | None) -> tuple[float | None, float | None]:
    """(started, declared duration) of a Kaiwo workload, in epoch seconds and seconds."""
    if obj is None:
        return None, None
    from kaiwo_ray.api.meta import parse_time

    started = parse_time((obj.get("status") or {}).get("startTime"))
    text = (obj.get("spec") or {}).get("duration")
    try:
        duration = parse_go_duration(str(text)).total_seconds() if text else None
    except ValueError:
        duration = None
    return (started.timestamp() if started else None), duration


def accounting_controller(client: Any, **kwargs: Any) -> AccountingController:
    return AccountingController(client, **kwargs)
