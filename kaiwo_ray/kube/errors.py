"""Typed API errors, built from the apiserver's Status body so callers branch on type, not codes."""

from __future__ import annotations

from typing import Any

import orjson


class KubeError(Exception):
    """An API call failed. `status` is the apiserver's Status object (or a synthesized one)."""

    code: int = 0

    def __init__(self, code: int, reason: str, message: str, status: dict[str, Any] | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.status = status or {}
        self.retry_after = retry_after

    @property
    def causes(self) -> list[dict[str, Any]]:
        details = self.status.get("details") or {}
        causes: list[dict[str, Any]] = details.get("causes") or []
        return causes


class BadRequest(KubeError):
    code = 400


class Unauthorized(KubeError):
    code = 401


class Forbidden(KubeError):
    code = 403


class NotFound(KubeError):
    code = 404


class Conflict(KubeError):
    """409 reason Conflict: stale resourceVersion or a server-side-apply field conflict."""

    code = 409


class AlreadyExists(Conflict):
    """409 reason AlreadyExists (a Conflict, so `except Conflict` catches both where that is meant)."""


class Gone(KubeError):
    """410: resourceVersion too old for a watch or a list continue token."""

    code = 410


class UnsupportedMediaType(KubeError):
    code = 415


class Invalid(KubeError):
    """422: the object failed validation; `causes` names each bad field."""

    code = 422


class TooManyRequests(KubeError):
    code = 429


class ServerError(KubeError):
    """5xx: retry with backoff."""


class TransportError(KubeError):
    """No HTTP answer (connection refused/reset, timeout)."""


class NotLeader(KubeError):
    """A write refused by the client itself: this instance does not (or no longer) hold its Lease.
    Retryable: the key waits until leadership comes back."""


class WatchIdle(TransportError):
    """A watch stream sent nothing (not even a bookmark) for longer than the caller's idle timeout:
    the connection is probably half-open. Reconnect at once."""


_BY_CODE: dict[int, type[KubeError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 410: Gone,
    415: UnsupportedMediaType, 422: Invalid, 429: TooManyRequests,
}


def error_from_response(code: int, body: bytes, retry_after: str | None = None) -> KubeError:
    try:
        status = orjson.loads(body) if body else {}
    except orjson.JSONDecodeError:
        status = {}
    if not isinstance(status, dict):
        status = {}
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or body[:200].decode(errors="replace"))
    cls: type[KubeError]
    if code == 409 and reason == "AlreadyExists":
        cls = AlreadyExists
    elif code >= 500:
        cls = ServerError
    else:
        cls = _BY_CODE.get(code, KubeError)
    delay: float | None = None
    if retry_after:
        try:
            delay = float(retry_after)
        except ValueError:
            delay = None
    return cls(code, reason or cls.__name__, message, status, delay)


RETRYABLE: tuple[type[KubeError], ...] = (ServerError, TooManyRequests, TransportError, Conflict, NotLeader)
"""Errors a reconcile should simply retry (with backoff): transient or a lost optimistic-lock race."""
