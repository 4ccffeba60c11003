"""The sandbox's own control endpoint, `/sandbox/v1/...` (same bearer token as the API):
fault injection, the audit log and extra client identities, for tests driving a sandbox in
another process. Documented in docs/sandbox.md."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from kaiwo_ray.sandbox.types import ApiError

if TYPE_CHECKING:
    from kaiwo_ray.sandbox.server import ApiServer


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


async def handle_control(server: ApiServer, request: web.Request, path: str) -> web.StreamResponse:
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
        user = body.get("user")
        if not isinstance(user, str) or not user:
            raise ApiError.bad_request('tokens: "user" (a non-empty string) is required')
        return _json({"user": user, "token": server.mint_token(user)}, 201)
    raise ApiError(404, "NotFound", f"no sandbox control endpoint {method} /sandbox/v1/{path}; see docs/sandbox.md")
