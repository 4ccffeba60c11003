"""What kube-controller-manager puts in every namespace: the `serviceaccount` controller's `default`
ServiceAccount (clients wait for it before creating pods) and the `root-ca-cert-publisher`'s
`kube-root-ca.crt` ConfigMap (the CA that verifies the API server, key `ca.crt`). Both are made for
every active namespace, including those that existed at start-up, and made again when deleted; the
ConfigMap's data is put back when someone changes it, as the publisher does.
"""

from __future__ import annotations

from collections.abc import Iterable

from kaiwo_sandbox.cluster.base import Controller, Key
from kaiwo_sandbox.contracts import (
    CONFIGMAPS,
    GVR,
    NAMESPACES,
    SERVICEACCOUNTS,
    ApiError,
    JsonObj,
    Store,
    WatchEvent,
)

DEFAULT_SERVICE_ACCOUNT = "default"
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the "
    "internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes "
    "clusters.")
# A sandbox serving plain HTTP has no CA; clients that only read the key still find a PEM block.
PLACEHOLDER_CA_PEM = ("-----BEGIN CERTIFICATE-----\n"
                      "a2Fpd28tc2FuZGJveCBzZXJ2ZXMgcGxhaW4gSFRUUDogbm8gQ0E=\n"
                      "-----END CERTIFICATE-----\n")


def root_ca_configmap(namespace: str, ca_pem: str) -> JsonObj:
    return {"metadata": {"name": ROOT_CA_CONFIGMAP, "namespace": namespace,
                         "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION}},
            "data": {"ca.crt": ca_pem}}


def _get(store: Store, gvr: GVR, namespace: str | None, name: str) -> JsonObj | None:
    try:
        return store.get(gvr, namespace, name)
    except ApiError as err:
        if err.code == 404:
            return None
        raise


class NamespaceDefaults(Controller):
    """kube-controller-manager's serviceaccount controller and root-ca-cert-publisher, keyed by namespace."""

    name = "namespace-defaults"
    watches = (NAMESPACES, SERVICEACCOUNTS, CONFIGMAPS)

    def keys_for(self, event: WatchEvent) -> Iterable[Key]:
        meta = event.object.get("metadata") or {}
        if event.gvr.resource == "namespaces":
            return [meta.get("name")]
        wanted = DEFAULT_SERVICE_ACCOUNT if event.gvr.resource == "serviceaccounts" else ROOT_CA_CONFIGMAP
        if meta.get("name") != wanted or (event.type == "MODIFIED" and event.gvr.resource == "serviceaccounts"):
            return []
        return [meta.get("namespace")]

    def reconcile(self, key: Key) -> float | None:
        namespace = str(key)
        ns = _get(self.store, NAMESPACES, None, namespace)
        if ns is None or ns["metadata"].get("deletionTimestamp") or (ns.get("status") or {}).get("phase") == \
                "Terminating":
            return None
        ca_pem = self.settings.root_ca_pem or PLACEHOLDER_CA_PEM
        try:
            if _get(self.store, SERVICEACCOUNTS, namespace, DEFAULT_SERVICE_ACCOUNT) is None:
                self.store.create(SERVICEACCOUNTS, {"metadata": {"name": DEFAULT_SERVICE_ACCOUNT,
                                                                 "namespace": namespace}},
                                  field_manager="kube-controller-manager")
            configmap = _get(self.store, CONFIGMAPS, namespace, ROOT_CA_CONFIGMAP)
            if configmap is None:
                self.store.create(CONFIGMAPS, root_ca_configmap(namespace, ca_pem),
                                  field_manager="kube-controller-manager")
            elif (configmap.get("data") or {}) != {"ca.crt": ca_pem} and not configmap["metadata"].get(
                    "deletionTimestamp"):
                configmap["data"] = {"ca.crt": ca_pem}
                self.store.update(CONFIGMAPS, configmap, field_manager="kube-controller-manager")
        except ApiError as err:
            if err.code in (403, 409):  # the namespace began terminating, or a client made it first
                return None
            raise
        return None
