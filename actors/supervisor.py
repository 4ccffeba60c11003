"""Start, watch and stop the controller actors of one kaiwo-ray instance.

The supervisor is a driver-side object, not another actor. Ray already restarts a crashed
controller actor on its own (`max_restarts=-1`), so what is left — create the actors, report their
health, recreate one that is gone for good (killed with `no_restart=True`, or its node lost) and
stop them gracefully — is exactly what the `kaiwo-ray up`/`dev` process does while it runs. A
supervisor actor would add a worker process (~120 MB) and a thing that itself needs supervising,
for no extra guarantee.

Actors are named after their controller (`kaiwojob`, ...) in a Ray namespace (`kaiwo`), and found
with `get_if_exists=True`: a second `up` against the same Ray cluster adopts the running actors
instead of starting duplicates. When `detached`, they outlive the driver (a long-lived Ray cluster
keeps reconciling if `up` dies); otherwise they share its fate.

Two instances in different Ray clusters (or namespaces) may run side by side: the Lease decides
which one writes (see `kaiwo_ray.kube.lease`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import ray

from actors.controller import ACTOR_OPTIONS, ControllerActor
from hosts.runtime.operator_runtime import ActorHealth
from kaiwo_ray.controllers.manager import CONTROLLERS, HostSettings, default_controller_names

log = logging.getLogger(__name__)

RAY_NAMESPACE = "kaiwo"

# The raylet waits a fixed 15 s for the dashboard agent's port files (Ray 2.60 ignores
# agent_register_timeout_ms there) and aborts the node when the agent's imports take longer, as
# they can on a busy two-core machine. A second attempt finds warm caches and usually wins.
LOCAL_RAY_ENV = {"RAY_agent_register_timeout_ms": "120000", "RAY_USAGE_STATS_ENABLED": "0"}
START_ATTEMPTS = 3


class SupervisorError(RuntimeError):
    """An actor could not be started (its start-up error, or no answer in time)."""


class StartInterrupted(SupervisorError):
    """`start` gave up because the caller asked to stop (Ctrl-C while caches were warming)."""


@contextlib.contextmanager
def _sigint_ignored_by_children() -> Iterator[None]:
    """Ray's daemons share our process group, so a terminal's Ctrl-C (sent to the whole foreground
    group) would kill them, and with them the actors, before we could stop the actors gracefully.
    A signal ignored at exec stays ignored in the child (and Python then installs no
    KeyboardInterrupt handler), so the daemons Ray starts now ignore SIGINT; we restore our own
    handler right after, and stop Ray ourselves once the actors are down."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def init_ray(address: str | None = None, *, namespace: str = RAY_NAMESPACE, num_cpus: int | None = None) -> bool:
    """Connect to the Ray cluster at `address`, or start a private local one; True when we started
    it (and so must `ray.shutdown()` it). Does nothing when Ray is already initialised.

    Without an address we pass "local" rather than nothing: plain `ray.init()` would join whatever
    `ray start` left running on this machine (or RAY_ADDRESS), which is not what "start Ray" means.
    """
    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, namespace=namespace, log_to_driver=True)
        return False
    for key, value in LOCAL_RAY_ENV.items():
        os.environ.setdefault(key, value)
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            with _sigint_ignored_by_children():
                ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, namespace=namespace,
                         log_to_driver=True)
            return True
        except Exception as err:  # Ray raises a bare Exception when its node does not come up
            if "timed out during startup" not in str(err) or attempt == START_ATTEMPTS:
                raise
            log.warning("Ray did not start (attempt %d of %d, a busy machine?); trying again", attempt,
                        START_ATTEMPTS)
            ray.shutdown()
    raise AssertionError("unreachable")


