"""The operator as a Ray Serve application (`actors.operator_app:app`), what deploy/'s RayService runs:
its one replica does what `kaiwo-ray up --in-cluster` does — starts the controller actors (detached, so a
replica restart adopts them instead of starting a second set), recreates any that are gone for good,
and keeps the GPU telemetry fleet (actors/telemetry.py: one TelemetryActor pinned on every Ray node of
the gpu-telemetry worker group, following nodes as they join and leave, and the aggregator) — and answers `GET /operator/healthz` with their health (503 while any is down), which is also its Serve
health check, so KubeRay sees an unhealthy operator as an unhealthy application.

Settings come from the pod's environment (deploy/base/rayservice.yaml sets them):
    KAIWO_IN_CLUSTER        "true": the pod's service account (the default); "false": KUBECONFIG
    KAIWO_LEASE_NAMESPACE   the Leases' namespace (default: the pod's own, else kaiwo-system)
    KAIWO_CONTROLLERS       a,b: run only these (default: all but the opt-in features that are off)
    RESOURCE_MONITORING_*, GPU_PREEMPTION_*, GPU_ACCOUNTING_*   the opt-in features, as upstream Kaiwo reads them
                            (docs/install.md); GPU preemption's Lease defaults to the Leases' namespace
    KAIWO_RAY_NAMESPACE     Ray namespace of the named actors (default: kaiwo)
    KAIWO_ACTOR_RESOURCES   JSON {resource: amount} each controller actor asks for (deploy/: Ray's
                            `node:__internal_head__`, so no controller is placed on a GPU telemetry worker);
                            the telemetry aggregator asks for the same
    KAIWO_TELEMETRY_BACKEND auto (default) | nvidia | amd | none | sandbox | off (no telemetry actors)
    KAIWO_TELEMETRY_NODE_RESOURCE   the Ray resource that marks a telemetry node (default
                            kaiwo_gpu_telemetry, deploy/components/telemetry/worker-group.yaml)
    KAIWO_TELEMETRY_INTERVAL        seconds between GPU samples (default 1)
    KAIWO_TELEMETRY_METRICS_PORT    where the aggregator serves the per-GPU series (deploy/: 9400; unset: not served)
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hosts.runtime.cpu_policy import batch_wanted
from hosts.runtime.operator_runtime import ActorHealth, parse_controller_names
from kaiwo_ray.controllers.accounting import AccountingSettings
from kaiwo_ray.controllers.gpupreemption import GpuPreemptionSettings
from kaiwo_ray.controllers.manager import HostSettings, default_controller_names
from kaiwo_ray.controllers.monitoring import MonitorSettings
from kaiwo_ray.telemetry.settings import TelemetrySettings

if TYPE_CHECKING:  # imported where used: it imports Ray
    from actors.telemetry import TelemetryFleet

log = logging.getLogger(__name__)

SUPERVISE_SECONDS = 10.0
DEFAULT_LEASE_NAMESPACE = "kaiwo-system"


def settings_from_env(env: Mapping[str, str]) -> tuple[HostSettings, list[str], str]:
    """(host settings, controller names, Ray namespace) from the environment; ValueError when they are wrong."""
    wanted = env.get("KAIWO_CONTROLLERS") or None
    names = parse_controller_names(wanted)
    settings = HostSettings(tune_gc=True, batch_scheduling=batch_wanted(env))
    if (env.get("KAIWO_IN_CLUSTER") or "true").lower() in ("1", "true", "yes"):
        from kaiwo_ray.kube import incluster

        config = incluster.load(env)
        settings.in_cluster = True
        settings.lease_namespace = env.get("KAIWO_LEASE_NAMESPACE") or config.namespace() or DEFAULT_LEASE_NAMESPACE
    else:
        settings.kubeconfig = env.get("KUBECONFIG") or None
        settings.lease_namespace = env.get("KAIWO_LEASE_NAMESPACE") or settings.lease_namespace
    # Read here, not in each actor: a bad value stops the replica with the variable named, and the
    # preemption Lease lands where the operator's Role allows Leases.
    ray_namespace = env.get("KAIWO_RAY_NAMESPACE") or "kaiwo"
    monitor = MonitorSettings.from_env(env)
    preemption = GpuPreemptionSettings.from_env(env, lease_namespace=settings.lease_namespace)
    # The telemetry aggregator is found by name in the operator's Ray namespace, named here: a controller
    # actor runs under this Serve replica's job, whose own namespace is Serve's.
    settings.controller_options = {
        "resourcemonitor": {"settings": monitor, **_native_source(monitor.endpoint, ray_namespace)},
        "gpuworkload": {"settings": preemption, **_native_source(preemption.endpoint, ray_namespace)},
        "accounting": {"settings": AccountingSettings.from_env(env, namespace=settings.lease_namespace),
                       **_aggregator_feed(ray_namespace)}}
    if wanted is None:  # as `kaiwo-ray up`: an opt-in feature's controller only when it is on
        names = default_controller_names(settings)
    return settings, names, ray_namespace


def _native_source(endpoint: str, ray_namespace: str) -> dict[str, Any]:
    """`source=` for a monitoring controller reading our telemetry (none where it scrapes an endpoint)."""
    if endpoint:
        return {}
    from kaiwo_ray.telemetry.sources import NativeSource

    return {"source": NativeSource(ray_namespace)}


def _aggregator_feed(ray_namespace: str) -> dict[str, Any]:
    """`feed=` for the GPU ledger: the telemetry aggregator of the operator's Ray namespace."""
    from kaiwo_ray.telemetry.sources import AggregatorFeed

    return {"feed": AggregatorFeed(ray_namespace)}


