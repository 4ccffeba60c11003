"""Authentication and authorization as Kubernetes does them: the Bearer token is checked with a
TokenReview, each request with a SubjectAccessReview for the verb, resource and namespace it touches
(so a user sees and submits only what kubectl would let them). Decisions are cached briefly: a
dashboard polling every second must not cost the API server two reviews per request.

`--admin-auth none` (NoAuth) lets every request through as an anonymous admin: localhost dev only.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

from kaiwo_ray.kube.client import KubeClient

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
# The extra keys a write passes on: what the API server's ServiceAccount tokens carry. RBAC grants
# impersonating an extra key by key (`userextras/<key>`, no wildcard but `*`), so the admin API's role
# lists these (deploy/base/rbac-admin-api.yaml) and other keys (an OIDC provider's) are not passed.
IMPERSONATED_EXTRA = tuple(f"authentication.kubernetes.io/{key}" for key in
                           ("credential-id", "node-name", "node-uid", "pod-name", "pod-uid"))
_HEADER_TOKEN = "!#$&'*+-.^_`|~"  # legal in a header name besides letters and digits (RFC 7230 tchar, less %)
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


@dataclass(frozen=True, slots=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Access:
    """What a request touches, in SubjectAccessReview terms."""

    verb: str
    resource: str = ""
    group: str = ""
    namespace: str | None = None
    subresource: str | None = None
    name: str | None = None
    path: str | None = None
    """For non-resource URLs (/metrics)."""

    def describe(self) -> str:
        """kube-apiserver's wording of a denial's object part."""
        if self.path is not None:
            return f'cannot {self.verb} path "{self.path}"'
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        where = f' in the namespace "{self.namespace}"' if self.namespace else " at the cluster scope"
        return f'cannot {self.verb} resource "{resource}" in API group "{self.group}"{where}'


def impersonation(user: User) -> list[tuple[str, str]]:
    """Headers that make a write the user's own at the API server (kubectl --as/--as-group/--as-uid/
    --as-user-extra): RBAC, admission webhooks, the audit log and managedFields then see the user, uid and
    extra included, not the admin API, whose role holds `impersonate` on users, groups, service accounts,
    uids and the userextras of IMPERSONATED_EXTRA instead of write rights on workloads. A service account is impersonated by its
    user name (the API server adds its groups). Extra keys are %-escaped as client-go escapes them."""
    headers = [("Impersonate-User", user.name)]
    if not user.name.startswith("system:serviceaccount:"):
        headers += [("Impersonate-Group", group) for group in user.groups if group != "system:authenticated"]
    if user.uid:
        headers.append(("Impersonate-Uid", user.uid))
    for key, values in user.extra:
        if key not in IMPERSONATED_EXTRA:
            continue
        headers += [(f"Impersonate-Extra-{quote(key, safe=_HEADER_TOKEN)}", value) for value in values]
    return headers


class Authorizer(Protocol):
    enabled: bool

    async def authenticate(self, token: str | None) -> User | None: ...

    async def allowed(self, user: User, access: Access) -> bool: ...


class NoAuth:
    """Everyone is an admin: for `--admin-auth none` on a localhost dev loop."""

    enabled = False

    async def authenticate(self, token: str | None) -> User | None:
        return User("dev-admin", ("system:masters",))

    async def allowed(self, user: User, access: Access) -> bool:
        return True


@dataclass(slots=True)
class _Cache:
    ttl: float
    entries: dict[Any, tuple[float, Any]] = field(default_factory=dict)

    def get(self, key: Any) -> tuple[bool, Any]:
        hit = self.entries.get(key)
        if hit is None or hit[0] < time.monotonic():
            return False, None
        return True, hit[1]

    def put(self, key: Any, value: Any, ttl: float | None = None) -> None:
        if len(self.entries) > 10_000:  # bounded: drop everything expired, else everything
            now = time.monotonic()
            self.entries = {k: v for k, v in self.entries.items() if v[0] >= now}
            if len(self.entries) > 10_000:
                self.entries.clear()
        self.entries[key] = (time.monotonic() + (self.ttl if ttl is None else ttl), value)


class KubernetesAuth:
    """TokenReview + SubjectAccessReview against the cluster the admin API serves."""

    enabled = True

    def __init__(self, client: KubeClient, *, ttl: float = 10.0, allow_ttl: float | None = None,
                 deny_ttl: float | None = None) -> None:
        """`ttl` for tokens and decisions; `allow_ttl`/`deny_ttl` keep an allow or a denial for
        another time (controller-runtime's metrics filter: tokens 1 min, allow 5 min, deny 30 s)."""
        self.client = client
        self._tokens = _Cache(ttl)
        self._decisions = _Cache(ttl)
        self._allow_ttl = allow_ttl
        self._deny_ttl = deny_ttl

    async def authenticate(self, token: str | None) -> User | None:
        if not token:
            return None
        key = hashlib.sha256(token.encode()).hexdigest()
        hit, cached = self._tokens.get(key)
        if hit:
            user: User | None = cached
            return user
        review = await self.client.request("POST", TOKEN_REVIEWS, body={
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
        status = (review or {}).get("status") or {}
        user = None
        if status.get("authenticated"):
            info = status.get("user") or {}
            extra = tuple(sorted((str(k), tuple(v)) for k, v in (info.get("extra") or {}).items()))
            user = User(str(info.get("username") or ""), tuple(info.get("groups") or ()), str(info.get("uid") or ""),
                        extra)
        self._tokens.put(key, user)
        return user

    async def allowed(self, user: User, access: Access) -> bool:
        key = (user, access)
        hit, cached = self._decisions.get(key)
        if hit:
            return bool(cached)
        spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups)}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        if access.path is not None:
            spec["nonResourceAttributes"] = {"path": access.path, "verb": access.verb}
        else:
            attributes = {"verb": access.verb, "group": access.group, "resource": access.resource,
                          "namespace": access.namespace or "", "subresource": access.subresource or "",
                          "name": access.name or ""}
            spec["resourceAttributes"] = {k: v for k, v in attributes.items() if v}
        review = await self.client.request("POST", ACCESS_REVIEWS, body={
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
        allowed = bool(((review or {}).get("status") or {}).get("allowed"))
        self._decisions.put(key, allowed, self._allow_ttl if allowed else self._deny_ttl)
        return allowed
