"""/api/v1 cluster endpoints (queues, nodes, overview, a live SSE feed) and /metrics."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse

from kaiwo_ray.kube.resources import CLUSTERQUEUES, LOCALQUEUES, NODES, PODS, WORKLOADS
from kaiwo_ray.views.nodes import node_totals, node_views
from kaiwo_ray.views.queues import ClusterQueueView, cluster_queue_views
from kaiwo_ray.views.workloads import phase_counts
from serve.auth import Access
from serve.errors import ApiError, error_responses
from serve.models import NodeList, Overview, QueueList
from serve.state import AdminState, admin, current_user, gpu_samples, require

router = APIRouter(tags=["cluster"])
KUEUE = "kueue.x-k8s.io"


def _queues(state: AdminState) -> list[ClusterQueueView]:
    cache = state.cache
    return cluster_queue_views(cache.items(CLUSTERQUEUES), cache.items(LOCALQUEUES), cache.items(WORKLOADS))


@router.get("/api/v1/queues", response_model=QueueList, responses=error_responses(401, 403))
async def list_queues(request: Request) -> QueueList:
    await require(request, Access("list", "clusterqueues", KUEUE))
    return QueueList(items=_queues(admin(request)))


@router.get("/api/v1/queues/{name}", response_model=ClusterQueueView, responses=error_responses(401, 403, 404))
async def get_queue(request: Request, name: str) -> ClusterQueueView:
    await require(request, Access("get", "clusterqueues", KUEUE, name=name))
    view = next((q for q in _queues(admin(request)) if q.name == name), None)
    if view is None:
        raise ApiError(404, f'clusterqueues.{KUEUE} "{name}" not found', kind="clusterqueues", name=name)
    return view


@router.get("/api/v1/nodes", response_model=NodeList, responses=error_responses(401, 403))
async def list_nodes(request: Request) -> NodeList:
    await require(request, Access("list", "nodes"))
    state = admin(request)
    views = node_views(state.cache.items(NODES), state.cache.items(PODS), gpu_samples(state))
    return NodeList(items=views, totals=node_totals(views))


@dataclass(frozen=True, slots=True)
class OverviewScope:
    """What one user's overview may show: workloads of these namespaces (None: all), queues, nodes."""

    namespaces: frozenset[str] | None
    queues: bool
    nodes: bool


async def overview_scope(request: Request) -> OverviewScope:
    from serve.routes_workloads import BY_KIND, visible_namespaces

    state = admin(request)
    user = await current_user(request)
    namespaces = await visible_namespaces(request, state, list(BY_KIND.values()), None)
    return OverviewScope(namespaces, await state.auth.allowed(user, Access("list", "clusterqueues", KUEUE)),
                         await state.auth.allowed(user, Access("list", "nodes")))


def overview(state: AdminState, scope: OverviewScope = OverviewScope(None, True, True)) -> Overview:
    cache = state.cache
    workloads = [w for w in cache.workloads() if scope.namespaces is None
                 or (w.get("metadata") or {}).get("namespace") in scope.namespaces]
    totals = None
    if scope.nodes:
        totals = node_totals(node_views(cache.items(NODES), cache.items(PODS), gpu_samples(state)))
    return Overview(phases=phase_counts(workloads), workloads=len(workloads),
                    queues=_queues(state) if scope.queues else [], nodes=totals, version=cache.version)


@router.get("/api/v1/overview", response_model=Overview, responses=error_responses(401))
async def get_overview(request: Request) -> Overview:
    """Workloads by phase, queues and node totals, each as far as the user may see them."""
    return overview(admin(request), await overview_scope(request))


@router.get("/api/v1/stream", response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}},
                             "description": "Server-sent events: `overview` (an Overview) whenever the cluster changed"},
                       **error_responses(401, 422)})
async def stream(request: Request,
                 interval: Annotated[float, Query(ge=0.2, le=60)] = 1.0) -> StreamingResponse:
    """Live updates for the dashboard: at most one `overview` event per `interval` seconds, sent only
    when something changed (and a comment every 15 s so proxies keep the stream open)."""
    scope = await overview_scope(request)
    state = admin(request)

    async def events() -> AsyncIterator[bytes]:
        version = -1
        idle = 0.0
        while not await request.is_disconnected():
            if state.cache.version != version:
                version = state.cache.version
                idle = 0.0
                body = overview(state, scope).model_dump_json()
                yield f"event: overview\nid: {version}\ndata: {body}\n\n".encode()
                await asyncio.sleep(interval)  # a rate limit on updates, not a synchronisation
                continue
            await state.cache.wait_changed(version, timeout=min(15.0, interval * 5))
            idle += interval * 5
            if idle >= 15.0:
                idle = 0.0
                yield b": keep-alive\n\n"

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


@router.get("/metrics", response_class=Response,
            responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text exposition"},
                       **error_responses(401, 403)})
async def metrics(request: Request) -> Response:
    await require(request, Access("get", path="/metrics"))
    state = admin(request)
    body, content_type = await state.metrics.render()
    from serve.usage import usage_metrics

    return Response(body + await usage_metrics(state), media_type=content_type)


@router.get("/healthz", include_in_schema=False)
async def healthz(request: Request) -> Response:
    state = admin(request)
    ok = state.cache.synced
    return Response(json.dumps({"synced": ok}), status_code=200 if ok else 503, media_type="application/json")
