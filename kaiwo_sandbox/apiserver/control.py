"""The sandbox's own control endpoint, `/sandbox/v1/...` (same bearer token as the API):
fault injection, the audit log and extra client identities, for tests driving a sandbox in
another process. Documented in docs/sandbox.md."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import orjson
from aiohttp import web

from kaiwo_sandbox.apiserver.audit import AuditLog
from kaiwo_sandbox.apiserver.faults import FaultInjector
from kaiwo_sandbox.contracts import ApiError

if TYPE_CHECKING:
    from kaiwo_sandbox.apiserver.auth.access import Access
    from kaiwo_sandbox.storage.store import ObjectStore


class ControlHandles(Protocol):
    """What the control routes may touch: the fault injector, the audit log, token minting (the store and the authenticator, for
    service-account tokens) (the
    server hands itself; the routes see nothing else of it, so control does not import the server)."""

    @property
    def faults(self) -> FaultInjector: ...

    @property
    def audit(self) -> AuditLog: ...

    @property
    def store(self) -> ObjectStore: ...

    @property
    def access(self) -> Access: ...

    def mint_token(self, user: str, groups: Sequence[str] = ()) -> str: ...


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiError.bad_request(f"the body of the request was not valid JSON: {exc}") from None


def mint_from_json(server: ControlHandles, body: Any) -> dict[str, Any]:
    """POST /sandbox/v1/tokens: {"user": NAME, "groups": [..]} or {"serviceAccount": "NS/NAME"}."""
    if not isinstance(body, dict):
        raise ApiError.bad_request("tokens: the body is a JSON object")
    account = body.get("serviceAccount")
    if account is not None:
        namespace, _, name = str(account).partition("/")
        if not namespace or not name:
            raise ApiError.bad_request('tokens: "serviceAccount" is "NAMESPACE/NAME"')
        from kaiwo_sandbox.apiserver.auth.reviews import token_request

        answer = token_request({"spec": {}}, namespace=namespace, name=name, store=server.store,
                               authn=server.access.authn)
        return {"user": f"system:serviceaccount:{namespace}:{name}", "token": answer["status"]["token"]}
    user = body.get("user")
    if not isinstance(user, str) or not user:
        raise ApiError.bad_request('tokens: "user" (a non-empty string) is required')
    groups = body.get("groups") or []
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise ApiError.bad_request('tokens: "groups" is a list of strings')
    return {"user": user, "token": server.mint_token(user, groups)}


async def handle_control(server: ControlHandles, request: web.Request, path: str) -> web.StreamResponse:
    method = request.method
    path = path.strip("/")
    if path == "faults":
        if method == "GET":
            return _json({"faults": [r.to_json() for r in server.faults.rules()]})
        if method == "POST":
            body = await _body(request)
            if not isinstance(body, dict):
                raise ApiError.bad_request("a fault is a JSON object")
            return _json({"id": server.faults.add_json(body)}, 201)
        if method == "DELETE":
            server.faults.clear()
            return _json({"cleared": True})
    elif path.startswith("faults/") and method == "DELETE":
        server.faults.remove(int(path.split("/", 1)[1]))
        return _json({"removed": True})
    elif path == "watches/cut" and method == "POST":
        body = await _body(request)
        return _json({"cut": server.faults.cut_watches(int(body.get("afterEvents", 0)))})
    elif path == "expire" and method == "POST":
        body = await _body(request)
        server.faults.expire_next(int(body.get("count", 1)))
        return _json({"expiring": int(body.get("count", 1))})
    elif path == "audit":
        if method == "GET":
            query = request.query
            records = server.audit.records(verb=query.get("verb"), resource=query.get("resource"),
                                           user=query.get("user"), namespace=query.get("namespace"),
                                           group=query.get("group"))
            return _json({"records": [r.to_json() for r in records],
                          "byVerb": server.audit.by_verb(user=query.get("user"))})
        if method == "DELETE":
            server.audit.clear()
            return _json({"cleared": True})
    elif path == "tokens" and method == "POST":
        body = await _body(request)
        return _json(mint_from_json(server, body), 201)
    raise ApiError(404, "NotFound", f"no sandbox control endpoint {method} /sandbox/v1/{path}; see docs/sandbox.md")
