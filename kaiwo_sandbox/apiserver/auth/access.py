"""Who may do what: the server's one seam to authentication (authn.py), authorization (authz.py, rbac.py)
and the review/TokenRequest endpoints (reviews.py). The HTTP server calls only this.

The tokens handed in at construction are the sandbox's admin tokens: they authenticate as members of
`system:masters` (like a kubeadm admin.conf), so `make dev` and every existing test keep full access.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from kaiwo_sandbox.apiserver.auth import reviews
from kaiwo_sandbox.apiserver.auth.authn import (
    AUTHENTICATED,
    MASTERS,
    Authenticator,
    UserInfo,
    service_account_user,
    split_service_account,
)
from kaiwo_sandbox.apiserver.auth.authz import AuthorizationMode, Authorizer, request_attributes
from kaiwo_sandbox.apiserver.auth.rbac import Attributes, forbidden
from kaiwo_sandbox.apiserver.routes import ApiPath
from kaiwo_sandbox.contracts import SERVICEACCOUNTS, ApiError, JsonObj
from kaiwo_sandbox.semantics.builtin.extra import REVIEW_RESOURCES
from kaiwo_sandbox.storage.store import ObjectStore

ADMIN_GROUPS = (MASTERS, AUTHENTICATED)
EXTRA_PREFIX = "impersonate-extra-"


def impersonated_extra(headers: Mapping[str, str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Impersonate-Extra-<key> headers (key %-unescaped, lower-cased; one value per header) as
    (key, values) pairs in key order."""
    items = getattr(headers, "items", None)
    found: dict[str, list[str]] = {}
    for key, value in (items() if items is not None else ()):
        if key.lower().startswith(EXTRA_PREFIX):
            found.setdefault(unquote(key[len(EXTRA_PREFIX):]).lower(), []).append(value)
    return tuple((key, tuple(values)) for key, values in sorted(found.items()))


class Access:
    def __init__(self, store: ObjectStore, admin_tokens: Mapping[str, str],
                 mode: AuthorizationMode = "AlwaysAllow") -> None:
        self.store = store
        static = {token: UserInfo(name, ADMIN_GROUPS) for token, name in admin_tokens.items()}
        self.authn = Authenticator(static, self._account_uid)
        self.authz = Authorizer(store, mode)

    def _account_uid(self, namespace: str, name: str) -> str | None:
        account = self.store.find_ref(SERVICEACCOUNTS, namespace, name)
        return None if account is None else str(account["metadata"].get("uid", ""))

    def authenticate(self, header: str) -> UserInfo | None:
        if not header.startswith("Bearer "):
            return None
        return self.authn.authenticate(header[7:].strip())

    def impersonate(self, user: UserInfo, headers: Mapping[str, str]) -> UserInfo:
        """`Impersonate-User` / `-Group` / `-Uid` / `-Extra-<key>` (kubectl --as, --as-group, --as-uid): the
        identity the request acts as, when `user` may `impersonate` each part of it (403 naming the first
        refused otherwise), as the apiserver's impersonation filter: users (or serviceaccounts), groups,
        `uids` and `userextras/<key>` of authentication.k8s.io."""
        getall = getattr(headers, "getall", None)
        groups = list(getall("Impersonate-Group", [])) if getall is not None else []
        extra = impersonated_extra(headers)
        uid = headers.get("Impersonate-Uid", "")
        name = headers.get("Impersonate-User", "")
        if not name:
            if groups or extra or uid:
                raise ApiError.bad_request(f"requested impersonation of groups {groups} without impersonating a user")
            return user
        account = split_service_account(name)
        checks = [Attributes(user, "impersonate", namespace=account[0], resource="serviceaccounts", name=account[1])
                  if account is not None else Attributes(user, "impersonate", resource="users", name=name)]
        checks += [Attributes(user, "impersonate", resource="groups", name=g) for g in groups]
        checks += [Attributes(user, "impersonate", api_group="authentication.k8s.io", resource="userextras",
                              subresource=key, name=value) for key, values in extra for value in values]
        if uid:
            checks.append(Attributes(user, "impersonate", api_group="authentication.k8s.io", resource="uids", name=uid))
        for attrs in checks:
            if not self.authz.authorize(attrs).allowed:
                raise forbidden(attrs)
        base = service_account_user(*account).groups if account is not None else (AUTHENTICATED,)
        return UserInfo(name, tuple(dict.fromkeys([*groups, *base])), uid=uid, extra=extra, impersonator=user.name)

    def check(self, user: UserInfo, verb: str, path: ApiPath, query: Mapping[str, str]) -> None:
        """403 (ApiError) unless `user` may `verb` what `path` addresses."""
        if self.authz.mode == "AlwaysAllow":  # the hot path of every default sandbox: no attributes built
            return
        self.authz.check(request_attributes(user, verb, path, query))

    def deny_path(self, user: UserInfo, method: str, path: str) -> ApiError | None:
        """A non-resource request (discovery, /openapi): the 403 to answer, or None."""
        attrs = Attributes(user, method.lower(), resource_request=False, path=path)
        return None if self.authz.authorize(attrs).allowed else forbidden(attrs)

    def check_control(self, user: UserInfo, method: str, path: str) -> None:
        self.authz.check_control(user, method, path)

    @staticmethod
    def answers(path: ApiPath) -> bool:
        """Whether a POST to `path` is answered here rather than stored (reviews, TokenRequest)."""
        if path.group == "" and path.resource == "serviceaccounts" and path.subresource == "token":
            return True
        return not path.subresource and (path.group, path.resource) in REVIEW_RESOURCES

    def answer(self, path: ApiPath, body: Any, user: UserInfo) -> JsonObj:
        if path.resource == "serviceaccounts":
            return reviews.token_request(body, namespace=path.namespace, name=path.name, store=self.store,
                                         authn=self.authn)
        return reviews.answer(path.resource, body, user=user, namespace=path.namespace, store=self.store,
                              authn=self.authn, authz=self.authz)
