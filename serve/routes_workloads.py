"""/api/v1 workload endpoints: list, get, submit, delete, events, explain, pod logs, GPUs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

import yaml
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse

from kaiwo_ray.admission.submitter import SUBMITTED_BY
from kaiwo_ray.api.errors import ManifestError
from kaiwo_ray.api.load import parse_object
from kaiwo_ray.api.yaml_input import safe_load_all
from kaiwo_ray.kube.resources import EVENTS, KAIWOJOBS, KAIWOSERVICES, PODS, Resource
from kaiwo_ray.simulation.forecast import PENDING
from kaiwo_ray.views._objects import meta, status
from kaiwo_ray.views.explain import Explanation, StartEstimate, collect_world, explain
from kaiwo_ray.views.workloads import WORKLOAD_KINDS, summarize, workload_kind
from serve.auth import Access, User, impersonation
from serve.errors import READ, ApiError, error_responses, invalid_manifest
from serve.forecasts import forecasts
from serve.listing import BadToken, Filters, WorkloadRows
from serve.models import (
    ChildRef,
    DeleteResult,
    EventList,
    EventView,
    SubmitResult,
    WorkloadDetail,
    WorkloadGpuList,
    WorkloadList,
    WorkloadPlural,
)
from serve.selectors import SelectorError, parse_selector
from serve.state import AdminState, admin, current_user, gpu_samples, require

router = APIRouter(prefix="/api/v1", tags=["workloads"])
GROUP = "kaiwo.silogen.ai"
PLURALS: dict[str, Resource] = {"kaiwojobs": KAIWOJOBS, "kaiwoservices": KAIWOSERVICES}
BY_KIND: dict[str, Resource] = {"KaiwoJob": KAIWOJOBS, "KaiwoService": KAIWOSERVICES}
MAX_PAGE = 1000


def _rows(state: AdminState) -> WorkloadRows:
    rows: WorkloadRows | None = state.extras.get("rows")
    if rows is None:
        rows = state.extras["rows"] = WorkloadRows(state.cache)
    return rows


async def visible_namespaces(request: Request, state: AdminState, kinds: list[Resource],
                              namespace: str | None) -> frozenset[str] | None:
    """The namespaces the user may list every asked kind in: None = all (a cluster-wide grant)."""
    if namespace is not None:
        for res in kinds:
            await require(request, Access("list", res.plural, GROUP, namespace))
        return frozenset({namespace})
    user = await current_user(request)
    if all([await state.auth.allowed(user, Access("list", r.plural, GROUP)) for r in kinds]):
        return None
    present = {row.namespace for row in _rows(state).rows()}
    allowed = set()
    for ns in sorted(present):
        if all([await state.auth.allowed(user, Access("list", r.plural, GROUP, ns)) for r in kinds]):
            allowed.add(ns)
    return frozenset(allowed)


@router.get("/workloads", response_model=WorkloadList, response_model_by_alias=True,
            responses=error_responses(401, 403, 422))
async def list_workloads(
    request: Request,
    namespace: str | None = None,
    user: str | None = None,
    queue: str | None = None,
    phase: Annotated[list[str] | None, Query(description="repeat or comma-separate: phase=PENDING,RUNNING")] = None,
    kind: Annotated[str | None, Query(description="KaiwoJob, KaiwoService (or kaiwojobs, jobs, services ...)")] = None,
    labelSelector: Annotated[str | None, Query(description="app=x,tier!=db,env in (a,b)")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    continue_: Annotated[str | None, Query(alias="continue")] = None,
) -> Response:
    state = admin(request)
    kinds = list(WORKLOAD_KINDS)
    if kind:  # `kind=` (empty) filters nothing, as an empty `phase=` does
        resolved = workload_kind(kind)
        if resolved is None:
            raise ApiError(422, f"query.kind: unknown workload kind {kind!r} (expected KaiwoJob or KaiwoService)",
                           causes=_cause("query.kind", f"unknown workload kind {kind!r}"))
        kinds = [resolved]
    try:
        labels = parse_selector(labelSelector) if labelSelector else None
    except SelectorError as err:
        raise ApiError(422, f"query.labelSelector: {err}", causes=_cause("query.labelSelector", str(err))) from None
    namespaces = await visible_namespaces(request, state, [BY_KIND[k] for k in kinds], namespace)
    phases = frozenset(p.strip().upper() for item in phase for p in item.split(",") if p.strip()) if phase else None
    filters = Filters(namespaces=namespaces, user=user, queue=queue, phases=phases, kinds=frozenset(kinds),
                      labels=labels)
    try:
        body = _rows(state).page_json(filters, limit, continue_)
    except BadToken as err:
        raise ApiError(422, f"query.continue: {err}", causes=_cause("query.continue", str(err))) from None
    return Response(body, media_type="application/json")  # already WorkloadList JSON (see page_json)


def _cause(field: str, message: str) -> list[Any]:
    from serve.models import StatusCause

    return [StatusCause(field=field, message=message)]


def _resource(plural: str) -> Resource:
    res = PLURALS.get(plural.lower())
    if res is None:
        raise ApiError(404, f"unknown workload type {plural!r} (expected kaiwojobs or kaiwoservices)")
    return res


async def _workload(request: Request, namespace: str, plural: str, name: str, verb: str = "get") -> dict[str, Any]:
    res = _resource(plural)
    await require(request, Access(verb, res.plural, GROUP, namespace, name=name))
    obj = admin(request).cache.get(res, namespace, name)
    if obj is None:
        raise ApiError(404, f'{res.plural}.{GROUP} "{name}" not found in namespace "{namespace}"', kind=res.plural,
                       name=name)
    return obj


def _child_ref(obj: dict[str, Any]) -> ChildRef:
    st = status(obj)
    phase = st.get("phase") or st.get("status") or ""
    if not phase:
        for cond in st.get("conditions") or ():
            if cond.get("status") == "True":
                phase = cond.get("type") or ""
    if not phase:  # a Job or RayJob on its way: its pod counts
        counts = [f"{st[k]} {k}" for k in ("active", "succeeded", "failed") if st.get(k)]
        phase = ", ".join(counts) or str(st.get("jobStatus") or st.get("jobDeploymentStatus") or "")
    return ChildRef(kind=str(obj.get("kind") or ""), name=str(meta(obj).get("name") or ""),
                    namespace=meta(obj).get("namespace"), phase=str(phase))


@router.get("/namespaces/{namespace}/{plural}/{name}", response_model=WorkloadDetail, responses=READ)
async def get_workload(request: Request, namespace: str, plural: WorkloadPlural, name: str) -> WorkloadDetail:
    obj = await _workload(request, namespace, plural, name)
    state = admin(request)
    children = state.cache.owned_by(str(meta(obj).get("uid") or ""))
    return WorkloadDetail(summary=summarize(obj, state.cache.default_queue()), object=obj,
                          children=[_child_ref(c) for c in children if c.get("kind") != "Pod"],
                          pods=[_child_ref(p) for p in state.cache.pods_of(namespace, name)])


def _world(state: AdminState, obj: dict[str, Any]) -> Any:
    cache = state.cache
    namespace = str(meta(obj).get("namespace") or "")
    name = str(meta(obj).get("name") or "")
    children = cache.owned_by(str(meta(obj).get("uid") or ""))
    pods = cache.pods_of(namespace, name)
    kueue: list[dict[str, Any]] = []
    for owner in [*children, *pods]:
        kueue.extend(w for w in cache.owned_by(str(meta(owner).get("uid") or "")) if w.get("kind") == "Workload")
    uids = {str(meta(o).get("uid") or "") for o in [obj, *children, *pods, *kueue]}
    from kaiwo_ray.kube.resources import CLUSTERQUEUES, LOCALQUEUES, WORKLOADS

    return collect_world(obj, owned=children, pods=pods, kueue_workloads=kueue, events=cache.events_about(uids),
                         cluster_queues=cache.items(CLUSTERQUEUES), local_queues=cache.items(LOCALQUEUES),
                         default_queue=cache.default_queue()), cache.items(WORKLOADS)


@router.get("/namespaces/{namespace}/{plural}/{name}/explain", response_model=Explanation, responses=READ)
async def explain_workload(request: Request, namespace: str, plural: WorkloadPlural, name: str) -> Response:
    from dataclasses import replace

    obj = await _workload(request, namespace, plural, name)
    world, all_kueue = _world(admin(request), obj)
    if any(not _admitted(w) for w in world.kueue_workloads):  # the queue position needs the whole queue
        world = replace(world, all_kueue_workloads=all_kueue)
    explanation = explain(world)
    known = forecasts(admin(request))
    estimate = known.get(namespace, name) if plural == WorkloadPlural.KAIWOJOBS else None
    if estimate is not None and known.computed is not None and explanation.phase in PENDING:
        explanation.estimated_start = StartEstimate(start=estimate.start, earliest=estimate.earliest,
                                                    latest=estimate.latest, computed=known.computed)
    return Response(explanation.model_dump_json(), media_type="application/json")  # typed; no re-validation


def _admitted(kueue_workload: dict[str, Any]) -> bool:
    return any(c.get("type") == "QuotaReserved" and c.get("status") == "True"
               for c in status(kueue_workload).get("conditions") or ())


@router.get("/namespaces/{namespace}/{plural}/{name}/gpus", response_model=WorkloadGpuList, responses=READ)
async def workload_gpus(request: Request, namespace: str, plural: WorkloadPlural, name: str) -> WorkloadGpuList:
    """Per-GPU telemetry of the workload's pods. Whoever may get the workload may see its GPUs (no
    list rights on nodes needed): what the workload page and `kaiwo monitor` show."""
    await _workload(request, namespace, plural, name)
    state = admin(request)
    pods = {str(meta(p).get("name") or "") for p in state.cache.pods_of(namespace, name)}
    items = [s for s in gpu_samples(state) if s.pod is not None and s.pod.namespace == namespace
             and s.pod.name in pods]
    return WorkloadGpuList(items=sorted(items, key=lambda s: (s.pod.name if s.pod else "", s.node, s.index)))


@router.get("/namespaces/{namespace}/{plural}/{name}/events", response_model=EventList, responses=READ)
async def workload_events(request: Request, namespace: str, plural: WorkloadPlural, name: str) -> EventList:
    obj = await _workload(request, namespace, plural, name)
    await require(request, Access("list", EVENTS.plural, "", namespace))
    world, _ = _world(admin(request), obj)
    items = []
    for event in world.events:
        involved = event.get("involvedObject") or event.get("regarding") or {}
        source = event.get("source") or {}
        items.append(EventView(
            type=str(event.get("type") or ""), reason=str(event.get("reason") or ""),
            message=str(event.get("message") or event.get("note") or ""),
            object=ChildRef(kind=str(involved.get("kind") or ""), name=str(involved.get("name") or ""),
                            namespace=involved.get("namespace")),
            first_seen=event.get("firstTimestamp") or event.get("eventTime") or meta(event).get("creationTimestamp"),
            last_seen=event.get("lastTimestamp") or event.get("eventTime") or meta(event).get("creationTimestamp"),
            count=int(event.get("count") or 1),
            source=str(source.get("component") or event.get("reportingComponent") or "")))
    items.sort(key=lambda e: (e.last_seen or "", e.first_seen or ""))
    return EventList(items=items)


@router.get("/namespaces/{namespace}/{plural}/{name}/logs", response_class=StreamingResponse,
            responses={200: {"content": {"text/plain": {}}, "description": "the pod's log, streamed"},
                       **error_responses(400, 401, 403, 404, 422, 503)})
async def workload_logs(
    request: Request, namespace: str, plural: WorkloadPlural, name: str,
    pod: str | None = None, container: str | None = None, follow: bool = False,
    tail: Annotated[int | None, Query(ge=0, le=100_000)] = None,
) -> StreamingResponse:
    await _workload(request, namespace, plural, name)
    state = admin(request)
    pods = state.cache.pods_of(namespace, name)
    if pod is not None:
        chosen = next((p for p in pods if meta(p).get("name") == pod), None)
        if chosen is None:
            raise ApiError(404, f'pod "{pod}" is not a pod of {plural} {namespace}/{name}', kind="pods", name=pod)
    else:
        running = [p for p in pods if status(p).get("phase") in ("Running", "Succeeded", "Failed")]
        candidates = sorted(running or pods, key=lambda p: str(meta(p).get("creationTimestamp") or ""))
        if not candidates:
            raise ApiError(404, f"{plural} {namespace}/{name} has no pods yet", kind="pods")
        chosen = candidates[-1]
    pod_name = str(meta(chosen).get("name"))
    await require(request, Access("get", "pods", "", namespace, subresource="log", name=pod_name))
    query: dict[str, Any] = {"follow": "true" if follow else None, "container": container,
                             "tailLines": tail}
    path = PODS.path(namespace, pod_name, "log")
    chunks = state.client.stream(path, query=query)
    try:  # the first chunk (or the API's error) before answering, so an error is a proper status
        first = await anext(chunks, b"")
    except Exception:
        await chunks.aclose()
        raise

    async def body() -> AsyncIterator[bytes]:
        try:
            if first:
                yield first
            async for chunk in chunks:
                yield chunk
        finally:
            await chunks.aclose()

    return StreamingResponse(body(), media_type="text/plain; charset=utf-8",
                             headers={"X-Kaiwo-Pod": pod_name, "Cache-Control": "no-cache"})


# -- writes ------------------------------------------------------------------------------------------
# Made as the user (serve/auth.py `impersonation`): the API server checks the user's RBAC and admission
# sees, audits and records them (fieldManager names them: managedFields show who wrote).


def as_user(state: AdminState, user: User) -> list[tuple[str, str]]:
    """Impersonation headers for a write, where callers are authenticated (not with `--admin-auth none`,
    whose anonymous admin is no identity the cluster knows: the admin API's own writes then)."""
    return impersonation(user) if state.auth.enabled else []


def field_manager(user: User) -> str:
    """The fieldManager of a write made for `user` (at most 128 characters, as the API server allows)."""
    return f"kaiwo-admin-api:{user.name}"[:128]



def _parse_body(raw: bytes, content_type: str) -> dict[str, Any]:
    text = raw.decode("utf-8", errors="replace")
    if not text.strip():
        raise ApiError(422, "request body is empty: send a KaiwoJob or KaiwoService manifest (JSON or YAML)")
    if "json" in content_type:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as err:
            raise ApiError(400, f"invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}") from None
        except RecursionError:
            raise ApiError(400, "invalid JSON: nested deeper than a manifest can be") from None
    else:
        try:
            docs = [d for d in safe_load_all(text) if d is not None]
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            raise ApiError(400, f"invalid YAML{where}: {getattr(err, 'problem', None) or err}") from None
        if len(docs) != 1:
            raise ApiError(422, f"send exactly one manifest per request (got {len(docs)})")
        doc = docs[0]
    if not isinstance(doc, dict):
        raise ApiError(422, "a manifest must be a mapping with apiVersion, kind, metadata and spec")
    return doc


@router.post("/workloads", response_model=SubmitResult, status_code=201,
             responses=error_responses(400, 401, 403, 409, 413, 422, 502, 503),
             openapi_extra={"requestBody": {"required": True, "description": "one KaiwoJob or KaiwoService manifest",
                                            "content": {"application/json": {"schema": {"type": "object"}},
                                                        "application/yaml": {"schema": {"type": "string"}}}}})
async def submit_workload(request: Request, namespace: str | None = None, dryRun: bool = False) -> SubmitResult:
    """Submit a KaiwoJob or KaiwoService (JSON, or YAML with a yaml content type)."""
    doc = _parse_body(await request.body(), request.headers.get("content-type", "application/yaml"))
    kind = doc.get("kind")
    if kind not in BY_KIND:
        raise ApiError(422, f"kind: must be KaiwoJob or KaiwoService (got {kind!r})",
                       causes=_cause("kind", f"must be KaiwoJob or KaiwoService (got {kind!r})"))
    metadata = doc.setdefault("metadata", {}) if isinstance(doc.get("metadata", {}), dict) else None
    if metadata is None:
        raise ApiError(422, "metadata: must be a mapping", causes=_cause("metadata", "must be a mapping"))
    target = metadata.get("namespace") or namespace or "default"
    if namespace and metadata.get("namespace") and metadata["namespace"] != namespace:
        message = f"the namespace of the object ({metadata['namespace']}) does not match the request's ({namespace})"
        raise ApiError(422, f"metadata.namespace: {message}", causes=_cause("metadata.namespace", message))
    metadata["namespace"] = target
    name = metadata.get("name") if isinstance(metadata.get("name"), str) else None
    try:
        parse_object(doc)
    except ManifestError as err:
        raise invalid_manifest(err, str(kind), name) from None
    if not name and not metadata.get("generateName"):
        raise ApiError(422, "metadata.name: required", kind=str(kind), causes=_cause("metadata.name", "required"))
    res = BY_KIND[str(kind)]
    user = await require(request, Access("create", res.plural, GROUP, target))
    # GPU-hours are charged to who submitted (docs/accounting.md): the authenticated caller, whatever the
    # manifest says. With auth on the write impersonates the caller, so the admission webhook records the
    # same name; without webhooks this is the record.
    annotations = metadata.get("annotations") if isinstance(metadata.get("annotations"), dict) else {}
    metadata["annotations"] = {**annotations, SUBMITTED_BY: user.name}
    state = admin(request)
    query = {"fieldManager": field_manager(user), **({"dryRun": "All"} if dryRun else {})}
    created = await state.client.request("POST", res.path(target), body=doc, query=query,
                                         headers=as_user(state, user))
    return SubmitResult(kind=str(kind), namespace=target, name=str(meta(created).get("name") or name),
                        uid=str(meta(created).get("uid") or ""), created=not dryRun)


@router.delete("/namespaces/{namespace}/{plural}/{name}", response_model=DeleteResult,
               responses=error_responses(401, 403, 404, 409, 422, 502, 503))
async def delete_workload(request: Request, namespace: str, plural: WorkloadPlural, name: str) -> DeleteResult:
    res = _resource(plural)
    user = await require(request, Access("delete", res.plural, GROUP, namespace, name=name))
    state = admin(request)
    obj = state.cache.get(res, namespace, name)
    options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
    if obj:  # never delete a same-named successor
        options["preconditions"] = {"uid": str(meta(obj).get("uid"))}
    await state.client.request("DELETE", res.path(namespace, name), body=options, headers=as_user(state, user))
    return DeleteResult(kind=res.kind, namespace=namespace, name=name)
