"""The operator's own metrics endpoint, as controller-runtime's metrics server serves it
(`--metrics-bind-address`, `--metrics-secure`, `--metrics-cert-dir`): GET /metrics with every
controller-runtime series and the kaiwo_* ones (serve/metrics.py's families, the same the admin API
writes), on a port of its own, so the ServiceMonitors and dashboards built for controller-runtime
operators scrape it unchanged.

Secure serving is controller-runtime's `filters.WithAuthenticationAndAuthorization`: TLS (the cert
dir's tls.crt/tls.key, else a self-signed certificate for localhost/127.0.0.1), every request's
Bearer token checked by a TokenReview (401 `Unauthorized` without a valid one), then a
SubjectAccessReview for the non-resource URL (path = the request's path, verb = its method in lower
case; 403 `Authorization denied for user <name>`). Tokens are cached 1 min, allows 5 min, denials 30 s.

It runs on a thread with its own event loop under uvicorn (no Ray Serve): in `kaiwo-ray up`'s process
and in the deployed operator's Serve replica on the head (actors/operator_app.py).
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import logging
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from serve.admin_identity import admin_client
from serve.auth import Access, KubernetesAuth
from serve.cache import ClusterCache
from serve.metrics import AdminMetrics
from serve.state import AdminSettings, GpuSamples, StatsSource

log = logging.getLogger(__name__)

TOKEN_TTL, ALLOW_TTL, DENY_TTL = 60.0, 300.0, 30.0  # controller-runtime's filter caches
CERT_NAME, KEY_NAME = "tls.crt", "tls.key"


def parse_bind_address(address: str) -> tuple[str, int] | None:
    """Go's listen address as controller-runtime takes it: "0" turns the server off, ":8443" listens on
    every interface, "host:port" and "[v6]:port" on that address. ValueError for anything else."""
    text = address.strip()
    if text == "0":
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:  # port 0: any free one, as Go
        raise ValueError(f"metrics bind address {address!r}: expected host:port, :port or 0 (off)")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


@dataclass(frozen=True, slots=True)
class MetricsServerOptions:
    bind_address: str = "0"
    secure: bool = False
    cert_dir: str | None = None
    """Holds tls.crt and tls.key (controller-runtime's CertDir); None: a self-signed certificate."""


@dataclass(slots=True)
class MetricsSources:
    """Where the series come from: the cluster (kaiwo_* from a watch-fed cache) and the controllers."""

    kubeconfig: str | None = None
    in_cluster: bool = False
    stats_source: StatsSource | None = None
    gpu_samples: GpuSamples | None = None
    sync_timeout: float = 60.0
    service_account_dir: str | None = None
    """In a pod: the admin API's own credentials (serve/app.py `admin_client`), whose replica serves this."""


def _unauthorized() -> Response:
    # Go's http.Error: the message, a newline, text/plain and nosniff
    return PlainTextResponse("Unauthorized\n", status_code=401, headers={"X-Content-Type-Options": "nosniff"})


def _plain(text: str, code: int) -> Response:
    return PlainTextResponse(text + "\n", status_code=code, headers={"X-Content-Type-Options": "nosniff"})


def build_metrics_app(sources: MetricsSources, *, secure: bool) -> Starlette:
    state: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        client = await admin_client(AdminSettings(kubeconfig=sources.kubeconfig, in_cluster=sources.in_cluster,
                                                  service_account_dir=sources.service_account_dir))
        cache = ClusterCache(client)
        state["metrics"] = AdminMetrics(cache, sources.stats_source, sources.gpu_samples)
        state["auth"] = KubernetesAuth(client, ttl=TOKEN_TTL, allow_ttl=ALLOW_TTL, deny_ttl=DENY_TTL)
        try:
            await cache.start(sync_timeout=sources.sync_timeout)
            yield
        finally:
            await cache.stop()
            await client.close()

    async def authorize(request: Request) -> Response | None:
        """controller-runtime's filter: None lets the request through, else the refusal."""
        if not secure:
            return None
        auth: KubernetesAuth = state["auth"]
        scheme, _, token = (request.headers.get("authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return _unauthorized()  # anonymous requests are off, as in controller-runtime's filter
        try:
            user = await auth.authenticate(token.strip())
        except Exception:
            log.warning("metrics: TokenReview failed", exc_info=True)
            return _plain("Authentication failed", 500)
        if user is None:
            return _unauthorized()
        try:
            allowed = await auth.allowed(user, Access(verb=request.method.lower(), path=request.url.path))
        except Exception:
            log.warning("metrics: SubjectAccessReview failed", exc_info=True)
            return _plain(f"Authorization for user {user.name} failed", 500)
        return None if allowed else _plain(f"Authorization denied for user {user.name}", 403)

    async def metrics(request: Request) -> Response:
        refused = await authorize(request)
        if refused is not None:
            return refused
        body, content_type = await state["metrics"].render()
        return Response(body, media_type=content_type)

    async def elsewhere(request: Request) -> Response:
        # the filter wraps the whole server: every path is authenticated before it is found missing
        return await authorize(request) or _plain("404 page not found", 404)

    methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    app = Starlette(routes=[Route("/metrics", metrics, methods=["GET"]),
                            Route("/{path:path}", elsewhere, methods=methods)], lifespan=lifespan)
    return app


def self_signed(directory: Path) -> tuple[Path, Path]:
    """controller-runtime's fallback: a self-signed certificate for localhost and 127.0.0.1, written
    (0600, in a private directory) only because uvicorn loads certificates from files. `cryptography`
    mints it: a dependency of the kubernetes client's google-auth, named by the operator only in the
    sandbox extra, so its absence is said, with the way around it."""
    try:
        import cryptography  # noqa: F401
    except ImportError:
        raise ValueError("a self-signed certificate needs the cryptography package: install it, or give a "
                         "certificate directory (--metrics-cert-dir, KAIWO_METRICS_CERT_DIR)") from None
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kaiwo-ray-metrics")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / CERT_NAME, directory / KEY_NAME
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.touch(mode=0o600)
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


class MetricsServer:
    """The endpoint on a thread of this process; `start()` returns once it listens (and its cache synced)."""

    def __init__(self, options: MetricsServerOptions, sources: MetricsSources) -> None:
        where = parse_bind_address(options.bind_address)
        if where is None:
            raise ValueError("metrics server disabled (bind address 0)")
        self.host, self.port = where
        self.options = options
        self.sources = sources
        self._tmp: str | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.options.secure else 'http'}://{host}:{self.port}/metrics"

    def _tls(self) -> dict[str, Any]:
        if not self.options.secure:
            return {}
        if self.options.cert_dir:
            cert, key = Path(self.options.cert_dir) / CERT_NAME, Path(self.options.cert_dir) / KEY_NAME
            for path in (cert, key):
                if not path.is_file():
                    raise ValueError(f"--metrics-cert-dir: {path} does not exist")
        else:
            self._tmp = tempfile.mkdtemp(prefix="kaiwo-metrics-cert-")
            cert, key = self_signed(Path(self._tmp))
        return {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}

    def start(self, timeout: float = 90.0) -> str:
        if self.port == 0:  # an ephemeral port, known before uvicorn binds it (tests)
            with socket.socket() as sock:
                sock.bind((self.host, 0))
                self.port = sock.getsockname()[1]
        app = build_metrics_app(self.sources, secure=self.options.secure)
        config = uvicorn.Config(app, host=self.host, port=self.port, log_level="warning", lifespan="on",
                                timeout_graceful_shutdown=2, access_log=False, **self._tls())
        self._server = server = uvicorn.Server(config)
        self._thread = threading.Thread(target=server.run, name=f"kaiwo-metrics-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not self._thread.is_alive():
                self.stop()
                raise RuntimeError(f"metrics server on {self.host}:{self.port} did not start (see the log)")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"metrics server on {self.host}:{self.port} not listening after {timeout:.0f}s")
            self._thread.join(0.05)  # the thread ends on failure: a join is the wait with a wake-up
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


def options_from_env(env: Mapping[str, str]) -> MetricsServerOptions | None:
    """The deployed operator's switches (the head container's environment, read by the admin API's
    replica): KAIWO_METRICS_BIND_ADDRESS (unset or 0: off), KAIWO_METRICS_SECURE (default true, as
    kubebuilder's --metrics-secure), KAIWO_METRICS_CERT_DIR. ValueError naming the variable."""
    address = (env.get("KAIWO_METRICS_BIND_ADDRESS") or "0").strip()
    try:
        if parse_bind_address(address) is None:
            return None
    except ValueError as err:
        raise ValueError(f"KAIWO_METRICS_BIND_ADDRESS: {err}") from None
    secure = (env.get("KAIWO_METRICS_SECURE") or "true").strip().lower()
    if secure not in ("true", "false", "1", "0", "yes", "no"):
        raise ValueError(f"KAIWO_METRICS_SECURE={secure!r}: true or false")
    return MetricsServerOptions(bind_address=address, secure=secure in ("true", "1", "yes"),
                                cert_dir=env.get("KAIWO_METRICS_CERT_DIR") or None)
