"""The admission webhooks served over TLS from the operator's process, as controller-runtime's webhook
server does (port 9443, in the manager, certificate reloaded by its certwatcher): the webhook app
(serve/webhooks.py) under uvicorn on a thread with its own event loop, beside the admin API in its
Serve replica on the head (serve/deployment.py), and in `kaiwo-ray dev`'s process.

Not a Ray Serve application: Serve's proxy takes one TLS certificate for every application at start
(the admin API would turn HTTPS with it) and cannot swap it without restarting the proxy, which drops
admissions in flight; and its proxy-to-replica hop costs every Job create time the API server waits
(benchmarks/webhooks.py measures both).

Rotation: the certificate comes from a Secret kept by serve/webhook_certs.py, checked every
`check_seconds`; a new one is loaded into the live SSL context `switch_seconds` after the caBundle that
trusts it was written (the old one, trusted by both bundles, serves meanwhile), so new handshakes present
it while connections already open keep theirs, and nothing restarts.

With cert-manager (webhook_certs.detect_source, asked at start and at each check) the Secret is
cert-manager's: the server
waits for its first issuance, reads it every `min(check_seconds, 60 s)`, and loads a renewed certificate
at once when its CA is the one the caBundle already trusts (cert-manager's CA issuer keeps its CA across
renewals), else once the cainjector has put the new CA into the caBundle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn

from kaiwo_ray.admission import certs
from kaiwo_ray.admission.workloads import Settings
from kaiwo_ray.kube.client import KubeClient
from serve import webhook_metrics
from serve.metrics_server import parse_bind_address
from serve.webhook_certs import (
    DEFAULT_NAMESPACE,
    DEFAULT_SECRET,
    DEFAULT_SERVICE,
    CertificateNotIssued,
    CertKeeper,
    CertManagerSource,
    CertSettings,
    detect_source,
)
from serve.webhooks import build_webhook_app, settings_from_env

log = logging.getLogger(__name__)

DEFAULT_PORT = 9443  # controller-runtime's webhook server port; the Service maps 443 to it
CHECK_SECONDS = 600.0
SWITCH_SECONDS = 30.0
CERT_MANAGER_CHECK_SECONDS = 60.0  # a GET of one Secret: cheap enough to notice a renewal within a minute
ISSUE_POLL_SECONDS = 1.0  # at start, how often to look for cert-manager's first issuance
"""How long a new certificate waits before this server presents it: the caBundle trusting it was written
first, but an API server reads configurations from an informer cache, and a request that read them before
the change verifies against the old bundle for up to its webhook timeout (5 s)."""


@dataclass(frozen=True, slots=True)
class WebhookServerOptions:
    bind_address: str = f":{DEFAULT_PORT}"
    certs: CertSettings = field(default_factory=CertSettings)
    check_seconds: float = CHECK_SECONDS
    switch_seconds: float = SWITCH_SECONDS
    admission: Settings | None = None
    """The admission settings (None: from the environment, serve.webhooks.settings_from_env)."""


ClientFactory = Callable[[], Awaitable[KubeClient]]


class WebhookServer:
    """Start with `start()` (returns once it listens with a certificate whose CA is in the caBundle)."""

    def __init__(self, options: WebhookServerOptions, client: ClientFactory) -> None:
        where = parse_bind_address(options.bind_address)
        if where is None:
            raise ValueError("webhook server disabled (bind address 0)")
        self.host, self.port = where
        self.options = options
        self._client_factory = client
        self._tmp = tempfile.mkdtemp(prefix="kaiwo-webhook-cert-")
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.set_alpn_protocols(["http/1.1"])
        self._loop: asyncio.AbstractEventLoop | None = None
        self._keeper: CertKeeper | CertManagerSource | None = None
        self.certificate: str | None = None
        """The cert-manager Certificate that keeps our Secret (None: this server keeps it itself)."""
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self.serving: certs.Bundle | None = None
        self._next: certs.Bundle | None = None
        self._behind = False  # cert-manager's Secret holds a certificate not presented yet
        self._client: KubeClient | None = None
        self.error = ""

    @property
    def keeper(self) -> str:
        """Who keeps the certificate: "cert-manager" or "operator" (this server)."""
        return "operator" if self.certificate is None else "cert-manager"

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"https://{host}:{self.port}"

    def _load(self, bundle: certs.Bundle) -> None:
        """Into the live context: later handshakes present it (files only because OpenSSL reads files)."""
        cert, key = Path(self._tmp) / "tls.crt", Path(self._tmp) / "tls.key"
        cert.write_bytes(bundle.cert_pem)
        key.touch(mode=0o600)
        key.write_bytes(bundle.key_pem)
        self._context.load_cert_chain(cert, key)
        self.serving = bundle

    async def _refresh(self, *, force: bool = False) -> certs.Bundle:
        """The Secret's certificate (rotated first when due): loaded at once on start, else after
        `switch_seconds`, while the previous one, which both bundles trust, keeps serving."""
        assert self._keeper is not None
        bundle = await self._keeper.ensure(force=force, serving=self.serving)
        if self.serving is None:
            self._load(bundle)
        elif isinstance(self._keeper, CertManagerSource):
            if bundle.cert_pem != self.serving.cert_pem and (
                    bundle.ca_pem == self.serving.ca_pem or await self._keeper.trusted(bundle)):
                self._load(bundle)  # renewed by cert-manager, and the caBundle trusts it: nothing to wait for
            # A certificate from a new CA waits for the cainjector: looked at again within a second.
            self._behind = bundle.cert_pem != self.serving.cert_pem
        elif bundle.cert_pem != self.serving.cert_pem and bundle != self._next:
            self._next = bundle
            asyncio.get_running_loop().call_later(self.options.switch_seconds, self._switch, bundle)
        return bundle

    def _switch(self, bundle: certs.Bundle) -> None:
        if self._next == bundle:  # not overtaken by a later rotation
            self._load(bundle)
            self._next = None

    async def _choose_keeper(self, client: KubeClient) -> None:
        """cert-manager's Certificate, or this server, keeps the certificate: asked at start and at each
        check, so adding or removing deploy/components/webhooks-cert-manager takes effect without a restart
        (the server keeps presenting what it serves until the new keeper's certificate is trusted)."""
        certificate = await detect_source(client, self.options.certs)
        if self._keeper is not None and certificate == self.certificate:
            return
        self.certificate = certificate
        if certificate is None:
            log.info("webhook certificate kept by this server (Secret %s/%s)", self.options.certs.namespace,
                     self.options.certs.secret)
            self._keeper = CertKeeper(client, self.options.certs)
        else:
            log.info("webhook certificate kept by cert-manager (Certificate %s/%s)", self.options.certs.namespace,
                     certificate)
            self._keeper = CertManagerSource(client, self.options.certs, certificate)

    async def _check(self) -> certs.Bundle:
        assert self._client is not None
        await self._choose_keeper(self._client)
        return await self._refresh()

    async def _keep(self) -> None:
        while True:
            period = self.options.check_seconds
            if isinstance(self._keeper, CertManagerSource):
                period = min(period, ISSUE_POLL_SECONDS if self._behind else CERT_MANAGER_CHECK_SECONDS)
            await asyncio.sleep(period)  # a period, not a synchronisation
            try:
                await self._check()
            except Exception:  # the API server away for a while: the current certificate serves on
                log.warning("webhook certificate check failed", exc_info=True)

    async def _main(self, sock: socket.socket) -> None:
        self._loop = asyncio.get_running_loop()
        client = self._client = await self._client_factory()
        try:
            await self._choose_keeper(client)
            while not self._stopping.is_set():
                try:
                    await self._refresh()
                    break
                except CertificateNotIssued as err:  # cert-manager issues within seconds of the install
                    log.info("webhook server waiting for its certificate: %s", err)
                    await asyncio.sleep(ISSUE_POLL_SECONDS)  # a poll under start()'s deadline
            app = build_webhook_app(self.options.admission or settings_from_env())
            config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False,
                                    timeout_graceful_shutdown=2, ssl_context_factory=lambda _c, _d: self._context)
            self._server = uvicorn.Server(config)
            if self._stopping.is_set():
                return
            keeper = asyncio.create_task(self._keep())
            try:
                await self._server.serve(sockets=[sock])
            finally:
                keeper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await keeper
        finally:
            await client.close()

    def _run(self, sock: socket.socket) -> None:
        try:
            asyncio.run(self._main(sock))
        except Exception as err:
            self.error = f"{type(err).__name__}: {err}"
            log.error("webhook server stopped: %s", self.error, exc_info=True)
        finally:
            sock.close()

    def start(self, timeout: float = 60.0) -> str:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # IPPROTO_TCP named, not left 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
        # without it the response's second TLS record waits for the API server's delayed ACK (~40 ms a call).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = int(sock.getsockname()[1])
        sock.listen(2048)
        sock.setblocking(False)
        self._thread = threading.Thread(target=self._run, args=(sock,), name=f"kaiwo-webhooks-{self.port}",
                                        daemon=True)
        self._thread.start()
        webhook_metrics.mark_serving()
        deadline = time.monotonic() + timeout
        while self._server is None or not self._server.started:
            if not self._thread.is_alive():
                self.stop()
                raise RuntimeError(f"webhook server on {self.host}:{self.port} did not start: {self.error}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"webhook server on {self.host}:{self.port} not listening after {timeout:.0f}s")
            self._thread.join(0.05)  # the thread ends on failure: a join is the wait with a wake-up
        return self.url

    def rotate(self, timeout: float = 30.0) -> certs.Bundle:
        """A rotation now (tests; an admin who suspects the key): new Secret, caBundle, then the server."""
        if self._loop is None:
            raise RuntimeError("webhook server not started")
        return asyncio.run_coroutine_threadsafe(self._refresh(force=True), self._loop).result(timeout)

    def check(self, timeout: float = 30.0) -> certs.Bundle:
        """One certificate check now, as the periodic one does."""
        if self._loop is None:
            raise RuntimeError("webhook server not started")
        return asyncio.run_coroutine_threadsafe(self._check(), self._loop).result(timeout)

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        shutil.rmtree(self._tmp, ignore_errors=True)


def options_from_env(env: Mapping[str, str]) -> WebhookServerOptions | None:
    """The deployed operator's switches (deploy/components/webhooks sets them on the head container):
    KAIWO_WEBHOOKS_BIND_ADDRESS (unset or 0: no webhooks), KAIWO_WEBHOOKS_SERVICE, KAIWO_WEBHOOKS_SECRET,
    KAIWO_WEBHOOKS_NAMESPACE (default: the pod's namespace, else kaiwo-system). ValueError naming the variable."""
    address = (env.get("KAIWO_WEBHOOKS_BIND_ADDRESS") or "0").strip()
    try:
        if parse_bind_address(address) is None:
            return None
    except ValueError as err:
        raise ValueError(f"KAIWO_WEBHOOKS_BIND_ADDRESS: {err}") from None
    namespace = env.get("KAIWO_WEBHOOKS_NAMESPACE") or env.get("KAIWO_LEASE_NAMESPACE") or DEFAULT_NAMESPACE
    return WebhookServerOptions(
        bind_address=address,
        certs=CertSettings(namespace=namespace, service=env.get("KAIWO_WEBHOOKS_SERVICE") or DEFAULT_SERVICE,
                           secret=env.get("KAIWO_WEBHOOKS_SECRET") or DEFAULT_SECRET),
        admission=settings_from_env(env))


def client_factory(*, kubeconfig: str | None, in_cluster: bool) -> ClientFactory:
    async def make() -> KubeClient:
        return KubeClient.in_cluster() if in_cluster else await KubeClient.from_kubeconfig(kubeconfig)

    return make


def start_from_env(env: Mapping[str, str] | None, *, kubeconfig: str | None, in_cluster: bool) -> WebhookServer | None:
    """The webhook server the environment asks for, started; None when KAIWO_WEBHOOKS_BIND_ADDRESS is off."""
    options = options_from_env(os.environ if env is None else env)
    if options is None:
        return None
    server = WebhookServer(options, client_factory(kubeconfig=kubeconfig, in_cluster=in_cluster))
    server.start()
    return server
