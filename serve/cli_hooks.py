"""The admin API's switches on `kaiwo-ray up` and `kaiwo-ray dev`, kept light: Ray Serve is imported
only when the API is actually started (the CLI module is imported by `kaiwo-ray --help`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

DEFAULT_PORT = 8000


def add_cli_arguments(parser: Any, *, default_auth: str) -> None:
    """`--admin-port/--admin-host/--admin-auth/--no-admin` for `kaiwo-ray up` and `kaiwo-ray dev`."""
    parser.add_argument("--admin-host", default="127.0.0.1", help="admin API address (default: 127.0.0.1)")
    parser.add_argument("--admin-port", type=int, default=DEFAULT_PORT, help=f"admin API port (default: {DEFAULT_PORT})")
    parser.add_argument("--admin-auth", choices=("kubernetes", "none"), default=default_auth,
                        help="admin API authentication: kubernetes (TokenReview + SubjectAccessReview) or none "
                             f"(a localhost dev loop only; default: {default_auth})")
    parser.add_argument("--no-admin", action="store_true", help="do not start the admin API on Ray Serve")


def start_from_cli(args: Any, *, kubeconfig: str | None, in_cluster: bool, ray_namespace: str,
                   aggregated_port: int | None = None) -> str | None:
    """Start the admin API as the CLI asked; its URL, or None when disabled or it failed (printed).
    `aggregated_port`: also open the aggregated listener on 127.0.0.1 of that port (`kaiwo-ray dev`)."""
    if getattr(args, "no_admin", False):
        return None
    if args.admin_auth == "none" and args.admin_host not in ("127.0.0.1", "localhost", "::1"):
        print(f"admin API not started: --admin-auth none is for localhost only (--admin-host {args.admin_host})",
              file=sys.stderr, flush=True)
        return None
    from serve.deployment import AdminOptions, start_admin

    options = AdminOptions(kubeconfig=kubeconfig, in_cluster=in_cluster, auth=args.admin_auth,
                           ray_namespace=ray_namespace,
                           aggregated_bind=f"127.0.0.1:{aggregated_port}" if aggregated_port else None)
    try:
        return start_admin(options, host=args.admin_host, port=args.admin_port)
    except Exception as err:  # the operator runs on without its HTTP face; say why
        print(f"admin API not started: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        return None


def stop_admin() -> None:
    from serve.deployment import stop_admin as stop

    stop()


def add_metrics_arguments(parser: Any) -> None:
    """controller-runtime's metrics server flags (kubebuilder's cmd/main.go), on `kaiwo-ray up`."""
    group = parser.add_argument_group("operator metrics endpoint (controller-runtime's)")
    group.add_argument("--metrics-bind-address", default="0", metavar="ADDR",
                       help="address the operator's /metrics listens on, e.g. :8443 (default: 0, off)")
    group.add_argument("--metrics-secure", action=argparse.BooleanOptionalAction, default=True,
                       help="serve /metrics over HTTPS, each scrape authenticated (TokenReview) and authorized "
                            "(SubjectAccessReview: get on /metrics); --no-metrics-secure: plain HTTP (default: on)")
    group.add_argument("--metrics-cert-dir", metavar="DIR",
                       help="directory with tls.crt and tls.key for --metrics-secure (default: self-signed)")


def start_metrics_from_cli(args: Any, sources: Any) -> Any:
    """The metrics server as the flags ask (a started serve.metrics_server.MetricsServer), or None when
    --metrics-bind-address is 0. ValueError/RuntimeError say why it cannot start."""
    from serve.metrics_server import MetricsServer, MetricsServerOptions, parse_bind_address

    if parse_bind_address(args.metrics_bind_address) is None:
        return None
    server = MetricsServer(MetricsServerOptions(bind_address=args.metrics_bind_address, secure=args.metrics_secure,
                                                cert_dir=args.metrics_cert_dir), sources)
    server.start()
    return server
