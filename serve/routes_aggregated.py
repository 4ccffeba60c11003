"""The admin API's aggregated group, `admin.kaiwo.silogen.ai/v1alpha1`: discovery, and WorkloadSummary
(serve/workload_summaries.py) listed, got and watched as Kubernetes serves a resource (List, Table,
watch events), with `explain`, `events` and `gpus` as its subresources answering exactly what the
/api/v1 paths answer. Reached through the Kubernetes API server (aggregated.py) or directly with a
token; every request is authorized with SubjectAccessReviews on the workloads it shows, as /api/v1 is.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response, StreamingResponse

from kaiwo_ray import clock
from kaiwo_ray.kube.resources import CLUSTERQUEUES, LOCALQUEUES, WORKLOADS, Resource
from kaiwo_ray.simulation.forecast import PENDING
from kaiwo_ray.views.explain import Explanation
from kaiwo_ray.views.queues import PendingWorkload, cluster_queue_views
from kaiwo_ray.views.workloads import WORKLOAD_KINDS
from serve import workload_summaries as ws
from serve.errors import READ, ApiError, error_responses
from serve.forecasts import forecasts
from serve.listing import BadToken, Filters, RowKey
from serve.models import EventList, WorkloadGpuList, WorkloadPlural
from serve.routes_workloads import (
    BY_KIND,
    _rows,
    explain_workload,
    visible_namespaces,
    workload_events,
    workload_gpus,
)
from serve.selectors import SelectorError, parse_selector
from serve.state import AdminState, admin, current_user

router = APIRouter(tags=["aggregated"])
PREFIX = f"/apis/{ws.GROUP}/{ws.VERSION}"
JSON = "application/json"
DEFAULT_WATCH_SECONDS = 1800


def _group_version() -> dict[str, str]:
    return {"groupVersion": ws.API_VERSION, "version": ws.VERSION}


def _group() -> dict[str, Any]:
    return {"name": ws.GROUP, "versions": [_group_version()], "preferredVersion": _group_version()}


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body, separators=(",", ":")), status_code=status, media_type=JSON)


@router.get("/apis", include_in_schema=False)
async def group_list(request: Request) -> Response:
    """Legacy discovery (what the aggregator falls back to: this server answers no apidiscovery/v2)."""
    await current_user(request)
    return _json({"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group()]})


@router.get(f"/apis/{ws.GROUP}", include_in_schema=False)
async def api_group(request: Request) -> Response:
    await current_user(request)
    return _json({"kind": "APIGroup", "apiVersion": "v1", **_group()})


@router.get(PREFIX, include_in_schema=False)
async def resource_list(request: Request) -> Response:
    await current_user(request)
    resources: list[dict[str, Any]] = [
        {"name": ws.RESOURCE, "singularName": "workloadsummary", "namespaced": True, "kind": ws.KIND,
         "verbs": ["get", "list", "watch"], "shortNames": ["kws"]}]
    kinds = {"explain": "Explanation", "events": "EventList", "gpus": "WorkloadGpuList"}
    resources += [{"name": f"{ws.RESOURCE}/{sub}", "singularName": "", "namespaced": True, "kind": kinds[sub],
                   "verbs": ["get"]} for sub in ws.SUBRESOURCES]
    return _json({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": ws.API_VERSION,
                  "resources": resources})


def _queues(state: AdminState) -> dict[tuple[str, str], PendingWorkload]:
    """Queue places per workload, recomputed only when the cache moved."""
    cached = state.extras.get("summary_queues")
    if cached is not None and cached[0] == state.cache.version:
        index: dict[tuple[str, str], PendingWorkload] = cached[1]
        return index
    cache = state.cache
    index = ws.queue_index(cluster_queue_views(cache.items(CLUSTERQUEUES), cache.items(LOCALQUEUES),
                                               cache.items(WORKLOADS)))
    state.extras["summary_queues"] = (state.cache.version, index)
    return index


def _objects(state: AdminState, keys: list[RowKey]) -> list[dict[str, Any]]:
    rows = _rows(state)
    queues = _queues(state)
    known = forecasts(state)
    objects = []
    for key in keys:
        rv, row = rows.versioned(key)
        estimate = known.get(row.namespace, row.name) if row.kind == "KaiwoJob" and row.phase in PENDING else None
        objects.append(ws.to_object(row, rv, queues, estimate, known.computed))
    return objects


def _include(value: str | None) -> str:
    include = value or "Metadata"
    if include not in ("None", "Metadata", "Object"):
        raise ApiError(400, f'includeObject: Unsupported value: "{include}"')
    return include


def _answer(request: Request, body: dict[str, Any], objects: list[dict[str, Any]], include: str,
            list_meta: dict[str, Any]) -> Response:
    """`body`, or the Table of `objects` (with `list_meta`) when the client asked for one."""
    if ws.wants_table(request.headers.get("accept", "")):
        return _json(ws.to_table(objects, list_meta, include, clock.now()))
    return _json(body)


async def _list(request: Request, namespace: str | None, label_selector: str | None, limit: int | None,
                continue_: str | None, include: str, watch: bool, resource_version: str | None,
                timeout_seconds: int | None) -> Response:
    state = admin(request)
    kinds = list(WORKLOAD_KINDS)
    namespaces = await visible_namespaces(request, state, [BY_KIND[k] for k in kinds], namespace)
    try:
        labels = parse_selector(label_selector) if label_selector else None
    except SelectorError as err:
        raise ApiError(400, f"unable to parse requirement: {err}") from None
    filters = Filters(namespaces=namespaces, labels=labels)
    if watch:
        return _watch(request, state, filters, include, resource_version, timeout_seconds)
    try:
        keys, _, next_token = _rows(state).page_keys(filters, limit or 10**9, continue_)
    except BadToken as err:
        raise ApiError(410, f"the provided continue parameter is invalid: {err}", reason="Expired") from None
    objects = _objects(state, keys)
    body = ws.to_list(objects, str(state.cache.version), next_token)
    return _answer(request, body, objects, include, body["metadata"])


def _watch(request: Request, state: AdminState, filters: Filters, include: str, resource_version: str | None,
           timeout_seconds: int | None) -> StreamingResponse:
    """Watch events from the cache's changes: the whole current view first (ADDED) unless the client
    resumes from a resourceVersion (a list's); then the workloads changed since that version (a
    workload created between a client's list and its watch is not lost; one deleted in that gap is
    not replayed), then the differences after each change."""
    table = ws.wants_table(request.headers.get("accept", ""))

    def view() -> dict[str, dict[str, Any]]:
        keys, _, _ = _rows(state).page_keys(filters, 10**9, None)
        return {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in _objects(state, keys)}

    def frame(kind: str, obj: dict[str, Any]) -> bytes:
        shown = ws.to_table([obj], {"resourceVersion": obj["metadata"]["resourceVersion"]}, include,
                            clock.now()) if table else obj
        return json.dumps({"type": kind, "object": shown}, separators=(",", ":")).encode() + b"\n"

    async def events() -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout_seconds or DEFAULT_WATCH_SECONDS)
        version = state.cache.version
        current = view()
        if resource_version in (None, "", "0"):
            for kind, obj in ws.watch_events({}, current):
                yield frame(kind, obj)
        elif (since := _version(resource_version)) is not None and since < version:
            changed = state.cache.workload_changed
            for key in sorted(current):
                obj = current[key]
                workload = (obj["workload"]["kind"], obj["metadata"]["namespace"], obj["workload"]["name"])
                if changed.get(workload, 0) > since:
                    yield frame("MODIFIED", obj)
        while (remaining := deadline - loop.time()) > 0:
            version = await state.cache.wait_changed(version, min(remaining, 5.0))
            if await request.is_disconnected():
                return
            latest = view()
            for kind, obj in ws.watch_events(current, latest):
                yield frame(kind, obj)
            current = latest

    return StreamingResponse(events(), media_type=JSON, headers={"Cache-Control": "no-cache"})


def _version(value: str) -> int | None:
    """A resourceVersion this API handed out (the cache's version), or None for any other."""
    return int(value) if value.isdigit() else None


def _flag(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1")


class ListQuery:
    """The query of a WorkloadSummary list or watch, as ListOptions spells it (`continue` is a Python
    keyword, hence its alias): one dependency for the namespaced and the all-namespaces route."""

    def __init__(
        self,
        labelSelector: str | None = None,
        limit: Annotated[int | None, Query(ge=0)] = None,
        continue_: Annotated[str | None, Query(alias="continue")] = None,
        includeObject: str | None = None,
        watch: str | None = None,
        resourceVersion: str | None = None,
        timeoutSeconds: Annotated[int | None, Query(ge=0)] = None,
    ) -> None:
        self.label_selector, self.limit, self.continue_ = labelSelector, limit, continue_
        self.include_object, self.watch, self.resource_version = includeObject, watch, resourceVersion
        self.timeout_seconds = timeoutSeconds


async def _list_query(request: Request, namespace: str | None, query: ListQuery) -> Response:
    return await _list(request, namespace, query.label_selector, query.limit, query.continue_,
                       _include(query.include_object), _flag(query.watch), query.resource_version,
                       query.timeout_seconds)


@router.get(f"{PREFIX}/{ws.RESOURCE}", summary="List WorkloadSummaries in every namespace the user may list",
            responses={200: {"description": "a WorkloadSummaryList, or a meta.k8s.io/v1 Table"},
                       **error_responses(400, 401, 403, 410, 422)})
async def list_all(request: Request, query: Annotated[ListQuery, Depends()]) -> Response:
    return await _list_query(request, None, query)


@router.get(f"{PREFIX}/namespaces/{{namespace}}/{ws.RESOURCE}", summary="List WorkloadSummaries of a namespace",
            responses={200: {"description": "a WorkloadSummaryList, or a meta.k8s.io/v1 Table"},
                       **error_responses(400, 401, 403, 410, 422)})
async def list_namespaced(request: Request, namespace: str, query: Annotated[ListQuery, Depends()]) -> Response:
    return await _list_query(request, namespace, query)


def _workload_of(namespace: str, name: str) -> tuple[Resource, str]:
    parsed = ws.parse_name(name)
    if parsed is None:
        raise ApiError(404, f'{ws.RESOURCE}.{ws.GROUP} "{name}" not found', kind=ws.RESOURCE, name=name)
    kind, workload = parsed
    return BY_KIND[kind], workload


@router.get(f"{PREFIX}/namespaces/{{namespace}}/{ws.RESOURCE}/{{name}}", summary="Get one WorkloadSummary",
            responses={200: {"description": "a WorkloadSummary, or a meta.k8s.io/v1 Table"},
                       **error_responses(400, 401, 403, 404, 422)})
async def get_summary(request: Request, namespace: str, name: str, includeObject: str | None = None) -> Response:
    from serve.auth import Access
    from serve.routes_workloads import GROUP
    from serve.state import require

    res, workload = _workload_of(namespace, name)
    await require(request, Access("get", res.plural, GROUP, namespace, name=workload))
    key: RowKey = (namespace, workload, res.kind)
    rows = _rows(admin(request))
    rows.rows()  # brings the rows up to date with the cache
    try:
        objects = _objects(admin(request), [key])
    except KeyError:
        raise ApiError(404, f'{ws.RESOURCE}.{ws.GROUP} "{name}" not found', kind=ws.RESOURCE, name=name) from None
    rv = objects[0]["metadata"]["resourceVersion"]
    return _answer(request, objects[0], objects, _include(includeObject), {"resourceVersion": rv})


@router.get(f"{PREFIX}/namespaces/{{namespace}}/{ws.RESOURCE}/{{name}}/explain", response_model=Explanation, responses=READ,
            summary="Why the workload is (not) running: the same as /api/v1/.../explain")
async def summary_explain(request: Request, namespace: str, name: str) -> Response:
    res, workload = _workload_of(namespace, name)
    return await explain_workload(request, namespace, WorkloadPlural(res.plural), workload)


@router.get(f"{PREFIX}/namespaces/{{namespace}}/{ws.RESOURCE}/{{name}}/events", response_model=EventList, responses=READ,
            summary="The workload's events: the same as /api/v1/.../events")
async def summary_events(request: Request, namespace: str, name: str) -> EventList:
    res, workload = _workload_of(namespace, name)
    return await workload_events(request, namespace, WorkloadPlural(res.plural), workload)


@router.get(f"{PREFIX}/namespaces/{{namespace}}/{ws.RESOURCE}/{{name}}/gpus", response_model=WorkloadGpuList, responses=READ,
            summary="Per-GPU telemetry of the workload's pods: the same as /api/v1/.../gpus")
async def summary_gpus(request: Request, namespace: str, name: str) -> WorkloadGpuList:
    res, workload = _workload_of(namespace, name)
    return await workload_gpus(request, namespace, WorkloadPlural(res.plural), workload)

