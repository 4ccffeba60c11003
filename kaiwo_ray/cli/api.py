"""A small synchronous Kubernetes API client for the `kaiwo` commands, over urllib3.

Every answer is checked here: a refused connection, a TLS failure, 401 and 403 become a
`ClusterError` naming the server and what to do; other non-2xx answers become `ApiStatusError`
carrying the server's Status (callers turn 404s into "no such workload"). Bodies are parsed with
orjson into plain dicts: `kaiwo list -A` over ten thousand workloads is one request and one parse.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote, urlencode

import orjson
import urllib3

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.cli.errors import ClusterError
from kaiwo_ray.cli.kubeconfig import ClusterAccess
from kaiwo_ray.kube.discovery import ClusterApis, parse_group_list
from kaiwo_ray.kube.resources import Resource

FIELD_MANAGER = "kaiwo-cli"
USER_AGENT = "kaiwo-cli"


class ApiStatusError(ClusterError):
    """A non-2xx answer other than 401/403: `code`, `reason` and the server's message."""

    def __init__(self, code: int, reason: str, message: str, status: JsonObj | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.status = status or {}


def path_of(res: Resource, namespace: str | None = None, name: str | None = None,
            subresource: str | None = None) -> str:
    """`res.path(...)` with the namespace and name URL-quoted: the CLI's come from its user."""
    return res.path(namespace and quote(namespace, safe=""), name and quote(name, safe=""), subresource)


class Api:
    def __init__(self, access: ClusterAccess, *, timeout: float = 30.0) -> None:
        self.access = access
        self.timeout = timeout
        self._apis: ClusterApis | None = None
        kwargs: dict[str, Any] = {"maxsize": 4, "retries": False}
        if access.ssl_context is not None:
            kwargs["ssl_context"] = access.ssl_context
            if access.server_hostname:
                kwargs["server_hostname"] = access.server_hostname
        self._pool = urllib3.PoolManager(**kwargs)

    def close(self) -> None:
        self._pool.clear()

    # -- transport -----------------------------------------------------------------------------
    def _url(self, path: str, query: Mapping[str, Any] | None) -> str:
        params = {k: ("true" if v is True else v) for k, v in (query or {}).items() if v not in (None, False, "")}
        return self.access.server + path + (f"?{urlencode(params)}" if params else "")

    def raw(self, method: str, path: str, *, query: Mapping[str, Any] | None = None, body: bytes | None = None,
            content_type: str = "application/json", stream: bool = False, timeout: float | None = None,
            accept: str = "application/json") -> urllib3.BaseHTTPResponse:
        headers = {"Accept": accept, "User-Agent": USER_AGENT, **self.access.headers}
        if body is not None:
            headers["Content-Type"] = content_type
        url = self._url(path, query)
        try:
            response = self._pool.request(method, url, body=body, headers=headers, preload_content=not stream,
                                          timeout=urllib3.Timeout(connect=10.0, read=timeout or self.timeout),
                                          redirect=False)
        except urllib3.exceptions.SSLError as exc:
            raise ClusterError(f"TLS with {self.access.server} failed ({_reason(exc)}): check the cluster's "
                               f"certificate-authority in {self.access.source}") from None
        except (urllib3.exceptions.ReadTimeoutError, TimeoutError):
            raise ClusterError(f"{self.access.server} did not answer {method} {path} in time: "
                               "is the cluster overloaded?") from None
        except urllib3.exceptions.HTTPError as exc:
            raise ClusterError(f"cannot reach the cluster at {self.access.server} ({_reason(exc)}): is it running? "
                               f"(kubeconfig {self.access.source}, context {self.access.context})") from None
        if response.status >= 400:
            data = response.data if not stream else response.read()
            response.release_conn()
            raise self._error(response.status, data)
        return response

    def _error(self, code: int, data: bytes) -> ClusterError:
        try:
            status = orjson.loads(data) if data else {}
        except orjson.JSONDecodeError:
            status = {}
        if not isinstance(status, dict):
            status = {}
        message = str(status.get("message") or data[:200].decode(errors="replace").strip() or f"HTTP {code}")
        if code == 401:
            return ClusterError(f"the cluster at {self.access.server} rejected your credentials (401 Unauthorized): "
                                f"refresh the token or certificate of context {self.access.context} in "
                                f"{self.access.source}")
        if code == 403:
            return ClusterError(f"forbidden: {message}: ask your cluster admin for access")
        return ApiStatusError(code, str(status.get("reason") or ""), message, status)

    def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None, body: Any = None,
                content_type: str = "application/json") -> JsonObj:
        data = None if body is None else orjson.dumps(body)
        response = self.raw(method, path, query=query, body=data, content_type=content_type)
        parsed = orjson.loads(response.data) if response.data else {}
        return parsed if isinstance(parsed, dict) else {}

    def served(self, res: Resource) -> Resource | None:
        """`res` at the version the cluster serves (`kube.discovery`, asked once per client), None when
        it serves the kind at no version kaiwo-ray speaks."""
        if self._apis is None:
            self._apis = ClusterApis(parse_group_list(self.get("/apis")))
        return self._apis.served(res)

    # -- verbs ---------------------------------------------------------------------------------
    def get(self, path: str, **query: Any) -> JsonObj:
        return self.request("GET", path, query=query)

    def get_or_none(self, path: str) -> JsonObj | None:
        try:
            return self.get(path)
        except ApiStatusError as err:
            if err.code == 404:
                return None
            raise

    def list(self, path: str, **query: Any) -> JsonObj:
        return self.get(path, **query)

    def apply(self, path: str, body: JsonObj, *, force: bool = True, field_manager: str = FIELD_MANAGER) -> JsonObj:
        """Server-side apply under the `kaiwo-cli` field manager (or the one given)."""
        query = {"fieldManager": field_manager, "force": force, "fieldValidation": "Strict"}
        return self.request("PATCH", path, query=query, body=body, content_type="application/apply-patch+yaml")

    def delete(self, path: str, *, propagation: str = "Background") -> JsonObj:
        return self.request("DELETE", path, body={"kind": "DeleteOptions", "apiVersion": "v1",
                                                  "propagationPolicy": propagation})

    def stream(self, path: str, *, query: Mapping[str, Any] | None = None,
               timeout: float | None = None) -> Iterator[bytes]:
        """The body of a streaming answer (logs, watches), chunk by chunk as the server sends it."""
        response = self.raw("GET", path, query=query, stream=True, timeout=timeout, accept="*/*")
        try:
            yield from response.stream(64 * 1024, decode_content=True)
        except urllib3.exceptions.ProtocolError:
            return  # the server ended the stream (a watch timeout, a follow that finished)
        finally:
            response.release_conn()

    def watch(self, path: str, *, resource_version: str, timeout_seconds: int = 300,
              **query: Any) -> Iterator[JsonObj]:
        """Watch events ({type, object}) from `resource_version` until the server ends the stream."""
        params = {**query, "watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
                  "timeoutSeconds": timeout_seconds}
        buffer = b""
        for chunk in self.stream(path, query=params, timeout=timeout_seconds + 30):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    event = orjson.loads(line)
                    if isinstance(event, dict):
                        yield event


def _reason(exc: BaseException) -> str:
    inner = getattr(exc, "reason", None) or exc
    text = str(inner)
    for known in ("Connection refused", "Name or service not known", "No route to host", "timed out",
                  "CERTIFICATE_VERIFY_FAILED", "Network is unreachable"):
        if known in text:
            return known.lower().replace("_", " ")
    return text.split(": ", 1)[-1][:160]
