"""The GPU telemetry, resource-monitoring and GPU-preemption switches of `kaiwo-ray up|dev`, kept out of up.py and
dev.py so that their hooks stay a few lines: `add_arguments`, `configure` (fills HostSettings and
checks values), `start_fleet` / `stop_fleet` (the per-node telemetry actors on Ray)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any

from kaiwo_ray.controllers.manager import HostSettings


def add_arguments(parser: argparse.ArgumentParser, *, dev: bool) -> None:
    group = parser.add_argument_group("GPU telemetry and resource monitoring")
    group.add_argument("--telemetry-backend", choices=("auto", "nvidia", "amd", "sandbox", "none", "off"),
                       default="sandbox" if dev else "auto",
                       help="GPU telemetry source per Ray node ('off': no telemetry actors; default: %(default)s)")
    group.add_argument("--telemetry-interval", type=float, default=1.0, metavar="SECONDS",
                       help="seconds between GPU samples (default: 1)")
    group.add_argument("--metrics-port", type=int, default=0, metavar="PORT",
                       help="port of the GPU /metrics endpoint (default: any free port)")
    group.add_argument("--metrics-host", default="127.0.0.1", metavar="ADDR",
                       help="address the GPU /metrics endpoint listens on (0.0.0.0 for a Prometheus scrape; "
                            "default: 127.0.0.1)")
    group.add_argument("--resource-monitoring", action=argparse.BooleanOptionalAction, default=True if dev else None,
                       help="evaluate GPU utilization of KaiwoJobs/KaiwoServices (default: "
                            + ("on" if dev else "$RESOURCE_MONITORING_ENABLED") + ")")
    group.add_argument("--resource-monitoring-endpoint", metavar="URL",
                       help="scrape this Prometheus endpoint instead of our telemetry "
                            "(default: $RESOURCE_MONITORING_METRICS_ENDPOINT)")
    group.add_argument("--resource-monitoring-interval", metavar="DURATION",
                       help="polling interval, e.g. 10s (default: $RESOURCE_MONITORING_POLLING_INTERVAL, else 10s)")
    group.add_argument("--gpu-preemption", action=argparse.BooleanOptionalAction, default=True if dev else None,
                       help="track GPU workloads (GpuWorkload) and preempt idle ones (default: "
                            + ("on" if dev else "$GPU_PREEMPTION_ENABLED") + ")")
    group.add_argument("--gpu-preemption-endpoint", metavar="URL",
                       help="scrape this Prometheus endpoint instead of our telemetry "
                            "(default: $GPU_PREEMPTION_METRICS_ENDPOINT)")
    group.add_argument("--gpu-preemption-interval", metavar="DURATION",
                       help="polling interval, e.g. 15s (default: $GPU_PREEMPTION_POLLING_INTERVAL, else 15s)")
    group.add_argument("--gpu-accounting", action=argparse.BooleanOptionalAction, default=True if dev else None,
                       help="account GPU-hours per workload, user and queue (docs/accounting.md; default: "
                            + ("on" if dev else "$GPU_ACCOUNTING_ENABLED") + ")")


def configure(args: argparse.Namespace, settings: HostSettings) -> str | None:
    """Put the monitor's settings into `settings`; the problem in one line when a value is unusable."""
    from kaiwo_ray.controllers.accounting import AccountingSettings
    from kaiwo_ray.controllers.gpupreemption import GpuPreemptionSettings
    from kaiwo_ray.controllers.monitoring import MonitorSettings

    if args.telemetry_interval <= 0:
        return "--telemetry-interval must be greater than 0"
    env = dict(os.environ)
    if args.resource_monitoring is not None:
        env["RESOURCE_MONITORING_ENABLED"] = "true" if args.resource_monitoring else "false"
    if args.resource_monitoring_endpoint is not None:
        env["RESOURCE_MONITORING_METRICS_ENDPOINT"] = args.resource_monitoring_endpoint
    if args.resource_monitoring_interval is not None:
        env["RESOURCE_MONITORING_POLLING_INTERVAL"] = args.resource_monitoring_interval
    if args.gpu_preemption is not None:
        env["GPU_PREEMPTION_ENABLED"] = "true" if args.gpu_preemption else "false"
    if args.gpu_preemption_endpoint is not None:
        env["GPU_PREEMPTION_METRICS_ENDPOINT"] = args.gpu_preemption_endpoint
    if args.gpu_preemption_interval is not None:
        env["GPU_PREEMPTION_POLLING_INTERVAL"] = args.gpu_preemption_interval
    if getattr(args, "gpu_accounting", None) is not None:
        env["GPU_ACCOUNTING_ENABLED"] = "true" if args.gpu_accounting else "false"
    env.setdefault("GPU_ACCOUNTING_INTERVAL", f"{args.telemetry_interval}s")
    try:
        monitor = MonitorSettings.from_env(env)
        preemption = GpuPreemptionSettings.from_env(env, lease_namespace=settings.lease_namespace)
        accounting = AccountingSettings.from_env(env, namespace=settings.lease_namespace)
    except ValueError as err:
        return str(err)
    settings.controller_options.setdefault("resourcemonitor", {})["settings"] = monitor
    settings.controller_options.setdefault("gpuworkload", {})["settings"] = preemption
    settings.controller_options.setdefault("accounting", {})["settings"] = accounting
    return None


def start_fleet(args: argparse.Namespace, settings: HostSettings, namespace: str, *, detached: bool) -> Any:
    """The telemetry actors and aggregator, or None with `--telemetry-backend off`."""
    if args.telemetry_backend == "off":
        return None
    from actors.telemetry import TelemetryFleet
    from kaiwo_ray.telemetry.settings import TelemetrySettings

    fleet = TelemetryFleet(TelemetrySettings(backend=args.telemetry_backend, interval=args.telemetry_interval,
                                             kubeconfig=settings.kubeconfig, in_cluster=settings.in_cluster,
                                             metrics_host=args.metrics_host, metrics_port=args.metrics_port),
                           namespace=namespace, detached=detached).start()
    with contextlib.suppress(Exception):
        print(f"GPU telemetry ({args.telemetry_backend}): metrics at {fleet.metrics_address()}", flush=True)
    return fleet


def stop_fleet(fleet: Any) -> None:
    if fleet is not None:
        try:
            fleet.stop()
        except Exception as err:  # Ray already gone: the actors went with it
            print(f"telemetry: {err}", file=sys.stderr)
