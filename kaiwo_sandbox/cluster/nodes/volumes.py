"""Dynamic provisioning, collapsed: StorageClasses exist, claims on a known class get Bound.

At start the binder creates the StorageClasses a Kaiwo cluster has (a default `standard` and the
CI's `rwx-nfs`) unless they exist. It also does the DefaultStorageClass admission plugin's job:
a claim created without `storageClassName` gets the default class written in. No
PersistentVolume objects are made: `spec.volumeName` names a volume that only exists in words.
"""

from __future__ import annotations

from collections.abc import Iterable

from kaiwo_sandbox.cluster.base import ClusterSettings, Controller, Key
from kaiwo_sandbox.cluster.events import record_event
from kaiwo_sandbox.contracts import GVR, PVCS, STORAGECLASSES, ApiError, Clock, JsonObj, Store, WatchEvent

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
PV_COMPONENT = "persistentvolume-controller"

BUILTIN_CLASSES: tuple[JsonObj, ...] = (
    {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "standard", "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
        "provisioner": "rancher.io/local-path",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    },
    {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "rwx-nfs"},
        "provisioner": "k8s-sigs.io/nfs-subdir-external-provisioner",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
        "allowVolumeExpansion": True,
    },
)


def default_class(classes: Iterable[JsonObj]) -> str | None:
    """The default StorageClass; with several, the newest wins (as the admission plugin does)."""
    defaults = [c for c in classes
                if ((c.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true"]
    if not defaults:
        return None
    newest = max(defaults, key=lambda c: (str(c["metadata"].get("creationTimestamp", "")), c["metadata"]["name"]))
    return str(newest["metadata"]["name"])


class VolumeBinder(Controller):
    name = "volume-binder"
    watches = (PVCS, STORAGECLASSES)

    def __init__(self, store: Store, clock: Clock, settings: ClusterSettings) -> None:
        super().__init__(store, clock, settings)
        self._reported: set[tuple[str, str, str]] = set()

    def initial_keys(self) -> Iterable[Key]:
        for storage_class in BUILTIN_CLASSES:
            try:
                self.store.create(STORAGECLASSES, storage_class, user="system:volume-binder")
            except ApiError as err:
                if err.code != 409:
                    raise
        return list(super().initial_keys())

    def keys_for(self, event: WatchEvent) -> Iterable[Key]:
        if event.gvr.resource == "storageclasses":
            if event.type == "DELETED":
                return []
            # A class appeared or changed: claims waiting for it may bind now.
            claims, _ = self.store.list(PVCS)
            return [(c["metadata"].get("namespace"), c["metadata"]["name"]) for c in claims
                    if (c.get("status") or {}).get("phase") != "Bound"]
        if event.type == "DELETED":
            return []
        return super().keys_for(event)

    def admit(self, operation: str, gvr: GVR, obj: JsonObj, old: JsonObj | None, user: str) -> None:
        if operation != "CREATE" or gvr.resource != "persistentvolumeclaims" or gvr.group:
            return
        spec = obj.setdefault("spec", {})
        if "storageClassName" in spec and spec["storageClassName"] is not None:
            return
        classes, _ = self.store.list(STORAGECLASSES)
        chosen = default_class(classes)
        if chosen:
            spec["storageClassName"] = chosen

    def reconcile(self, key: Key) -> float | None:
        assert isinstance(key, tuple)
        namespace, name = str(key[0]), str(key[1])
        try:
            claim = self.store.get(PVCS, namespace, name)
        except ApiError as err:
            if err.code == 404:
                return None
            raise
        if (claim.get("status") or {}).get("phase") == "Bound" or (claim.get("metadata") or {}).get("deletionTimestamp"):
            return None
        spec = claim.get("spec") or {}
        class_name = spec.get("storageClassName")
        if not class_name:
            self._pending(claim, "Normal", "FailedBinding",
                          "no persistent volumes available for this claim and no storage class is set")
            return None
        try:
            storage_class = self.store.get(STORAGECLASSES, None, str(class_name))
        except ApiError as err:
            if err.code != 404:
                raise
            self._pending(claim, "Warning", "ProvisioningFailed",
                          f'storageclass.storage.k8s.io "{class_name}" not found')
            return None
        self._bind(claim, storage_class)
        return None

    def _pending(self, claim: JsonObj, event_type: str, reason: str, message: str) -> None:
        status = claim.get("status") or {}
        if status.get("phase") != "Pending":
            self.store.patch(PVCS, claim["metadata"]["namespace"], claim["metadata"]["name"],
                             {"status": {"phase": "Pending"}}, "merge", subresource="status",
                             user="system:volume-binder")
        said = (str(claim["metadata"].get("uid", "")), reason, message)
        if said not in self._reported:  # the real controller repeats it every resync; once is enough here
            self._reported.add(said)
            record_event(self.store, self.clock, claim, event_type, reason, message, PV_COMPONENT)

    def _bind(self, claim: JsonObj, storage_class: JsonObj) -> None:
        meta = claim["metadata"]
        spec = claim.get("spec") or {}
        provisioner = str(storage_class.get("provisioner", ""))
        volume = f"pvc-{meta.get('uid', '')}"
        requested = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
        annotations = {
            "pv.kubernetes.io/bind-completed": "yes",
            "pv.kubernetes.io/bound-by-controller": "yes",
            "volume.beta.kubernetes.io/storage-provisioner": provisioner,
            "volume.kubernetes.io/storage-provisioner": provisioner,
        }
        namespace, name = str(meta["namespace"]), str(meta["name"])
        self.store.patch(PVCS, namespace, name, {"metadata": {"annotations": annotations},
                                                 "spec": {"volumeName": volume}}, "merge",
                         user="system:volume-binder")
        bound = self.store.patch(PVCS, namespace, name, {"status": {
            "phase": "Bound",
            "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
            "capacity": {"storage": requested},
        }}, "merge", subresource="status", user="system:volume-binder")
        record_event(self.store, self.clock, bound, "Normal", "ProvisioningSucceeded",
                     f"Successfully provisioned volume {volume}", provisioner or PV_COMPONENT)
