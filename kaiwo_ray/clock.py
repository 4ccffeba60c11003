"""The operator's clock. Three sources:

- the wall clock (the default): `now()` is `datetime.now(UTC)`, intervals are the event loop's;
- a virtual one (`kaiwo-ray simulate`), set for the whole process with `use`; intervals are the virtual
  loop's own;
- the cluster's scaled clock (`kaiwo-ray dev --time-factor F --scaled-clock`): the sandbox's clock runs
  1/F times as fast as the wall clock from an origin both agree on (`KAIWO_CLOCK_SCALE="<origin> <F>"`,
  set by dev for its Ray workers). `now()` and `monotonic()` read cluster time, and `wall_seconds`
  turns a cluster interval into the wall seconds a timer waits, so that a KaiwoJob's `duration: 60s` is
  60 seconds of the cluster's timestamps, as in a simulation.

The controllers read "now" here, never from `datetime.now` directly, so that a simulated week of
duration thresholds and grace periods is a week on the simulated cluster's clock too.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

SCALE_ENV = "KAIWO_CLOCK_SCALE"


@dataclass(frozen=True, slots=True)
class Scale:
    """Cluster time runs 1/`factor` times as fast as wall time and equals it at `origin` (Unix seconds)."""

    origin: float
    factor: float

    def cluster(self, wall: float) -> float:
        return self.origin + (wall - self.origin) / self.factor

    def encode(self) -> str:
        return f"{self.origin!r} {self.factor!r}"


def parse_scale(text: str) -> Scale:
    """`"<origin> <factor>"` (ValueError, saying what is wrong, otherwise)."""
    parts = text.split()
    if len(parts) != 2:
        raise ValueError(f"{SCALE_ENV} must be '<origin unix seconds> <time factor>', not {text!r}")
    origin, factor = float(parts[0]), float(parts[1])
    if not factor > 0:
        raise ValueError(f"{SCALE_ENV}: the time factor must be greater than 0, not {parts[1]}")
    return Scale(origin, factor)


_source: Callable[[], datetime] | None = None
_scale: Scale | None = parse_scale(os.environ[SCALE_ENV]) if os.environ.get(SCALE_ENV) else None


def now() -> datetime:
    if _source is not None:
        return _source()
    if _scale is not None:
        return datetime.fromtimestamp(_scale.cluster(time.time()), UTC)
    return datetime.now(UTC)


def timestamp() -> float:
    """`now()` as seconds since the epoch (`time.time()` on the wall clock)."""
    if _source is not None:
        return _source().timestamp()
    return time.time() if _scale is None else _scale.cluster(time.time())


def monotonic() -> float:
    """The running event loop's clock: `time.monotonic()` in a real loop, virtual in a simulation's
    (`time.monotonic()` outside any loop), in cluster seconds under a scaled clock. For intervals the
    operator measures itself."""
    try:
        moment = asyncio.get_running_loop().time()
    except RuntimeError:
        moment = time.monotonic()
    return moment if _scale is None else moment / _scale.factor


def wall_seconds(seconds: float) -> float:
    """How long a timer of `seconds` of this clock waits on the event loop."""
    return seconds if _scale is None else seconds * _scale.factor


async def sleep(seconds: float) -> None:
    """`asyncio.sleep` for `seconds` of this clock."""
    await asyncio.sleep(wall_seconds(seconds))


def last_multiple(moment: float, interval: float, offset: float = 0.0) -> float:
    """The latest `offset + k * interval` (k whole) at or before `moment` (seconds since the epoch)."""
    return math.floor((moment - offset) / interval) * interval + offset


async def sleep_to_multiple(interval: float, offset: float = 0.0) -> None:
    """Sleep until the next `offset + k * interval` seconds of this clock (counted from the epoch):
    periodic work then happens at moments set by the clock, not by when the process started, so a
    simulation and a live run of the same trace poll at the same moments."""
    moment = timestamp()
    await sleep(last_multiple(moment, interval, offset) + interval - moment)


def scale() -> Scale | None:
    return _scale


def set_scale(value: Scale | None) -> None:
    """Run this process on the cluster's scaled clock (None: the wall clock again)."""
    global _scale
    _scale = value


@contextmanager
def use(source: Callable[[], datetime]) -> Iterator[None]:
    """`now()` answers from `source` inside the block (the previous source comes back after it)."""
    global _source
    previous, _source = _source, source
    try:
        yield
    finally:
        _source = previous
