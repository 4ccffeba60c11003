"""Admission webhooks, called as kube-apiserver 1.32 calls them (mutating/dispatcher.go,
validating/dispatcher.go, reinvocation.go): the mutating ones one after the other, the object patched
by each answer, the chain run once more for `IfNeeded` webhooks when it changed the object; then the
validating ones in parallel on the final object. Refusals and failures become the real server's
statuses (2.5 of the cluster-mechanics reference); `Ignore` lets a failed call pass, audited.

The store is synchronous and webhooks are HTTP calls, so the server runs one write in passes (see
`ApiServer._dispatch_admitted`): a dry run captures the candidate mutating webhooks see, the answered
patches are replayed at the same point of the next pass, and validating webhooks see what a dry run of
the patched write would store. This module only calls and judges; it writes nothing.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from yarl import URL

from kaiwo_sandbox.apiserver.auth.authn import UserInfo
from kaiwo_sandbox.apiserver.webhooks.client import CallError, Target, call, go_duration
from kaiwo_sandbox.apiserver.webhooks.matching import Candidate, Request, by_rules, by_selectors
from kaiwo_sandbox.contracts import GVR, NAMESPACES, PODS, SERVICES, ApiError, JsonObj
from kaiwo_sandbox.runtime.podspec import service_endpoints
from kaiwo_sandbox.runtime.processes import LocalRuntime
from kaiwo_sandbox.semantics.patching import apply_json_patch
from kaiwo_sandbox.storage.store import ObjectStore

MUTATING = GVR("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations")
VALIDATING = GVR("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")
ENDPOINTS = GVR("", "v1", "endpoints")
OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


@dataclass(frozen=True, slots=True)
class Attributes:
    """One write as admission sees it."""

    request: Request
    kind: str
    namespace: str
    name: str
    user: UserInfo
    dry_run: bool
    field_manager: str = ""


@dataclass(slots=True)
class Outcome:
    """What the webhooks said besides yes: patches to replay (in order, each with the version it was
    made against), warnings (`Warning` headers) and audit annotations."""

    patches: list[tuple[GVR, list[Any]]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)


def replay(patches: list[tuple[GVR, list[Any]]], obj: JsonObj) -> JsonObj:
    """`obj` with the answered patches applied, each through the version its webhook was called with;
    the result keeps `obj`'s apiVersion (the store's form)."""
    stored_version = obj.get("apiVersion")
    current = obj
    for gvr, ops in patches:
        current = dict(current)
        current["apiVersion"] = gvr.api_version
        current = apply_json_patch(current, ops)
    current["apiVersion"] = stored_version
    return current


class Admission:
    """The webhook side of admission for one API server: configurations read from its store, calls
    made with one shared HTTP client (connections kept alive, as the real server's are)."""

    def __init__(self, store: ObjectStore, runtime: Callable[[], LocalRuntime | None]) -> None:
        self.store = store
        self._runtime = runtime
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def candidates(self, *, mutating: bool, request: Request) -> list[Candidate]:
        configurations = self.store.refs(MUTATING if mutating else VALIDATING)
        return by_rules(configurations, request) if configurations else []

    # ------------------------------------------------------------------ chains
    async def mutate(self, candidates: list[Candidate], attrs: Attributes, obj: JsonObj | None,
                     old: JsonObj | None) -> tuple[Outcome, JsonObj | None]:
        """Run the mutating chain; the outcome and the object as the last webhook left it."""
        outcome = Outcome()
        current = obj
        reinvocable: list[Candidate] = []
        changed = False
        for candidate in candidates:
            if not self._selected(candidate, attrs, current, old):
                continue
            patched = await self._mutate_one(candidate, attrs, current, old, outcome, 0)
            if patched is not current:
                changed = changed or patched != current
                current = patched
            if candidate.webhook.get("reinvocationPolicy") == "IfNeeded":
                reinvocable.append(candidate)
        if changed:  # one more round, only for IfNeeded webhooks that already ran
            for candidate in reinvocable:
                if self._selected(candidate, attrs, current, old):
                    current = await self._mutate_one(candidate, attrs, current, old, outcome, 1)
        return outcome, current

    async def validate(self, candidates: list[Candidate], attrs: Attributes, obj: JsonObj | None,
                       old: JsonObj | None) -> Outcome:
        """Call the validating webhooks in parallel; the first refusal (in chain order) is raised."""
        outcome = Outcome()
        selected = [c for c in candidates if self._selected(c, attrs, obj, old)]
        results = await asyncio.gather(*(self._validate_one(c, attrs, obj, old, outcome) for c in selected),
                                       return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return outcome

    async def _mutate_one(self, candidate: Candidate, attrs: Attributes, obj: JsonObj | None,
                          old: JsonObj | None, outcome: Outcome, round_: int) -> JsonObj | None:
        sent = _as_version(obj, candidate.gvr)
        response = await self._call(candidate, attrs, sent, _as_version(old, candidate.gvr), outcome,
                                    f"mutation.webhook.admission.k8s.io/round_{round_}_index_{candidate.index}")
        if response is None or not response.get("patch"):
            return obj
        if obj is None:
            raise ApiError(500, "InternalError", "Internal error occurred: attempted to modify the object, "
                           "which is not supported for this operation")
        try:
            ops = orjson.loads(base64.b64decode(response["patch"], validate=True))
        except (binascii.Error, ValueError) as exc:
            raise ApiError(500, "InternalError", f"Internal error occurred: {exc}") from None
        try:
            patched = apply_json_patch(dict(obj, apiVersion=candidate.gvr.api_version), ops)
        except ApiError as exc:
            raise ApiError(500, "InternalError", f"Internal error occurred: {exc.message}") from None
        patched["apiVersion"] = obj.get("apiVersion")
        outcome.patches.append((candidate.gvr, ops))
        return patched

    async def _validate_one(self, candidate: Candidate, attrs: Attributes, obj: JsonObj | None,
                            old: JsonObj | None, outcome: Outcome) -> None:
        await self._call(candidate, attrs, _as_version(obj, candidate.gvr), _as_version(old, candidate.gvr),
                         outcome, f"validating.webhook.admission.k8s.io/round_0_index_{candidate.index}")

    def _selected(self, candidate: Candidate, attrs: Attributes, obj: JsonObj | None, old: JsonObj | None) -> bool:
        labels: Mapping[str, str] | None = None
        request = attrs.request
        if request.gvr.group == "" and request.gvr.resource == "namespaces":
            labels = ((obj or old or {}).get("metadata") or {}).get("labels") or {}
        elif request.namespaced:
            namespace = self.store.find_ref(NAMESPACES, None, attrs.namespace)
            labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
        try:
            return by_selectors(candidate, obj=obj, old=old, namespace_labels=labels)
        except ApiError as exc:  # a selector the configuration's validation let through
            raise ApiError(500, "InternalError", f"Internal error occurred: {exc.message}") from None

    # ------------------------------------------------------------------ one call
    async def _call(self, candidate: Candidate, attrs: Attributes, obj: JsonObj | None, old: JsonObj | None,
                    outcome: Outcome, failed_open_key: str) -> JsonObj | None:
        """The webhook's response when it allowed the request; None when it failed open (Ignore)."""
        webhook = candidate.webhook
        name = candidate.name
        timeout = float(webhook.get("timeoutSeconds") or 10)
        review = self._review(candidate, attrs, obj, old)
        try:
            target = self._target(webhook.get("clientConfig") or {}, timeout)
            if self._session is None:
                self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
            response = await call(self._session, target, (webhook.get("clientConfig") or {}).get("caBundle"),
                                  review, timeout)
        except CallError as exc:
            if webhook.get("failurePolicy", "Fail") == "Ignore":
                outcome.annotations[f"failed-open.{failed_open_key}"] = name
                return None
            message = f'failed calling webhook "{name}": {exc}'
            raise ApiError(500, "InternalError", f"Internal error occurred: {message}",
                           {"causes": [{"message": message}]}) from None
        for warning in response.get("warnings") or []:
            if warning and warning not in outcome.warnings:
                outcome.warnings.append(str(warning))
        for key, value in (response.get("auditAnnotations") or {}).items():
            outcome.annotations[f"{name}/{key}"] = str(value)
        if not response["allowed"]:
            raise _denied(name, response.get("status") or {})
        return response

    def _review(self, candidate: Candidate, attrs: Attributes, obj: JsonObj | None, old: JsonObj | None) -> JsonObj:
        request = attrs.request
        operation = request.operation
        options: JsonObj = {"kind": OPTIONS_KIND[operation], "apiVersion": "meta.k8s.io/v1"}
        if attrs.dry_run:
            options["dryRun"] = ["All"]
        if attrs.field_manager and operation != "DELETE":
            options["fieldManager"] = attrs.field_manager
        body: JsonObj = {
            "uid": str(uuid.uuid4()),
            "kind": {"group": candidate.gvr.group, "version": candidate.gvr.version, "kind": attrs.kind},
            "resource": {"group": candidate.gvr.group, "version": candidate.gvr.version,
                         "resource": candidate.gvr.resource},
            "requestKind": {"group": request.gvr.group, "version": request.gvr.version, "kind": attrs.kind},
            "requestResource": {"group": request.gvr.group, "version": request.gvr.version,
                                "resource": request.gvr.resource},
            "name": attrs.name,
            "namespace": attrs.namespace,
            "operation": operation,
            "userInfo": attrs.user.to_json(),
            "object": obj,
            "oldObject": old,
            "dryRun": attrs.dry_run,
            "options": options,
        }
        if request.subresource:
            body["subResource"] = body["requestSubResource"] = request.subresource
        if not attrs.namespace:
            del body["namespace"]
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}

    def _target(self, config: JsonObj, timeout: float) -> Target:
        """Where the call goes: the url, or the Service's name (TLS) and one of its endpoints (address)."""
        query = f"timeout={go_duration(timeout)}"
        if config.get("url"):
            url = URL(str(config["url"]))
            full = str(url) + ("&" if url.query_string else "?") + query
            return Target(full, full, url.host or "", url.port or 443, None)
        service_ref = config.get("service") or {}
        name, namespace = str(service_ref.get("name")), str(service_ref.get("namespace"))
        port = int(service_ref.get("port") or 443)
        path = str(service_ref.get("path") or "")
        shown = f"https://{name}.{namespace}.svc:{port}{path}?{query}"
        failed = f'failed to call webhook: Post "{shown}"'
        service = self.store.find_ref(SERVICES, namespace, name)
        if service is None:
            raise CallError(f'{failed}: service "{name}" not found')
        spec_port = next((p for p in (service.get("spec") or {}).get("ports") or [] if p.get("port") == port), None)
        if spec_port is None:
            raise CallError(f'{failed}: no service port {port} found for service "{name}"')
        address = self._endpoint(service, spec_port)
        if address is None:
            raise CallError(f'{failed}: no endpoints available for service "{name}"')
        host, target_port = address
        return Target(shown, f"https://{host}:{target_port}{path}?{query}", host, target_port,
                      f"{name}.{namespace}.svc")

    def _endpoint(self, service: JsonObj, spec_port: JsonObj) -> tuple[str, int] | None:
        """A ready address behind the Service: a real pod it selects (only real pods listen), or, for a
        Service without a selector, the Endpoints object of its name that its owner wrote."""
        meta = service["metadata"]
        spec = service.get("spec") or {}
        target_port = spec_port.get("targetPort", spec_port.get("port"))
        if spec.get("selector"):
            runtime = self._runtime()
            if runtime is None or not isinstance(target_port, int):
                return None
            pods = [p for p in self.store.refs(PODS) if p["metadata"].get("namespace") == meta["namespace"]]
            ips = service_endpoints(service, pods, runtime.reachable())
            return (ips[0], target_port) if ips else None
        endpoints = self.store.find_ref(ENDPOINTS, meta["namespace"], meta["name"])
        for subset in (endpoints or {}).get("subsets") or []:
            addresses = subset.get("addresses") or []
            ports = subset.get("ports") or []
            chosen = next((p for p in ports if p.get("name", "") == spec_port.get("name", "")), None)
            if addresses and chosen is not None:
                return str(addresses[0]["ip"]), int(chosen["port"])
        return None


def _as_version(obj: JsonObj | None, gvr: GVR) -> JsonObj | None:
    if obj is None or obj.get("apiVersion") == gvr.api_version:
        return obj
    return dict(obj, apiVersion=gvr.api_version)  # one storage: a version change rewrites apiVersion only


def _denied(name: str, status: JsonObj) -> ApiError:
    """webhook/errors/statuserror.go ToStatusErr: the webhook's status, its message prefixed."""
    code = status.get("code")
    code = code if isinstance(code, int) and code >= 400 else 400
    explanation = status.get("message") or status.get("reason")
    message = (f'admission webhook "{name}" denied the request: {explanation}' if explanation
               else f'admission webhook "{name}" denied the request without explanation')
    details = status.get("details")
    return ApiError(code, str(status.get("reason") or ""), message,
                    copy.deepcopy(details) if isinstance(details, dict) else None)
