"""Authentication: bearer tokens -> who is asking (user name, uid, groups), as the apiserver's token
authenticators answer it.

Three kinds of token, as on a real cluster:
- the sandbox's admin token (user `kaiwo-admin`, group `system:masters`, like a kubeadm admin.conf);
- static user tokens minted for tests (`mint`), with the groups given plus `system:authenticated`;
- service-account tokens (`mint_service_account`, and `POST .../serviceaccounts/NAME/token` as
  `kubectl create token` sends it): user `system:serviceaccount:NS:NAME`, groups `system:serviceaccounts`,
  `system:serviceaccounts:NS`, `system:authenticated`. They are bound to the ServiceAccount's uid, so a
  deleted (or deleted and re-created) ServiceAccount's tokens stop working, and they expire. Their user
  carries the token's ID in extra `authentication.kubernetes.io/credential-id` (`JTI=<id>`), as
  kube-apiserver 1.30+ says it.

Tokens are opaque random strings rather than JWTs: nothing in the project reads their claims.
`revoke` drops one (what rotation looks like from the outside: the old token stops authenticating).
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kaiwo_sandbox.contracts import JsonObj

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
SERVICE_ACCOUNTS = "system:serviceaccounts"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
DEFAULT_TOKEN_SECONDS = 3600
MIN_TOKEN_SECONDS = 600  # the TokenRequest API refuses shorter lifetimes
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"  # extra key of a service-account token's user


@dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(key, values) pairs: what impersonation's Impersonate-Extra-* headers add, passed on by the aggregator."""
    impersonator: str = ""
    """Who acts as this user (Impersonate-User): the authenticated user's name, for the audit log."""

    def to_json(self) -> JsonObj:
        out: JsonObj = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            out["uid"] = self.uid
        if self.extra:
            out["extra"] = {key: list(values) for key, values in self.extra}
        return out


def service_account_user(namespace: str, name: str, uid: str = "") -> UserInfo:
    return UserInfo(f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}",
                    (SERVICE_ACCOUNTS, f"{SERVICE_ACCOUNTS}:{namespace}", AUTHENTICATED), uid)


def split_service_account(user_name: str) -> tuple[str, str] | None:
    """(namespace, name) of a `system:serviceaccount:NS:NAME` user name, else None."""
    if not user_name.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    parts = user_name[len(SERVICE_ACCOUNT_PREFIX):].split(":")
    return (parts[0], parts[1]) if len(parts) == 2 and all(parts) else None


@dataclass(frozen=True, slots=True)
class BoundToken:
    """A service-account token: valid while the account with this uid exists and until `expires`."""

    namespace: str
    name: str
    uid: str
    expires: float  # time.time()
    audiences: tuple[str, ...] = ()
    jti: str = ""  # the token's ID: kube-apiserver (1.30+) puts it in the user's extra as its credential-id


# Looks up a ServiceAccount's uid (None when it does not exist); the store answers it.
AccountLookup = Callable[[str, str], str | None]


class Authenticator:
    def __init__(self, static: dict[str, UserInfo], lookup: AccountLookup) -> None:
        self._static = static
        self._bound: dict[str, BoundToken] = {}
        self._lookup = lookup

    def authenticate(self, token: str) -> UserInfo | None:
        user = self._static.get(token)
        if user is not None:
            return user
        bound = self._bound.get(token)
        if bound is None:
            return None
        if time.time() >= bound.expires or self._lookup(bound.namespace, bound.name) != bound.uid:
            return None
        user = service_account_user(bound.namespace, bound.name, bound.uid)
        return UserInfo(user.name, user.groups, user.uid, ((CREDENTIAL_ID, (f"JTI={bound.jti}",)),))

    def audiences(self, token: str) -> tuple[str, ...]:
        bound = self._bound.get(token)
        return bound.audiences if bound is not None else ()

    def add_static(self, token: str, user: UserInfo) -> None:
        self._static[token] = user

    def mint(self, user: str, groups: tuple[str, ...] | list[str] = ()) -> str:
        token = secrets.token_urlsafe(24)
        all_groups = tuple(dict.fromkeys([*groups, AUTHENTICATED]))
        self._static[token] = UserInfo(user, all_groups)
        return token

    def mint_service_account(self, namespace: str, name: str, uid: str, *,
                             seconds: int = DEFAULT_TOKEN_SECONDS, audiences: tuple[str, ...] = ()) -> tuple[str, float]:
        """A token for an existing ServiceAccount (the caller checked it exists): (token, expiry time)."""
        token = secrets.token_urlsafe(32)
        expires = time.time() + seconds
        self._bound[token] = BoundToken(namespace, name, uid, expires, audiences, str(uuid.uuid4()))
        return token, expires

    def revoke(self, token: str) -> bool:
        return self._static.pop(token, None) is not None or self._bound.pop(token, None) is not None
