"""Test harness: a sandbox on a background thread with its own event loop, for tests that talk to
it through the real `kubernetes` client (or kubectl) and poke at its internals via `.call`.

    with start_sandbox(nodes=[]) as sb:
        core = kubernetes.client.CoreV1Api(sb.api_client())
        core.create_namespaced_config_map("default", {...})
        assert sb.audit.count("create", "configmaps") == 1

The store is not thread-safe: touch `sb.store` only inside `sb.call(...)`. The audit log and
fault injector are simple enough to use from the test thread (their methods don't yield).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import ssl
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.client import HTTPConnection, HTTPSConnection
from pathlib import Path
from typing import Any, TypeVar

from kaiwo_sandbox.apiserver.audit import AuditLog
from kaiwo_sandbox.apiserver.auth.authz import AuthorizationMode
from kaiwo_sandbox.apiserver.faults import FaultInjector
from kaiwo_sandbox.cluster.base import ClusterSettings
from kaiwo_sandbox.contracts import Clock, JsonObj, ManualClock
from kaiwo_sandbox.instance import Sandbox, SandboxConfig, new_event_loop
from kaiwo_sandbox.storage.store import ObjectStore

T = TypeVar("T")
START_TIMEOUT = 30.0


class RunningSandbox:
    """Handle on a sandbox running on its own thread. Stop it (or use `with`) when done."""

    def __init__(self, sandbox: Sandbox, loop: asyncio.AbstractEventLoop, thread: threading.Thread,
                 tmpdir: tempfile.TemporaryDirectory[str]) -> None:
        self.sandbox = sandbox
        self.loop = loop
        self._thread = thread
        self._tmpdir = tmpdir
        self._stopped = False

    @property
    def url(self) -> str:
        return self.sandbox.url

    @property
    def token(self) -> str:
        return self.sandbox.token

    @property
    def kubeconfig_path(self) -> Path:
        path = self.sandbox.config.kubeconfig_path
        assert path is not None
        return path

    @property
    def ca_cert_path(self) -> Path | None:
        """The server certificate (its own CA), for clients configured by hand."""
        cert = self.sandbox.cert
        if cert is None:
            return None
        path = Path(self._tmpdir.name) / "ca.crt"
        if not path.exists():
            path.write_bytes(cert.cert_pem)
        return path

    @property
    def store(self) -> ObjectStore:
        return self.sandbox.store

    @property
    def clock(self) -> Clock:
        return self.sandbox.clock

    def advance(self, seconds: float) -> None:
        """Move a manual clock (`start_sandbox(manual_clock=True)`) `seconds` forward, timer by timer,
        letting the simulated controllers settle after each (what they write may start new timers),
        so the cluster ends where it would be after that much time."""
        clock = self.sandbox.clock
        if not isinstance(clock, ManualClock):
            raise TypeError("advance needs a sandbox started with manual_clock=True")

        def step() -> None:
            remaining = seconds
            runner = self.sandbox.cluster
            if runner is not None:
                runner.drain_until_idle()
            while True:
                due = clock.next_due()
                if due is None or due > remaining:
                    clock.advance(remaining)
                    break
                clock.advance(due)
                remaining -= due
                if runner is not None:
                    runner.drain_until_idle()
            if runner is not None:
                runner.drain_until_idle()

        self.call(step)

    @property
    def faults(self) -> FaultInjector:
        return self.sandbox.faults

    @property
    def audit(self) -> AuditLog:
        return self.sandbox.audit

    @property
    def open_watches(self) -> int:
        """How many HTTP watch streams are open right now."""
        return self.sandbox.server.open_watches

    @property
    def cluster(self) -> Any:
        """The ControllerRunner when started with `cluster=...`, else None."""
        return self.sandbox.cluster

    def api_client(self, token: str | None = None) -> Any:
        """A fresh `kubernetes.client.ApiClient` for this sandbox (as the admin, or `token`'s user)."""
        import kubernetes.client

        configuration = kubernetes.client.Configuration()
        configuration.host = self.url
        if self.ca_cert_path is not None:
            configuration.ssl_ca_cert = str(self.ca_cert_path)
        configuration.api_key = {"authorization": token or self.token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        return kubernetes.client.ApiClient(configuration)

    def http(self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None,
             token: str | None = None, timeout: float = 30.0) -> tuple[int, dict[str, str], bytes]:
        """One raw HTTP request (path incl. query): (status, headers, body). `body` dicts/lists are JSON."""
        connection = self._connection(timeout)
        sent_headers = {"Authorization": f"Bearer {token or self.token}", "Accept": "application/json"}
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
            sent_headers["Content-Type"] = "application/json"
        sent_headers.update(headers or {})
        try:
            connection.request(method, path, body=body, headers=sent_headers)
            response = connection.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            connection.close()

    def stream(self, path: str, *, timeout: float = 10.0, headers: dict[str, str] | None = None,
               token: str | None = None) -> Iterator[JsonObj]:
        """Decoded lines of a streaming response (a watch), until the server ends it or `timeout`."""
        connection = self._connection(timeout)
        sent_headers = {"Authorization": f"Bearer {token or self.token}", "Accept": "application/json"}
        sent_headers.update(headers or {})
        try:
            connection.request("GET", path, headers=sent_headers)
            response = connection.getresponse()
            while True:
                line = response.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            connection.close()

    def _connection(self, timeout: float) -> HTTPConnection:
        host, port = "127.0.0.1", self.sandbox.port
        if self.sandbox.cert is None:
            return HTTPConnection(host, port, timeout=timeout)
        context = ssl.create_default_context(cadata=self.sandbox.cert.cert_pem.decode())
        return HTTPSConnection(host, port, timeout=timeout, context=context)

    def mint_token(self, user: str, groups: tuple[str, ...] | list[str] = ()) -> str:
        """A token for a second client identity (member of `groups` and system:authenticated)."""
        return self.call(self.sandbox.mint_token, user, tuple(groups))

    def grant(self, user: str, namespace: str, rules: list[JsonObj], *, role: str | None = None) -> str:
        """Role `role` (default: the user's name) with `rules` in `namespace`, bound to User `user` (created
        through the API, as an admin would), and a token for that user."""
        rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
        role = role or user
        for plural, obj in (
                ("roles", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                           "metadata": {"name": role, "namespace": namespace}, "rules": rules}),
                ("rolebindings", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                                  "metadata": {"name": user, "namespace": namespace},
                                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                                  "subjects": [{"kind": "User", "name": user,
                                                "apiGroup": "rbac.authorization.k8s.io"}]})):
            code, _, body = self.http("POST", f"{rbac}/{plural}", obj)
            if code != 201:
                raise AssertionError(f"creating {plural} in {namespace}: {code} {body!r}")
        return self.mint_token(user)

    def service_account_token(self, namespace: str, name: str, seconds: int = 3600) -> str:
        """A token of the (existing) ServiceAccount NAMESPACE/NAME."""
        return self.call(self.sandbox.service_account_token, namespace, name, seconds)

    def revoke_token(self, token: str) -> bool:
        return self.call(self.sandbox.revoke_token, token)

    def kubeconfig_for(self, token: str, path: Path) -> Path:
        """Write a kubeconfig for this sandbox that authenticates with `token` (another identity)."""
        from kaiwo_sandbox.instance import write_kubeconfig

        cert = self.sandbox.cert
        write_kubeconfig(path, self.url, token, cert.cert_pem if cert else None)
        return path

    def call(self, fn: Callable[..., T], *args: Any, timeout: float = 30.0, **kwargs: Any) -> T:
        """Run `fn(*args, **kwargs)` on the sandbox's loop thread and return its result (or raise)."""
        async def run() -> T:
            return fn(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def run_async(self, make: Callable[[], Awaitable[T]], timeout: float = 30.0) -> T:
        """Await a coroutine on the sandbox's loop (for async helpers such as draining controllers)."""
        async def run() -> T:
            return await make()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            asyncio.run_coroutine_threadsafe(self.sandbox.stop(), self.loop).result(START_TIMEOUT)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)
            if not self.loop.is_running():
                self.loop.close()
            self._tmpdir.cleanup()

    def __enter__(self) -> RunningSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(slots=True)