class Supervisor:
    """The controller actors of one kaiwo-ray instance (one Ray namespace, one Lease identity)."""

    def __init__(self, settings: HostSettings, names: Sequence[str] | None = None, *,
                 namespace: str = RAY_NAMESPACE, detached: bool = False,
                 log_level: int = logging.WARNING, resources: dict[str, float] | None = None) -> None:
        unknown = [n for n in (names or ()) if n not in CONTROLLERS]
        if unknown:
            raise ValueError(f"unknown controllers {unknown}; choose from {list(CONTROLLERS)}")
        self.settings = settings
        self.names = list(names or default_controller_names(settings))  # opt-in ones only when enabled
        self.namespace = namespace
        self.detached = detached
        self.log_level = log_level
        # Custom Ray resources each actor asks for, to pin the controllers to the nodes that offer them
        # (deploy/ asks for Ray's `node:__internal_head__`: no controller lands on a GPU telemetry worker).
        self.resources = dict(resources or {})
        self.handles: dict[str, Any] = {}
        self._pids: dict[str, int] = {}
        self._restarts: dict[str, int] = dict.fromkeys(self.names, 0)
        self._remote = ray.remote(**ACTOR_OPTIONS)(ControllerActor)

    # -- life cycle -----------------------------------------------------------------------------

    def _create(self, name: str) -> Any:
        options: dict[str, Any] = {"name": name, "namespace": self.namespace, "get_if_exists": True}
        if self.detached:
            options["lifetime"] = "detached"
        if self.resources:
            options["resources"] = self.resources
        handle = self._remote.options(**options).remote(name, self.settings, self.log_level)
        self.handles[name] = handle
        return handle

    def start(self, timeout: float = 120.0, leader_wait: float = 3.0,
              interrupted: Callable[[], bool] = lambda: False) -> list[ActorHealth]:
        """Create (or adopt) every actor and wait until each has warm caches, then up to
        `leader_wait` seconds for its Lease.

        Raises SupervisorError naming the actors that failed (StartInterrupted when `interrupted()`
        turned true meanwhile), after stopping the actors."""
        for name in self.names:
            self._create(name)
        refs = {name: self.handles[name].ready.remote(leader_wait) for name in self.names}
        deadline = time.monotonic() + timeout
        ready: list[Any] = []
        while len(ready) < len(refs) and time.monotonic() < deadline:
            if interrupted():
                self.stop(grace_seconds=1.0)
                raise StartInterrupted("interrupted while the controllers were starting")
            ready, _ = ray.wait(list(refs.values()), num_returns=len(refs),
                                timeout=max(0.0, min(0.5, deadline - time.monotonic())))
        failures: list[str] = []
        rows: list[ActorHealth] = []
        for name, ref in refs.items():
            if ref not in ready:
                failures.append(f"{name}: not ready after {timeout:.0f}s")
                continue
            try:
                report = ray.get(ref)
            except ray.exceptions.RayError as err:
                failures.append(f"{name}: {_cause(err)}")
                continue
            rows.append(self._row(name, report))
        if failures:
            self.stop(grace_seconds=1.0)
            raise SupervisorError("; ".join(failures))
        return rows

    def ensure(self) -> list[str]:
        """Recreate actors that are gone for good (Ray restarts crashed ones by itself).

        The handles made by `_create` are kept, never replaced by a looked-up one: a non-detached
        actor lives exactly as long as the handle that created it, so swapping that handle for a
        `ray.get_actor` handle would drop the owner's reference and Ray would destroy the actor
        ("all references to the actor were removed") - every controller restarted each interval.
        The look-up only tells whether the actor still exists."""
        recreated: list[str] = []
        for name in self.names:
            try:
                found = ray.get_actor(name, namespace=self.namespace)
            except ValueError:
                log.warning("controller actor %s is gone; starting a new one", name)
                self._create(name)
                self._restarts[name] = self._restarts.get(name, 0) + 1
                self._pids.pop(name, None)  # the new actor's pid is not a restart on top of this one
                recreated.append(name)
                continue
            self.handles.setdefault(name, found)  # adopted by another driver: any handle will do
        return recreated

    def stop(self, grace_seconds: float = 10.0) -> list[ActorHealth]:
        """Graceful stop: every actor finishes its in-flight reconciles and releases its Lease (in
        parallel), then is killed for good so that Ray does not bring it back."""
        refs: dict[str, Any] = {}
        for name, handle in self.handles.items():
            try:
                refs[name] = handle.stop.remote(grace_seconds)
            except ray.exceptions.RayError as err:
                log.warning("controller actor %s: %s", name, _cause(err))
        ready: list[Any] = []
        if refs:
            ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=grace_seconds + 15.0)
        rows: list[ActorHealth] = []
        for name, ref in refs.items():
            restarts = self._restarts.get(name, 0)
            if ref not in ready:
                rows.append(ActorHealth.unreachable(name, "did not stop in time; killed", restarts))
                continue
            try:
                rows.append(self._row(name, ray.get(ref)))
            except ray.exceptions.RayError as err:
                rows.append(ActorHealth.unreachable(name, _cause(err), restarts))
        for handle in self.handles.values():
            try:
                ray.kill(handle, no_restart=True)
            except (ray.exceptions.RayError, ValueError) as err:
                log.debug("kill: %s", err)
        self.handles.clear()
        return rows

    # -- health ---------------------------------------------------------------------------------

    def health(self, timeout: float = 5.0) -> list[ActorHealth]:
        """Ask every actor at once; one that does not answer within `timeout` is reported unreachable."""
        refs: dict[str, Any] = {}
        rows: dict[str, ActorHealth] = {}
        for name in self.names:
            handle = self.handles.get(name)
            if handle is None:
                rows[name] = ActorHealth.unreachable(name, "not started", self._restarts.get(name, 0))
                continue
            refs[name] = handle.health.remote()
        ready: list[Any] = []
        if refs:
            ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout)
        for name, ref in refs.items():
            if ref not in ready:
                rows[name] = ActorHealth.unreachable(name, f"no answer within {timeout:.0f}s (restarting?)",
                                                     self._restarts.get(name, 0))
                continue
            try:
                rows[name] = self._row(name, ray.get(ref))
            except ray.exceptions.RayError as err:
                rows[name] = ActorHealth.unreachable(name, _cause(err), self._restarts.get(name, 0))
        return [rows[name] for name in self.names]

    def _row(self, name: str, report: dict[str, Any]) -> ActorHealth:
        pid = report.get("pid")
        if isinstance(pid, int):
            previous = self._pids.get(name)
            if previous is not None and previous != pid:
                self._restarts[name] = self._restarts.get(name, 0) + 1
            self._pids[name] = pid
        return ActorHealth.from_report(name, report, self._restarts.get(name, 0))

    def handle(self, name: str) -> Any:
        return self.handles[name]


def _cause(err: BaseException) -> str:
    """The actor-side exception's message rather than Ray's wrapping traceback."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {cause}"
    text = str(err).strip().splitlines()
    return text[-1] if text else type(err).__name__
