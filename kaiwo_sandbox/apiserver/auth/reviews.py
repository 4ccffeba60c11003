"""The create-only, never-stored kinds of authentication.k8s.io and authorization.k8s.io, and the
TokenRequest subresource (`POST .../serviceaccounts/NAME/token`, what `kubectl create token` sends):

- TokenReview: which user a bearer token authenticates as (what an in-cluster server asks);
- SelfSubjectReview: who am I (`kubectl auth whoami`);
- SubjectAccessReview / LocalSubjectAccessReview / SelfSubjectAccessReview: may this user do this
  (`kubectl auth can-i`, and the operator's own permission checks);
- SelfSubjectRulesReview: what may I do in this namespace (`kubectl auth can-i --list`).

Validation and wording follow pkg/apis/authorization/validation and pkg/registry/authentication.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kaiwo_sandbox.apiserver.auth.authn import MIN_TOKEN_SECONDS, Authenticator, UserInfo
from kaiwo_sandbox.apiserver.auth.authz import Authorizer
from kaiwo_sandbox.apiserver.auth.rbac import Attributes
from kaiwo_sandbox.contracts import SERVICEACCOUNTS, ApiError, JsonObj
from kaiwo_sandbox.semantics import field_errors as fe
from kaiwo_sandbox.storage.store import ObjectStore

AUTHN = "authentication.k8s.io"
AUTHZ = "authorization.k8s.io"
API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
MAX_TOKEN_SECONDS = 1 << 32


def _answer(body: JsonObj, group: str, kind: str, status: JsonObj) -> JsonObj:
    metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    return {"kind": kind, "apiVersion": f"{group}/v1", "metadata": {**(metadata or {}), "creationTimestamp": None},
            "spec": body.get("spec") or {}, "status": status}


def _spec(body: JsonObj) -> JsonObj:
    spec = body.get("spec")
    return spec if isinstance(spec, dict) else {}


def _access_attributes(user: UserInfo, spec: JsonObj, kind: str) -> Attributes:
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    causes: list[JsonObj] = []
    if resource is not None and non_resource is not None:
        causes.append(fe.invalid("spec.nonResourceAttributes", non_resource,
                                 "cannot be specified in combination with resourceAttributes"))
    if resource is None and non_resource is None:
        causes.append(fe.invalid("spec.resourceAttributes", None,
                                 "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
    if causes:
        raise ApiError.invalid(kind, AUTHZ, "", causes)
    if isinstance(resource, dict):
        return Attributes(user, str(resource.get("verb") or ""), namespace=str(resource.get("namespace") or ""),
                          api_group=str(resource.get("group") or ""), resource=str(resource.get("resource") or ""),
                          subresource=str(resource.get("subresource") or ""), name=str(resource.get("name") or ""))
    attrs = non_resource if isinstance(non_resource, dict) else {}
    return Attributes(user, str(attrs.get("verb") or ""), resource_request=False, path=str(attrs.get("path") or ""))


def _access_status(authorizer: Authorizer, attrs: Attributes) -> JsonObj:
    decision = authorizer.authorize(attrs)
    status: JsonObj = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    return status


def answer(resource: str, body: Any, *, user: UserInfo, namespace: str, store: ObjectStore,
           authn: Authenticator, authz: Authorizer) -> JsonObj:
    """The response body (201) to a POST of a review kind; ApiError for a bad request."""
    if not isinstance(body, dict):
        raise ApiError.bad_request("the body of the request must be a JSON object")
    spec = _spec(body)
    if resource == "tokenreviews":
        token = spec.get("token")
        if not isinstance(token, str) or not token:
            raise ApiError.bad_request("token is required for TokenReview in authentication")
        found = authn.authenticate(token)
        audiences = list(spec.get("audiences") or [API_AUDIENCE])
        if found is None:
            return _answer(body, AUTHN, "TokenReview", {"user": {}, "error": "[invalid bearer token]"})
        return _answer(body, AUTHN, "TokenReview", {"authenticated": True, "user": found.to_json(),
                                                     "audiences": audiences})
    if resource == "selfsubjectreviews":
        return _answer(body, AUTHN, "SelfSubjectReview", {"userInfo": user.to_json()})
    if resource == "selfsubjectaccessreviews":
        attrs = _access_attributes(user, spec, "SelfSubjectAccessReview")
        return _answer(body, AUTHZ, "SelfSubjectAccessReview", _access_status(authz, attrs))
    if resource in ("subjectaccessreviews", "localsubjectaccessreviews"):
        kind = "SubjectAccessReview" if resource == "subjectaccessreviews" else "LocalSubjectAccessReview"
        raw_extra = spec.get("extra")
        extra: dict[str, Any] = raw_extra if isinstance(raw_extra, dict) else {}
        subject = UserInfo(str(spec.get("user") or ""), tuple(str(g) for g in spec.get("groups") or []),
                           str(spec.get("uid") or ""),
                           tuple(sorted((str(k), tuple(str(v) for v in vs or [])) for k, vs in extra.items())))
        if not subject.name and not subject.groups:
            raise ApiError.invalid(kind, AUTHZ, "", [fe.invalid("spec.user", "",
                                                                "at least one of user or group must be specified")])
        attrs = _access_attributes(subject, spec, kind)
        if kind == "LocalSubjectAccessReview":
            requested = (spec.get("resourceAttributes") or {}).get("namespace") or ""
            if requested and requested != namespace:
                raise ApiError.bad_request(f"spec.resourceAttributes.namespace must match namespace: {namespace}")
            if attrs.resource_request:
                attrs = Attributes(subject, attrs.verb, namespace=namespace, api_group=attrs.api_group,
                                   resource=attrs.resource, subresource=attrs.subresource, name=attrs.name)
        return _answer(body, AUTHZ, kind, _access_status(authz, attrs))
    if resource == "selfsubjectrulesreviews":
        resource_rules, url_rules = authz.rules(user, str(spec.get("namespace") or ""))
        return _answer(body, AUTHZ, "SelfSubjectRulesReview", {"resourceRules": resource_rules,
                                                                "nonResourceRules": url_rules, "incomplete": False})
    raise ApiError(404, "NotFound", "the server could not find the requested resource")


def token_request(body: Any, *, namespace: str, name: str, store: ObjectStore, authn: Authenticator) -> JsonObj:
    """POST serviceaccounts/NAME/token: a bound token for an existing ServiceAccount."""
    if not isinstance(body, dict):
        raise ApiError.bad_request("the body of the request must be a JSON object")
    account = store.find_ref(SERVICEACCOUNTS, namespace, name)
    if account is None:
        raise ApiError.not_found(SERVICEACCOUNTS, name)
    spec = dict(_spec(body))
    seconds = spec.get("expirationSeconds", 3600)
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        raise ApiError.bad_request("spec.expirationSeconds must be an integer")
    if seconds < MIN_TOKEN_SECONDS:
        raise ApiError.invalid("TokenRequest", AUTHN, "", [fe.invalid("spec.expirationSeconds", seconds,
                                                                      "may not specify a duration less than 10 minutes")])
    if seconds > MAX_TOKEN_SECONDS:
        raise ApiError.invalid("TokenRequest", AUTHN, "", [fe.invalid("spec.expirationSeconds", seconds,
                                                                      "may not specify a duration larger than 2^32 "
                                                                      "seconds")])
    audiences = tuple(str(a) for a in spec.get("audiences") or [API_AUDIENCE])
    token, expires = authn.mint_service_account(namespace, name, account["metadata"]["uid"], seconds=seconds,
                                                audiences=audiences)
    spec.update(audiences=list(audiences), expirationSeconds=seconds)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"kind": "TokenRequest", "apiVersion": f"{AUTHN}/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": now},
            "spec": spec,
            "status": {"token": token,
                       "expirationTimestamp": datetime.fromtimestamp(expires, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}}
