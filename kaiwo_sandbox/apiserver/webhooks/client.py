"""One webhook call as kube-apiserver makes it (pkg/util/webhook/client.go, request/admissionreview.go):
POST an AdmissionReview v1 over HTTPS verified against the webhook's caBundle, read its response, and
describe every failure in the words the real server uses, since users match on them.

A Service reference is called at `https://<name>.<namespace>.svc:<port><path>` (the name the
certificate must carry) but connected to one of the Service's endpoints: the sandbox has no cluster
network, so the name is the TLS server name and Host header, and the address comes from `Target`.
"""

from __future__ import annotations

import asyncio
import base64
import math
import ssl
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from kaiwo_sandbox.contracts import JsonObj


class CallError(Exception):
    """The call failed (unreachable, timed out, TLS, bad response): failurePolicy decides what follows.
    The message is the part after `failed calling webhook "<name>": `."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where to send one call: `url` as the real server names it, and the address actually dialled."""

    url: str  # https://svc.ns.svc:443/path?timeout=10s, or the configuration's url (with ?timeout=)
    dial: str  # the URL requested: `url` with the endpoint's address in place of the Service's name
    host: str  # the address dialled, for error messages
    port: int
    server_name: str | None  # TLS SNI, verification name and Host header when dialling an address


def go_duration(seconds: float) -> str:
    """The `?timeout=` value: the time left, rounded up to whole seconds (Go's Duration.String())."""
    return f"{max(1, math.ceil(seconds))}s"


def _ssl_context(ca_bundle_b64: str | None) -> ssl.SSLContext:
    if not ca_bundle_b64:
        return ssl.create_default_context()
    try:
        pem = base64.b64decode(ca_bundle_b64).decode()
        return ssl.create_default_context(cadata=pem)
    except (ValueError, ssl.SSLError) as exc:
        raise CallError(f"could not get REST client: unable to load root certificates: {exc}") from None


_CONTEXTS: dict[str, ssl.SSLContext] = {}


def ssl_context(ca_bundle_b64: str | None) -> ssl.SSLContext:
    """Cached per caBundle: building a context parses the PEM, and a rotated bundle is a new key."""
    key = ca_bundle_b64 or ""
    context = _CONTEXTS.get(key)
    if context is None:
        if len(_CONTEXTS) > 64:
            _CONTEXTS.clear()
        context = _CONTEXTS[key] = _ssl_context(ca_bundle_b64)
    return context


_VERIFY_EXPIRED = frozenset({9, 10})  # X509_V_ERR_CERT_NOT_YET_VALID, X509_V_ERR_CERT_HAS_EXPIRED
_VERIFY_HOSTNAME = 62  # X509_V_ERR_HOSTNAME_MISMATCH


def _explain(exc: BaseException, target: Target) -> str:
    """Go's net/http error text for what aiohttp raised."""
    if isinstance(exc, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return "context deadline exceeded"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        error = exc.certificate_error
        code = getattr(error, "verify_code", None)
        prefix = "tls: failed to verify certificate: x509: "
        if code in _VERIFY_EXPIRED:
            return prefix + "certificate has expired or is not yet valid"
        if code == _VERIFY_HOSTNAME or "mismatch" in str(error):
            return prefix + f"certificate is valid for other names, not {target.server_name or target.host}"
        # Go cannot build a chain to a root it trusts: every other chain failure reads the same.
        return prefix + "certificate signed by unknown authority"
    if isinstance(exc, aiohttp.ClientConnectorError):
        if isinstance(exc.os_error, ConnectionRefusedError):
            reason = "connection refused"
        elif isinstance(exc.os_error, TimeoutError):
            reason = "i/o timeout"
        else:
            reason = (exc.os_error.strerror if exc.os_error is not None else None) or str(exc)
        return f"dial tcp {target.host}:{target.port}: connect: {reason.lower()}"
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError):
        return "EOF"
    return str(exc) or type(exc).__name__


async def call(session: aiohttp.ClientSession, target: Target, ca_bundle: str | None, review: JsonObj,
               timeout: float) -> JsonObj:
    """POST `review`; the AdmissionReview response's `response`, checked as the apiserver checks it."""
    context = ssl_context(ca_bundle)
    uid = review["request"]["uid"]
    headers = {"Content-Type": "application/json", "Accept": "application/json, */*"}
    if target.server_name:
        headers["Host"] = target.url.split("/")[2]
    failed = f'failed to call webhook: Post "{target.url}"'
    try:
        async with session.post(target.dial, data=orjson.dumps(review), headers=headers, ssl=context,
                                server_hostname=target.server_name,
                                timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            raw = await response.read()
            status = response.status
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise CallError(f"{failed}: {_explain(exc, target)}") from None
    if not 200 <= status < 300:
        text = raw.decode(errors="replace").strip()
        raise CallError(f"{failed}: an error on the server (\"{text}\") has prevented the request from succeeding")
    return _response(raw, uid)


def _response(raw: bytes, uid: str) -> JsonObj:
    invalid = "received invalid webhook response: "
    try:
        body: Any = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise CallError(f"{invalid}{exc}") from None
    if not isinstance(body, dict) or body.get("kind") != "AdmissionReview" \
            or body.get("apiVersion") != "admission.k8s.io/v1":
        got = (body.get("apiVersion"), body.get("kind")) if isinstance(body, dict) else (None, None)
        raise CallError(f'{invalid}expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, '
                        f'got {got[0] or ""}, Kind={got[1] or ""}')
    response = body.get("response")
    if not isinstance(response, dict):
        raise CallError(f"{invalid}webhook response was absent")
    if response.get("uid") != uid:
        raise CallError(f'{invalid}expected response.uid="{uid}", got "{response.get("uid", "")}"')
    if not isinstance(response.get("allowed"), bool):
        raise CallError(f"{invalid}webhook response was missing allowed")
    if bool(response.get("patch")) != bool(response.get("patchType")):
        raise CallError(f"{invalid}webhook returned response.patch but not response.patchType"
                        if response.get("patch") else f"{invalid}webhook returned response.patchType but not "
                        "response.patch")
    if response.get("patchType") not in (None, "", "JSONPatch"):
        raise CallError(f'{invalid}webhook returned invalid response.patchType of "{response["patchType"]}"')
    return response