def actor_resources(env: Mapping[str, str]) -> dict[str, float]:
    """KAIWO_ACTOR_RESOURCES as a dict; ValueError naming the variable when it is not a JSON object of numbers."""
    raw = env.get("KAIWO_ACTOR_RESOURCES") or ""
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as err:
        raise ValueError(f"KAIWO_ACTOR_RESOURCES is not JSON: {err}") from None
    if not isinstance(parsed, dict) or not all(isinstance(v, int | float) for v in parsed.values()):
        raise ValueError('KAIWO_ACTOR_RESOURCES must be a JSON object of numbers, e.g. '
                         '{"node:__internal_head__": 0.001}')
    return {str(k): float(v) for k, v in parsed.items()}


TELEMETRY_NODE_RESOURCE = "kaiwo_gpu_telemetry"
TELEMETRY_BACKENDS = ("auto", "nvidia", "amd", "none", "sandbox", "off")


def telemetry_settings_from_env(env: Mapping[str, str], settings: HostSettings) -> TelemetrySettings | None:
    """The telemetry fleet's settings (None: KAIWO_TELEMETRY_BACKEND=off); ValueError naming the variable.
    The aggregator serves the per-GPU series on KAIWO_TELEMETRY_METRICS_PORT (deploy/: 9400, port `gpu-metrics`
    of the head, which the PodMonitor scrapes); without it, only the admin API's per-node GPU series exist."""
    backend = (env.get("KAIWO_TELEMETRY_BACKEND") or "auto").strip().lower()
    if backend not in TELEMETRY_BACKENDS:
        raise ValueError(f"KAIWO_TELEMETRY_BACKEND={backend!r}: choose from {', '.join(TELEMETRY_BACKENDS)}")
    if backend == "off":
        return None
    text = env.get("KAIWO_TELEMETRY_INTERVAL") or "1"
    try:
        interval = float(text)
    except ValueError:
        interval = 0.0
    if not interval > 0:
        raise ValueError(f"KAIWO_TELEMETRY_INTERVAL={text!r}: must be a number of seconds greater than 0")
    port_text = (env.get("KAIWO_TELEMETRY_METRICS_PORT") or "").strip()
    if port_text and not (port_text.isdigit() and 0 < int(port_text) < 65536):
        raise ValueError(f"KAIWO_TELEMETRY_METRICS_PORT={port_text!r}: must be a port number (1-65535)")
    return TelemetrySettings(backend=backend, interval=interval, kubeconfig=settings.kubeconfig,
                             in_cluster=settings.in_cluster, metrics_host="0.0.0.0",
                             metrics_port=int(port_text) if port_text else None,
                             node_resource=env.get("KAIWO_TELEMETRY_NODE_RESOURCE") or TELEMETRY_NODE_RESOURCE,
                             aggregator_resources=actor_resources(env))


