"""Garbage-collector settings for a process that holds large, long-lived caches: an operator, or the
sandbox with its object store.

A controller caches every object it watches as plain dicts: 10,000 KaiwoJobs with their Jobs and
Workloads are a few million container objects. CPython's cyclic collector walks all of them on each
full collection (up to ~480 ms at 10,000 KaiwoJobs, measured in benchmarks/operator.py: the whole
p99 of create -> child Job at 100 CR/s) and the young ones on every gen-0 run (each 700 allocations
by default). Cached JSON has no reference cycles (reference counting frees a replaced or deleted
object at once, frozen or not), so keeping it out of the collector's sight loses nothing:

* `tune_for_long_lived_caches()`, before the caches fill: one collection, then `gc.freeze()` moves what
  exists (imported modules, pydantic schemas) out of sight for good, and the thresholds rise: gen-0
  runs every 10,000 net allocations instead of 700 (with the caches frozen, a gen-0 walks only what
  is new: a few ms), gen-1 every 20 of those, gen-2 every 100 gen-1 runs (and only when enough
  survivors accumulated). Filling 30,000 objects into the caches under the
  default thresholds ran a dozen full collections over the growing caches: seconds of a cold start.
* `filling_caches()` around the first sync: no collection while the caches fill, then the initial lists
  join the frozen set without a collection (walking them once more would be the pause this module
  avoids).
* `freeze_after=g`: what survives a collection of generation g or older is frozen at once
  (`gc.callbacks`). The operator uses 1: what lives through two young collections is, in a
  controller, almost always a cache entry, so no collection walks the objects cached since the start
  (each full collection walked every object cached since the last freeze: the 480 ms pauses). The
  sandbox uses 0: its store keeps nearly everything it allocates.

The price: cyclic garbage whose cycle closes only after it was frozen (an object alive at such a
collection that later becomes part of an unreachable cycle: an exception's traceback held by a
long-lived task, say) is never collected; reference counting still frees everything acyclic.
`full_collection()` collects everything once, frozen or not, for a process that wants to bound that.

Only for processes that are the operator (a Ray actor, `kaiwo-ray up`) or the sandbox (`kaiwo-ray
sandbox`): a test process or a library user keeps the defaults.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

THRESHOLDS = (10_000, 20, 100)


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
