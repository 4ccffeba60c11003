"""What every request handler reaches through `request.app.state.admin`: the cluster cache, the API
client for writes, the authorizer, the metrics, and the settings the app was built with."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import Request

from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.views.nodes import GpuReading
from serve.auth import Access, Authorizer, User
from serve.cache import ClusterCache
from serve.errors import ApiError
from serve.front_proxy import NotAllowed, RequestHeaderConfig, client_common_name
from serve.front_proxy import authenticate as authenticate_front_proxy
from serve.limits import DEFAULT_MAX_BODY_BYTES

StatsSource = Callable[[], Awaitable[list[dict[str, Any]]]]
GpuSamples = Callable[[], Iterable[GpuReading]]
"""Per-GPU telemetry, when a collector exists: the latest sample of every GPU (the telemetry seam)."""
"""Returns one stats snapshot per controller (see hosts.runtime.controller_host.ControllerHost.stats)."""


@dataclass(slots=True)
class AdminSettings:
    kubeconfig: str | None = None
    in_cluster: bool = False
    auth: Literal["kubernetes", "none"] = "kubernetes"
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    stats_source: StatsSource | None = None
    ray_namespace: str | None = None
    """When set (and no stats_source), controller stats come from the named actors of this Ray namespace."""
    auth_cache_seconds: float = 10.0
    sync_timeout: float = 60.0
    gpu_samples: GpuSamples | None = None
    """Per-GPU utilization for /api/v1/nodes, the overview and the dashboard's heat map (none: allocation only)."""
    ledger_namespace: str = field(default_factory=lambda: os.environ.get("GPU_ACCOUNTING_NAMESPACE")
                                  or os.environ.get("KAIWO_LEASE_NAMESPACE") or "kube-system")
    """Where the GPU ledger's ConfigMaps are (the accounting controller's namespace; docs/accounting.md)."""
    tune_gc: bool = False
    """The process is the admin server (a Serve replica): freeze the synced caches out of the collector's
    sight and collect rarely (hosts.runtime.gc_tuning), as the operator does."""
    forecast_interval: float | None = 60.0
    """Seconds between start-time forecasts (serve/forecasts.py) while the cluster changes; None: none."""
    aggregated_bind: str | None = None
    """Serve the aggregated API (serve/aggregated.py) over TLS on this address too (":8443", "127.0.0.1:0")."""
    aggregated_cert_dir: str | None = None
    """tls.crt/tls.key for that listener; None: a self-signed certificate (the APIService then skips verification)."""
    service_account_dir: str | None = None
    """In a pod: the admin API's own credentials (`token`, `ca.crt`, `namespace` of its mounted token Secret)
    instead of the pod's service account, which is the operator's."""


@dataclass(slots=True)
class AdminState:
    settings: AdminSettings
    client: KubeClient
    cache: ClusterCache
    auth: Authorizer
    metrics: Any = None
    extras: dict[str, Any] = field(default_factory=dict)
    front_proxy: RequestHeaderConfig | None = None
    """Requestheader authentication for the aggregated listener (None: every request needs a token)."""


def admin(request: Request) -> AdminState:
    state: AdminState = request.app.state.admin
    return state


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization") or ""
    if header.lower().startswith("bearer "):
        return header[7:].strip() or None
    # EventSource (SSE) cannot set headers: the dashboard passes its token as a query parameter.
    return request.query_params.get("access_token") or None


async def current_user(request: Request) -> User:
    state = admin(request)
    cached: User | None = getattr(request.state, "user", None)
    if cached is not None:
        return cached
    user: User | None = None
    common_name = client_common_name(request.scope) if state.front_proxy is not None else None
    if common_name is not None and state.front_proxy is not None:  # the aggregator's certificate (front_proxy.py)
        try:
            user = authenticate_front_proxy(state.front_proxy, common_name, request.headers.items())
        except NotAllowed as err:
            raise ApiError(401, f"Unauthorized: {err}") from None
    if user is None:
        user = await state.auth.authenticate(bearer_token(request))
    if user is None:
        raise ApiError(401, "Unauthorized: send `Authorization: Bearer <token>` with a token the cluster accepts")
    request.state.user = user
    return user


async def require(request: Request, access: Access) -> User:
    """The user, if they may do `access`; otherwise 401/403 naming verb, resource and namespace."""
    user = await current_user(request)
    if not await admin(request).auth.allowed(user, access):
        raise ApiError(403, f'{access.resource or access.path} is forbidden: User "{user.name}" {access.describe()}',
                       kind=access.resource or None, name=access.name)
    return user


def gpu_samples(state: AdminState) -> list[GpuReading]:
    """Per-GPU telemetry, when a collector is configured (AdminSettings.gpu_samples); else none."""
    source = state.settings.gpu_samples
    return list(source()) if source is not None else []
