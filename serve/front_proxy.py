"""Request-header authentication, as an aggregated API server does it (k8s.io/apiserver
`authentication_dynamic_request_header.go`, `request/x509`, `request/headerrequest`): a request whose
TLS client certificate was signed by the requestheader CA (the TLS layer verified it: see
aggregated.py) and names an allowed CN comes from the aggregator, which says who the user is in
X-Remote-User/-Group/-Extra-*. Every other request (no client certificate) is authenticated by its
bearer token as before, and the X-Remote-* headers it carries are ignored: only the aggregator's
certificate makes them believable.

The configuration is what kube-apiserver publishes in kube-system/extension-apiserver-authentication.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from serve.auth import User

CONFIGMAP_NAMESPACE, CONFIGMAP_NAME = "kube-system", "extension-apiserver-authentication"
# The library's defaults where the ConfigMap says nothing.
DEFAULT_USERNAME_HEADERS = ("x-remote-user",)
DEFAULT_GROUP_HEADERS = ("x-remote-group",)
DEFAULT_EXTRA_PREFIXES = ("x-remote-extra-",)


class NotAllowed(Exception):
    """A client certificate from the requestheader CA for a CN not in the allowed list."""


@dataclass(frozen=True, slots=True)
class RequestHeaderConfig:
    ca_pem: str
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = DEFAULT_USERNAME_HEADERS
    group_headers: tuple[str, ...] = DEFAULT_GROUP_HEADERS
    extra_prefixes: tuple[str, ...] = DEFAULT_EXTRA_PREFIXES


def _strings(raw: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    if not raw:
        return default
    values = json.loads(raw)
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValueError(f"expected a JSON list of strings, got {raw!r}")
    return tuple(v.lower() for v in values) or default


def from_configmap(data: Mapping[str, str]) -> RequestHeaderConfig | None:
    """The requestheader settings of the ConfigMap's data; None when it has no requestheader CA (then
    no request is trusted by certificate)."""
    ca = data.get("requestheader-client-ca-file") or ""
    if not ca.strip():
        return None
    allowed = json.loads(data.get("requestheader-allowed-names") or "[]")
    return RequestHeaderConfig(
        ca_pem=ca, allowed_names=tuple(str(n) for n in allowed),
        username_headers=_strings(data.get("requestheader-username-headers"), DEFAULT_USERNAME_HEADERS),
        group_headers=_strings(data.get("requestheader-group-headers"), DEFAULT_GROUP_HEADERS),
        extra_prefixes=_strings(data.get("requestheader-extra-headers-prefix"), DEFAULT_EXTRA_PREFIXES))


def client_common_name(scope: Mapping[str, Any]) -> str | None:
    """The verified client certificate's CN, from the ASGI TLS extension aggregated.py fills in."""
    tls = (scope.get("extensions") or {}).get("tls") or {}
    name = tls.get("client_cert_common_name")
    return str(name) if name is not None else None


def authenticate(config: RequestHeaderConfig, common_name: str, headers: Iterable[tuple[str, str]]) -> User | None:
    """The user the aggregator names; NotAllowed for a CN outside the allowed list; None when no
    username header is set (then the request is not authenticated by this method)."""
    if config.allowed_names and common_name not in config.allowed_names:
        raise NotAllowed(f"x509: subject with cn={common_name} is not in the allowed list")
    pairs = [(k.lower(), v) for k, v in headers]
    name = next((v for header in config.username_headers for k, v in pairs if k == header and v), "")
    if not name:
        return None
    groups = tuple(v for header in config.group_headers for k, v in pairs if k == header)
    extra: dict[str, list[str]] = {}
    for key, value in pairs:
        for prefix in config.extra_prefixes:
            if key.startswith(prefix):
                extra.setdefault(unquote(key[len(prefix):]).lower(), []).append(value)
    return User(name, groups, "", tuple(sorted((k, tuple(v)) for k, v in extra.items())))
