"""Estimated start times for the admin API: recomputed in the background, never per request.

While KaiwoJobs are pending, every `interval` seconds in which the cache changed, the cluster's
KaiwoJobs, Nodes, KaiwoConfig and the KaiwoQueueConfig `kaiwo` go to a child process
(`python -m hosts.runtime.forecast`) that simulates them forward; its estimates replace the last ones,
stamped with when they were computed. A child process, because a forecast takes seconds of CPU and
runs the operator's clock in virtual time. A failed forecast is logged and the last estimates kept.

Calibration: each pending KaiwoJob's first estimate is kept until the KaiwoJob starts; then how far
that estimate missed and its size class (`score`) join the last `MAX_SCORES` scores, which go to the
next forecasts to widen their intervals into 80 % ones per size class. They live in memory: a
restarted admin API widens by the defaults alone (`DEFAULTS`) until `MIN_SCORES` of its new estimates
have started. `settled` and `remembered` are that bookkeeping, pure.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime

from kaiwo_ray import clock
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.kube.errors import KubeError
from kaiwo_ray.kube.resources import KAIWOCONFIGS, KAIWOJOBS, KAIWOQUEUECONFIGS, KAIWOSERVICES, NODES
from kaiwo_ray.simulation.forecast import PENDING, Estimate, Key, Score, settle
from serve.state import AdminState

log = logging.getLogger(__name__)
QUEUE_CONFIG = "kaiwo"  # the one KaiwoQueueConfig the operator reads
TIMEOUT_SECONDS = 300.0
MAX_SCORES = 500  # the most recent ones: the cluster's load changes, and so do its errors


@dataclass
class Forecasts:
    """The last forecast: (namespace, KaiwoJob name) -> its estimate, and when it was computed."""

    by_workload: dict[Key, Estimate] = field(default_factory=dict)
    computed: datetime | None = None
    # Calibration memory: the first estimate of each workload still pending (when it was made, the
    # estimate), and the scores of those that started, oldest first.
    first: dict[Key, tuple[datetime, Estimate]] = field(default_factory=dict)
    scores: list[Score] = field(default_factory=list)

    def get(self, namespace: str, name: str) -> Estimate | None:
        return self.by_workload.get((namespace, name))


def forecasts(state: AdminState) -> Forecasts:
    found = state.extras.get("forecasts")
    return found if isinstance(found, Forecasts) else Forecasts()


def settled(previous: Forecasts, kaiwojobs: list[JsonObj], now: datetime) -> Forecasts:
    """`previous`'s calibration memory brought up to the KaiwoJobs now, without estimates: the first
    estimates of those that started since are scored (the last `MAX_SCORES` scores kept), those of
    KaiwoJobs still pending kept, the others dropped."""
    first, started = settle(previous.first, kaiwojobs)
    return Forecasts(computed=now, first=first, scores=(previous.scores + started)[-MAX_SCORES:])


def remembered(memory: Forecasts, estimates: list[Estimate], now: datetime) -> Forecasts:
    """`memory` with the estimates of a forecast computed at `now`; a workload's first estimate with a
    start is kept to be scored when it starts (later ones do not replace it: the first looked furthest
    ahead)."""
    first = dict(memory.first)
    for estimate in estimates:
        if estimate.start is not None:
            first.setdefault((estimate.namespace, estimate.name), (now, estimate))
    return Forecasts({(e.namespace, e.name): e for e in estimates}, now, first, memory.scores)


async def compute(state: AdminState) -> Forecasts:
    """One forecast of the cluster as the cache and the API server show it now, calibrated with the
    scores of the earlier forecasts' estimates whose workloads have started since."""
    jobs = state.cache.items(KAIWOJOBS)
    now = clock.now().replace(microsecond=0)  # the cluster's clock; its stamps are whole seconds
    memory = settled(forecasts(state), jobs, now)
    scores = memory.scores
    pending = [j for j in jobs if str((j.get("status") or {}).get("status") or "") in PENDING]
    if not pending:
        return memory
    try:
        queue_config = await state.client.get(KAIWOQUEUECONFIGS, QUEUE_CONFIG)
    except KubeError as err:
        log.warning("start-time forecast skipped: KaiwoQueueConfig %s: %s", QUEUE_CONFIG, err)
        return memory
    configs = state.cache.items(KAIWOCONFIGS)
    request = {"now": now.isoformat(), "kaiwojobs": jobs, "kaiwoservices": state.cache.items(KAIWOSERVICES),
               "nodes": state.cache.items(NODES),
               "queueConfig": queue_config, "kaiwoConfig": configs[0] if configs else None, "scores": scores}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hosts.runtime.forecast", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        async with asyncio.timeout(TIMEOUT_SECONDS):
            out, stderr = await proc.communicate(json.dumps(request).encode())
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise RuntimeError(f"the forecast took more than {TIMEOUT_SECONDS:.0f} s") from None
    if proc.returncode != 0:
        raise RuntimeError(f"the forecast failed ({proc.returncode}): {stderr.decode(errors='replace')[-500:]}")
    return remembered(memory, [Estimate.model_validate(e) for e in json.loads(out)], now)


async def run_forecasts(state: AdminState, interval: float) -> None:
    """Recompute whenever the cache moved, at most every `interval` seconds, until cancelled."""
    seen = -1
    while True:
        version = state.cache.version
        if version != seen:
            seen = version
            try:
                state.extras["forecasts"] = await compute(state)
            except Exception as err:  # keep serving the last forecast
                log.warning("start-time forecast failed: %s", err)
        await asyncio.sleep(interval)


@contextlib.asynccontextmanager
async def background(state: AdminState, interval: float | None) -> AsyncIterator[None]:
    """The forecast loop for the app's lifetime (none when `interval` is None)."""
    if interval is None:
        yield
        return
    task = asyncio.create_task(run_forecasts(state, interval), name="start-time-forecasts")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
