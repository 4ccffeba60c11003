"""kaiwo_ray.gc_tuning, in a child interpreter each (it changes the collector of the whole process)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run(code: str) -> None:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_what_survives_a_gen1_collection_is_frozen_and_cycles_younger_than_that_are_collected() -> None:
    run("""
        import gc
        from kaiwo_ray.gc_tuning import THRESHOLDS, tune_for_long_lived_caches
        tune_for_long_lived_caches(freeze_after=1)
        assert gc.get_threshold() == THRESHOLDS
        frozen = gc.get_freeze_count()
        cache = [{"n": i, "labels": {"a": str(i)}} for i in range(5000)]
        gc.collect(0)
        assert gc.get_freeze_count() == frozen, "a gen-0 collection freezes nothing"
        gc.collect(1)
        assert gc.get_freeze_count() >= frozen + 5000, "the cache survived gen-1: frozen"
        cycle = []
        cycle.append(cycle)
        del cycle
        assert gc.collect(0) >= 1, "new cyclic garbage is still collected"
    """)


def test_no_collection_while_the_caches_fill_and_what_they_hold_is_frozen_after() -> None:
    run("""
        import gc
        from kaiwo_ray.gc_tuning import filling_caches, tune_for_long_lived_caches
        tune_for_long_lived_caches(freeze_after=1)
        collections = []
        gc.callbacks.append(lambda phase, info: collections.append(info) if phase == "stop" else None)
        with filling_caches():
            assert not gc.isenabled()
            cache = [{"n": [i]} for i in range(100000)]  # 200,000 tracked containers
        assert gc.isenabled() and not collections, collections
        assert gc.get_freeze_count() >= 200000
    """)
