"""Garbage-collector settings for a process that holds large, long-lived caches: an operator, or the
sandbox with its object store.

A controller caches every object it watches as plain dicts, and CPython's cyclic collector walks all
of them on each full collection and the young ones on every gen-0 run. Cached JSON has no reference
cycles (reference counting frees a replaced or deleted object at once, frozen or not), so keeping it
out of the collector's sight loses nothing:

* `tune_for_long_lived_caches()`, before the caches fill: one collection, then `gc.freeze()` moves what
  exists (imported modules, pydantic schemas) out of sight for good, and THRESHOLDS apply: gen-0 every
  2,000 net allocations (with the caches frozen a gen-0 walks only what is new; the threshold sets how
  long each run holds the event loop, not their total), gen-1 every 100 of those, gen-2 every 100
  gen-1 runs.
* `filling_caches()` around the first sync: no collection while the caches fill, then the initial
  lists join the frozen set without a collection.
* `freeze_after=g`: what survives a collection of generation g or older is frozen at once
  (`gc.callbacks`). The operator uses 1 (what lives through two young collections is, in a
  controller, almost always a cache entry); the sandbox uses 0 (its store keeps nearly everything it
  allocates).

The price: cyclic garbage whose cycle closes only after it was frozen (an exception's traceback held
by a long-lived task, say) is never collected by the young collections. `full_collection()` collects
everything once, frozen or not; `sweep_frozen_garbage()` runs it every SWEEP_SECONDS in the operator,
at a quiet moment, which bounds that garbage. What each setting buys, measured, is in
docs/performance.md ("Garbage collection").

Only for processes that are the operator (a Ray actor, `kaiwo-ray up`) or the sandbox (`kaiwo-ray
sandbox`): a test process or a library user keeps the defaults.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

THRESHOLDS = (2_000, 100, 100)
SWEEP_SECONDS = 1800.0  # between two full collections of the frozen objects
QUIET_WAIT_SECONDS = 60.0  # how long a due sweep waits for the controllers' queues to empty

log = logging.getLogger(__name__)


def _freezer(youngest: int) -> Callable[[str, dict[str, Any]], None]:
    def freeze_survivors(phase: str, info: dict[str, Any]) -> None:
        if phase == "stop" and info.get("generation", 0) >= youngest:
            gc.freeze()

    return freeze_survivors


_FREEZERS: dict[int, Callable[[str, dict[str, Any]], None]] = {}


def tune_for_long_lived_caches(*, freeze_after: int | None = None) -> None:
    """Freeze what exists and raise the thresholds; with `freeze_after` = g, also freeze what survives
    each collection of generation g or older from now on (the operator: 1; the sandbox, whose store
    keeps nearly everything it allocates, so that gen-1 walked up to 20 gen-0s' worth of new objects,
    270 ms at 100 creates/s: 0)."""
    gc.collect()  # what is garbage now must not be frozen with the rest
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    if freeze_after is not None:
        freezer = _FREEZERS.setdefault(freeze_after, _freezer(freeze_after))
        if freezer not in gc.callbacks:
            gc.callbacks.append(freezer)


@contextmanager
def filling_caches() -> Iterator[None]:
    """Around the first list of every cache: no collection while it runs (each would walk the growing
    caches: about 1 s of a 10,000-KaiwoJob cold start), then what exists is frozen without a collection
    (walking it would cost what freezing saves; the few cycles of the sync that are garbage stay, once)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
        release_free_heap()


def release_free_heap() -> None:
    """Hand the C heap's free pages back to the system (glibc's `malloc_trim`): the first list's pages
    (a megabyte of JSON each, decoded whole, then trimmed to what the caches keep) leave most of the heap
    they grew free but mapped, counted in RSS. Elsewhere than glibc, nothing."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def full_collection() -> int:
    """Collect everything, the frozen objects included, and freeze the survivors again: one pause as long
    as the process is large (about 0.5 s at 10,000 cached KaiwoJobs). Returns what was collected."""
    gc.unfreeze()
    found = gc.collect()
    gc.freeze()
    return found


@dataclass(slots=True)
class SweepStats:
    sweeps: int = 0
    collected: int = 0  # objects, over all sweeps
    last_pause_seconds: float = 0.0


SWEEPS = SweepStats()  # the process's: the collector is process-wide
_busy_checks: list[Callable[[], bool]] = []
_sweeper: asyncio.Task[None] | None = None


def ensure_sweeper(busy: Callable[[], bool], every: float = SWEEP_SECONDS,
                   quiet_wait: float = QUIET_WAIT_SECONDS) -> None:
    """Start the process's sweeper on the running loop unless one runs; `busy` (a controller's queue
    is not empty) joins the checks a due sweep waits on, for at most `quiet_wait` seconds."""
    global _sweeper
    _busy_checks.append(busy)
    if _sweeper is None or _sweeper.done():
        _sweeper = asyncio.get_running_loop().create_task(
            sweep_frozen_garbage(every, quiet_wait), name="gc-sweep-frozen")


def forget_busy_check(busy: Callable[[], bool]) -> None:
    """A stopped controller's check leaves; the last one out stops the sweeper."""
    global _sweeper
    if busy in _busy_checks:
        _busy_checks.remove(busy)
    if not _busy_checks and _sweeper is not None:
        _sweeper.cancel()
        _sweeper = None


async def sweep_frozen_garbage(every: float, quiet_wait: float) -> None:
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(every)
        give_up = loop.time() + quiet_wait
        while any(check() for check in list(_busy_checks)) and loop.time() < give_up:
            await asyncio.sleep(min(0.5, quiet_wait))
        started = time.perf_counter()
        found = full_collection()
        SWEEPS.last_pause_seconds = time.perf_counter() - started
        SWEEPS.sweeps += 1
        SWEEPS.collected += found
        log.info("gc sweep: %d objects of cyclic garbage collected in %.0f ms (frozen: %d)",
                 found, SWEEPS.last_pause_seconds * 1000, gc.get_freeze_count())
