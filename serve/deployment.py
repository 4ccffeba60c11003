"""The admin API as a Ray Serve application.

From Python (what `kaiwo-ray up` and `kaiwo-ray dev` do):

    url = start_admin(AdminOptions(kubeconfig="/abs/kubeconfig", auth="none"))   # after ray.init()
    ...
    stop_admin()

From a Serve config file: `serve deploy serve/config.yaml` (or `serve run serve/config.yaml`), whose
application names `serve.deployment:app_builder` and passes the same options as `args`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ray import serve
from ray.serve import Application

from serve.app import build_app
from serve.metrics_server import MetricsServer, MetricsSources, options_from_env
from serve.ray_stats import actor_stats_source
from serve.state import AdminSettings

APP_NAME = "kaiwo-admin"
# The admin API's own ServiceAccount token, mounted into the head (deploy/base/rayservice.yaml).
SERVICE_ACCOUNT_DIR_VARIABLE = "KAIWO_ADMIN_API_SERVICE_ACCOUNT_DIR"
DEFAULT_PORT = 8000


@dataclass(frozen=True, slots=True)
class AdminOptions:
    """What the Serve application is built from (plain values: they travel to the replicas)."""

    kubeconfig: str | None = None
    in_cluster: bool = False
    auth: Literal["kubernetes", "none"] = "kubernetes"
    ray_namespace: str | None = "kaiwo"
    """Controller actors to read /metrics stats from (None: no controller series)."""
    max_body_bytes: int = 1 << 20
    tune_gc: bool = True
    """A replica is a long-lived server holding large caches (see hosts.runtime.gc_tuning)."""
    aggregated_bind: str | None = None
    """The aggregated API's TLS listener (serve/aggregated.py), e.g. ":8443"; else $KAIWO_AGGREGATED_API_BIND_ADDRESS."""
    aggregated_cert_dir: str | None = None
    """Its tls.crt/tls.key; else $KAIWO_AGGREGATED_API_CERT_DIR; else self-signed."""

    def settings(self, env: Mapping[str, str] | None = None) -> AdminSettings:
        """The app's settings; the aggregated listener's from `env` where the options leave them unset
        (the deployed head sets them in its environment: deploy/components/aggregated-api)."""
        env = env if env is not None else {}
        bind = self.aggregated_bind or (env.get("KAIWO_AGGREGATED_API_BIND_ADDRESS") or "").strip() or None
        return AdminSettings(kubeconfig=self.kubeconfig, in_cluster=self.in_cluster, auth=self.auth,
                             ray_namespace=self.ray_namespace, max_body_bytes=self.max_body_bytes,
                             tune_gc=self.tune_gc, aggregated_bind=None if bind == "0" else bind,
                             aggregated_cert_dir=self.aggregated_cert_dir
                             or env.get("KAIWO_AGGREGATED_API_CERT_DIR") or None,
                             service_account_dir=(env.get(SERVICE_ACCOUNT_DIR_VARIABLE) or "").strip() or None)


@serve.deployment(name="AdminAPI", ray_actor_options={"num_cpus": 0}, max_ongoing_requests=256,
                  health_check_period_s=10,
                  # one log line per request would cost more than the request on a busy machine
                  logging_config={"enable_access_log": False, "log_level": "WARNING"})
@serve.ingress()
class AdminAPI:
    """One replica = one FastAPI app with its own watch-fed cache (its lifespan starts the watches)."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = AdminOptions(**options)
        self.metrics = start_metrics_from_env(self.options, os.environ)
        # deploy/components/webhooks turns this on (KAIWO_WEBHOOKS_BIND_ADDRESS): the admission webhooks
        # over TLS from this replica's process, beside the admin API (serve/webhook_server.py says why
        # not as a Serve application).
        from serve.webhook_server import start_from_env

        self.webhooks = start_from_env(os.environ, kubeconfig=self.options.kubeconfig,
                                       in_cluster=self.options.in_cluster)

    def __serve_build_asgi_app__(self) -> Any:
        return build_app(self.options.settings(os.environ))


def start_metrics_from_env(options: AdminOptions, env: Mapping[str, str]) -> MetricsServer | None:
    """The operator's own metrics endpoint in a deployed operator (KAIWO_METRICS_BIND_ADDRESS, see
    serve.metrics_server.options_from_env): served from this replica, which runs on the head, with the
    controller actors' stats and the telemetry aggregator's readings. A bad setting fails the replica,
    named; a port already taken too."""
    metrics_options = options_from_env(env)
    if metrics_options is None:
        return None
    from serve.telemetry_samples import AggregatorSamples

    ray_namespace = options.ray_namespace or ""
    sources = MetricsSources(kubeconfig=options.kubeconfig, in_cluster=options.in_cluster,
                             service_account_dir=options.settings(env).service_account_dir,
                             stats_source=actor_stats_source(ray_namespace) if ray_namespace else None,
                             gpu_samples=AggregatorSamples(ray_namespace) if ray_namespace else None)
    server = MetricsServer(metrics_options, sources)
    server.start()
    return server


def application(options: AdminOptions) -> Application:
    app: Application = AdminAPI.bind(asdict(options))  # type: ignore[attr-defined]
    return app


def app_builder(args: dict[str, Any]) -> Application:
    """Entry point for Serve config files (`import_path: serve.deployment:app_builder`)."""
    known = {k: v for k, v in args.items() if k in AdminOptions.__dataclass_fields__}
    unknown = sorted(set(args) - set(known))
    if unknown:
        raise ValueError(f"unknown admin API option(s) {', '.join(unknown)} "
                         f"(known: {', '.join(AdminOptions.__dataclass_fields__)})")
    return application(AdminOptions(**known))


def start_admin(options: AdminOptions, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> str:
    """Start Serve's HTTP proxy on host:port and deploy the admin API at /; returns its URL.
    Waits until the replica's cache has synced (Serve runs the app's lifespan before it is ready)."""
    # Idle connections kept 75 s (Serve's default is 5): dashboards and API clients poll every few seconds,
    # and a connection closed by the server just as a client reuses it costs that client an error.
    serve.start(http_options={"host": host, "port": port, "keep_alive_timeout_s": 75})
    serve.run(application(options), name=APP_NAME, route_prefix="/", blocking=False)
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    return f"http://{shown}:{port}"


def stop_admin() -> None:
    """Tear down the application and Serve (its proxy and controller actors)."""
    serve.shutdown()  # type: ignore[no-untyped-call]

