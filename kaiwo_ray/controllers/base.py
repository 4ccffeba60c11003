"""The controller loop shared by every kaiwo-ray controller (controller-runtime's shape, in asyncio).

A controller declares the kinds it watches and how each event maps to work keys (the object itself
for the primary kind, its controller owner for children); informers keep one cache per kind; a
rate-limited work queue feeds `workers` coroutines that call `reconcile(key)`, at most one per key
at a time. Transient API errors back off per key; `reconcile` may ask to be called again later.
`stop()` stops taking work and waits for in-flight reconciles to finish (graceful shutdown).

Nothing kills a controller quietly: a worker that crashes (an error outside `reconcile`'s own
handling) is logged, counted in `health()` and restarted, its key retried; informers survive any
error on their own (see `Informer.run`). Start-up that cannot list a watched kind (its CRD is not
installed, RBAC forbids it) fails within `startup_timeout` with one line naming the resource and verb.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.kube.cache import ObjectCache, Transform
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.discovery import ClusterApis, detect
from kaiwo_ray.kube.errors import RETRYABLE, Forbidden, KubeError, NotFound
from kaiwo_ray.kube.informer import Informer, InformerSettings
from kaiwo_ray.kube.projection import PageDecoder
from kaiwo_ray.kube.resources import Resource
from kaiwo_ray.kube.stats import RECONCILE_BUCKETS, Histogram
from kaiwo_ray.kube.workqueue import WorkQueue

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace or "", name)


class Requeue(Exception):
    """Raised by `reconcile` to run its key again as soon as this pass ends, its backoff untouched (no
    failure counted, none forgotten): the pass gathered what the next one decides on."""


KeyMapper = Callable[[str, JsonObj, JsonObj | None], Iterable[Key]]


def own_key(event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
    meta = obj.get("metadata") or {}
    return [(meta.get("namespace") or "", meta.get("name") or "")]


def controller_owner_key(kind: str) -> KeyMapper:
    """Map a child's event to its controller owner of `kind` (same namespace)."""

    def mapper(event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
        keys: list[Key] = []
        for version in (obj, old):
            meta = (version or {}).get("metadata") or {}
            for ref in meta.get("ownerReferences") or ():
                if ref.get("controller") and ref.get("kind") == kind:
                    key = (meta.get("namespace") or "", ref.get("name") or "")
                    if key not in keys:
                        keys.append(key)
        return keys

    return mapper


@dataclass(slots=True)
class Watch:
    """One watched kind: what to list/watch, which labels to index, how events become keys."""

    resource: Resource
    to_keys: KeyMapper | None = None  # None: the cache is read, but events enqueue nothing
    label_selector: str | None = None
    index_labels: tuple[str, ...] = ()
    # Children's events come in bursts (Kueue admits, the Job unsuspends, its pod starts, all within
    # milliseconds on a fast cluster); reconciling the owner once per burst instead of once per event
    # saves a status write per short-lived intermediate state. See `Controller.coalesce_seconds`.
    coalesce: bool = False
    # What of each object the cache keeps (see `ObjectCache.transform`): None keeps it whole.
    transform: Transform | None = None
    # How list pages are decoded: only the fields `transform` reads (see `kube.projection`); None: whole.
    page_decoder: PageDecoder | None = None


class StartupError(RuntimeError):
    """A controller could not start: its message is one line naming the API resource and verb."""


@dataclass(slots=True)
class ControllerStats:
    reconciles: int = 0
    errors: int = 0
    retries: int = 0
    worker_crashes: int = 0
    # Reconciles that raised something other than a KubeError: a bug, what a recovered panic is in Go.
    panics: int = 0
    last_error: str = ""
    reconcile_seconds: float = 0.0
    started_at: float = field(default_factory=time.monotonic)
    # controller-runtime's reconcile_total{result} and reconcile_time_seconds, for the admin API's /metrics
    results: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("success", "error", "requeue", "requeue_after"), 0))
    reconcile_time: Histogram = field(default_factory=lambda: Histogram(RECONCILE_BUCKETS))


