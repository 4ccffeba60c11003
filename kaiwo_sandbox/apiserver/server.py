"""The HTTP front end: Kubernetes REST paths and JSON bodies over the store, with bearer-token
authentication, the audit log, fault injection, Table output and streaming watches.

One catch-all aiohttp route parses the path itself (`routes.parse_api_path`): the API's path
space is regular and this keeps per-request work small. No per-request logging on the hot path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from kaiwo_sandbox.apiserver import discovery, discovery_v2
from kaiwo_sandbox.apiserver.aggregation.proxy import Aggregator
from kaiwo_sandbox.apiserver.aggregation.registrations import Backend
from kaiwo_sandbox.apiserver.audit import AuditLog, AuditRecord
from kaiwo_sandbox.apiserver.auth.access import Access
from kaiwo_sandbox.apiserver.auth.authn import UserInfo
from kaiwo_sandbox.apiserver.faults import FaultInjector
from kaiwo_sandbox.apiserver.routes import ApiPath, parse_api_path
from kaiwo_sandbox.apiserver.streams import pods as pod_streams
from kaiwo_sandbox.apiserver.tables import to_table
from kaiwo_sandbox.apiserver.webhooks.dispatch import Admission, Attributes, Outcome, replay
from kaiwo_sandbox.apiserver.webhooks.matching import Request as AdmissionRequest
from kaiwo_sandbox.apiserver.yaml_body import load_yaml
from kaiwo_sandbox.contracts import (
    GVR,
    PATCH_CONTENT_TYPES,
    ApiError,
    JsonObj,
    PatchType,
    ResourceInfo,
    WatchEvent,
)
from kaiwo_sandbox.runtime.processes import LocalRuntime
from kaiwo_sandbox.semantics.listing import Selection
from kaiwo_sandbox.semantics.patching import apply_json_patch, apply_merge_patch
from kaiwo_sandbox.storage.store import ObjectStore

log = logging.getLogger(__name__)

PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/livez", "/version", "/version/"})
DEFAULT_WATCH_TIMEOUT = 1800.0  # a real server picks 30-60 min
CLIENT_CLOSED_REQUEST = 499  # audited for a request whose client left before it was answered (nginx's code)
JSON = "application/json"
JOB_ORPHAN_WARNING = ("child pods are preserved by default when jobs are deleted; set propagationPolicy=Background "
                      "to remove them or set propagationPolicy=Orphan to suppress this warning")
# The registries with ReturnDeletedObject (a DELETE answers with the object, and the OpenAPI document
# types the response so: the `kubernetes` client's delete_namespaced_service returns a V1Service), plus
# every custom resource. The others answer a Success Status once the object is gone.
RETURNS_DELETED_OBJECT = frozenset({
    ("", "pods"), ("", "services"), ("", "serviceaccounts"), ("", "persistentvolumeclaims"),
    ("", "persistentvolumes"), ("", "podtemplates"), ("", "resourcequotas"),
    ("storage.k8s.io", "storageclasses"), ("storage.k8s.io", "csidrivers"), ("storage.k8s.io", "csinodes"),
    ("storage.k8s.io", "volumeattachments"), ("storage.k8s.io", "volumeattributesclasses"),
    ("resource.k8s.io", "deviceclasses"), ("resource.k8s.io", "resourceclaims"),
    ("resource.k8s.io", "resourceclaimtemplates"), ("resource.k8s.io", "resourceslices"),
})
# The apiserver's MaxRequestBodyBytes (3 MiB: twice etcd's 1.5 MiB request limit, for JSON's overhead
# over protobuf); a larger body is refused before it is decoded.
MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024
# Request storage: the audit annotations admission gave the request.
AUDIT_ANNOTATIONS: web.RequestKey[dict[str, str]] = web.RequestKey("audit_annotations", dict)
# A create's name is in its body, not its path (generateName included): the audit record names the
# object created, as a real apiserver's objectRef.name does.
AUDIT_CREATED_NAME: web.RequestKey[str] = web.RequestKey("audit_created_name", str)
# A write run as a dry run whatever the client asked: the passes before the last of a write that
# admission webhooks intercept (`_dispatch_admitted`).
FORCED_DRY_RUN: web.RequestKey[bool] = web.RequestKey("forced_dry_run", bool)
# Events queued for one watch whose client stopped reading, before the server closes it (bounds memory).
# A burst (a deletecollection) may queue more for a reader that keeps up: only a writer stuck on the
# socket counts, and the limit matches the event history, so the client's re-watch usually resumes.
WATCH_BUFFER_LIMIT = 10_000
PRE_DEADLINE_BOOKMARK_SECONDS = 2.0  # the watch cache sends a bookmark this long before a watch ends
_INT64 = re.compile(r"[+-]?[0-9]+")


def _status_body(err: ApiError) -> bytes:
    return orjson.dumps(err.status())


def error_response(err: ApiError) -> web.Response:
    headers = {}
    if err.code == 429:
        retry = (err.details or {}).get("retryAfterSeconds", 1)
        headers["Retry-After"] = str(retry)
    return web.Response(body=_status_body(err), status=err.code, content_type=JSON, headers=headers)


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type=JSON)


def query_flag(value: str | None) -> bool:
    """A boolean query parameter as the apiserver reads one (watch, force, allowWatchBookmarks)."""
    return value is not None and value.lower() in ("true", "1")


def _verb(method: str, path: ApiPath, watch: bool) -> str:
    if method == "GET":
        if watch or path.legacy_watch:
            return "watch"
        return "get" if path.name else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if path.name else "deletecollection"
    return method.lower()


def _dry_run(query: Any, body: JsonObj | None = None) -> bool:
    values = list(query.getall("dryRun", []))
    if body is not None:
        values.extend(body.get("dryRun") or [])
    for value in values:
        if value != "All":
            raise ApiError.bad_request(f'Invalid dryRun value "{value}": supported values: "All"')
    return bool(values)


def request_too_large() -> ApiError:
    """errors.NewRequestEntityTooLargeError as limitedReadBody raises it."""
    return ApiError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {MAX_REQUEST_BODY_BYTES}")


async def read_limited(request: web.Request) -> bytes:
    """The request body, at most MAX_REQUEST_BODY_BYTES (413 beyond, like the apiserver's limitedReadBody).
    aiohttp caches it, so later `request.read()` calls return the same bytes without reading again."""
    if request.content_length is not None and request.content_length > MAX_REQUEST_BODY_BYTES:
        raise request_too_large()
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:  # a chunked body that passed the limit (client_max_size)
        raise request_too_large() from None


def parse_int64(value: str) -> int:
    """A query parameter as the apiserver's query conversion parses an int64 (strconv.ParseInt):
    400 BadRequest with Go's message otherwise."""
    if not _INT64.fullmatch(value):
        raise ApiError.bad_request(f'strconv.ParseInt: parsing "{value}": invalid syntax')
    number = int(value)
    if not -(2**63) <= number < 2**63:
        raise ApiError.bad_request(f'strconv.ParseInt: parsing "{value}": value out of range')
    return number


def list_options(query: Any) -> tuple[int | None, float | None]:
    """limit and timeoutSeconds of a list or watch, decoded as the apiserver decodes ListOptions.
    A limit <= 0 means no limit (the storage pages only when limit > 0)."""
    limit = timeout = None
    raw_limit = query.get("limit")
    if raw_limit is not None and raw_limit != "":
        limit = parse_int64(raw_limit)
    raw_timeout = query.get("timeoutSeconds")
    if raw_timeout is not None and raw_timeout != "":
        timeout = float(parse_int64(raw_timeout))
    return (limit if limit is not None and limit > 0 else None), timeout


def field_manager_for(query: Any, user_agent: str) -> str:
    """fieldManager, else the User-Agent's product token (as the apiserver's fieldmanager does)."""
    manager: str | None = query.get("fieldManager")
    if manager:
        if len(manager) > 128:
            raise ApiError.bad_request("fieldManager: Too long: may not be longer than 128")
        return manager
    return (user_agent.split("/", 1)[0] or "unknown")[:128]


@dataclass(slots=True)
class _Frame:
    """One request's outcome, as ApiServer._frame records it."""

    audited: bool = True
    response: web.StreamResponse | None = None
    code: int = 0  # set where no response says it (a client that left)


class ApiServer:
    """Request handling. `tokens` maps bearer tokens to user names (mutable: tests mint more)."""

    def __init__(self, store: ObjectStore, *, tokens: dict[str, str], audit: AuditLog, faults: FaultInjector,
                 bookmark_interval: float = 60.0, access: Access | None = None) -> None:
        self.store = store
        self.access = access or Access(store, tokens)  # authentication + authorization (access.py)
        self.audit = audit
        self.faults = faults
        self.bookmark_interval = bookmark_interval
        self.address = ""
        self._encoded: OrderedDict[tuple[int, str, str, str], bytes] = OrderedDict()
        self.open_watches = 0
        self.local_runtime: LocalRuntime | None = None  # real pods' logs, exec and port-forward (--local-image)
        self.watch_buffer_limit = WATCH_BUFFER_LIMIT  # events queued for one watcher before it is closed
        self.admission = Admission(store, lambda: self.local_runtime)  # admission webhooks (webhooks/)
        self.aggregator: Aggregator | None = None  # APIService proxying (aggregation/), set by the instance

    def application(self, extra_routes: Sequence[Callable[[web.Application], None]] = ()) -> web.Application:
        """The aiohttp app: `extra_routes` add endpoints of the layers above the API server (the
        simulated GPU exporter) before the catch-all Kubernetes route."""
        app = web.Application(client_max_size=MAX_REQUEST_BODY_BYTES)
        for add in extra_routes:
            add(app)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    # ------------------------------------------------------------------ entry point
    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path in PUBLIC_PATHS:
            return self._public(path)
        identity = self.access.authenticate(request.headers.get("Authorization", ""))
        if identity is None:
            return error_response(ApiError(401, "Unauthorized", "Unauthorized"))
        if any(key.lower().startswith("impersonate-") for key in request.headers):
            try:
                identity = self.access.impersonate(identity, request.headers)
            except ApiError as err:
                return error_response(err)
        if path.startswith("/sandbox/v1/"):
            return await self._control(request, path[len("/sandbox/v1/"):], identity)
        api_path = parse_api_path(path)
        if api_path is None or not api_path.resource:
            denied = self.access.deny_path(identity, request.method, path)
            if denied is not None:
                return error_response(denied)
        if (self.aggregator is not None and api_path is not None and api_path.version and api_path.group
                and (target := self.aggregator.backend(api_path.group, api_path.version)) is not None):
            return await self._proxy(request, api_path, identity, target)
        if path.startswith("/openapi/"):
            from kaiwo_sandbox.apiserver import openapi

            document = openapi.for_path(self.store.registry, path) if path.startswith("/openapi/v3") else None
            if document is None:
                return error_response(ApiError(404, "NotFound", "the server could not find the requested resource"))
            return json_response(document)
        if api_path is None:
            return error_response(ApiError(404, "NotFound", "the server could not find the requested resource"))
        if not api_path.resource:
            return self._discovery(api_path, request.headers)
        query = request.query
        verb = _verb(request.method, api_path, query_flag(query.get("watch")))
        with self._frame(request, identity, verb, api_path) as frame:
            frame.response = await self._serve(request, identity, verb, api_path, frame)
        assert frame.response is not None
        return frame.response

    async def _serve(self, request: web.Request, identity: UserInfo, verb: str, api_path: ApiPath,
                     frame: _Frame) -> web.StreamResponse:
        user = identity.name
        query = request.query
        self.access.check(identity, verb, api_path, query)
        info = self.store.resolve(GVR(api_path.group, api_path.version, api_path.resource))
        if api_path.namespace and not info.namespaced:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        latency, fault = self.faults.check(verb, api_path.group, api_path.resource, api_path.namespace,
                                           api_path.name, user)
        if latency:
            await asyncio.sleep(latency)
        if fault is not None:
            raise fault
        if request.method in ("POST", "PUT", "PATCH", "DELETE") and request.body_exists:
            await read_limited(request)
        if verb == "watch":
            def started() -> None:  # a watch is audited when its stream starts, not when it ends
                frame.audited = False
                self._audit(identity, verb, api_path, 200)

            try:
                return await self._watch(request, info, api_path, started)
            except ConnectionResetError:
                # The client went away before its stream began (a watcher closed at once, an
                # operator shutting down): nothing to answer, and nothing wrong with the server.
                return web.Response(status=CLIENT_CLOSED_REQUEST)
        validation = query.get("fieldValidation")
        if validation not in (None, "", "Strict", "Warn", "Ignore"):
            raise ApiError.bad_request(f'fieldValidation: Unsupported value: "{validation}": supported '
                                       'values: "Ignore", "Strict", "Warn"')
        response: web.StreamResponse
        if verb == "create" and self.access.answers(api_path):  # reviews, TokenRequest: never stored
            response = json_response(self.access.answer(api_path, await self._body(request), identity), 201)
        elif (verb in ("create", "update", "patch", "delete") and (admitted := await self._dispatch_admitted(
                request, info, api_path, verb, identity, validation or "Warn")) is not None):
            response = admitted
        elif verb in ("create", "update", "patch"):
            response = await self._dispatch_validated(request, info, api_path, verb, user, validation or "Warn")
        else:
            response = await self._dispatch(request, info, api_path, verb, user)
        deprecation = info.deprecations.get(api_path.version)
        if deprecation:
            response.headers.add("Warning", f'299 - "{deprecation}"')
        return response

    @contextlib.contextmanager
    def _frame(self, request: web.Request, identity: UserInfo, verb: str, path: ApiPath, *,
               audited: bool = True) -> Iterator[_Frame]:
        """What every API request is served in: an ApiError becomes its Status, a bug a 500 (as a real
        server answers, rather than dropping the connection), a client that left is 499; and the
        request is audited at the end with the code it got (unless `audited` is off, or a watch
        audited when its stream began)."""
        frame = _Frame(audited=audited)
        try:
            yield frame
        except ApiError as err:
            frame.response = error_response(err)
        except asyncio.CancelledError:  # the client went away mid-request (aiohttp cancels its handler)
            frame.code = CLIENT_CLOSED_REQUEST
            raise
        except Exception as exc:
            log.exception("sandbox: %s %s failed", request.method, request.path)
            frame.response = error_response(ApiError(500, "InternalError", f"Internal error occurred: {exc}"))
        finally:
            if frame.audited:
                code = frame.code or (frame.response.status if frame.response is not None else 500)
                self._audit(identity, verb, path, code, request.get(AUDIT_ANNOTATIONS), request.get(AUDIT_CREATED_NAME))

    def _audit(self, identity: UserInfo, verb: str, path: ApiPath, code: int,
               annotations: dict[str, str] | None = None, created: str | None = None) -> None:
        self.audit.record(AuditRecord(time.time(), identity.name, verb, path.group, path.resource, path.subresource,
                                      path.namespace, path.name or created or "", code, annotations or {},
                                      uid=identity.uid, extra={k: list(v) for k, v in identity.extra},
                                      impersonator=identity.impersonator))

    async def _proxy(self, request: web.Request, api_path: ApiPath, identity: UserInfo,
                     target: Backend) -> web.StreamResponse:
        """A request for an aggregated group/version: authorized here as for any resource (discovery was
        authorized as a path above), then passed to the backend as the caller (aggregation/proxy.py)."""
        assert self.aggregator is not None
        verb = _verb(request.method, api_path, query_flag(request.query.get("watch")))
        with self._frame(request, identity, verb, api_path, audited=bool(api_path.resource)) as frame:
            if api_path.resource:
                self.access.check(identity, verb, api_path, request.query)
            frame.response = await self.aggregator.forward(request, target, identity,
                                                           stream=api_path.resource != "" and verb == "watch")
        assert frame.response is not None
        return frame.response

    def _public(self, path: str) -> web.Response:
        if path.startswith("/version"):
            return json_response(discovery.SERVER_VERSION)
        return web.Response(text="ok", content_type="text/plain")

    def _aggregated_discovery(self, path: ApiPath, version: str, if_none_match: str) -> web.Response:
        """`/api` or `/apis` as an APIGroupDiscoveryList (discovery_v2.py): the aggregated groups as the
        aggregator last synced them. 304 when the client's ETag still holds."""
        registry = self.store.registry
        if path.named_group:
            aggregated = self.aggregator.discovery_groups(set(registry.groups())) if self.aggregator else []
            document = discovery_v2.groups(registry, aggregated, version)
        else:
            document = discovery_v2.core(registry, version)
        body = orjson.dumps(document)
        tag = discovery_v2.etag(body)
        headers = {"ETag": tag, "Vary": "Accept"}
        if if_none_match == tag:
            return web.Response(status=304, headers=headers)
        response = web.Response(body=body, headers=headers)
        response.headers["Content-Type"] = discovery_v2.media_type(version)
        return response

    def _discovery(self, path: ApiPath, headers: Any) -> web.Response:
        registry = self.store.registry
        body: JsonObj | None
        if path.version == "" and path.group == "" and (version := discovery_v2.negotiate(headers.get("Accept", ""))):
            return self._aggregated_discovery(path, version, headers.get("If-None-Match", ""))
        if path.version == "" and not path.named_group:
            body = discovery.api_versions(self.address)
        elif path.version == "" and path.group == "":
            body = discovery.api_group_list(registry)
            if self.aggregator is not None:  # the groups only APIServices serve, after the local ones
                body["groups"] += self.aggregator.aggregated_groups(set(registry.groups()))
        elif path.version == "":
            body = discovery.api_group(registry, path.group)
            if body is None and self.aggregator is not None and (entry := self.aggregator.group(path.group)):
                body = {"kind": "APIGroup", "apiVersion": "v1", **entry}
        else:
            body = discovery.api_resource_list(registry, path.group, path.version)
        if body is None:
            return error_response(ApiError(404, "NotFound", "the server could not find the requested resource"))
        return json_response(body)

    # ------------------------------------------------------------------ verbs
    async def _dispatch(self, request: web.Request, info: ResourceInfo, path: ApiPath, verb: str,
                        user: str) -> web.StreamResponse:
        gvr = GVR(path.group, path.version, path.resource)
        ns = path.namespace or None
        query = request.query
        sub = path.subresource or None
        if sub is not None and sub not in info.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if info.namespaced and not path.namespace and verb not in ("list", "watch"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if (verb not in info.verbs and sub is None) or (verb in ("update", "patch") and not path.name):
            raise ApiError.method_not_allowed("the server does not allow this method on the requested resource")
        if sub in pod_streams.SUBRESOURCES and info.resource == "pods":
            return await pod_streams.serve(self.store, request, path.namespace, path.name, sub, self.local_runtime)
        if verb == "get":
            if sub == "scale":
                return json_response(self.store.get_scale(gvr, ns, path.name))
            obj = self.store.get_ref(gvr, ns, path.name)
            return self._object_response(request, info, gvr, obj)
        if verb == "list":
            limit, _ = list_options(query)
            page = self.store.list_page(
                gvr, ns, label_selector=query.get("labelSelector"), field_selector=query.get("fieldSelector"),
                limit=limit, continue_token=self._continue(query.get("continue")),
                resource_version=query.get("resourceVersion"),
                resource_version_match=query.get("resourceVersionMatch"))
            return self._list_response(request, info, gvr, page.items, page.resource_version,
                                       page.continue_token, page.remaining)
        manager = field_manager_for(query, request.headers.get("User-Agent", ""))
        if verb == "create":
            body = await self._body(request)
            if sub == "binding":
                return self._bind(body, path, self._dry(request), user)
            if sub == "eviction":
                # No PodDisruptionBudgets exist here, so every eviction is allowed: it deletes the pod.
                self.store.delete_ref(gvr, ns, path.name, dry_run=self._dry(request, body.get("deleteOptions")),
                                      user=user)
                return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                      "code": 201}, status=201)
            if path.name:
                raise ApiError.method_not_allowed("the server does not allow this method on the requested resource")
            self.store.decode_typed(info, gvr, body)
            created = self.store.create_owned(gvr, body, namespace=ns, dry_run=self._dry(request),
                                              field_manager=manager, user=user)
            request[AUDIT_CREATED_NAME] = created["metadata"]["name"]
            return self._object_response(request, info, gvr, created, status=201)
        if verb == "update":
            body = await self._body(request)
            if sub == "scale":
                return json_response(self.store.update_scale(gvr, ns, path.name, body, dry_run=self._dry(request),
                                                             field_manager=manager, user=user))
            self.store.decode_typed(info, gvr, body)
            updated = self.store.update_owned(gvr, body, subresource=sub, dry_run=self._dry(request),
                                              field_manager=manager, user=user, namespace=ns, name=path.name)
            return self._object_response(request, info, gvr, updated)
        if verb == "patch":
            return await self._patch(request, info, gvr, path, manager, user)
        if verb == "delete":
            return await self._delete(request, info, gvr, path, user)
        if verb == "deletecollection":
            options = await self._delete_options(request)
            deleted = self.store.delete_collection(
                gvr, ns, label_selector=query.get("labelSelector"), field_selector=query.get("fieldSelector"),
                propagation_policy=options.get("propagationPolicy") or query.get("propagationPolicy"),
                dry_run=self._dry(request, options), user=user)
            return self._list_response(request, info, gvr, deleted, str(self.store.resource_version), None, None)
        raise ApiError.method_not_allowed("the server does not allow this method on the requested resource")

    async def _dispatch_validated(self, request: web.Request, info: ResourceInfo, path: ApiPath, verb: str,
                                  user: str, validation: str) -> web.StreamResponse:
        """A write under its fieldValidation. The body is read first (aiohttp caches it) so that
        nothing inside the scope awaits I/O: the store's per-request mode can't leak to another."""
        await request.read()
        with self.store.field_validation(validation) as unknown, self.store.admission_notes() as notes:
            try:
                response = await self._dispatch(request, info, path, verb, user)
            finally:  # a refused write is audited with what admission said about it too
                request[AUDIT_ANNOTATIONS] = dict(notes.annotations)
        for warning in notes.warnings:
            response.headers.add("Warning", warning_header(warning))
        for field in unknown:
            response.headers.add("Warning", f'299 - "unknown field \\"{field}\\""')
        return response

    def _dry(self, request: web.Request, body: JsonObj | None = None) -> bool:
        return _dry_run(request.query, body) or request.get(FORCED_DRY_RUN, False)

    async def _dispatch_admitted(self, request: web.Request, info: ResourceInfo, path: ApiPath, verb: str,
                                 identity: UserInfo, validation: str) -> web.StreamResponse | None:
        """A write that admission webhooks intercept, in passes (webhooks/dispatch.py says why): a dry
        run captures the candidate at the admission point, the mutating webhooks answer patches, a dry
        run with them replayed gives what validating webhooks judge, and the last pass writes (or
        dry-runs, if the client asked) with the same patches replayed. None when no webhook's rules
        match, so a write nobody intercepts takes the usual single pass."""
        gvr = GVR(path.group, path.version, path.resource)
        namespace = path.namespace
        operation = {"create": "CREATE", "update": "UPDATE", "patch": "UPDATE", "delete": "DELETE"}[verb]
        if verb == "patch" and request.content_type == "application/apply-patch+yaml" \
                and self.store.find_ref(gvr, namespace or None, path.name) is None:
            operation = "CREATE"
        admission_request = AdmissionRequest(operation, gvr, path.subresource, info.namespaced,
                                             tuple(v for v in info.versions if v != gvr.version))
        mutating = self.admission.candidates(mutating=True, request=admission_request)
        validating = self.admission.candidates(mutating=False, request=admission_request)
        if not mutating and not validating:
            return None
        user = identity.name
        name = path.name
        if verb == "create" and not name:
            name = str(((await self._body(request)).get("metadata") or {}).get("name") or "")
        options = await self._delete_options(request) if verb == "delete" else None
        attrs = Attributes(admission_request, info.kind, namespace, name, identity, self._dry(request, options),
                           field_manager_for(request.query, request.headers.get("User-Agent", "")))
        outcomes: list[Outcome] = []
        response: web.StreamResponse
        if operation == "DELETE":
            old = self.store.find_ref(gvr, namespace or None, path.name)
            if old is None:
                return None  # the usual 404
            if mutating:
                outcomes.append((await self.admission.mutate(mutating, attrs, None, old))[0])
            if validating:
                outcomes.append(await self.admission.validate(validating, attrs, None, old))
            response = await self._dispatch(request, info, path, verb, user)
            return self._with_outcomes(request, response, outcomes)
        captured: list[tuple[JsonObj, JsonObj | None]] = []
        patches: list[tuple[GVR, list[Any]]] = []

        def capture(_op: str, _gvr: GVR, obj: JsonObj, old: JsonObj | None, _user: str) -> None:
            if patches:
                replaced = replay(patches, obj)
                obj.clear()
                obj.update(replaced)
            captured.append((orjson.loads(orjson.dumps(obj)), old))

        first_pass_clean = False
        if mutating:
            try:
                await self._write_pass(request, info, path, verb, user, validation, capture)
                first_pass_clean = True
            except ApiError:
                if not captured:
                    raise  # refused before admission (not found, conflict, bad body): webhooks are not called
            candidate, old = captured[-1]
            sent = candidate
            if operation == "CREATE":  # the apiserver fills uid and creationTimestamp after mutating admission
                sent = dict(candidate, metadata={k: v for k, v in candidate["metadata"].items()
                                                 if k not in ("uid", "creationTimestamp")})
            outcome, _ = await self.admission.mutate(mutating, attrs, sent, old)
            outcomes.append(outcome)
            patches.extend(outcome.patches)
        if validating:
            if not (mutating and first_pass_clean and not patches):
                captured.clear()
                await self._write_pass(request, info, path, verb, user, validation, capture)
            final, old = captured[-1]
            outcomes.append(await self.admission.validate(validating, attrs, final, old))
        response = await self._write_pass(request, info, path, verb, user, validation, capture if patches else None,
                                          dry_run=False)
        return self._with_outcomes(request, response, outcomes)

    async def _write_pass(self, request: web.Request, info: ResourceInfo, path: ApiPath, verb: str, user: str,
                          validation: str, hook: Any, *, dry_run: bool = True) -> web.StreamResponse:
        request[FORCED_DRY_RUN] = dry_run
        with self.store.webhook_admission(hook) if hook is not None else _no_scope():
            return await self._dispatch_validated(request, info, path, verb, user, validation)

    @staticmethod
    def _with_outcomes(request: web.Request, response: web.StreamResponse,
                       outcomes: list[Outcome]) -> web.StreamResponse:
        annotations = dict(request.get(AUDIT_ANNOTATIONS) or {})
        seen: set[str] = set()
        for outcome in outcomes:
            annotations.update(outcome.annotations)
            for warning in outcome.warnings:
                if warning not in seen:
                    seen.add(warning)
                    response.headers.add("Warning", warning_header(warning))
        request[AUDIT_ANNOTATIONS] = annotations
        return response

    async def _patch(self, request: web.Request, info: ResourceInfo, gvr: GVR, path: ApiPath, manager: str,
                     user: str) -> web.StreamResponse:
        content_type = request.content_type
        patch_type: PatchType | None = PATCH_CONTENT_TYPES.get(content_type)
        if patch_type is None:
            accepted = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
            if not info.custom:
                accepted += ", application/strategic-merge-patch+json"
            raise ApiError.unsupported_media_type(
                f"the body of the request was in an unknown format - accepted media types include: {accepted}")
        raw = await request.read()
        patch = self._decode(raw, yaml_ok=patch_type == "apply")
        query = request.query
        ns = path.namespace or None
        dry_run = self._dry(request)
        if path.subresource == "scale":
            scale = self.store.get_scale(gvr, ns, path.name)
            if patch_type == "json":
                scale = apply_json_patch(scale, patch)
            else:
                scale = apply_merge_patch(scale, patch)
            return json_response(self.store.update_scale(gvr, ns, path.name, scale, dry_run=dry_run,
                                                         field_manager=manager, user=user))
        field_manager = query.get("fieldManager") if patch_type == "apply" else manager
        creating = patch_type == "apply" and self.store.find_ref(gvr, ns, path.name) is None
        patched = self.store.patch_owned(gvr, ns, path.name, patch, patch_type, subresource=path.subresource or None,
                                         field_manager=field_manager, force=query_flag(query.get("force")),
                                         dry_run=dry_run, user=user)
        return self._object_response(request, info, gvr, patched, status=201 if creating else 200)

    async def _delete(self, request: web.Request, info: ResourceInfo, gvr: GVR, path: ApiPath,
                      user: str) -> web.StreamResponse:
        options = await self._delete_options(request)
        preconditions = options.get("preconditions") or {}
        query = request.query
        policy = options.get("propagationPolicy") or query.get("propagationPolicy")
        orphan = options.get("orphanDependents", query.get("orphanDependents"))
        if policy is None and orphan is not None:
            policy = "Orphan" if orphan in (True, "true") else "Background"
        result = self.store.delete_ref(gvr, path.namespace or None, path.name, propagation_policy=policy,
                                       resource_version=preconditions.get("resourceVersion"),
                                       uid=preconditions.get("uid"), dry_run=self._dry(request, options), user=user)
        if self._dry(request, options):
            pending = bool(result["metadata"].get("deletionTimestamp"))
        else:
            pending = self.store.find_ref(gvr, path.namespace or None, path.name) is not None
        response: web.Response
        if pending:
            # The object, held by finalizers. 202 only where the client asked for the deprecated
            # orphanDependents=false (the apiserver keeps 200 otherwise, for old clients' sake).
            accepted = options.get("orphanDependents", query.get("orphanDependents")) in (False, "false")
            response = self._object_response(request, info, gvr, result, status=202 if accepted else 200)
        elif info.custom or (info.group, info.resource) in RETURNS_DELETED_OBJECT:
            response = self._object_response(request, info, gvr, result)
        else:
            response = json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                      "details": {"name": path.name, "group": info.group, "kind": info.resource,
                                                  "uid": result["metadata"].get("uid", "")}})
        if policy is None and (info.group, info.resource) == ("batch", "jobs"):
            response.headers["Warning"] = f'299 - "{JOB_ORPHAN_WARNING}"'
        return response

    def _bind(self, body: JsonObj, path: ApiPath, dry_run: bool, user: str) -> web.Response:
        target = body.get("target") or {}
        node = target.get("name")
        if not node:
            raise ApiError.invalid("Binding", "", path.name, [{"reason": "FieldValueRequired",
                                                               "message": "Required value", "field": "target.name"}])
        self.store.bind(path.namespace, path.name, str(node), dry_run=dry_run, user=user)
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                              "code": 201}, status=201)

    # ------------------------------------------------------------------ bodies
    async def _body(self, request: web.Request) -> JsonObj:
        content_type = request.content_type
        if content_type == "application/vnd.kubernetes.protobuf":
            # kubectl's typed generators (create namespace|configmap|...) send protobuf.
            from kaiwo_sandbox.apiserver import protobuf

            return protobuf.decode(await request.read())
        if content_type == "application/cbor":
            raise ApiError.unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json, application/yaml, application/vnd.kubernetes.protobuf")
        raw = await request.read()
        body = self._decode(raw, yaml_ok="yaml" in content_type)
        if not isinstance(body, dict):
            raise ApiError.bad_request("the body of the request must be a JSON object")
        return body

    @staticmethod
    def _decode(raw: bytes, *, yaml_ok: bool) -> Any:
        if not raw.strip():
            raise ApiError.bad_request("the body of the request is empty")
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if yaml_ok:
                return load_yaml(raw)
            raise ApiError.bad_request(f"the body of the request was not valid JSON: {exc}") from None

    async def _delete_options(self, request: web.Request) -> JsonObj:
        if not request.body_exists:
            return {}
        raw = await request.read()
        if not raw.strip():
            return {}
        options = self._decode(raw, yaml_ok=False)
        if not isinstance(options, dict):
            raise ApiError.bad_request("DeleteOptions must be a JSON object")
        return options

    def _continue(self, token: str | None) -> str | None:
        if token and self.faults.take_forced_gone():
            raise ApiError(410, "Expired", "The provided continue parameter is too old to display a consistent "
                           "list result. You can start a new list without the continue parameter, or use the "
                           "continue value from the response to resume the list.")
        return token or None

    # ------------------------------------------------------------------ responses
    def _table_request(self, request: web.Request) -> str | None:
        """The includeObject policy when the client asked for a Table (and we can make one)."""
        accept = request.headers.get("Accept", "")
        if "as=Table" not in accept:
            return None
        include = request.query.get("includeObject") or "Metadata"
        if include not in ("None", "Metadata", "Object"):
            raise ApiError.bad_request(f'includeObject: Unsupported value: "{include}"')
        return include

    def _table(self, info: ResourceInfo, version: str, objects: list[JsonObj], include: str) -> JsonObj:
        columns = info.printer_columns.get(version) if info.custom else None
        table: JsonObj = to_table(objects, kind=info.kind, group=info.group, printer_columns=columns,
                                         now=self.store.clock.now(), include_object=include)
        return table

    def _object_response(self, request: web.Request, info: ResourceInfo, gvr: GVR, obj: JsonObj, *,
                         status: int = 200) -> web.Response:
        include = self._table_request(request)
        if include is not None:
            table = self._table(info, gvr.version, [obj], include)
            table.setdefault("metadata", {})["resourceVersion"] = obj["metadata"].get("resourceVersion", "")
            return json_response(table, status)
        return web.Response(body=orjson.dumps(obj), status=status, content_type=JSON)

    def _list_response(self, request: web.Request, info: ResourceInfo, gvr: GVR, items: list[JsonObj], rv: str,
                       continue_token: str | None, remaining: int | None) -> web.Response:
        meta: JsonObj = {"resourceVersion": rv}
        if continue_token:
            meta["continue"] = continue_token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        include = self._table_request(request)
        if include is not None:
            table = self._table(info, gvr.version, items, include)
            table["metadata"] = meta
            return json_response(table)
        return json_response({"kind": info.list_kind, "apiVersion": gvr.api_version, "metadata": meta,
                              "items": items})

    # ------------------------------------------------------------------ watch
    async def _watch(self, request: web.Request, info: ResourceInfo, path: ApiPath,
                     started: Callable[[], None]) -> web.StreamResponse:
        query = request.query
        gvr = GVR(path.group, path.version, path.resource)
        selection = Selection.parse(query.get("labelSelector"), query.get("fieldSelector"), info.kind)
        include = self._table_request(request)
        _, timeout_seconds = list_options(query)
        timeout = timeout_seconds or DEFAULT_WATCH_TIMEOUT
        bookmarks = query_flag(query.get("allowWatchBookmarks"))
        send_initial = query_flag(query.get("sendInitialEvents"))
        rv_param = query.get("resourceVersion") or ""
        if send_initial and query.get("resourceVersionMatch") != "NotOlderThan":
            raise ApiError.invalid("ListOptions", "meta.k8s.io", "", [{
                "reason": "FieldValueForbidden", "field": "resourceVersionMatch",
                "message": "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"}])
        resume_from = None if rv_param in ("", "0") or send_initial else self.store.parse_resource_version(rv_param)
        stream = WatchStream(self, info, gvr, path.namespace, selection, include)
        response = web.StreamResponse(status=200, headers={"Content-Type": JSON, "Cache-Control": "no-cache"})
        await response.prepare(request)
        started()
        # From here to add_watcher nothing awaits: the initial state and the live stream join exactly.
        initial: list[bytes] = []
        error: ApiError | None = None
        if rv_param in ("", "0") or send_initial:
            page = self.store.list_page(gvr, path.namespace or None, label_selector=query.get("labelSelector"),
                                        field_selector=query.get("fieldSelector"))
            initial = [stream.encode("ADDED", obj) for obj in page.items]
        else:
            try:
                if self.faults.take_forced_gone():
                    raise ApiError.gone(f"too old resource version: {rv_param} ({self.store.resource_version})")
                assert resume_from is not None
                backlog = self.store.events_since(info, resume_from)
                initial = [frame for event in backlog if (frame := stream.frame(event)) is not None]
            except ApiError as err:
                error = err
        if error is not None:
            await response.write(orjson.dumps({"type": "ERROR", "object": error.status()}) + b"\n")
            return response
        if send_initial and bookmarks:
            initial.append(stream.bookmark(initial_events_end=True))
        return await stream.run(request, response, initial, timeout=timeout, bookmarks=bookmarks)

    def encode_event(self, key: tuple[int, str, str, str], make: Callable[[], bytes]) -> bytes:
        """Serialised watch frames shared by all watchers of one event (bounded cache)."""
        cached = self._encoded.get(key)
        if cached is None:
            cached = make()
            self._encoded[key] = cached
            if len(self._encoded) > 512:
                self._encoded.popitem(last=False)
        return cached

    # ------------------------------------------------------------------ control endpoint
    async def _control(self, request: web.Request, path: str, identity: UserInfo) -> web.StreamResponse:
        from kaiwo_sandbox.apiserver.control import handle_control

        try:
            self.access.check_control(identity, request.method, request.path)
            return await handle_control(self, request, path)
        except ApiError as err:
            return error_response(err)
        except (ValueError, TypeError) as exc:
            return error_response(ApiError.bad_request(str(exc)))

    def mint_token(self, user: str, groups: Sequence[str] = ()) -> str:
        return self.access.authn.mint(user, list(groups))


