"""Garbage-collector settings for a process that holds large, long-lived caches: an operator, or the
sandbox with its object store.

A controller caches every object it watches as plain dicts: 1,000 KaiwoJobs and their Jobs are a few
hundred thousand container objects. CPython's cyclic collector walks all of them on each full
collection and the young ones on every gen-0 run (each 700 allocations by default), which showed up as
25-190 ms pauses in the operator benchmark's p99. Cached JSON has no reference cycles (reference
counting frees a replaced object at once), so collecting rarely loses nothing:

* `gc.freeze()` after the first sync moves what exists then (imported modules, pydantic schemas, the
  initial caches) out of the collector's sight for good;
* gen-0 runs every 50,000 net allocations instead of 700, gen-1 every 20 of those, gen-2 every 100
  gen-1 runs (and only when enough survivors accumulated), so cycles are still collected.

Only for processes that are the operator (a Ray actor, `kaiwo-ray up`) or the sandbox (`kaiwo-ray
sandbox`): a test process or a library user keeps the defaults.
"""

from __future__ import annotations

import gc

THRESHOLDS = (50_000, 20, 100)


def tune_for_long_lived_caches() -> None:
    gc.collect()  # what is garbage now must not be frozen with the rest
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
