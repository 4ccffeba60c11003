"""An async client for every resource in `resources.py`, over the official `kubernetes.aio` package.

It uses the package's configuration, auth and aiohttp session, but sends and parses with orjson
into plain dicts instead of building the generated per-field model objects: that is the
controllers' hot path, and the objects are fed to pydantic models and the renderer as dicts anyway.
Every non-2xx answer raises a typed `KubeError` subclass.
"""

from __future__ import annotations

import builtins
import os
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlencode

import aiohttp
import orjson

from kaiwo_ray.kube.errors import KubeError, TransportError, error_from_response
from kaiwo_ray.kube.resources import Resource

JsonObj = dict[str, Any]

FIELD_MANAGER = "kaiwo-ray"
_AUTH_TTL_SECONDS = 60.0

PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}


class KubeClient:
    """Thin async verbs: get, list, create, replace, apply, patch, delete, watch."""

    def __init__(self, api_client: Any, *, request_timeout: float = 30.0, user_agent: str = "kaiwo-ray") -> None:
        self._api = api_client
        self._timeout = request_timeout
        self._user_agent = user_agent
        self._auth: str | None = None
        self._auth_expires = 0.0

    @classmethod
    async def from_kubeconfig(cls, path: str | None = None, context: str | None = None) -> KubeClient:
        from kubernetes.aio import client as aio_client
        from kubernetes.aio import config as aio_config

        configuration = aio_client.Configuration()
        load: Any = aio_config.load_kube_config  # untyped upstream
        await load(config_file=path, context=context, client_configuration=configuration)
        return cls(aio_client.ApiClient(_without_netrc_lookup(configuration)))

    @classmethod
    def in_cluster(cls) -> KubeClient:
        from kubernetes.aio import client as aio_client
        from kubernetes.aio import config as aio_config

        configuration = aio_client.Configuration()
        load: Any = aio_config.load_incluster_config  # untyped upstream
        load(client_configuration=configuration)
        return cls(aio_client.ApiClient(_without_netrc_lookup(configuration)))

    async def close(self) -> None:
        await self._api.close()

    # -- transport ---------------------------------------------------------------------------

    def _session(self) -> aiohttp.ClientSession:
        """The package's own aiohttp session (its TLS context, proxy and pool settings)."""
        rest = self._api.rest_client
        if rest.pool_manager is None:
            rest.pool_manager = rest._create_pool_manager()
        session: aiohttp.ClientSession = rest.pool_manager
        return session

    async def _authorization(self, *, refresh: bool = False) -> str | None:
        """The Authorization header from the package's configuration (which runs its token-refresh
        hooks), cached for a minute instead of being rebuilt on every request."""
        now = time.monotonic()
        if refresh or now >= self._auth_expires:
            settings = await self._api.configuration.auth_settings()
            bearer = settings.get("BearerToken")
            self._auth = bearer["value"] if bearer else None
            self._auth_expires = now + _AUTH_TTL_SECONDS
        return self._auth

    async def _send(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                    body: Any = None, content_type: str = "application/json",
                    timeout: float | None = None) -> aiohttp.ClientResponse:
        """One request; returns the aiohttp response (status already checked).

        The generated client's request path (param_serialize, sanitize_for_serialization, stdlib
        json, its retry wrapper) was ~45% of a reconcile's CPU: this sends orjson bytes on the same
        session instead. A 401 refreshes the token once (expired exec/OIDC credentials)."""
        configuration = self._api.configuration
        url = configuration.host + path
        params = [(k, str(v)) for k, v in (query or {}).items() if v is not None]
        if params:
            url += "?" + urlencode(params)
        data = None if body is None else orjson.dumps(body)
        extra: dict[str, Any] = {}
        if configuration.proxy:
            extra["proxy"] = configuration.proxy
        if configuration.tls_server_name:
            extra["server_hostname"] = configuration.tls_server_name
        client_timeout = aiohttp.ClientTimeout(total=timeout or self._timeout)
        for attempt in (0, 1):
            headers = {"Accept": "application/json", "Content-Type": content_type, "User-Agent": self._user_agent}
            auth = await self._authorization(refresh=attempt > 0)
            if auth:
                headers["Authorization"] = auth
            try:
                response = await self._session().request(method, url, data=data, headers=headers,
                                                         timeout=client_timeout, **extra)
            except (TimeoutError, OSError, aiohttp.ClientError) as exc:
                raise TransportError(0, "TransportError", f"{method} {path}: {exc}") from exc
            if response.status == 401 and attempt == 0:
                response.release()
                continue
            if response.status >= 300:
                try:
                    payload = await response.read()
                except (TimeoutError, OSError, aiohttp.ClientError):
                    payload = b""
                raise error_from_response(response.status, payload, response.headers.get("Retry-After"))
            return response
        raise AssertionError("unreachable")

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = await self._send(method, path, **kwargs)
        try:
            data = await response.read()
        except (TimeoutError, OSError, aiohttp.ClientError) as exc:  # the body can fail after the headers
            raise TransportError(0, "TransportError", f"{method} {path}: {exc}") from exc
        return orjson.loads(data) if data else None

    # -- verbs ---------------------------------------------------------------------------------

    async def get(self, res: Resource, name: str, namespace: str | None = None, *,
                  subresource: str | None = None) -> JsonObj:
        result: JsonObj = await self.request("GET", res.path(namespace, name, subresource))
        return result

    async def list(self, res: Resource, namespace: str | None = None, *, label_selector: str | None = None,
                   field_selector: str | None = None, limit: int | None = None,
                   continue_token: str | None = None, resource_version: str | None = None) -> JsonObj:
        query = {"labelSelector": label_selector, "fieldSelector": field_selector, "limit": limit,
                 "continue": continue_token, "resourceVersion": resource_version}
        result: JsonObj = await self.request("GET", res.path(namespace), query=query)
        return result

    async def list_all(self, res: Resource, namespace: str | None = None, *, label_selector: str | None = None,
                       page_size: int = 500) -> tuple[builtins.list[JsonObj], str]:
        """Every item, following continue tokens; returns (items, resourceVersion of the list)."""
        items: builtins.list[JsonObj] = []
        token: str | None = None
        while True:
            page = await self.list(res, namespace, label_selector=label_selector, limit=page_size,
                                   continue_token=token)
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue") or None
            if not token:
                return items, str(meta.get("resourceVersion", ""))

    async def create(self, res: Resource, body: JsonObj, namespace: str | None = None, *,
                     field_manager: str = FIELD_MANAGER) -> JsonObj:
        ns = namespace or (body.get("metadata") or {}).get("namespace")
        result: JsonObj = await self.request("POST", res.path(ns), body=body,
                                             query={"fieldManager": field_manager})
        return result

    async def replace(self, res: Resource, body: JsonObj, *, subresource: str | None = None,
                      field_manager: str = FIELD_MANAGER) -> JsonObj:
        meta = body.get("metadata") or {}
        path = res.path(meta.get("namespace"), meta["name"], subresource)
        result: JsonObj = await self.request("PUT", path, body=body, query={"fieldManager": field_manager})
        return result

    async def apply(self, res: Resource, body: JsonObj, *, field_manager: str = FIELD_MANAGER,
                    force: bool = True, subresource: str | None = None) -> JsonObj:
        """Server-side apply: send only the fields we own; `force` takes them over from others."""
        meta = body.get("metadata") or {}
        path = res.path(meta.get("namespace"), meta["name"], subresource)
        query = {"fieldManager": field_manager, "force": "true" if force else None}
        result: JsonObj = await self.request("PATCH", path, body=body, query=query,
                                             content_type=PATCH_TYPES["apply"])
        return result

    async def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None,
                    field_manager: str = FIELD_MANAGER) -> JsonObj:
        result: JsonObj = await self.request("PATCH", res.path(namespace, name, subresource), body=patch,
                                             query={"fieldManager": field_manager},
                                             content_type=PATCH_TYPES[patch_type])
        return result

    async def delete(self, res: Resource, name: str, namespace: str | None = None, *,
                     propagation_policy: str | None = "Background", uid: str | None = None) -> JsonObj | None:
        """Delete; `uid` adds a precondition so we never delete a same-named successor."""
        options: JsonObj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if uid:
            options["preconditions"] = {"uid": uid}
        result: JsonObj | None = await self.request("DELETE", res.path(namespace, name), body=options)
        return result

    async def watch(self, res: Resource, namespace: str | None = None, *, resource_version: str,
                    timeout_seconds: int = 300, allow_bookmarks: bool = True,
                    label_selector: str | None = None) -> AsyncIterator[JsonObj]:
        """Yield watch events ({type, object}) until the server ends the stream.

        An ERROR event is yielded as is (the caller relists on code 410)."""
        query = {"watch": "1", "resourceVersion": resource_version, "timeoutSeconds": timeout_seconds,
                 "allowWatchBookmarks": "true" if allow_bookmarks else None, "labelSelector": label_selector}
        response = await self._send("GET", res.path(namespace), query=query, timeout=timeout_seconds + 30)
        stream = response.content
        try:
            while True:
                try:
                    line = await stream.readline()
                except (TimeoutError, OSError, aiohttp.ClientError) as exc:
                    raise TransportError(0, "TransportError", f"watch {res.plural}: {exc}") from exc
                if not line:
                    return
                line = line.strip()
                if line:
                    yield orjson.loads(line)
        finally:
            response.release()


_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def _without_netrc_lookup(configuration: Any) -> Any:
    """The package's aiohttp session trusts the environment, which makes aiohttp look ~/.netrc up on
    a worker thread before every request (our requests carry a bearer token, so it never applies):
    a thread hop per request, which on a busy machine costs more than the request. The environment
    is still trusted when it names a proxy, the one setting of it that matters to us."""
    if not any(os.environ.get(name) for name in _PROXY_VARIABLES):
        configuration.client_session_kwargs = {"trust_env": False}
    return configuration


__all__ = ["FIELD_MANAGER", "KubeClient", "KubeError"]
