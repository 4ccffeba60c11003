"""A rate-limited work queue per controller, with controller-runtime's contract:

* a key is queued at most once (adding a queued key again is a no-op);
* at most one reconcile per key is in flight; a key added while in flight is re-queued once
  the current reconcile finishes (`done`), never run twice concurrently;
* failures back off per key exponentially (5 ms doubling to 5 min) until `forget`;
* a global token bucket caps the overall rate of retries (10 qps, burst 100 by default), so a
  storm of failures cannot starve the API server;
* `add_after` schedules a key for later (requeue-after), keeping the earliest deadline.

Single event loop, no locks: every method is called from the loop that owns the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from kaiwo_ray import clock as operator_clock
from kaiwo_ray.kube.stats import QueueStats

K = TypeVar("K", bound=Hashable)


@dataclass(slots=True)
class Backoff:
    """Per-key exponential backoff: base * 2**failures, capped."""

    base: float = 0.005
    cap: float = 300.0
    failures: dict[Hashable, int] = field(default_factory=dict)

    def next_delay(self, key: Hashable) -> float:
        n = self.failures.get(key, 0)
        self.failures[key] = n + 1
        # The exponent is capped: 2.0**1024 overflows (an OverflowError inside a worker's error
        # handling killed the worker), and past 2**62 every delay is the cap anyway.
        delay: float = min(self.base * (2.0 ** min(n, 62)), self.cap)
        return delay

    def forget(self, key: Hashable) -> None:
        self.failures.pop(key, None)

    def retries(self, key: Hashable) -> int:
        return self.failures.get(key, 0)


@dataclass(slots=True)
class TokenBucket:
    """Global budget for rate-limited re-adds: `rate` tokens/s, at most `burst` saved."""

    rate: float = 10.0
    burst: float = 100.0
    clock: Callable[[], float] = operator_clock.monotonic  # the loop's clock, as the queue's timers
    _tokens: float | None = None  # None until first use; negative = reservations in debt
    _last: float = 0.0

    def reserve(self) -> float:
        """Take one token; return how long the caller must wait for it (0 when available now)."""
        now = self.clock()
        tokens = self.burst if self._tokens is None else self._tokens
        tokens = min(self.burst, tokens + (now - self._last) * self.rate) - 1.0
        self._tokens, self._last = tokens, now
        return 0.0 if tokens >= 0 else -tokens / self.rate


class WorkQueue(Generic[K]):
    def __init__(self, *, backoff: Backoff | None = None, bucket: TokenBucket | None = None,
                 clock: Callable[[], float] = operator_clock.monotonic) -> None:
        self._clock = clock
        self._backoff = backoff or Backoff()
        self._bucket = bucket or TokenBucket(clock=clock)
        self._queue: dict[K, None] = {}  # insertion-ordered set of ready keys
        self._processing: set[K] = set()
        self._dirty_while_processing: set[K] = set()
        self._delayed: list[tuple[float, int, K]] = []
        self._deadline: dict[K, float] = {}
        self._seq = itertools.count()
        # Idle workers, each on a future of its own: a key wakes one of them, not all (with 4 workers
        # an Event woke 4 for every key, 3 of them to find nothing: 14 worker wake-ups a workload at
        # 100 workloads a second). One timer for the queue wakes one for the next delayed key.
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_when = 0.0  # the loop time the timer fires at
        self._shutting_down = False
        self.stats = QueueStats()  # read by the admin API's /metrics
        self._added_at: dict[K, float] = {}
        self._started_at: dict[K, float] = {}

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def in_flight(self) -> int:
        return len(self._processing)

    def add(self, key: K) -> None:
        if self._shutting_down:
            return
        if key in self._processing:
            self._dirty_while_processing.add(key)
            return
        if key not in self._queue:
            self._queue[key] = None
            self.stats.adds += 1
            self._added_at[key] = self._clock()
            self._wake_one()

    def add_after(self, key: K, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        when = self._clock() + delay
        current = self._deadline.get(key)
        if current is not None and current <= when:
            return  # an earlier wake-up is already scheduled
        self._deadline[key] = when
        heapq.heappush(self._delayed, (when, next(self._seq), key))
        if self._waiters:  # idle workers wait on the timer: it must not fire after this key is due
            self._arm(delay)

    def add_coalesced(self, key: K, window: float) -> None:
        """Run `key` within `window` seconds, together with whatever else arrives for it meanwhile:
        a no-op when it is already waiting to run (that run will read the newer state), else an
        `add_after` that keeps the earliest deadline, so the first event of a burst sets the time."""
        if key in self._queue:
            return
        self.add_after(key, window)

    def add_rate_limited(self, key: K) -> None:
        """Re-add after a failure: the larger of the key's backoff and the global budget's wait."""
        self.stats.retries += 1
        self.add_after(key, max(self._backoff.next_delay(key), self._bucket.reserve()))

    def forget(self, key: K) -> None:
        self._backoff.forget(key)

    def retries(self, key: K) -> int:
        return self._backoff.retries(key)

    def _promote_due(self) -> float | None:
        """Move due delayed keys to the ready queue; return seconds until the next one."""
        now = self._clock()
        while self._delayed:
            when, _, key = self._delayed[0]
            if self._deadline.get(key) != when:
                heapq.heappop(self._delayed)  # superseded by an earlier deadline or already fired
                continue
            if when > now:
                return when - now
            heapq.heappop(self._delayed)
            del self._deadline[key]
            self.add(key)
        return None

    async def get(self) -> K:
        """Wait for the next key and mark it in flight. Raises asyncio.CancelledError on shutdown."""
        while True:
            wait = self._promote_due()
            if self._queue:
                key = next(iter(self._queue))
                del self._queue[key]
                self._processing.add(key)
                now = self._clock()
                self.stats.queue_duration.observe(now - self._added_at.pop(key, now))
                self._started_at[key] = now
                if self._queue:
                    self._wake_one()  # more are ready: the next idle worker takes the next one
                return key
            if self._shutting_down:
                raise asyncio.CancelledError("work queue shut down")
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            if wait is not None:
                self._arm(wait)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # woken, then stopped before taking the key: pass it on
                raise
            finally:
                if waiter.cancelled():
                    with contextlib.suppress(ValueError):
                        self._waiters.remove(waiter)

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _arm(self, delay: float) -> None:
        """Have the queue's timer wake a worker within `delay` seconds (an earlier timer stays)."""
        loop = asyncio.get_running_loop()
        when = loop.time() + operator_clock.wall_seconds(delay)  # `delay` is of the queue's clock
        if self._timer is not None:
            if self._timer_when <= when:
                return
            self._timer.cancel()
        self._timer, self._timer_when = loop.call_at(when, self._on_timer), when

    def _on_timer(self) -> None:
        self._timer = None
        self._wake_one()

    def done(self, key: K) -> None:
        """The reconcile of `key` finished; re-queue it if it was added meanwhile."""
        self._processing.discard(key)
        started = self._started_at.pop(key, None)
        if started is not None:
            self.stats.work_duration.observe(self._clock() - started)
        if key in self._dirty_while_processing:
            self._dirty_while_processing.discard(key)
            self.add(key)

    def processing_seconds(self) -> tuple[float, float]:
        """client-go's workqueue_unfinished_work_seconds and workqueue_longest_running_processor_seconds:
        the seconds keys now in flight have run, summed and at most."""
        now = self._clock()
        running = [now - started for started in self._started_at.values()]
        return sum(running), max(running, default=0.0)

    def shutdown(self) -> None:
        """Stop handing out new keys; keys in flight may still call `done`."""
        self._shutting_down = True
        self._queue.clear()
        self._added_at.clear()
        while self._waiters:
            self._wake_one()

    def pending_keys(self) -> list[K]:
        return list(self._queue)