@contextlib.contextmanager
def _no_scope() -> Iterator[None]:
    yield


def warning_header(text: str) -> str:
    """A `Warning` header value as the apiserver writes one: code 299, agent "-", the text quoted."""
    return '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


_CUT = object()


class WatchStream:
    """One HTTP watch: filters committed events through its namespace and selectors (an object
    leaving the selection is DELETED for this watcher, entering it is ADDED), and writes frames."""

    def __init__(self, server: ApiServer, info: ResourceInfo, gvr: GVR, namespace: str, selection: Selection,
                 table: str | None) -> None:
        self.server = server
        self.store = server.store
        self.info = info
        self.gvr = gvr
        self.namespace = namespace
        self.selection = selection
        self.table = table
        self.pending: list[WatchEvent | object] = []
        self.wake = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self.cut_after: int | None = None
        self.overflowed = False
        self.writing = False  # awaiting the socket: a client that does not read keeps it so
        self._transport: asyncio.Transport | None = None

    def encode(self, kind: str, obj: JsonObj) -> bytes:
        if self.table is not None:
            table = self.server._table(self.info, self.gvr.version, [obj], self.table)
            return orjson.dumps({"type": kind, "object": table}) + b"\n"
        return orjson.dumps({"type": kind, "object": obj}) + b"\n"

    def frame(self, event: WatchEvent) -> bytes | None:
        obj = event.object
        if self.namespace and (obj.get("metadata") or {}).get("namespace") != self.namespace:
            return None
        kind: str = event.type
        if not self.selection.everything:
            now_in = self.selection.matches(obj)
            was_in = event.old is not None and self.selection.matches(event.old)
            if kind == "MODIFIED":
                if now_in and not was_in:
                    kind = "ADDED"
                elif was_in and not now_in:
                    kind = "DELETED"
                elif not now_in:
                    return None
            elif (kind == "ADDED" and not now_in) or (kind == "DELETED" and not (now_in or was_in)):
                return None
        view = self.store.view(self.info, self.gvr.version, obj)
        if self.table is not None:
            return self.encode(kind, view)
        key = (event.resource_version, self.info.group, self.gvr.version, kind)
        return self.server.encode_event(key, lambda: self.encode(kind, view))

    def bookmark(self, *, initial_events_end: bool = False) -> bytes:
        meta: JsonObj = {"resourceVersion": str(self.store.resource_version)}
        if initial_events_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": self.info.kind, "apiVersion": self.gvr.api_version, "metadata": meta}
        return orjson.dumps({"type": "BOOKMARK", "object": obj}) + b"\n"

    def _on_event(self, event: WatchEvent) -> None:
        if self.overflowed:
            return
        self.pending.append(event)
        if self.writing and len(self.pending) > self.server.watch_buffer_limit:
            # A watcher that does not read: the stream's writer is stuck on a full socket while events
            # pile up. As the watch cache does with an unresponsive watcher ("Forcing watcher close
            # due to unresponsiveness"), drop what is queued and close the connection; the client
            # re-watches from the last resourceVersion it received.
            self.overflowed = True
            self.pending = [_CUT]
            log.warning("sandbox: closing a %s watch that stopped reading (%d events queued)",
                        self.info.resource, self.server.watch_buffer_limit)
            if self._transport is not None:
                self._transport.abort()
        self.wake.set()

    def _cut(self, after_events: int) -> None:
        # Fault injection may call this from a test thread: hop onto the stream's loop.
        self._loop.call_soon_threadsafe(self._cut_on_loop, after_events)

    def _cut_on_loop(self, after_events: int) -> None:
        if after_events <= 0:
            self.pending.append(_CUT)
            self.wake.set()
        else:
            self.cut_after = after_events

    async def run(self, request: web.Request, response: web.StreamResponse, initial: list[bytes], *,
                  timeout: float, bookmarks: bool) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        self._transport = request.transport
        remove_watcher = self.store.add_watcher(self.store.primary(self.info).storage, self._on_event)
        unregister = self.server.faults.register_watch(self._cut)
        self.server.open_watches += 1
        deadline = loop.time() + timeout
        timers = [loop.call_at(deadline, self.wake.set)]
        interval = self.server.bookmark_interval

        def bookmark_after(now: float) -> float:
            # The watch cache's nextBookmarkTime: every bookmark period, and once right before the
            # watch's deadline, so a client resumes from a fresh resourceVersion after the stream ends.
            before_deadline = deadline - PRE_DEADLINE_BOOKMARK_SECONDS
            return before_deadline if now < before_deadline < now + interval else now + interval

        next_bookmark = bookmark_after(loop.time())
        if bookmarks:
            timers.append(loop.call_at(next_bookmark, self.wake.set))
        try:
            if initial:
                self.writing = True
                await response.write(b"".join(initial))
                self.writing = False
            while True:
                await self.wake.wait()
                self.wake.clear()
                batch, self.pending = self.pending, []
                frames: list[bytes] = []
                stop = False
                for item in batch:
                    if item is _CUT:
                        stop = True
                        break
                    assert isinstance(item, WatchEvent)
                    frame = self.frame(item)
                    if frame is None:
                        continue
                    frames.append(frame)
                    if self.cut_after is not None:
                        self.cut_after -= 1
                        if self.cut_after <= 0:
                            stop = True
                            break
                now = loop.time()
                if bookmarks and now >= next_bookmark and not stop:
                    frames.append(self.bookmark())
                    next_bookmark = bookmark_after(now)
                    timers.append(loop.call_at(next_bookmark, self.wake.set))
                if frames:
                    self.writing = True
                    await response.write(b"".join(frames))
                    self.writing = False
                if stop or now >= deadline:
                    break
        except ConnectionResetError:
            pass
        finally:
            remove_watcher()
            unregister()
            self.server.open_watches -= 1
            for timer in timers:
                timer.cancel()
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await response.write_eof()
        return response
