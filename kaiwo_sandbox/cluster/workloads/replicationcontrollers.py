"""The replication manager: v1 ReplicationControllers keep their pods as ReplicaSets do
(`replicas.py`), with their own component name and controller identity."""

from __future__ import annotations

from collections.abc import Iterable

from kaiwo_sandbox.cluster.base import ClusterSettings, Controller, Key
from kaiwo_sandbox.cluster.workloads.replicas import ReplicaKind, ReplicaSync
from kaiwo_sandbox.contracts import PODS, REPLICATIONCONTROLLERS, Clock, Store, WatchEvent

COMPONENT = "replication-controller"
USER = "system:serviceaccount:kube-system:replication-controller"
KIND = ReplicaKind(REPLICATIONCONTROLLERS, "ReplicationController", COMPONENT, USER)


class ReplicationManager(Controller):
    name = "replication-controller"
    watches = (REPLICATIONCONTROLLERS, PODS)

    def __init__(self, store: Store, clock: Clock, settings: ClusterSettings) -> None:
        super().__init__(store, clock, settings)
        self._replicas = ReplicaSync(store, clock, KIND)

    def keys_for(self, event: WatchEvent) -> Iterable[Key]:
        meta = event.object.get("metadata") or {}
        if event.gvr.resource == "replicationcontrollers":
            return [(meta.get("namespace"), meta.get("name"))]
        owner = self._replicas.observe(event)
        return [owner] if owner is not None else []

    def reconcile(self, key: Key) -> float | None:
        assert isinstance(key, tuple)
        return self._replicas.sync(str(key[0]), str(key[1]))
