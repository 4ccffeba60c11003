"""Errors as the Kubernetes API server words them (a `Status` with causes naming field paths), and
the handlers that make sure no exception escapes a request as anything else."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from kaiwo_ray.api.errors import ManifestError, format_path
from kaiwo_ray.kube.errors import KubeError
from serve.models import Status, StatusCause, StatusDetails

log = logging.getLogger(__name__)

REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
           406: "NotAcceptable", 409: "Conflict", 413: "RequestEntityTooLarge", 415: "UnsupportedMediaType",
           422: "Invalid", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}


# What each error status means at the admin API: the OpenAPI document lists, per operation, every
# status it can answer (`error_responses`), each with the Status body.
ERROR_DESCRIPTIONS = {
    400: "BadRequest: the body or a parameter cannot be read (unreadable JSON or YAML, a bad selector)",
    401: "Unauthorized: no bearer token, or one the cluster does not accept (TokenReview)",
    403: "Forbidden: the user's RBAC does not allow it (SubjectAccessReview); the message names user, verb, "
         "resource and namespace",
    404: "NotFound: no such workload (or pod, ClusterQueue), or a path this API does not serve",
    409: "Conflict: the API server refused the write (the object exists, or changed: uid precondition)",
    410: "Expired: the continue token cannot be used",
    413: "RequestEntityTooLarge: a body over the limit (1 MiB by default)",
    422: "Invalid: parameters or manifest invalid; details.causes[].field names each field path",
    502: "the API server's answer to a write could not be read",
    503: "ServiceUnavailable: the API server, asked to write or stream, is unavailable",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for these error statuses, each a Status."""
    return {code: {"model": Status, "description": ERROR_DESCRIPTIONS[code]} for code in codes}


READ = error_responses(401, 403, 404, 422)
"""A read of one workload (or its events, explain, GPUs) from the cache."""


class ApiError(Exception):
    """Raised by handlers: becomes a Status answer with this code."""

    def __init__(self, code: int, message: str, *, reason: str | None = None, kind: str | None = None,
                 name: str | None = None, causes: list[StatusCause] | None = None) -> None:
        super().__init__(message)
        self.status = Status(code=code, reason=reason or REASONS.get(code, "Unknown"), message=message,
                             details=StatusDetails(kind=kind, name=name, causes=causes or [])
                             if (kind or name or causes) else None)


def status_response(status: Status, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status.model_dump(exclude_none=True), status_code=status.code, headers=headers)


def invalid_manifest(err: ManifestError, kind: str | None, name: str | None) -> ApiError:
    causes = [StatusCause(reason=e.reason, field=e.path, message=e.message) for e in err.errors]
    what = f'{kind or "object"} "{name}"' if name else (kind or "object")
    return ApiError(422, f"{what} is invalid: " + "; ".join(str(e) for e in err.errors), kind=kind, name=name,
                    causes=causes)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this path (Starlette's 405 names only the first route's)."""
    from starlette.routing import Match, Route

    methods: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, Route) and route.methods and route.matches(request.scope)[0] != Match.NONE:
            methods |= route.methods
    return sorted(methods)


def install(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return status_response(exc.status)

    @app.exception_handler(RequestValidationError)
    async def bad_parameters(request: Request, exc: RequestValidationError) -> JSONResponse:
        causes = [StatusCause(field=format_path(tuple(e.get("loc") or ())), message=str(e.get("msg") or ""))
                  for e in exc.errors()]
        message = "; ".join(f"{c.field}: {c.message}" for c in causes)
        return status_response(Status(code=422, reason="Invalid", message=message,
                                      details=StatusDetails(causes=causes)))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = str(exc.detail)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            message = f"method {request.method} is not allowed on {request.url.path}"
            headers["Allow"] = ", ".join(allowed_methods(request))
        elif exc.status_code == 404 and message == "Not Found":
            message = f"no such path: {request.url.path}"
        return status_response(Status(code=exc.status_code, reason=REASONS.get(exc.status_code, "Unknown"),
                                      message=message), headers=headers)

    @app.exception_handler(KubeError)
    async def kube_error(request: Request, exc: KubeError) -> JSONResponse:
        """The API server's answer to a write, passed on (its causes keep their field paths)."""
        code = exc.code if 400 <= exc.code < 600 else 502
        causes = [StatusCause(reason=str(c.get("reason") or "FieldValueInvalid"), message=str(c.get("message") or ""),
                              field=str(c.get("field") or "")) for c in exc.causes]
        details = exc.status.get("details") or {}
        return status_response(Status(code=code, reason=exc.reason or REASONS.get(code, "Unknown"),
                                      message=exc.message or str(exc),
                                      details=StatusDetails(kind=details.get("kind"), name=details.get("name"),
                                                            causes=causes) if details or causes else None))

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return status_response(Status(code=500, reason="InternalError",
                                      message=f"internal error: {type(exc).__name__}: {exc}"))
