"""An asyncio event loop whose clock is virtual: when nothing is ready to run and no I/O is waiting,
it jumps straight to its next timer instead of sleeping, so that an idle hour costs no wall time.

Everything on the loop that measures time through it (`loop.time()`, `asyncio.sleep`, `call_later`,
`asyncio.timeout`) lives in virtual time; `LoopClock` gives the sandbox the same time as its Clock,
and `kaiwo_ray.clock` gives it to the operator. I/O between parts on the loop (HTTP over loopback) is
seen by a zero-timeout poll before any jump: a loopback write is readable by the peer as soon as
`send` returns. Work handed to threads (`run_in_executor`, `asyncio.to_thread`) is the exception the
loop cannot see through: while any is in flight, it waits for it in real time and does not jump.
"""

from __future__ import annotations

import asyncio
import contextvars
import selectors
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar, TypeVarTuple

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

# While a thread works for the loop, the real wait per poll (seconds): short, since the thread's
# result comes through the loop's self-pipe anyway and ends the wait at once.
THREAD_POLL_SECONDS = 0.05
# The shortest wait (a timer's delay, an idle jump), as real time moves at least this much between two
# polls. While callbacks are ready, asyncio runs timers up to its clock resolution (1 ns) early; code
# that waits "until t" by computing `t - now` itself (the sandbox's Kueue status writer) then finds a
# remainder under a nanosecond and waits again. In real time the clock moves meanwhile; here it would
# not, and with the loop kept busy by the sandbox's own work the waiter spun for ever.
MIN_JUMP_SECONDS = 1e-6


class _JumpingSelector(selectors.BaseSelector):
    """The loop's selector, polled without waiting; an empty poll moves virtual time by the wait."""

    def __init__(self, loop: VirtualTimeLoop, inner: selectors.BaseSelector) -> None:
        self._loop = loop
        self._inner = inner

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self._inner.select(0)
        if ready or timeout == 0:
            return ready
        if self._loop.threads_in_flight:
            return self._inner.select(THREAD_POLL_SECONDS if timeout is None else min(timeout, THREAD_POLL_SECONDS))
        if timeout is None:  # no timer at all: only I/O from outside (a signal) can move anything
            return self._inner.select(None)
        self._loop.jumps += 1
        self._loop.virtual_now += max(timeout, MIN_JUMP_SECONDS)
        return []

    def close(self) -> None:
        self._inner.close()

    def get_map(self) -> Any:
        return self._inner.get_map()

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.get_key(fileobj)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop in virtual time (starts at 0.0 seconds)."""

    def __init__(self) -> None:
        self.virtual_now = 0.0
        self.jumps = 0  # how many idle waits were skipped (a benchmark figure)
        self.threads_in_flight = 0
        super().__init__(_JumpingSelector(self, selectors.DefaultSelector()))

    def time(self) -> float:
        return self.virtual_now

    def call_later(self, delay: float, callback: Callable[[*Ts], object], *args: *Ts,
                   context: contextvars.Context | None = None) -> asyncio.TimerHandle:
        if delay > 0:
            delay = max(delay, MIN_JUMP_SECONDS)
        return super().call_later(delay, callback, *args, context=context)

    def run_in_executor(self, executor: Executor | None, func: Callable[[*Ts], T],
                        *args: *Ts) -> asyncio.Future[T]:
        future = super().run_in_executor(executor, func, *args)
        self.threads_in_flight += 1

        def done(_: asyncio.Future[T]) -> None:
            self.threads_in_flight -= 1

        future.add_done_callback(done)
        return future


@dataclass(slots=True)
class LoopClock:
    """The sandbox's Clock (kaiwo_sandbox.contracts.Clock) read from a loop's time: with a
    VirtualTimeLoop, the sandbox's timestamps and timers are virtual too. `start` is the wall
    time that loop time 0 stands for."""

    loop: asyncio.AbstractEventLoop
    start: datetime
    time_factor: float = 1.0
    # The last answer and the loop time it was for: virtual time stands still between jumps, and the
    # store, the controllers and the operator ask for the time hundreds of thousands of times.
    _at: float = field(default=-1.0, repr=False)
    _now: datetime | None = field(default=None, repr=False)

    def now(self) -> datetime:
        at = self.loop.time()
        if at != self._at or self._now is None:
            self._at, self._now = at, self.start + timedelta(seconds=at)
        return self._now

    def monotonic(self) -> float:
        return self.loop.time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
        return self.loop.call_later(max(delay, 0.0), callback)