class World:
    """What the product under test owns and every sandbox of a test session starts with: its CRDs
    and the Nodes a fresh cluster has. The sandbox knows no product, so a test suite registers its
    world once (`use_world`, e.g. from its root conftest.py); empty until then."""

    crds: list[JsonObj] = field(default_factory=list)
    nodes: list[JsonObj] = field(default_factory=list)


_world = World()


def use_world(*, crds: Iterable[JsonObj] = (), nodes: Iterable[JsonObj] = ()) -> None:
    """Make `crds` and `nodes` the world of every sandbox `start_sandbox` starts from now on."""
    global _world
    _world = World(crds=list(crds), nodes=list(nodes))


def start_sandbox(*, nodes: list[JsonObj] | None = None, cluster: bool | Iterable[str] = False,
                  time_factor: float = 0.01, cluster_settings: ClusterSettings | None = None,
                  state_dir: Path | None = None, port: int = 0, bookmark_interval: float = 60.0,
                  install_crds: bool = True, extra_crds: list[JsonObj] | None = None,
                  tls: bool = True, manual_clock: bool = False,
                  authorization: AuthorizationMode = "AlwaysAllow",
                  local_images: Iterable[str] = (), local_commands: bool = False,
                  clock: Clock | None = None) -> RunningSandbox:
    """Start a sandbox on 127.0.0.1 on a background thread. `nodes=None` seeds the world's nodes
    (see `use_world`), `nodes=[]` none; `extra_crds` are installed beside the world's CRDs;
    `cluster=True` starts every simulated controller (an iterable: only those); `manual_clock=True`
    stops time until the test moves it with `RunningSandbox.advance`; `authorization="RBAC"` enforces
    Roles and bindings; `local_images` run their pods as real processes (root only), and so do pods whose commands can run
    on this machine with `local_commands=True`; `clock` replaces the sandbox's (a ScaledClock: the
    cluster's own time)."""
    tmpdir = tempfile.TemporaryDirectory(prefix="kaiwo-sandbox-")
    config = SandboxConfig(port=port, nodes=list(_world.nodes if nodes is None else nodes), cluster=cluster,
                           time_factor=time_factor, cluster_settings=cluster_settings, state_dir=state_dir,
                           kubeconfig_path=Path(tmpdir.name) / "kubeconfig", bookmark_interval=bookmark_interval,
                           install_crds=install_crds, extra_crds=[*_world.crds, *(extra_crds or [])], tls=tls,
                           manual_clock=manual_clock, authorization=authorization, local_images=list(local_images),
                           local_commands=local_commands, clock=clock)
    loop = new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="kaiwo-sandbox", daemon=True)
    thread.start()
    sandbox_box: list[Sandbox] = []

    async def boot() -> None:
        sandbox = Sandbox(config)  # built on the loop thread: the store belongs to that loop
        sandbox_box.append(sandbox)
        await sandbox.start()

    try:
        asyncio.run_coroutine_threadsafe(boot(), loop).result(START_TIMEOUT)
    except BaseException:
        if sandbox_box:
            asyncio.run_coroutine_threadsafe(sandbox_box[0].stop(), loop).result(START_TIMEOUT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        tmpdir.cleanup()
        raise
    return RunningSandbox(sandbox_box[0], loop, thread, tmpdir)


def eventually(check: Callable[[], T | None], timeout: float = 5.0, message: str = "", *,
               interval: float = 0.01, ignoring: Callable[[Exception], bool] | None = None) -> T:
    """Poll `check` until it returns something truthy, which is returned; AssertionError naming `message`
    and the last value seen once `timeout` seconds have passed (check runs at least once, and once more
    at the deadline). An exception for which `ignoring(err)` is true counts as "not yet" (a transient
    API error in a suite that injects faults); any other propagates. The sleep is the polling period
    under a deadline, never synchronisation by itself."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = check()
            if value:
                return value
            last = value
        except Exception as err:
            if ignoring is None or not ignoring(err):
                raise
            last = f"{type(err).__name__}: {err}"
        if time.monotonic() >= deadline:
            raise AssertionError(f"{message or 'condition'} not met within {timeout}s (last value: {last!r})")
        time.sleep(interval)


def polling(*, timeout: float = 5.0, interval: float = 0.01,
            ignoring: Callable[[Exception], bool] | None = None) -> Callable[..., Any]:
    """`eventually` with other defaults, for a suite whose waits are longer or coarser (real Ray,
    subprocesses, fault injection): `wait_for = polling(timeout=60.0, interval=0.1)`."""
    def wait(check: Callable[[], T | None], timeout: float = timeout, message: str = "", *,
             interval: float = interval) -> T:
        return eventually(check, timeout, message, interval=interval, ignoring=ignoring)

    return wait