def start_telemetry(env: Mapping[str, str], settings: HostSettings, namespace: str) -> TelemetryFleet | None:
    """The deployed operator's telemetry fleet, started (detached actors: a new replica adopts them by name)."""
    from actors.telemetry import TelemetryFleet

    telemetry = telemetry_settings_from_env(env, settings)
    if telemetry is None:
        return None
    return TelemetryFleet(telemetry, namespace=namespace, detached=True).start()


def health_body(rows: list[ActorHealth], error: str = "") -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON body) of /operator/healthz: 200 when every controller is alive and started."""
    healthy = not error and bool(rows) and all(r.alive and r.started for r in rows)
    body: dict[str, Any] = {"healthy": healthy, "controllers": [r.model_dump() for r in rows]}
    if error:
        body["error"] = error
    return (200 if healthy else 503), body


class OperatorApp:
    """The Serve deployment's class (wrapped by `serve.deployment` below; plain, so it is testable)."""

    def __init__(self) -> None:
        from actors.supervisor import Supervisor

        settings, names, namespace = settings_from_env(os.environ)
        self.settings, self.namespace = settings, namespace
        telemetry_settings_from_env(os.environ, settings)  # a bad value fails the replica here, named
        self.supervisor = Supervisor(settings, names, namespace=namespace, detached=True,
                                     resources=actor_resources(os.environ))
        self.fleet: TelemetryFleet | None = None
        self.error = ""
        self._stop = threading.Event()
        # Starting waits for warm caches (seconds to minutes on a big cluster): not in the constructor,
        # which Serve times out; health reports "starting" meanwhile.
        self._thread = threading.Thread(target=self._run, name="kaiwo-supervisor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from actors.supervisor import SupervisorError

        try:
            # First the aggregator and the telemetry actors, which the monitoring controllers read.
            self.fleet = start_telemetry(os.environ, self.settings, self.namespace)
        except Exception as err:  # Ray refusing an actor: the controllers run without GPU readings
            log.error("telemetry fleet did not start: %s", err)
        try:
            self.supervisor.start()
        except SupervisorError as err:
            self.error = f"controllers failed to start: {err}"
            log.error("%s", self.error)
            return
        while not self._stop.wait(SUPERVISE_SECONDS):
            for name in self.supervisor.ensure():
                log.warning("%s: actor was gone; started a new one", name)

    def status(self) -> tuple[int, dict[str, Any]]:
        return health_body(self.supervisor.health(), self.error)

    def check_health(self) -> None:
        """Serve's health check: raising marks the replica unhealthy (Serve restarts it; the actors, being
        detached, are adopted by the new replica)."""
        code, body = self.status()
        if code != 200 and self.error:
            raise RuntimeError(body["error"])

    async def __call__(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        code, body = self.status()
        return JSONResponse(body, status_code=code)


def _deployment() -> Any:
    from ray import serve

    return serve.deployment(name="kaiwo-operator", num_replicas=1, ray_actor_options={"num_cpus": 0},
                            health_check_period_s=30, max_ongoing_requests=8)(OperatorApp)


try:  # what Serve imports; the module's pure parts stay importable without ray[serve]
    app: Any = _deployment().bind()
except ImportError:
    app = None
