"""The controller contract for simulated cluster components, and the loop that drives them.

A controller maps store events to work keys (`keys_for`) and reconciles one key at a time
(`reconcile`), level-based: read the store, decide, write. Keys are de-duplicated while queued.
`reconcile` may return a delay in seconds to be called again for that key (timers such as
"this pod finishes in 3 s"). Callbacks from the store only enqueue; all writes happen in the
drain, so controllers never re-enter the store from inside a notification.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from kaiwo_sandbox.contracts import GVR, ApiError, Clock, JsonObj, Store, TimerHandle, WatchEvent
from kaiwo_sandbox.runtime.processes import LocalRuntime

log = logging.getLogger(__name__)
TRANSIENT_API_CODES = frozenset({404, 409, 429, 500, 503, 504})  # races and overload: retried quietly
MAX_ERROR_BACKOFF = 30.0  # seconds: the longest wait before retrying a key whose reconciles keep failing
# The simulated controllers run in slices of this many seconds between the API server's turns, at
# most SLICE_KEYS keys of one controller before the next one's turn.
SLICE_SECONDS = 0.005
SLICE_KEYS = 16

Key = Hashable


@dataclass(slots=True)
class ClusterSettings:
    """Knobs for the simulated cluster. Durations are simulated seconds (scaled by clock.time_factor)."""

    default_run_seconds: float = 15.0  # a container with an unknown command runs this long, then succeeds
    pod_start_seconds: float = 0.5  # Pending(bound) -> Running
    ray_submit_seconds: float = 1.0  # RayJob cluster ready -> job RUNNING
    progress_deadline_default: int = 600
    root_ca_pem: str = ""  # the API server's CA (PEM) for kube-root-ca.crt; the sandbox sets it when serving TLS
    # Real processes for pods of local images (`--local-image`): the kubelet runs those pods here.
    local_runtime: LocalRuntime | None = None
    # (namespace, service account) -> a long-lived token of it: the token controller fills legacy token Secrets
    token_minter: Callable[[str, str], str] | None = None


class Controller:
    """Base class. Subclasses set `name` and `watches`, and implement `keys_for` and `reconcile`."""

    name: str = "controller"
    watches: tuple[GVR, ...] = ()

    def __init__(self, store: Store, clock: Clock, settings: ClusterSettings) -> None:
        self.store = store
        self.clock = clock
        self.settings = settings

    def keys_for(self, event: WatchEvent) -> Iterable[Key]:
        """Work keys an event concerns. Default: (namespace, name) of the object itself."""
        meta = event.object.get("metadata", {})
        return [(meta.get("namespace"), meta.get("name"))]

    def initial_keys(self) -> Iterable[Key]:
        """Keys to reconcile at start (objects that existed before the controller started)."""
        keys: list[Key] = []
        for gvr in self.watches:
            items, _ = self.store.list(gvr)
            for item in items:
                keys.extend(self.keys_for(WatchEvent("ADDED", gvr, item)))
        return keys

    def reconcile(self, key: Key) -> float | None:
        """Bring the world in line for `key`. Return seconds until the next call, or None."""
        raise NotImplementedError

    def admit(self, operation: str, gvr: GVR, obj: JsonObj, old: JsonObj | None, user: str) -> None:
        """Optional mutating admission (a webhook's job, e.g. Kueue suspending new Jobs).
        Override to mutate `obj` in place or raise ApiError; registered only when overridden."""


def _storage_key(gvr: GVR) -> tuple[str, str]:
    return (gvr.group, gvr.resource)


class ControllerRunner:
    """Drives controllers on the current asyncio loop: one queue of dirty keys per controller,
    drained in order, with per-key timers for requeue-after."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self.controllers: list[Controller] = []
        self._dirty: dict[str, dict[Key, None]] = {}
        self._timers: dict[tuple[str, Key], TimerHandle] = {}
        self._by_resource: dict[tuple[str, str], list[Controller]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._unsubscribe: object = None
        self._removers: list[Callable[[], None]] = []
        self.errors = 0
        self._failures: dict[tuple[str, Key], int] = {}  # consecutive failed reconciles per key
        self._next = 0  # the controller whose turn opens the next slice

    def add(self, controller: Controller) -> None:
        self.controllers.append(controller)
        self._dirty[controller.name] = {}
        for gvr in controller.watches:
            self._by_resource.setdefault(_storage_key(gvr), []).append(controller)

    def start(self) -> None:
        self._unsubscribe = self.store.subscribe(self._on_event)
        for controller in self.controllers:
            if type(controller).admit is not Controller.admit:
                self._removers.append(self.store.add_admission_hook(controller.admit))
        for controller in self.controllers:
            for key in controller.initial_keys():
                self.enqueue(controller, key)
        self._task = asyncio.get_running_loop().create_task(self._drain_forever(), name="sandbox-cluster")

    async def stop(self) -> None:
        if callable(self._unsubscribe):
            self._unsubscribe()
        for remove in self._removers:
            remove()
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def enqueue(self, controller: Controller, key: Key) -> None:
        self._dirty[controller.name][key] = None
        self._wake.set()

    def _on_event(self, event: WatchEvent) -> None:
        for controller in self._by_resource.get(_storage_key(event.gvr), ()):
            try:
                keys = list(controller.keys_for(event))
            except Exception:  # a bad object must not break the store's notify loop
                log.exception("%s: keys_for failed", controller.name)
                continue
            for key in keys:
                self.enqueue(controller, key)

    def _schedule(self, controller: Controller, key: Key, delay: float) -> None:
        timer_key = (controller.name, key)
        old = self._timers.pop(timer_key, None)
        if old is not None:
            old.cancel()

        def fire() -> None:
            self._timers.pop(timer_key, None)
            self.enqueue(controller, key)

        self._timers[timer_key] = self.clock.call_later(max(delay, 0.0), fire)

    def _backoff(self, controller: Controller, key: Key, first: float) -> float:
        """Per-key exponential back-off after failed reconciles (like controller-runtime's rate
        limiter): `first`, doubling per consecutive failure up to MAX_ERROR_BACKOFF seconds."""
        failures = self._failures.get((controller.name, key), 0)
        self._failures[(controller.name, key)] = failures + 1
        return float(min(first * 2 ** min(failures, 20), MAX_ERROR_BACKOFF))

    def drain_once(self) -> int:
        """Reconcile every dirty key once; returns how many reconciles ran."""
        ran = 0
        for controller in self.controllers:
            queue = self._dirty[controller.name]
            while queue:
                key = next(iter(queue))
                del queue[key]
                ran += 1
                self._reconcile(controller, key)
        return ran

    def drain_slice(self, budget: float = SLICE_SECONDS) -> bool:
        """Reconcile dirty keys for about `budget` seconds, at most SLICE_KEYS of one controller at a
        time, the controllers in turn (where the last slice stopped); True when keys are left."""
        deadline = time.perf_counter() + budget
        count = len(self.controllers)
        idle_in_a_row = 0
        while idle_in_a_row < count:
            controller = self.controllers[self._next % count]
            self._next = (self._next + 1) % count
            queue = self._dirty[controller.name]
            if not queue:
                idle_in_a_row += 1
                continue
            idle_in_a_row = 0
            for _ in range(min(len(queue), SLICE_KEYS)):
                key = next(iter(queue))
                del queue[key]
                self._reconcile(controller, key)
            if time.perf_counter() >= deadline:
                return any(self._dirty[c.name] for c in self.controllers)
        return False

    def _reconcile(self, controller: Controller, key: Key) -> None:
        try:
            delay = controller.reconcile(key)
        except ApiError as err:
            # Conflicts and not-founds are normal races with clients: retry soon. A write
            # the store keeps refusing (400/422 on a malformed object) backs off instead
            # of failing twenty times a second forever.
            refused = err.code not in TRANSIENT_API_CODES and (controller.name, key) not in self._failures
            # A refusal that will not go away by itself is worth one warning per episode:
            # it leaves objects stuck (e.g. a Job whose status can never be written).
            (log.warning if refused else log.debug)("%s: %r -> %s %s", controller.name, key, err.code,
                                                    err.message)
            delay = self._backoff(controller, key, 0.05)
        except Exception:
            self.errors += 1
            log.exception("%s: reconcile %r failed", controller.name, key)
            delay = self._backoff(controller, key, 1.0)
        else:
            self._failures.pop((controller.name, key), None)
        if delay is not None:
            self._schedule(controller, key, delay)

    def drain_until_idle(self, limit: int = 10_000) -> int:
        """Reconcile until no key is dirty (each reconcile's writes may dirty others); returns how
        many ran. For a manual clock, where a test settles the cluster between steps of time."""
        total = 0
        while total < limit:
            ran = self.drain_once()
            if not ran:
                break
            total += ran
        return total

    async def _drain_forever(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self.drain_slice():
                self._wake.set()
            # Yield so HTTP handlers interleave with controller work: draining every queue at once
            # held the loop for hundreds of milliseconds under load (2,000 Jobs starting), and each
            # API request waited behind it, as no real API server waits on its controllers.
            await asyncio.sleep(0)
