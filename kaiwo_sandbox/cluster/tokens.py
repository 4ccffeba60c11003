"""kube-controller-manager's token controller: a Secret of type `kubernetes.io/service-account-token`
annotated `kubernetes.io/service-account.name` gets `token`, `ca.crt` and `namespace` filled in once its
ServiceAccount exists, and its `service-account.uid` annotation. The token is a long-lived token of that
ServiceAccount (legacy token Secrets never expire), minted by the API server's authenticator, which the
sandbox hands in as `ClusterSettings.token_minter`.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable

from kaiwo_sandbox.cluster.base import Controller, Key
from kaiwo_sandbox.contracts import SECRETS, SERVICEACCOUNTS, ApiError, JsonObj, WatchEvent

TOKEN_TYPE = "kubernetes.io/service-account-token"
NAME_ANNOTATION = "kubernetes.io/service-account.name"
UID_ANNOTATION = "kubernetes.io/service-account.uid"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class TokenController(Controller):
    name = "token-controller"
    watches = (SECRETS, SERVICEACCOUNTS)

    def keys_for(self, event: WatchEvent) -> Iterable[Key]:
        meta = event.object.get("metadata") or {}
        if event.gvr.resource == SECRETS.resource:
            return [(meta.get("namespace"), meta.get("name"))] if event.object.get("type") == TOKEN_TYPE else []
        if event.type == "DELETED":
            return []
        secrets, _ = self.store.list(SECRETS, meta.get("namespace"))  # the ServiceAccount's waiting Secrets
        return [(meta.get("namespace"), (s.get("metadata") or {}).get("name")) for s in secrets
                if s.get("type") == TOKEN_TYPE
                and ((s.get("metadata") or {}).get("annotations") or {}).get(NAME_ANNOTATION) == meta.get("name")]

    def reconcile(self, key: Key) -> float | None:
        assert isinstance(key, tuple)
        namespace, name = str(key[0]), str(key[1])
        minter = self.settings.token_minter
        if minter is None:
            return None
        try:
            secret = self.store.get(SECRETS, namespace, name)
        except ApiError:
            return None
        meta: JsonObj = secret.get("metadata") or {}
        account = str((meta.get("annotations") or {}).get(NAME_ANNOTATION) or "")
        if secret.get("type") != TOKEN_TYPE or not account or (secret.get("data") or {}).get("token"):
            return None
        try:
            service_account = self.store.get(SERVICEACCOUNTS, namespace, account)
        except ApiError:
            return None  # filled in once the ServiceAccount exists (its event requeues this Secret)
        data = dict(secret.get("data") or {})
        data.update({"token": _b64(minter(namespace, account)), "namespace": _b64(namespace)})
        if self.settings.root_ca_pem:
            data["ca.crt"] = _b64(self.settings.root_ca_pem)
        uid = str((service_account.get("metadata") or {}).get("uid", ""))
        self.store.patch(SECRETS, namespace, name, {"metadata": {"annotations": {UID_ANNOTATION: uid}}, "data": data},
                         "merge", user="system:serviceaccount:kube-system:token-controller")
        return None
