"""The admin API as a FastAPI app: `build_app(settings)`. The same app runs under Ray Serve
(serve/deployment.py) or plain uvicorn; its lifespan starts the watch-fed cache and stops it.

    GET    /api/v1/workloads                                  list (filters, paging)
    POST   /api/v1/workloads                                  submit a KaiwoJob/KaiwoService (JSON or YAML)
    GET    /api/v1/namespaces/{ns}/{kaiwojobs|kaiwoservices}/{name}            get
    DELETE /api/v1/namespaces/{ns}/{kaiwojobs|kaiwoservices}/{name}            delete
    GET    /api/v1/namespaces/{ns}/{plural}/{name}/events|explain|logs
    GET    /api/v1/queues, /api/v1/queues/{name}, /api/v1/nodes, /api/v1/overview, /api/v1/stream (SSE)
    GET    /api/v1/usage?groupBy=user|namespace|queue|...&since=&until=&format=csv   GPU-hours (serve/usage.py)
    GET    /metrics (Prometheus), / (dashboard), /openapi.json, /docs
    GET    /apis/admin.kaiwo.silogen.ai/v1alpha1/...    the aggregated group (routes_aggregated.py)
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator

from fastapi import FastAPI

from serve import errors
from serve.admin_identity import admin_client
from serve.auth import Authorizer, KubernetesAuth, NoAuth
from serve.cache import ClusterCache
from serve.limits import BodyLimit
from serve.metrics import AdminMetrics
from serve.state import AdminSettings, AdminState

API_TITLE = "kaiwo-ray admin API"


async def open_state(settings: AdminSettings) -> AdminState:
    client = await admin_client(settings)
    cache = ClusterCache(client)
    auth: Authorizer = (KubernetesAuth(client, ttl=settings.auth_cache_seconds) if settings.auth == "kubernetes"
                        else NoAuth())
    stats = settings.stats_source
    if stats is None and settings.ray_namespace:
        from serve.ray_stats import actor_stats_source

        stats = actor_stats_source(settings.ray_namespace)
    if settings.gpu_samples is None and settings.ray_namespace:
        settings = _with_aggregator_samples(settings)
    state = AdminState(settings=settings, client=client, cache=cache, auth=auth)
    state.metrics = AdminMetrics(cache, stats, settings.gpu_samples)
    try:
        await cache.start(sync_timeout=settings.sync_timeout)
    except BaseException:
        await cache.stop()
        await client.close()
        raise
    if settings.tune_gc:
        from hosts.runtime.gc_tuning import tune_for_long_lived_caches

        tune_for_long_lived_caches()
    return state


def _with_aggregator_samples(settings: AdminSettings) -> AdminSettings:
    """On Ray (a Serve replica of `kaiwo-ray up`/`dev`), per-GPU utilization from the telemetry aggregator."""
    import ray

    if not ray.is_initialized():
        return settings
    from serve.telemetry_samples import AggregatorSamples

    return dataclasses.replace(settings, gpu_samples=AggregatorSamples(settings.ray_namespace or ""))


async def close_state(state: AdminState) -> None:
    await state.cache.stop()
    await state.client.close()


def build_app(settings: AdminSettings | None = None) -> FastAPI:
    settings = settings or AdminSettings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = await open_state(settings)
        app.state.admin = state
        listener = None
        try:
            if settings.aggregated_bind:  # the same app over TLS for the aggregation layer (aggregated.py)
                from serve.aggregated import start_listener

                listener = await start_listener(app, state, settings.aggregated_bind, settings.aggregated_cert_dir)
                state.extras["aggregated_port"] = listener.port
            from serve.forecasts import background

            async with background(state, settings.forecast_interval):
                yield
        finally:
            if listener is not None:
                await listener.stop()
            await close_state(state)

    app = FastAPI(title=API_TITLE, version="v1", lifespan=lifespan,
                  description="Workloads, queues, nodes and `explain` for kaiwo-ray, from a watch-fed cache.")
    errors.install(app)
    from serve import dashboard, routes_aggregated, routes_cluster, routes_workloads, usage

    app.include_router(routes_workloads.router)
    app.include_router(routes_cluster.router)
    app.include_router(routes_aggregated.router)
    app.include_router(usage.router)
    dashboard.install(app)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    return app