class Controller:
    """Subclasses set `name`, `watches` (first entry = primary kind) and implement `reconcile`."""

    name = "controller"
    # How long events of `coalesce` watches wait for more of their kind before the owner is reconciled
    # (the first event of a burst schedules the reconcile, later ones within the window join it).
    # A state that lasts longer than this is always seen and written; one that is over sooner is not
    # reported as a phase of its own. The owner's own events are never delayed: a new or edited CR
    # is acted on at once. kopf's former `batch_window` (0.1 s) made the same trade for every event.
    coalesce_seconds = 0.05

    def __init__(self, client: KubeClient, *, workers: int = 4,
                 informer_settings: InformerSettings | None = None, startup_timeout: float = 30.0) -> None:
        self.client = client
        self.workers = workers
        self.queue: WorkQueue[Key] = WorkQueue()
        self.informers: dict[Resource, Informer] = {}
        self.caches: dict[Resource, ObjectCache] = {}
        self.stats = ControllerStats()
        self._informer_settings = informer_settings or InformerSettings()
        self.startup_timeout = startup_timeout
        self._tasks: list[asyncio.Task[None]] = []
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.writes_enabled = asyncio.Event()  # cleared while another instance holds the lease
        self.writes_enabled.set()
        self._reconciles: set[asyncio.Future[None]] = set()
        # What the cluster serves (kube/discovery.py): detected in `start` unless set before it.
        self.apis: ClusterApis | None = None

    def watches(self) -> list[Watch]:
        raise NotImplementedError

    async def reconcile(self, key: Key) -> float | None:
        """Bring the world in line for `key`; return seconds until it should run again, or None."""
        raise NotImplementedError

    # -- plumbing ------------------------------------------------------------------------------

    def cache(self, resource: Resource) -> ObjectCache:
        return self.caches[resource]

    def served(self, resource: Resource) -> Resource:
        """`resource` at the version the cluster serves (Kueue v1beta1 on an older Kueue), for writes."""
        found = self.apis.served(resource) if self.apis is not None else None
        return found or resource

    async def detect_apis(self) -> ClusterApis:
        if self.apis is None:
            self.apis = await detect(self.client)
        return self.apis

    async def start(self) -> None:
        """Start informers, wait for their first list, then start the workers. A kind the cluster does
        not serve (KubeRay or AppWrapper not installed) is not watched: its cache stays empty."""
        apis = await self.detect_apis()
        for watch in self.watches():
            cache = ObjectCache(label_keys=watch.index_labels, transform=watch.transform)
            self.caches[watch.resource] = cache
            served = apis.served(watch.resource)
            if served is None:
                log.info("%s: the cluster serves no %s; not watching it", self.name, watch.resource.api_version)
                continue
            handler = self._handler(watch.to_keys, watch.coalesce)
            informer = Informer(self.client, served, handler, label_selector=watch.label_selector,
                                cache=cache, settings=self._informer_settings, page_decoder=watch.page_decoder)
            self.informers[watch.resource] = informer
            self._tasks.append(asyncio.create_task(informer.run(), name=f"{self.name}-{watch.resource.plural}"))
        try:
            await self._wait_synced()
        except BaseException:
            await self._cancel_tasks()
            raise
        for n in range(self.workers):
            self._tasks.append(asyncio.create_task(self._supervised_worker(n), name=f"{self.name}-worker-{n}"))

    async def _wait_synced(self) -> None:
        """Wait for every informer's first list. A kind the server does not serve (404: its CRD is
        missing) or will not let us list (403) fails at once; anything else gets `startup_timeout`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.startup_timeout
        while True:
            waiting = [i for i in self.informers.values() if not i.synced.is_set()]
            if not waiting:
                return
            for informer in waiting:
                err = informer.last_error
                if isinstance(err, NotFound | Forbidden):
                    raise StartupError(_cannot_list(self.name, informer, err))
            if loop.time() >= deadline:
                informer = waiting[0]
                raise StartupError(_cannot_list(self.name, informer, informer.last_error, self.startup_timeout))
            await asyncio.sleep(0.05)  # polling the informers' state under a deadline

    def _handler(self, to_keys: KeyMapper | None,
                 coalesce: bool = False) -> Callable[[str, JsonObj, JsonObj | None], None]:
        def on_event(event_type: str, obj: JsonObj, old: JsonObj | None) -> None:
            if to_keys is None:
                return
            for key in to_keys(event_type, obj, old):
                if not key[1]:
                    continue
                if coalesce and self.coalesce_seconds > 0:
                    self.queue.add_coalesced(key, self.coalesce_seconds)
                else:
                    self.queue.add(key)

        return on_event

    def enqueue_all(self) -> None:
        """Queue every primary object (a resync, e.g. after KaiwoConfig changed)."""
        primary = self.watches()[0].resource
        for obj in self.caches[primary]:
            self.queue.add(own_key("SYNC", obj, None)[0])

    async def _supervised_worker(self, n: int) -> None:
        """Run a worker; restart it whenever it crashes (it only returns on shutdown)."""
        while True:
            try:
                await self._worker()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                self.stats.worker_crashes += 1
                log.exception("%s: worker %d crashed (%d so far); restarting it", self.name, n,
                              self.stats.worker_crashes)
                await asyncio.sleep(0.1)  # a crash loop must not spin the event loop

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except asyncio.CancelledError:
                return
            try:
                # A standby's worker holds its key here until it leads; that is not work in flight,
                # so a standby's stop does not wait out its grace period for it.
                await self.writes_enabled.wait()
            except asyncio.CancelledError:
                self.queue.done(key)
                raise
            self._in_flight += 1
            self._idle.clear()
            try:
                reconcile = asyncio.ensure_future(self._run_one(key))
                self._reconciles.add(reconcile)
                try:
                    await reconcile
                except asyncio.CancelledError:
                    current = asyncio.current_task()
                    if not reconcile.cancelled() or (current is not None and current.cancelling()):
                        raise  # the worker itself is being stopped
                    self.queue.add(key)  # cut short by a step-down: run again once we lead
                finally:
                    self._reconciles.discard(reconcile)
            except Exception:
                self.queue.add_after(key, 1.0)  # the key is not lost with the worker: retried later
                raise
            finally:
                self.queue.done(key)
                self._in_flight -= 1
                if self._in_flight == 0:
                    self._idle.set()

    async def _run_one(self, key: Key) -> None:
        began = time.perf_counter()
        self.stats.reconciles += 1
        result = "error"
        try:
            delay = await self.reconcile(key)
            result = "success" if delay is None else "requeue_after"
        except Requeue:
            result = "requeue"
            self.queue.add(key)  # the key is being processed: it runs again right after this pass
            return
        except RETRYABLE as err:
            self.stats.retries += 1
            log.debug("%s %s/%s: retrying after %s", self.name, key[0], key[1], err)
            if err.retry_after:
                self.queue.add_after(key, err.retry_after)
            else:
                self.queue.add_rate_limited(key)
            return
        except KubeError as err:
            self.stats.errors += 1
            self.stats.last_error = str(err)
            log.warning("%s %s/%s: %s", self.name, key[0], key[1], err)
            self.queue.add_rate_limited(key)
            return
        except Exception as err:  # a bug in one reconcile must not take the controller down
            self.stats.errors += 1
            self.stats.panics += 1
            self.stats.last_error = f"{type(err).__name__}: {err}"
            log.exception("%s %s/%s: reconcile crashed", self.name, key[0], key[1])
            self.queue.add_rate_limited(key)
            return
        finally:
            elapsed = time.perf_counter() - began
            self.stats.reconcile_seconds += elapsed
            self.stats.reconcile_time.observe(elapsed)
            self.stats.results[result] += 1
        self.queue.forget(key)
        if delay is not None:
            self.queue.add_after(key, delay)

    def cancel_in_flight(self) -> int:
        """Cut every running reconcile short (leadership was lost: whatever they were about to write
        is no longer ours to write). Their keys run again when writes are enabled. Returns how many."""
        running = [r for r in self._reconciles if not r.done()]
        for reconcile in running:
            reconcile.cancel()
        return len(running)

    async def drain(self) -> None:
        """Finish background side effects (e.g. Events being sent) during a graceful stop."""

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def stop(self, *, grace_seconds: float = 10.0) -> None:
        """Stop taking work, let in-flight reconciles finish (up to `grace_seconds`), stop watching."""
        self.queue.shutdown()
        try:
            async with asyncio.timeout(grace_seconds):
                await self._idle.wait()
        except TimeoutError:
            log.warning("%s: %d reconciles still running after %.0fs", self.name, self._in_flight, grace_seconds)
        try:
            async with asyncio.timeout(grace_seconds):
                await self.drain()
        except TimeoutError:
            log.warning("%s: background writes still pending after %.0fs", self.name, grace_seconds)
        await self._cancel_tasks()

    async def _cancel_tasks(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    def stats_snapshot(self) -> JsonObj:
        """Numbers for controller-runtime's metrics (rendered by the admin API's /metrics)."""
        queue = self.queue.stats
        unfinished, longest = self.queue.processing_seconds()
        return {
            "controller": self.name,
            "reconcile_total": dict(self.stats.results),
            "reconcile_errors_total": self.stats.errors + self.stats.retries,
            "reconcile_panics_total": self.stats.panics,
            # Every error is retried (no reconcile.TerminalError) and no reconcile has a timeout.
            "terminal_reconcile_errors_total": 0,
            "reconcile_timeouts_total": 0,
            "max_concurrent_reconciles": self.workers,
            "active_workers": self._in_flight,
            "workqueue_unfinished_work_seconds": unfinished,
            "workqueue_longest_running_processor_seconds": longest,
            "reconcile_time_seconds": self.stats.reconcile_time.snapshot(),
            "workqueue_depth": len(self.queue),
            "workqueue_adds_total": queue.adds,
            "workqueue_retries_total": queue.retries,
            "workqueue_queue_duration_seconds": queue.queue_duration.snapshot(),
            "workqueue_work_duration_seconds": queue.work_duration.snapshot(),
            "rest_client_requests_total": self.client.requests.snapshot(),
            "rest_client_host": self.client.server,
        }

    def health(self) -> JsonObj:
        return {
            "name": self.name,
            # False while any cache is broken (an informer between an error and its next list/watch).
            "synced": all(i.synced.is_set() and i.healthy for i in self.informers.values()),
            "queue": len(self.queue),
            "in_flight": self._in_flight,
            "reconciles": self.stats.reconciles,
            "errors": self.stats.errors,
            "retries": self.stats.retries,
            "worker_crashes": self.stats.worker_crashes,
            "workers": sum(1 for t in self._tasks if "-worker-" in t.get_name() and not t.done()),
            "last_error": self.stats.last_error,
            "writing": self.writes_enabled.is_set(),
            "cached": {r.plural: len(c) for r, c in self.caches.items()},
            "relists": {r.plural: i.relists for r, i in self.informers.items()},
            "informer_errors": {r.plural: i.crashes for r, i in self.informers.items() if i.crashes},
        }


def _cannot_list(controller: str, informer: Informer, err: KubeError | None, waited: float | None = None) -> str:
    res = informer.resource
    target = f"{res.plural}.{res.group}" if res.group else res.plural
    if isinstance(err, NotFound):
        why = f"the server does not serve it (404: is the {res.kind} CRD installed?)"
    elif isinstance(err, Forbidden):
        why = f"forbidden (403: grant list and watch on {target}): {err.message}"
    elif err is not None:
        why = f"{err}" + (f" (still failing after {waited:.0f}s)" if waited else "")
    else:
        why = f"no answer within {waited:.0f}s" if waited else "no answer"
    return f"{controller}: cannot list {target} ({res.api_version}): {why}".replace("\n", " ")
