"""The operator's wall clock: `now()` is `datetime.now(UTC)`, unless a process that runs the operator in
virtual time (`kaiwo-ray simulate`) sets another source for the whole process with `use`.

The controllers read "now" here, never from `datetime.now` directly, so that a simulated week of
duration thresholds and grace periods is a week on the simulated cluster's clock too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

_source: Callable[[], datetime] | None = None


def now() -> datetime:
    return datetime.now(UTC) if _source is None else _source()


def timestamp() -> float:
    """`now()` as seconds since the epoch (`time.time()` outside a simulation)."""
    return time.time() if _source is None else _source().timestamp()


def monotonic() -> float:
    """The running event loop's clock: `time.monotonic()` in a real loop, virtual in a simulation's
    (`time.monotonic()` outside any loop). For intervals the operator measures itself."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


@contextmanager
def use(source: Callable[[], datetime]) -> Iterator[None]:
    """`now()` answers from `source` inside the block (the previous source comes back after it)."""
    global _source
    previous, _source = _source, source
    try:
        yield
    finally:
        _source = previous
