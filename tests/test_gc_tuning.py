"""hosts.runtime.gc_tuning, in a child interpreter each (it changes the collector of the whole process)."""

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
        from hosts.runtime.gc_tuning import THRESHOLDS, tune_for_long_lived_caches
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
        from hosts.runtime.gc_tuning import filling_caches, tune_for_long_lived_caches
        tune_for_long_lived_caches(freeze_after=1)
        collections = []
        gc.callbacks.append(lambda phase, info: collections.append(info) if phase == "stop" else None)
        with filling_caches():
            assert not gc.isenabled()
            cache = [{"n": [i]} for i in range(100000)]  # 200,000 tracked containers
        assert gc.isenabled() and not collections, collections
        assert gc.get_freeze_count() >= 200000
    """)


def test_the_sweeper_collects_cyclic_garbage_frozen_before_its_cycle_closed_once_the_queues_are_quiet() -> None:
    run("""
        import asyncio, gc, weakref
        from hosts.runtime.gc_tuning import SWEEPS, ensure_sweeper, forget_busy_check, tune_for_long_lived_caches
        tune_for_long_lived_caches(freeze_after=1)

        class Node:
            pass

        holder = Node()
        holder.child = Node()
        gc.collect(1)  # both survive gen-1: frozen
        holder.child.back = holder  # the cycle closes after the freeze
        alive = weakref.ref(holder)
        del holder
        gc.collect()
        assert alive() is not None, "frozen cyclic garbage: a normal collection never finds it"

        async def main():
            busy = [True]
            check = lambda: busy[0]
            ensure_sweeper(check, every=0.01, quiet_wait=30)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 0.3
            while loop.time() < deadline:  # due, but the queue is busy: it waits
                await asyncio.sleep(0.01)
            assert SWEEPS.sweeps == 0, "swept while a controller was busy"
            busy[0] = False
            deadline = loop.time() + 20
            while SWEEPS.sweeps == 0 and loop.time() < deadline:
                await asyncio.sleep(0.01)
            forget_busy_check(check)

        asyncio.run(main())
        assert SWEEPS.sweeps >= 1 and alive() is None, SWEEPS
    """)
